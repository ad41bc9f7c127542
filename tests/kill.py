"""Test helpers: run a command as a real process group, SIGKILL it at random instants inside its run.

An instant is drawn from the run's own progress: the same work run once in this process (warm, and a check
in itself) says how many progress lines a run writes and how far apart they are; a killed run then dies a
random part of such a gap after a random one of its lines. So every kill lands in the work, never in the
interpreter's or JVM's start, and no uninterrupted run in a fresh JVM is needed just to time one.

``KILL_PROFILE=explore`` draws many more seeds than CI's few, and more kills per seed; ``KILL_SEEDS=1,2``
replays given seeds. Every test names its seed in its failure messages.
"""

from __future__ import annotations

import logging
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ingest.model import TableId
from ingest.spark import LOCAL_MASTER_ENV
from testkit.local_services import watch
from testkit.sample import SIMPLE_FOR_TESTS, Stream

PROFILES = {
    # seeds, kills per seed, and the protocols a captured-records run by path is killed under. CI's one kill
    # per test keeps the suite within its time budget: each kill costs a JVM start and a partial run. CI
    # kills that run by name only (test_by_name, Simple, on classic and on Connect), since the Kafka kill
    # test and the swaps kill test already kill Canal-JSON mirrors by path; the explore profile draws the
    # many instants by path under both protocols.
    "ci": ([1], 1, []),
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
    never behaviour). C1 alone also shrinks the JVM's code cache from 240 MiB to 48 MiB, which a kernel JVM
    running several notebooks fills ("Out of space in CodeCache for method handle intrinsic" then fails a
    Spark job), so the cache keeps its usual size. One task thread and partition, as the test session's
    (tests/conftest.py).
    """
    return {**os.environ, "JDK_JAVA_OPTIONS": CHILD_JAVA_OPTIONS, LOCAL_MASTER_ENV: "local[1]"}


CHILD_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"


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


# What the command line writes for each step of its work: the ingest loggers at INFO, except the config
# line, which it writes before Spark starts and a run in this process does not write at all.
PROGRESS = re.compile(rb" INFO ingest[.:](?! config:)")


@dataclass(frozen=True)
class Progress:
    """The progress lines of one uninterrupted run, as the seconds at which each was written."""

    times: list[float]

    def gap_after(self, n: int) -> float:
        """Seconds from the n-th line (1-based) to the next, or to the run's end after the last."""
        return self.times[n] - self.times[n - 1] if n < len(self.times) else 1.0


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.started = time.monotonic()
        self.times: list[float] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno == logging.INFO:  # as PROGRESS counts the child's lines
            self.times.append(time.monotonic() - self.started)


def progress_of(run: Callable[[], object]) -> Progress:
    """Run the work in this process and note when it wrote each progress line."""
    lines, ingest = _Lines(), logging.getLogger("ingest")
    level = ingest.level
    ingest.setLevel(logging.INFO)
    ingest.addHandler(lines)
    try:
        run()
    finally:
        ingest.removeHandler(lines)
        ingest.setLevel(level)
    assert lines.times, "the run wrote no progress line"
    return Progress(lines.times)


@dataclass(frozen=True)
class Mark:
    """Kill ``delay`` seconds after the ``line``-th progress line."""

    line: int
    delay: float


def kill_marks(rnd: random.Random, progress: Progress, kills: int) -> list[Mark]:
    """Instants inside a run: after a random progress line, a random part of the gap to the next. A fresh
    JVM runs its first minute slower than this warm one, so the gap is doubled."""
    marks = []
    for _ in range(kills):
        line = rnd.randint(1, max(1, len(progress.times) - 1))  # the last line ends the run
        marks.append(Mark(line, rnd.uniform(0.0, 2.0 * progress.gap_after(line))))
    return marks


def run_killed(args: list[str], marks: list[Mark]) -> list[str]:
    """Run the command once per mark, SIGKILLing its process group at that mark, until an attempt
    finishes first; returns what happened to each attempt."""
    outcomes = []
    for mark in marks:
        child = child_process(args)
        started, seen, tail = time.monotonic(), 0, deque(maxlen=100)
        hung = threading.Timer(CHILD_TIMEOUT, lambda c=child: os.killpg(c.pid, signal.SIGKILL))
        hung.start()
        assert child.stderr is not None
        killed = False
        for line in child.stderr:
            tail.append(line)
            seen += bool(PROGRESS.search(line))
            if seen == mark.line:
                time.sleep(mark.delay)
                if child.poll() is None:
                    os.killpg(child.pid, signal.SIGKILL)
                    killed = True
                break
        child.communicate()
        hung.cancel()
        if not killed:
            assert child.returncode == 0, b"".join(tail).decode(errors="replace")[-3000:]
            outcomes.append(f"finished before line {mark.line} + {mark.delay:.1f}s")
            break  # nothing left to interrupt
        outcomes.append(
            f"killed {mark.delay:.1f}s after line {mark.line}, {time.monotonic() - started:.1f}s in"
        )
    return outcomes
