"""A kill at any instant costs nothing but time: the next run ends where an uninterrupted run ends.

The first tests rebuild exactly what a kill inside a table's creation leaves on disk: a ``_delta_log/``
with nothing in it but an empty ``_staged_commits/``. The randomized tests kill a real ``ticdc-ingest run``
process group (SIGKILL) at random moments, several times, then let it finish; the tables must equal the
upstream model at G and a further run must change nothing. ``KILL_PROFILE=explore`` runs many more seeds;
a failure names its seed, and ``KILL_SEEDS=<seed>`` replays it.
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

import pytest
from mirror import delta_rows, expected_rows

from ingest.config import IngestConfig
from ingest.model import TableId
from ingest.pipeline import run_files
from ingest.sample import SIMPLE_FOR_TESTS, Stream

T = TableId("app", "t")
U = TableId("app", "u")
STATE_TABLES = ("progress", "buffer", "quarantine", "ddl_history", "schemas")


def _cut_short(location: Path) -> None:
    """What a kill between Delta's first mkdir and its first commit leaves behind."""
    (location / "_delta_log" / "_staged_commits").mkdir(parents=True)


def _small_stream(protocol: str) -> Stream:
    s = Stream(topic="cdc", partitions=2, protocol=protocol)
    s.create_table(SIMPLE_FOR_TESTS, s.tso(1))
    s.insert(T, {"id": 1, "v": "a"}, s.tso(2))
    s.insert(T, {"id": 2, "v": "b"}, s.tso(2))
    s.append_raw(1, b'{"database": "app"')  # quarantined
    s.watermark(s.tso(3))
    s.insert(T, {"id": 3, "v": "pending"}, s.tso(4))  # above G: buffered
    s.watermark(s.tso(5), partitions=[0])
    return s


@pytest.mark.parametrize(
    ("protocol", "where"), [("canal-json", "mirrored"), ("canal-json", "state"), ("simple", "both")]
)
def test_tables_whose_creation_was_cut_short_are_created_again(
    spark, tmp_path: Path, protocol: str, where: str
):
    stream = _small_stream(protocol)
    input_dir, lake = tmp_path / "in", tmp_path / "lake"
    stream.write(input_dir)
    if where in ("mirrored", "both"):
        _cut_short(lake / "app" / "t")
    if where in ("state", "both"):
        for name in STATE_TABLES:
            _cut_short(lake / "_ingest" / name)
    config = IngestConfig.from_params(
        {"input": str(input_dir), "target-path": str(lake), "protocol": protocol, "max-bad-ratio": "0.5"}
    )

    result = run_files(spark, config)

    g = stream.complete_watermark()
    assert result.global_watermark == g
    assert delta_rows(spark, str(lake), T) == expected_rows(stream, T, g)
    assert result.quarantined == 1
    assert spark.read.format("delta").load(f"{lake}/_ingest/quarantine").count() == 1
    assert spark.read.format("delta").load(f"{lake}/_ingest/buffer").count() >= 1
    assert spark.read.format("delta").load(f"{lake}/_ingest/ddl_history").count() == 1
    if protocol == "simple":
        assert spark.read.format("delta").load(f"{lake}/_ingest/schemas").count() >= 1
    again = run_files(spark, config)
    assert all(r.upserted == 0 and r.deleted == 0 and not r.ddls for r in again.tables.values())


# -- SIGKILL at random instants -----------------------------------------------------------------------------

PROFILES = {
    # seeds per protocol, kills per seed
    "ci": ([1], 2),
    "explore": (list(range(100, 120)), 4),
}
PROFILE = os.environ.get("KILL_PROFILE", "ci")
SEEDS, KILLS = PROFILES[PROFILE]
if os.environ.get("KILL_SEEDS"):
    SEEDS = [int(s) for s in os.environ["KILL_SEEDS"].split(",")]

CHILD = "import sys\nfrom ingest.cli import main\nsys.exit(main(sys.argv[1:]))\n"
R = TableId("app", "r")
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


def _run_args(input_dir: Path, lake: Path, protocol: str) -> list[str]:
    return ["run", "--input", str(input_dir), "--target-path", str(lake), "--protocol", protocol]


def _child(args: list[str]) -> subprocess.Popen[bytes]:
    # Its own process group, so one killpg takes the Spark JVM down with the Python driver.
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def run_killed(args: list[str], delays: list[float]) -> list[str]:
    """Run the command once per delay, SIGKILLing its process group after that many seconds (unless it
    finished first); returns what happened to each attempt."""
    outcomes = []
    for delay in delays:
        child = _child(args)
        try:
            _, err = child.communicate(timeout=delay)
            assert child.returncode == 0, err.decode(errors="replace")[-3000:]
            outcomes.append(f"finished before {delay:.1f}s")
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
        child = _child(args)
        _, err = child.communicate(timeout=CHILD_TIMEOUT)
        assert child.returncode == 0, err.decode(errors="replace")[-3000:]
        _DURATIONS[key] = time.monotonic() - started
    return _DURATIONS[key]


def kill_delays(rnd: random.Random, duration: float, kills: int) -> list[float]:
    """Instants inside a run: past the interpreter's and JVM's start, before the run would have ended."""
    return [rnd.uniform(0.2 * duration, duration) for _ in range(kills)]


def assert_mirror(spark, lake: Path, stream: Stream, tables: list[TableId], why: str) -> None:
    g = stream.complete_watermark()
    for table in tables:
        assert delta_rows(spark, str(lake), table) == expected_rows(stream, table, g), f"{table}; {why}"


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("protocol", ["canal-json", "simple"])
def test_run_killed_at_random_instants_ends_like_an_uninterrupted_run(
    spark, tmp_path: Path, protocol: str, seed: int
):
    rnd = random.Random(seed)
    stream = kill_stream(protocol, rnd)
    input_dir, lake = tmp_path / "in", tmp_path / "lake"
    stream.write(input_dir)
    duration = run_duration(protocol, _run_args(input_dir, tmp_path / "uninterrupted", protocol))
    if (tmp_path / "uninterrupted").exists():  # measured here: it also checks the stream itself
        assert_mirror(spark, tmp_path / "uninterrupted", stream, [T, U, R], f"seed {seed}, uninterrupted")
    delays = kill_delays(rnd, duration, KILLS)

    outcomes = run_killed(_run_args(input_dir, lake, protocol), delays)

    why = f"seed {seed} ({protocol}, a run takes {duration:.1f}s): {', '.join(outcomes)}"
    config = IngestConfig.from_params(
        {"input": str(input_dir), "target-path": str(lake), "protocol": protocol}
    )
    result = run_files(spark, config)
    assert result.global_watermark == stream.complete_watermark(), why
    assert_mirror(spark, lake, stream, [T, U, R], why)
    again = run_files(spark, config)
    changed = {
        t: (r.upserted, r.deleted, r.ddls)
        for t, r in again.tables.items()
        if r.upserted or r.deleted or r.ddls
    }
    assert not changed, f"a further run changed {changed}; {why}"
