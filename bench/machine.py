"""Facts about the machine for the report's Machine table, and what the run measures of it from ``/proc``:
peak memory (:class:`MemorySampler`) and the CPU seconds of Spark's JVM and Python workers."""

from __future__ import annotations

import os
import platform
import subprocess
import threading
from importlib import metadata
from pathlib import Path

from pyspark.sql import SparkSession

from ingest.spark import DELTA_JAR_VERSION

SPARK_THREADS = 2  # local[2]


def _meminfo_gib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) / 1024 / 1024
    return float("nan")


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _java_version() -> str:
    try:
        done = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unknown ({exc})"
    return (done.stderr or done.stdout).splitlines()[0].strip() if (done.stderr or done.stdout) else "unknown"


def machine(spark: SparkSession) -> list[tuple[str, str]]:
    return [
        ("CPU", _cpu_model()),
        ("Cores", str(os.cpu_count())),
        ("RAM", f"{_meminfo_gib():.1f} GiB"),
        ("OS", f"{platform.system()} {platform.release()}"),
        ("Python", platform.python_version()),
        ("Java", _java_version()),
        ("Spark", f"{spark.version} (local[{SPARK_THREADS}])"),
        ("Delta", f"delta-spark {metadata.version('delta-spark')} (jar {DELTA_JAR_VERSION})"),
        ("orjson", metadata.version("orjson")),
        ("Load average at start (1/5/15 min)", " / ".join(f"{x:.1f}" for x in os.getloadavg())),
    ]


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(parent, []).append(int(entry.name))
    return tree


def _rss_bytes(pid: int, field: str = "VmRSS:", source: str = "status") -> int:
    try:
        for line in Path(f"/proc/{pid}/{source}").read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _pss_bytes(pid: int) -> int:
    # Workers are forked from one daemon and share its pages: RSS would count those once per worker.
    return _rss_bytes(pid, "Pss:", "smaps_rollup")


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class MemorySampler:
    """Samples the RSS of this process's JVM (the Spark driver) and of its Python workers."""

    def __init__(self, interval: float = 0.2) -> None:
        self.interval = interval
        self.peak_driver = 0
        self.peak_workers = 0
        self.peak_worker_count = 0
        self.peak_self = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="memory-sampler", daemon=True)

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def sample(self) -> None:
        tree = _children()
        me = os.getpid()
        self.peak_self = max(self.peak_self, _rss_bytes(me))
        for pid in tree.get(me, []):
            if "java" not in _cmdline(pid).split(" ", 1)[0]:
                continue
            self.peak_driver = max(self.peak_driver, _rss_bytes(pid))
            workers: list[int] = []
            stack = list(tree.get(pid, []))
            while stack:
                child = stack.pop()
                stack.extend(tree.get(child, []))
                if "python" in _cmdline(child):
                    workers.append(child)
            self.peak_workers = max(self.peak_workers, sum(_pss_bytes(w) for w in workers))
            self.peak_worker_count = max(self.peak_worker_count, len(workers))

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()


def _process_cpu_seconds(pid: int) -> float:
    """CPU time of a process and of its children already reaped (so a worker that exits still counts)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def spark_cpu_seconds() -> float:
    """CPU seconds used so far by this process's JVM and everything under it (the Python workers)."""
    tree = _children()
    total = 0.0
    for pid in tree.get(os.getpid(), []):
        if "java" not in _cmdline(pid).split(" ", 1)[0]:
            continue
        stack = [pid]
        while stack:
            current = stack.pop()
            total += _process_cpu_seconds(current)
            stack.extend(tree.get(current, []))
    return total
