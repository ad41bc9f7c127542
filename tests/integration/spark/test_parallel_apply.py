"""Tables applied from a thread pool run their Spark jobs under the caller's tags and job group."""

import threading

import pytest

from ingest.model import TableId
from ingest.pipeline.parallel import apply_tables

TABLES = [TableId("shop", name) for name in "abcd"]


@pytest.mark.both_modes
def test_every_table_thread_runs_under_the_callers_tags(spark):
    spark.addTag("mirror-batch-7")
    seen: dict[TableId, tuple[set[str], str]] = {}

    def apply(table: TableId) -> int:
        seen[table] = (set(spark.getTags()), threading.current_thread().name)
        return spark.range(3).count()

    try:
        results = apply_tables(spark, TABLES, apply, parallelism=3)
    finally:
        spark.removeTag("mirror-batch-7")

    assert results == dict.fromkeys(TABLES, 3)
    assert all(name.startswith("ingest-table") for _, name in seen.values())  # really the pool's threads
    assert {table: "mirror-batch-7" in tags for table, (tags, _) in seen.items()} == dict.fromkeys(
        TABLES, True
    )


def test_every_table_that_fails_is_reported_and_the_others_finish(spark):
    """Failures other than a refused DDL (which stops its table only) fail the batch; every failed table is
    named, and the tables already running finish first."""
    from ingest.errors import TablesFailed

    finished = []

    def apply(table: TableId) -> int:
        if table.table in ("a", "c"):
            raise RuntimeError(f"{table} broke")
        finished.append(table)
        return spark.range(1).count()

    with pytest.raises(
        TablesFailed, match=r"2 tables failed: shop\.a: RuntimeError: shop\.a broke; shop\.c"
    ) as failed:
        apply_tables(spark, TABLES, apply, parallelism=2)
    assert [table for table, _ in failed.value.failures] == [TABLES[0], TABLES[2]]
    assert sorted(finished) == [TABLES[1], TABLES[3]]
