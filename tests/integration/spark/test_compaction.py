"""Mirrored tables compact themselves (Delta auto compaction), and what we read back from the history still
holds: each table's A_T, the as-of versions, and Delta's idempotent-write ids.

Delta compacts only once 50 small files have piled up; the test lowers that threshold for its own session so
that every batch is followed by a compaction commit. Files pile up on a table above the copy-on-write limit
(a smaller one has the file its MERGE touches rewritten), so the test lowers that limit too.
"""

import pytest
from mirror import located

from ingest.apply import merge as apply_merge_module
from ingest.apply.table import AUTO_COMPACT, CHECKPOINT_INTERVAL
from ingest.commands import asof
from ingest.config import IngestConfig
from ingest.lake import delta_io
from ingest.model import TableId
from ingest.pipeline import run_files
from ingest.state.table_state import (
    read_table_state,
    state_from_metadata,
)
from testkit.sample import Stream
from testkit.workload import Mix, Workload, WorkloadSpec, write_records

MIN_FILES = "spark.databricks.delta.autoCompact.minNumFiles"


@pytest.fixture
def compact_early(spark, monkeypatch):
    monkeypatch.setattr(apply_merge_module, "SMALL_TABLE_BYTES", 0)
    spark.conf.set(MIN_FILES, "2")
    try:
        yield
    finally:
        spark.conf.unset(MIN_FILES)


def _rows(spark, path, version=None):
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return {r["id"]: (r["c1"], r["c2"]) for r in reader.load(path).collect()}


@pytest.mark.full(modes=("connect",))  # the classic run stays in CI
@pytest.mark.both_modes
def test_auto_compaction_keeps_table_state_as_of_versions_and_replays(spark, tmp_path, compact_early):
    workload = Workload(WorkloadSpec(mix=Mix.UPDATE_HEAVY, width=3, partitions=1))
    workload.create_tables()
    workload.insert_rows(20)
    lake = tmp_path / "lake"
    path = located(lake, TableId("bench", "t0"))
    points = []
    for batch in range(3):
        if batch:
            workload.changes(15)
        records = tmp_path / f"in-{batch}"
        write_records(workload.take(), records, topic="tidb_cdc")
        run_files(spark, IngestConfig.from_params({"input": str(records), "target-path": str(lake)}))
        points.append((workload.last_ts, _rows(spark, path)))

    assert delta_io.properties(spark, path)[AUTO_COMPACT] == "true"
    assert delta_io.properties(spark, path)[CHECKPOINT_INTERVAL[0]] == "100"
    history = delta_io.history(spark, path).collect()
    compactions = [
        r for r in history if r["operation"] == "OPTIMIZE" and r["operationParameters"].get("auto") == "true"
    ]
    assert len(compactions) >= 2, [r["operation"] for r in history]
    # Each compaction commit carries the state of the write it followed, so a history of compactions cannot
    # push our newest state out of the HISTORY_DEPTH commits read_table_state searches.
    for commit in compactions:
        state = state_from_metadata(commit["userMetadata"])
        assert state is not None
        made_by = max((r for r in history if r["version"] < commit["version"]), key=lambda r: r["version"])
        assert state == state_from_metadata(made_by["userMetadata"])
    assert delta_io.detail(spark, path)["numFiles"] <= 2
    assert read_table_state(spark, path).applied_ts == workload.last_ts

    for g, rows in points:
        answer = asof.resolve(spark, str(lake), g)
        assert answer.g == g
        assert _rows(spark, path, answer.tables[0].version) == rows


def test_compaction_off_creates_tables_without_it_and_a_renamed_table_keeps_its_setting(spark, run, lake):
    def compacts(table: TableId) -> str | None:
        return delta_io.properties(spark, located(lake, table)).get(AUTO_COMPACT)

    s = Stream(topic="cdc", partitions=1)
    plain = s.create_table("CREATE TABLE `app`.`plain` (`id` int PRIMARY KEY, `v` int)", s.tso(1))
    s.insert(plain, {"id": 1, "v": 1}, s.tso(2))
    s.watermark(s.tso(2))
    run(s, compaction="off")
    assert compacts(plain) == "false"

    # Created with the default: on. A rename made while the mirror runs with `off` copies the source's.
    compacted = s.create_table("CREATE TABLE `app`.`compacted` (`id` int PRIMARY KEY, `v` int)", s.tso(3))
    s.insert(compacted, {"id": 1, "v": 1}, s.tso(4))
    s.watermark(s.tso(4))
    run(s)
    assert compacts(compacted) == "true"
    renamed = TableId(compacted.schema, "renamed")
    s.rename_table(compacted, renamed, s.tso(5))
    s.insert(renamed, {"id": 2, "v": 2}, s.tso(6))
    s.watermark(s.tso(6))
    run(s, compaction="off")
    assert compacts(renamed) == "true"
    rows = delta_io.read(spark, located(lake, renamed)).collect()
    assert sorted(r["id"] for r in rows) == [1, 2]
