"""Each Kafka position is applied once, whether it comes twice from the input or also from the buffer."""

from __future__ import annotations

from ingest.pipeline import cache_once_per_position
from ingest.source import has_duplicate_positions

SCHEMA = "topic string, partition int, offset long, value binary"


def records(spark, *positions: tuple[int, int]):
    return spark.createDataFrame([("cdc", p, o, f"{p}:{o}".encode()) for p, o in positions], SCHEMA)


def positions(frame) -> list[tuple[int, int]]:
    return sorted((r["partition"], r["offset"]) for r in frame.collect())


def shuffles(frame) -> bool:
    return "Exchange" in frame._jdf.queryExecution().executedPlan().toString()


def test_duplicate_positions_are_found_by_position_alone(spark):
    assert has_duplicate_positions(records(spark, (0, 1), (1, 1), (0, 1)))
    assert not has_duplicate_positions(records(spark, (0, 1), (1, 1), (0, 2)))


def test_overlapping_records_are_cached_once_per_position(spark):
    frame = cache_once_per_position(records(spark, (0, 1), (0, 2), (0, 2), (1, 1), (1, 1), (1, 1)))
    try:
        assert positions(frame) == [(0, 1), (0, 2), (1, 1)]
    finally:
        frame.unpersist()


def test_a_batch_without_duplicates_is_cached_as_it_is(spark):
    frame = cache_once_per_position(records(spark, (0, 1), (0, 2), (1, 1)))
    try:
        assert positions(frame) == [(0, 1), (0, 2), (1, 1)]
        assert frame.storageLevel.useMemory
        assert not shuffles(frame)
    finally:
        frame.unpersist()
