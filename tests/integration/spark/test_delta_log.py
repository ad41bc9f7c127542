"""The direct Delta log reader against tables Delta itself wrote: the files a version needs that later
commits removed, deletion vector files included, are named where Delta keeps them."""

from __future__ import annotations

import pytest

from ingest.lake import delta_log


def test_files_removed_since_a_version_are_the_data_and_deletion_vector_files_it_reads(spark, tmp_path):
    table = tmp_path / "t"
    spark.sql(
        f"CREATE TABLE delta.`{table}` (id INT, v STRING) USING delta "
        "TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')"
    )
    spark.range(100).selectExpr("CAST(id AS INT) AS id", "CAST(id AS STRING) AS v").coalesce(1).write.format(
        "delta"
    ).mode("append").save(str(table))
    spark.sql(f"DELETE FROM delta.`{table}` WHERE id = 1")  # version 2: a deletion vector on the file
    spark.sql(f"DELETE FROM delta.`{table}` WHERE id = 2")  # version 3: that vector replaced by a new one
    data_files = {p.name for p in table.glob("*.parquet")}
    dv_files = sorted(table.rglob("deletion_vector_*.bin"), key=lambda p: p.stat().st_mtime_ns)
    assert len(data_files) == 1 and len(dv_files) == 2
    first_dv = dv_files[0].name  # written by version 2, replaced by version 3

    after_insert = {p.name for p in delta_log.files_removed_since(table, 1)}
    assert after_insert == data_files  # version 1 read the file without a vector; version 2 removed it
    after_first_delete = delta_log.files_removed_since(table, 2)
    assert {p.name for p in after_first_delete} == data_files | {first_dv}
    assert all(p.exists() for p in after_first_delete)
    assert delta_log.files_removed_since(table, 3) == []
    assert [c.version for c in delta_log.commits(table)] == [0, 1, 2, 3]


def test_rows_of_the_newest_version_from_a_checkpoint_and_the_commits_after_it(spark, tmp_path):
    table = tmp_path / "t"
    spark.sql(
        f"CREATE TABLE delta.`{table}` (id BIGINT, at TIMESTAMP, v STRING) USING delta "
        "TBLPROPERTIES ('delta.checkpointInterval' = '3', 'delta.enableDeletionVectors' = 'false')"
    )
    for i in range(7):  # versions 1..7; checkpoints at 3 and 6
        spark.sql(f"INSERT INTO delta.`{table}` VALUES ({i}, TIMESTAMP '2026-11-27 10:00:0{i}', 'v{i}')")
    spark.sql(f"DELETE FROM delta.`{table}` WHERE id = 2")  # version 8: the file rewritten away
    assert (table / "_delta_log" / f"{6:020d}.checkpoint.parquet").exists()
    expected = sorted((r["id"], r["v"]) for r in spark.read.format("delta").load(str(table)).collect())
    rows = delta_log.read_rows(table, ["id", "v"])
    assert sorted((r["id"], r["v"]) for r in rows) == expected == [(i, f"v{i}") for i in range(7) if i != 2]


def test_rows_deleted_through_deletion_vectors_are_left_to_spark(spark, tmp_path):
    table = tmp_path / "t"
    spark.range(10).write.format("delta").option("delta.enableDeletionVectors", "true").save(str(table))
    spark.sql(f"DELETE FROM delta.`{table}` WHERE id = 1")
    with pytest.raises(delta_log.Unreadable, match="deletion vectors"):
        delta_log.read_rows(table, ["id"])
