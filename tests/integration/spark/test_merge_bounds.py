"""The MERGE carries the batch's key bounds, so Delta skips target files whose keys lie outside them."""

from datetime import datetime

from mirror import located

from ingest.apply.merge import INSERT_COLUMN, ChangeSummary, slot, summarize
from ingest.config import IngestConfig
from ingest.model import BAD_COLUMN, TableId
from ingest.pipeline import run_files
from testkit.workload import Mix, Workload, WorkloadSpec, write_records


def test_merge_with_key_bounds_keeps_the_result_and_bounds_skip_files_outside(spark, tmp_path):
    workload = Workload(WorkloadSpec(mix=Mix.UPDATE_HEAVY, width=3, partitions=1))
    workload.create_tables()
    workload.insert_rows(40)  # keys 0..39
    lake = tmp_path / "lake"
    first = tmp_path / "in-1"
    write_records(workload.take(), first, topic="tidb_cdc")
    run_files(spark, IngestConfig.from_params({"input": str(first), "target-path": str(lake)}))
    path = located(lake, TableId("bench", "t0"))
    # Four files of ten keys each, in key order.
    rows = spark.read.format("delta").load(path)
    rows.repartitionByRange(4, "id").sortWithinPartitions("id").write.format("delta").mode("overwrite").save(
        path
    )
    assert len(spark.read.format("delta").load(path).inputFiles()) == 4

    # Only keys 30..39 change, and two new keys arrive above them.
    state = workload.tables[0]
    state.live[:] = list(range(30, 40))
    state.slot.clear()
    state.slot.update({k: i for i, k in enumerate(state.live)})
    workload.changes(25, Mix.UPDATE_HEAVY)
    second = tmp_path / "in-2"
    write_records(workload.take(), second, topic="tidb_cdc")
    run_files(spark, IngestConfig.from_params({"input": str(second), "target-path": str(lake)}))

    # The bound the MERGE adds leaves out the three files of keys 0..29 by their statistics alone. Delta
    # does not record a MERGE's skipping in the table history, so the same predicate is checked on a read.
    table = spark.read.format("delta").load(path)
    lo, hi = 30, max(workload.tables[0].rows)
    skipped = set(table.inputFiles()) - set(table.where(f"id BETWEEN {lo} AND {hi}").inputFiles())
    assert len(skipped) == 3
    mirrored = {r["id"]: r["c1"] for r in spark.read.format("delta").load(path).collect()}
    # No preloaded rows here, so the generator's rows are the whole upstream table.
    expected = {key: row[1] for key, row in workload.tables[0].rows.items()}
    assert mirrored == expected


def test_timestamp_keys_get_no_bounds(spark):
    changes = spark.createDataFrame(
        [
            (datetime(2026, 1, 1, 8), True, ""),
            (datetime(2026, 1, 2, 9), True, ""),
            (None, True, "missing key column k"),
        ],
        f"{slot(0)} timestamp, {INSERT_COLUMN} boolean, {BAD_COLUMN} string",
    )
    assert summarize(spark, changes, ("k",), ["k"]) == ChangeSummary(1, None, True)


def test_integer_keys_are_bounded_by_the_good_changes_only(spark):
    changes = spark.createDataFrame(
        [(5, True, ""), (9, False, ""), (1, False, "c: value will not convert")],
        f"{slot(0)} long, {INSERT_COLUMN} boolean, {BAD_COLUMN} string",
    )
    assert summarize(spark, changes, ("k",), ["k"]) == ChangeSummary(1, (5, 9), False)


def test_only_inserts_looks_at_the_good_changes_only(spark):
    changes = spark.createDataFrame(
        [(5, True, ""), (1, False, "c: value will not convert")],
        f"{slot(0)} long, {INSERT_COLUMN} boolean, {BAD_COLUMN} string",
    )
    assert summarize(spark, changes, ("k",), ["k"]) == ChangeSummary(1, (5, 5), True)
