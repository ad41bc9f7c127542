"""Services a test run starts die with it, even when the run itself is killed with SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

OWNER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from testkit.local_services import _Process
    service = _Process("sleeper", Path(sys.argv[1]), owned=sys.argv[2] == "owned")
    service.launch(["sleep", "300"], Path(sys.argv[1]).parent)
    print(service.pid, flush=True)
    time.sleep(300)
    """
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    return state != "Z"


def _service_after_owner_is_killed(tmp_path, mode: str) -> tuple[int, bool]:
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(tmp_path / "service.log"), mode], stdout=subprocess.PIPE, text=True
    )
    service = int(owner.stdout.readline())
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    deadline = time.monotonic() + 10
    while _alive(service) and time.monotonic() < deadline:
        time.sleep(0.2)
    return service, _alive(service)


def test_an_owned_service_is_killed_when_its_owner_is_killed(tmp_path):
    _, alive = _service_after_owner_is_killed(tmp_path, "owned")
    assert not alive


def test_a_service_started_for_the_command_line_outlives_it(tmp_path):
    service, alive = _service_after_owner_is_killed(tmp_path, "detached")
    try:
        assert alive
    finally:
        os.kill(service, signal.SIGKILL)


# A killed-at-random test's child: a process group of its own (the driver and, under it, the JVM).
GROUP_OWNER = textwrap.dedent(
    """
    import subprocess, sys, time
    from testkit.local_services import watch
    leader = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, time; p = subprocess.Popen(['sleep', '300']); "
         "print(p.pid, flush=True); time.sleep(300)"],
        stdout=subprocess.PIPE, text=True, start_new_session=True,
    )
    watch(leader.pid, group=True)
    print(leader.pid, leader.stdout.readline().strip(), flush=True)
    time.sleep(300)
    """
)


def test_a_watched_process_group_dies_with_the_test_run_that_started_it():
    owner = subprocess.Popen([sys.executable, "-c", GROUP_OWNER], stdout=subprocess.PIPE, text=True)
    leader, member = (int(pid) for pid in owner.stdout.readline().split())
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    deadline = time.monotonic() + 10
    while (_alive(leader) or _alive(member)) and time.monotonic() < deadline:
        time.sleep(0.2)
    try:
        assert not _alive(leader) and not _alive(member)
    finally:
        for pid in (leader, member):
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


INSTALLER = textwrap.dedent(
    """
    import contextlib, sys
    from pathlib import Path
    import testkit.local_services as services
    services.CACHE_DIR = Path(sys.argv[1])  # the Maven repository stays where it is: no new download
    if sys.argv[2] == "unlocked":
        services._installing = contextlib.nullcontext
    version, home = services.apicurio_home()
    print(home, flush=True)
    """
)


def _install_at_once(cache: Path, mode: str, count: int = 3) -> list[subprocess.CompletedProcess[str]]:
    root = Path(__file__).parents[2]
    children = [
        subprocess.Popen(
            [sys.executable, "-c", INSTALLER, str(cache), mode],
            cwd=root,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(count)
    ]
    return [subprocess.CompletedProcess(c.args, c.wait(timeout=600), *c.communicate()) for c in children]


def test_workers_installing_the_registry_at_once_all_get_one_whole_copy(tmp_path):
    done = _install_at_once(tmp_path / "cache", "locked")
    assert [d.returncode for d in done] == [0, 0, 0], [d.stderr[-2000:] for d in done]
    homes = {d.stdout.strip() for d in done}
    assert len(homes) == 1
    assert (Path(homes.pop()) / "quarkus-run.jar").is_file()
    assert not list((tmp_path / "cache").glob("*.partial"))
