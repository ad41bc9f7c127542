"""A kill at any instant costs nothing but time: the next run ends where an uninterrupted run ends.

The first tests rebuild exactly what a kill inside a table's creation leaves on disk: a ``_delta_log/``
with nothing in it but an empty ``_staged_commits/``. The randomized tests kill a real ``ticdc-ingest run``
process group (SIGKILL) at random moments, several times, then let it finish; the tables must equal the
upstream model at G and a further run must change nothing. ``KILL_PROFILE=explore`` runs many more seeds;
a failure names its seed, and ``KILL_SEEDS=<seed>`` replays it.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import threading
import time
from pathlib import Path

import pytest
from dumpling_export import write_export
from kill import (
    KILLS,
    PROFILE,
    RUN_PROTOCOLS,
    SEEDS,
    R,
    T,
    child_process,
    kill_marks,
    kill_stream,
    progress_of,
    run_args,
    run_killed,
)
from mirror import corpus_problems, delta_rows, expected_rows, located, recover_problems
from ticdc_fixture import CORPORA

from ingest.commands.load import load_dumpling
from ingest.config import IngestConfig
from ingest.errors import ConfigError
from ingest.lake.delta_io import NotADeltaTable, prepare_to_create
from ingest.load_config import LoadConfig
from ingest.model import TableId
from ingest.pipeline import run_files
from ingest.pipeline.report import BatchResult
from ingest.state import progress, table_state
from testkit.sample import SIMPLE_FOR_TESTS, Stream

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


@pytest.mark.parametrize(("protocol", "where"), [("canal-json", "mirrored"), ("simple", "both")])
def test_tables_whose_creation_was_cut_short_are_created_again(
    spark, tmp_path: Path, protocol: str, where: str
):
    stream = _small_stream(protocol)
    input_dir, lake = tmp_path / "in", tmp_path / "lake"
    stream.write(input_dir)
    if where in ("mirrored", "both"):
        _cut_short(Path(located(lake, TableId("app", "t"))))
    if where == "both":
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


def assert_mirror(spark, lake: Path, stream: Stream, tables: list[TableId], why: str) -> None:
    g = stream.complete_watermark()
    for table in tables:
        assert delta_rows(spark, str(lake), table) == expected_rows(stream, table, g), f"{table}; {why}"


# CI kills this run by name instead (test_by_name, on classic and on Connect: the same stream, command and
# kill instants, every Delta step the same but the addressing); a path-mode mirror is killed there by the
# Kafka kill test and the swaps test below. The explore profile kills it by path under both protocols.
if RUN_PROTOCOLS:

    @pytest.mark.long
    @pytest.mark.parametrize("seed", SEEDS)
    @pytest.mark.parametrize("protocol", RUN_PROTOCOLS)
    def test_run_killed_at_random_instants_ends_like_an_uninterrupted_run(
        spark, tmp_path: Path, protocol: str, seed: int
    ):
        """Both tables are applied at once, each in a Spark session of its own. (On Spark Connect, where the
        killed command is a client whose server goes on, the same kills run by name: test_by_name.)"""
        rnd = random.Random(seed)
        stream = kill_stream(protocol, rnd)
        input_dir, lake = tmp_path / "in", tmp_path / "lake"
        stream.write(input_dir)

        def config_for(target: Path) -> IngestConfig:
            return IngestConfig.from_params(
                {"input": str(input_dir), "target-path": str(target), "protocol": protocol}
            )

        progress_ = progress_of(lambda: run_files(spark, config_for(tmp_path / "uninterrupted")))
        assert_mirror(spark, tmp_path / "uninterrupted", stream, [T, R], f"seed {seed}, uninterrupted")
        marks = kill_marks(rnd, progress_, KILLS)

        outcomes = run_killed(run_args(input_dir, lake, protocol), marks)

        why = f"seed {seed} ({protocol}, {len(progress_.times)} progress lines): {', '.join(outcomes)}"
        print(why)  # shown with -rP: where the kills landed
        config = config_for(lake)
        result = run_files(spark, config)
        assert result.global_watermark == stream.complete_watermark(), why
        assert_mirror(spark, lake, stream, [T, R], why)
        again = run_files(spark, config)
        changed = {
            t: (r.upserted, r.deleted, r.ddls)
            for t, r in again.tables.items()
            if r.upserted or r.deleted or r.ddls
        }
        assert not changed, f"a further run changed {changed}; {why}"


@pytest.mark.long
@pytest.mark.parametrize("seed", SEEDS)
def test_table_swaps_and_exchanges_killed_at_random_instants_end_with_both_tables_applied(
    spark, tmp_path: Path, seed: int
):
    """A RENAME swap, an EXCHANGE PARTITION and a CREATE TABLE … LIKE move rows between tables without row
    events (TiCDC v8.3.0's own records, tests/fixtures/corpora/cutover). Killed anywhere, even between the
    two tables of one DDL, the repeated run ends with upstream's tables: never one side applied alone."""
    corpus = CORPORA["cutover"]
    records = corpus / "canal-json" / "records.jsonl"
    rnd = random.Random(seed)

    def config_for(target: Path) -> IngestConfig:
        return IngestConfig.from_params({"input": str(records), "target-path": str(target)})

    results: list[BatchResult] = []

    uninterrupted = config_for(tmp_path / "uninterrupted")
    progress_ = progress_of(lambda: results.append(run_files(spark, uninterrupted)))
    # In CI the corpus test leaves this corpus and protocol to this run (test_ticdc_ddl_corpora.CI_RUNS).
    assert results[0].quarantined == 0
    assert corpus_problems(spark, uninterrupted, corpus) == {}
    outcomes = run_killed(
        run_args(records, tmp_path / "lake", "canal-json"), kill_marks(rnd, progress_, KILLS)
    )
    why = f"seed {seed} ({len(progress_.times)} progress lines): {', '.join(outcomes)}"
    print(why)
    config = config_for(tmp_path / "lake")
    run_files(spark, config)
    assert corpus_problems(spark, config, corpus) == {}, why
    again = run_files(spark, config)
    assert not [t for t, r in again.tables.items() if r.upserted or r.deleted or r.ddls], why


@pytest.mark.parametrize("seed", SEEDS)
def test_initial_load_killed_at_random_instants_then_run_again_loads_the_snapshot(spark, tmp_path, seed):
    rnd = random.Random(seed)
    stream = kill_stream("canal-json", rnd)
    snapshot = stream.complete_watermark()
    creates = {T: SIMPLE_FOR_TESTS, R: SIMPLE_FOR_TESTS.replace("`t`", "`r`")}
    export = write_export(stream, snapshot, tmp_path / "export", creates, data_format="csv", rows_per_file=4)

    def load_args(lake: Path) -> list[str]:
        return ["load", "--input", str(export), "--target-path", str(lake)]

    once = {"input": str(export), "target-path": str(tmp_path / "once")}
    marks = kill_marks(rnd, progress_of(lambda: load_dumpling(spark, LoadConfig.from_params(once))), KILLS)

    outcomes = run_killed(load_args(tmp_path / "lake"), marks)

    why = f"seed {seed}: {', '.join(outcomes)}"
    print(why)  # shown with -rP: where the kills landed
    lake = tmp_path / "lake"
    params = {"input": str(export), "target-path": str(lake)}
    if not any(o.startswith("finished") for o in outcomes):
        load_dumpling(spark, LoadConfig.from_params(params))
    for table in creates:
        assert delta_rows(spark, str(lake), table) == expected_rows(stream, table, snapshot), (
            f"{table}; {why}"
        )
        state = table_state.read_table_state(spark, located(lake, table))
        assert state.applied_ts == snapshot
    assert set(progress.load_progress(spark, f"{lake}/_ingest", "default").tables) == set(creates), why
    with pytest.raises(ConfigError, match="already holds a mirror"):  # done: a second load is refused
        load_dumpling(spark, LoadConfig.from_params(params))


def test_resync_killed_right_after_its_first_commit_on_the_table_loses_no_row(spark, tmp_path: Path):
    stream = _small_stream("canal-json")
    input_dir, lake = tmp_path / "in", tmp_path / "lake"
    stream.write(input_dir)
    config = IngestConfig.from_params(
        {"input": str(input_dir), "target-path": str(lake), "max-bad-ratio": "0.5"}
    )
    run_files(spark, config)
    log = Path(located(lake, TableId("app", "t"))) / "_delta_log"
    before = set(log.glob("*.json"))

    child = child_process(
        ["resync", "--table", "app.t", "--input", str(input_dir), "--target-path", str(lake)]
    )
    while not set(log.glob("*.json")) - before:
        assert child.poll() is None, "the re-sync ended without a commit on the table"
        time.sleep(0.01)
    os.killpg(child.pid, signal.SIGKILL)
    child.communicate()

    run_files(spark, config)
    g = stream.complete_watermark()
    assert delta_rows(spark, str(lake), T) == expected_rows(stream, T, g)


# The revivals of the recover corpus: the table, and the DDL that brings it back (the one in place, the one
# under a new name). CI kills after the first, the explore profile after both.
REVIVALS = {"rc.t1": "RECOVER TABLE `rc`.`t1`", "rc.t2_back": "FLASHBACK TABLE `rc`.`t2` TO `t2_back`"}


@pytest.mark.parametrize("table", ["rc.t1"] if PROFILE == "ci" else sorted(REVIVALS))
def test_a_kill_right_after_a_revival_neither_revives_twice_nor_loses_the_rows_after(spark, tmp_path, table):
    """SIGKILL the run as soon as the revival's copy of a dropped table is committed, before the DDL is
    marked applied and before any progress: the next run must see the copy as done (reviving it again would
    drop the rows written to the table after it) and end where a real TiDB ends."""
    corpus = CORPORA["recover"]
    records = corpus / "canal-json" / "records.jsonl"
    events = json.loads((corpus / "events.json").read_text())
    ts = next(e["commitTs"] for d in events for e in d.get("events", ()) if e["query"] == REVIVALS[table])
    lake = tmp_path / "lake"
    log = Path(located(lake, TableId(*table.split(".")))) / "_delta_log"
    child = child_process(run_args(records, lake, "canal-json"))
    threading.Thread(target=child.communicate, daemon=True).start()  # its log never fills the pipe
    deadline = time.monotonic() + 900
    # The commit that writes the copy: a CREATE [OR REPLACE] TABLE AS SELECT among the DDL's own commits.
    copy = re.compile(rf'"operation":"CREATE (OR REPLACE )?TABLE AS SELECT".*ddl {ts} in progress')
    while not any(copy.search(commit.read_text()) for commit in log.glob("*.json")):
        assert child.poll() is None, "the run ended before it revived the table"
        assert time.monotonic() < deadline, "no revival within 15 minutes"
        time.sleep(0.02)
    os.killpg(child.pid, signal.SIGKILL)
    child.wait()
    assert not any(f"ddl {ts}: " in commit.read_text() for commit in log.glob("*.json")), "killed too late"

    config = IngestConfig.from_params({"input": str(records), "target-path": str(lake)})
    run_files(spark, config)
    assert recover_problems(spark, config, corpus) == {}
    again = run_files(spark, config)
    assert not [t for t, r in again.tables.items() if r.upserted or r.deleted or r.ddls]


def test_only_a_log_without_any_file_is_ever_cleared(spark, tmp_path: Path):
    cut = tmp_path / "cut"
    _cut_short(cut)
    (cut / "part-0.parquet").write_bytes(b"never committed")
    assert prepare_to_create(spark, str(cut)) is False
    assert cut.is_dir() and not any(cut.iterdir())

    odd = tmp_path / "odd"
    (odd / "_delta_log").mkdir(parents=True)
    (odd / "_delta_log" / "00000000000000000000.crc").write_text("{}")
    with pytest.raises(NotADeltaTable, match="left as is"):
        prepare_to_create(spark, str(odd))
    assert (odd / "_delta_log" / "00000000000000000000.crc").exists()

    table = tmp_path / "table"
    spark.range(3).write.format("delta").save(str(table))
    assert prepare_to_create(spark, str(table)) is True
    assert spark.read.format("delta").load(str(table)).count() == 3
