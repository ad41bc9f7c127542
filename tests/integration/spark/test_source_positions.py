"""Each Kafka position is read once, whether it comes twice from the input or also from the buffer."""

from __future__ import annotations

from ingest.model import PartitionId
from ingest.source import once_per_position, with_buffered

SCHEMA = "topic string, partition int, offset long, value binary"


def records(spark, *positions: tuple[int, int]):
    return spark.createDataFrame([("cdc", p, o, f"{p}:{o}".encode()) for p, o in positions], SCHEMA)


def positions(frame) -> list[tuple[int, int]]:
    return sorted((r["partition"], r["offset"]) for r in frame.collect())


def shuffles(frame) -> bool:
    return "Exchange" in frame._jdf.queryExecution().executedPlan().toString()


def test_overlapping_captures_give_each_position_once(spark):
    frame = once_per_position(records(spark, (0, 1), (0, 2), (0, 2), (1, 1), (1, 1), (1, 1)))
    assert positions(frame) == [(0, 1), (0, 2), (1, 1)]


def test_input_without_duplicates_is_not_shuffled(spark):
    frame = once_per_position(records(spark, (0, 1), (0, 2), (1, 1)))
    assert positions(frame) == [(0, 1), (0, 2), (1, 1)]
    assert not shuffles(frame)


def test_buffer_below_the_resume_offsets_joins_the_batch_as_it_is(spark):
    resume = {PartitionId("cdc", 0): 5, PartitionId("cdc", 1): 3}
    union = with_buffered(records(spark, (0, 5), (0, 6), (1, 3)), records(spark, (0, 4), (1, 2)), resume)
    assert positions(union) == [(0, 4), (0, 5), (0, 6), (1, 2), (1, 3)]
    assert not shuffles(union)


def test_buffer_left_by_a_crash_before_progress_is_deduplicated_against_the_batch(spark):
    # The crashed run read offsets 5.. and buffered 6; progress still says resume at 5, so 6 is read again.
    resume = {PartitionId("cdc", 0): 5}
    union = with_buffered(records(spark, (0, 5), (0, 6), (0, 7)), records(spark, (0, 4), (0, 6)), resume)
    assert positions(union) == [(0, 4), (0, 5), (0, 6), (0, 7)]
