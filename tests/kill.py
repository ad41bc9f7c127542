"""Test helpers: run a command as a real process group, SIGKILL it at random instants inside its run.

``KILL_PROFILE=explore`` draws many more seeds than CI's few, and more kills per seed; ``KILL_SEEDS=1,2``
replays given seeds. Every test names its seed in its failure messages.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from ingest.model import TableId
from testkit.local_services import watch
from testkit.sample import SIMPLE_FOR_TESTS, Stream

PROFILES = {
    # seeds, kills per seed, and the protocols a captured-records run is killed under. CI's one kill per
    # test keeps the suite within its time budget: each kill costs a JVM start and a partial run. CI kills
    # that run under Simple only, since the Kafka kill test already kills a Canal-JSON mirror; the explore
    # profile draws the many instants under both.
    "ci": ([1], 1, ["simple"]),
    "explore": (list(range(100, 120)), 4, ["canal-json", "simple"]),
}
PROFILE = os.environ.get("KILL_PROFILE", "ci")
SEEDS, KILLS, RUN_PROTOCOLS = PROFILES[PROFILE]
if os.environ.get("KILL_SEEDS"):
    SEEDS = [int(s) for s in os.environ["KILL_SEEDS"].split(",")]


def child_env() -> dict[str, str]:
    """This process's environment as it is now, for a child whose Spark JVM lives a minute or two.

    Such a JVM's C2 compilations cost more CPU than they win back in that time, and on a shared two-core
    runner that CPU is taken from the other tests; C1 alone runs the same code (the JIT tier changes speed,
    never behaviour).
    """
    return {**os.environ, "JDK_JAVA_OPTIONS": "-XX:TieredStopAtLevel=1"}


CHILD = "import sys\nfrom ingest.cli import main\nsys.exit(main(sys.argv[1:]))\n"
T = TableId("app", "t")
U = TableId("app", "u")
R = TableId("app", "r")  # U renamed
CHILD_TIMEOUT = 900


def kill_stream(protocol: str, rnd: random.Random) -> Stream:
    """Two tables through every kind of DDL the mirror applies (one renamed, then dropped and created
    again under its new name), with random inserts, updates, key changes and deletes over four watermarks."""
    s = Stream(topic="cdc", partitions=2, protocol=protocol)
    s.create_table(SIMPLE_FOR_TESTS, s.tso(1))
    s.create_table(SIMPLE_FOR_TESTS.replace("`t`", "`u`"), s.tso(1))
    t = 2.0

    def rows(table: TableId, n: int) -> None:
        nonlocal t
        for _ in range(n):
            t += 1
            ts = s.tso(t)
            state = s.state_at(ts)[table]
            key = rnd.randint(1, 12)
            extra = {c: rnd.randint(0, 9) for c in s.table_columns(table) if c not in ("id", "v")}
            if (key,) not in state:
                s.insert(table, {"id": key, "v": f"v{rnd.randint(0, 99)}", **extra}, ts)
            elif rnd.random() < 0.3:
                s.delete(table, (key,), ts)
            elif rnd.random() < 0.3 and (key + 20,) not in state:
                s.update(table, (key,), {"id": key + 20}, ts)  # key change: DELETE + INSERT
            else:
                s.update(table, (key,), {"v": f"v{rnd.randint(0, 99)}"}, ts)

    def ddl(apply: Callable[[int], None]) -> None:
        nonlocal t
        t += 1
        apply(s.tso(t))

    def watermark() -> None:
        s.watermark(s.tso(t + 0.5))

    rows(T, 8)
    rows(U, 8)
    watermark()
    ddl(lambda ts: s.add_column(T, "ALTER TABLE `t` ADD COLUMN `c` int(11) NOT NULL DEFAULT '7'", ts, "c",
                                "int", 7))  # fmt: skip
    rows(T, 4)
    ddl(lambda ts: s.truncate(U, ts))
    rows(U, 4)
    watermark()
    ddl(lambda ts: s.rename_column(T, "c", "d", ts))
    ddl(lambda ts: s.drop_column(T, "d", ts))
    ddl(lambda ts: s.rename_table(U, R, ts))
    rows(R, 4)
    rows(T, 4)
    watermark()
    ddl(lambda ts: s.drop_table(R, ts))
    ddl(lambda ts: s.create_table(SIMPLE_FOR_TESTS.replace("`t`", "`r`"), ts))
    rows(R, 4)
    watermark()
    rows(T, 2)  # above the final G: stays pending
    s.watermark(s.tso(t + 0.5), partitions=[0])
    return s


def run_args(input_dir: Path, lake: Path, protocol: str) -> list[str]:
    return ["run", "--input", str(input_dir), "--target-path", str(lake), "--protocol", protocol]


def child_process(args: list[str]) -> subprocess.Popen[bytes]:
    # Its own process group, so one killpg takes the Spark JVM down with the Python driver; and that group
    # goes with this process if the test run is interrupted.
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env=child_env(),
    )
    watch(child.pid, group=True)
    return child


def run_killed(args: list[str], delays: list[float]) -> list[str]:
    """Run the command once per delay, SIGKILLing its process group after that many seconds, until an
    attempt finishes first; returns what happened to each attempt."""
    outcomes = []
    for delay in delays:
        child = child_process(args)
        try:
            _, err = child.communicate(timeout=delay)
            assert child.returncode == 0, err.decode(errors="replace")[-3000:]
            outcomes.append(f"finished before {delay:.1f}s")
            break  # nothing left to interrupt
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.communicate()
            outcomes.append(f"killed at {delay:.1f}s")
    return outcomes


_DURATIONS: dict[str, float] = {}


def run_duration(key: str, args: list[str]) -> float:
    """How long one uninterrupted run of the command takes here (measured once per key)."""
    if key not in _DURATIONS:
        started = time.monotonic()
        child = child_process(args)
        _, err = child.communicate(timeout=CHILD_TIMEOUT)
        assert child.returncode == 0, err.decode(errors="replace")[-3000:]
        _DURATIONS[key] = time.monotonic() - started
    return _DURATIONS[key]


def kill_delays(rnd: random.Random, duration: float, kills: int) -> list[float]:
    """Instants inside a run: past the interpreter's and JVM's start, before the run would have ended."""
    return [rnd.uniform(0.2 * duration, duration) for _ in range(kills)]
