"""How a table's MERGE is planned: a segment of INSERTs only gets the INSERT clause alone, and a small table
is rewritten copy-on-write instead of gaining deletion vectors; every plan leaves the rows upstream has."""

import json
from pathlib import Path

import pytest
from mirror import located
from pyspark.sql import functions as F

from ingest.apply import merge as apply_merge_module
from ingest.apply.merge import RANK_COLUMN, apply_merge, slot
from ingest.config import IngestConfig
from ingest.model import TableId
from ingest.order import RANK_UPSERT
from ingest.pipeline import run_files
from ingest.state.table_state import COMMIT_TS_COLUMN, session_confs
from testkit.workload import Mix, Workload, WorkloadSpec, write_records


def _last_merge(spark, path: str) -> dict:
    row = (
        spark.sql(f"DESCRIBE HISTORY delta.`{path}`")
        .where("operation = 'MERGE'")
        .orderBy(F.col("version").desc())
        .first()
    )
    assert row is not None
    return {"parameters": dict(row["operationParameters"]), "metrics": dict(row["operationMetrics"])}


def _mirrored_equals_upstream(spark, path: str, workload: Workload) -> None:
    mirrored = {r["id"]: (r["c1"], r["c2"]) for r in spark.read.format("delta").load(path).collect()}
    expected = {key: (row[1], row[2]) for key, row in workload.tables[0].rows.items()}
    assert mirrored == expected


@pytest.mark.parametrize("small", [True, False], ids=["copy-on-write", "deletion-vectors"])
def test_inserts_only_merge_with_the_insert_clause_and_the_table_size_picks_how_updates_are_written(
    spark, tmp_path: Path, monkeypatch, small: bool
):
    if not small:
        monkeypatch.setattr(apply_merge_module, "SMALL_TABLE_BYTES", 0)
    workload = Workload(WorkloadSpec(mix=Mix.UPDATE_HEAVY, width=3, partitions=2))
    workload.create_tables()
    workload.insert_rows(60)
    lake = tmp_path / "lake"
    path = located(lake, TableId("bench", "t0"))
    for step in ("inserts", "changes"):
        if step == "changes":
            workload.changes(80, Mix.UPDATE_HEAVY)
        batch = tmp_path / step
        write_records(workload.take(), batch, topic="tidb_cdc")
        run_files(spark, IngestConfig.from_params({"input": str(batch), "target-path": str(lake)}))
        merge = _last_merge(spark, path)
        matched = json.loads(merge["parameters"]["matchedPredicates"])
        if step == "inserts":
            assert matched == []  # WHEN NOT MATCHED only: Delta's insert-only MERGE
            assert int(merge["metrics"]["numTargetRowsInserted"]) == 60
        else:
            assert len(matched) == 2  # the guarded UPDATE and DELETE
            assert int(merge["metrics"]["numTargetRowsUpdated"]) > 0
            dvs = int(merge["metrics"]["numTargetDeletionVectorsAdded"])
            assert (dvs == 0) if small else (dvs > 0)
        _mirrored_equals_upstream(spark, path, workload)


def test_an_insert_only_merge_leaves_a_key_the_target_already_holds(spark, tmp_path: Path):
    """A replayed INSERT of a key that a later change has already updated must change nothing."""
    path = str(tmp_path / "t")
    spark.createDataFrame(
        [(1, "updated later", 20)], f"id long, v string, {COMMIT_TS_COLUMN} long"
    ).write.format("delta").save(path)
    source = spark.createDataFrame(
        [(1, "first insert", 10, RANK_UPSERT), (2, "new", 15, RANK_UPSERT)],
        f"{slot(0)} long, {slot(1)} string, commit_ts long, {RANK_COLUMN} int",
    )
    result = apply_merge(spark, path, source, ("id",), ["id", "v"], "{}", insert_only=True)
    rows = {r["id"]: (r["v"], r[COMMIT_TS_COLUMN]) for r in spark.read.format("delta").load(path).collect()}
    assert rows == {1: ("updated later", 20), 2: ("new", 15)}
    assert (result.upserted, result.deleted) == (1, 0)


def test_a_planning_setting_the_session_refuses_is_left_out_and_the_others_are_put_back(spark):
    refused = "spark.sql.warehouse.dir"  # a static setting: every session refuses to change it
    partitions = "spark.sql.shuffle.partitions"
    before = spark.conf.get(partitions)
    confs = {partitions: "7", refused: "/elsewhere"}
    with session_confs(spark, confs, optional=True):
        assert spark.conf.get(partitions) == "7"
        assert spark.conf.get(refused) != "/elsewhere"
    assert spark.conf.get(partitions) == before
    with pytest.raises(Exception, match=r"(?i)static|modify"), session_confs(spark, confs):
        pass
    assert spark.conf.get(partitions) == before
