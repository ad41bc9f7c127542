"""Each Kafka position is applied once, whether it comes twice from the input or also from the buffer."""

from __future__ import annotations

from ingest.model import PartitionId
from ingest.pipeline.batch import cache_once_per_position

SCHEMA = "topic string, partition int, offset long, value binary"
P0, P1 = PartitionId("cdc", 0), PartitionId("cdc", 1)


def records(spark, *positions: tuple[int | None, int | None]):
    rows = [("cdc", p, o, f"{p}:{o}".encode()) for p, o in positions]
    return spark.createDataFrame(rows, SCHEMA).selectExpr(
        "*", "'dml' AS kind", "CAST(NULL AS string) AS error", "CAST(NULL AS long) AS commit_ts"
    )


def positions(frame) -> list[tuple[int, int]]:
    return sorted((r["partition"], r["offset"]) for r in frame.collect() if r["partition"] is not None)


def shuffles(frame) -> bool:
    return "Exchange" in frame._jdf.queryExecution().executedPlan().toString()


def test_overlapping_records_are_cached_once_per_position(spark):
    frame, ranges = cache_once_per_position(records(spark, (0, 1), (0, 2), (0, 2), (1, 1), (1, 1), (1, 1)))
    try:
        assert positions(frame) == [(0, 1), (0, 2), (1, 1)]
        assert {p: (r.records, r.duplicates) for p, r in ranges.items()} == {P0: (2, 0), P1: (1, 0)}
    finally:
        frame.unpersist()


def test_a_batch_without_duplicates_is_cached_as_it_is(spark):
    frame, ranges = cache_once_per_position(records(spark, (0, 1), (0, 2), (1, 1)))
    try:
        assert positions(frame) == [(0, 1), (0, 2), (1, 1)]
        assert {p: r.records for p, r in ranges.items()} == {P0: 2, P1: 1}
        assert frame.storageLevel.useMemory
        assert not shuffles(frame)
    finally:
        frame.unpersist()


def test_lines_without_a_position_are_not_copies_of_each_other(spark):
    frame, _ = cache_once_per_position(records(spark, (0, 1), (0, 1), (None, None), (None, None)))
    try:
        assert positions(frame) == [(0, 1)]
        assert frame.where("partition IS NULL").count() == 2
    finally:
        frame.unpersist()
