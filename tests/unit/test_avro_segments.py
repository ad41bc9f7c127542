"""TiCDC Avro: which writer schemas a table's batch follows in turn (plan.avro_schema.segments). Pure."""

from __future__ import annotations

from ingest.plan.avro_schema import SchemaUse, Segment, segments


def use(schema: int, commit_ts: int, offset: int) -> SchemaUse:
    return SchemaUse(
        value_schema=schema, key_schema=100, max_commit_ts=commit_ts, max_offset=offset, partition=0
    )


def retyped_between(*pairs: tuple[int, int]):
    return lambda older, newer: (older, newer) in pairs


def test_one_schema_is_one_segment_to_the_end():
    only = use(1, 50, 9)
    assert segments([only], retyped_between()) == [Segment(only)]


def test_columns_added_or_dropped_are_followed_at_once_under_the_newest_schema():
    old, new = use(1, 50, 4), use(2, 90, 9)
    assert segments([old, new], retyped_between()) == [Segment(new)]


def test_a_type_change_merges_the_older_rows_first_up_to_their_newest_commit_ts():
    old, new = use(1, 50, 4), use(2, 90, 9)
    assert segments([new, old], retyped_between((1, 2))) == [Segment(old, 0, 50), Segment(new, 50, None)]


def test_only_the_schemas_that_retype_start_a_segment():
    a, b, c = use(1, 10, 1), use(2, 20, 2), use(3, 30, 3)
    # 1 -> 2 adds a column, 2 -> 3 changes a type: rows of 1 and 2 go together, under 2
    assert segments([a, b, c], retyped_between((2, 3))) == [Segment(b, 0, 20), Segment(c, 20, None)]


def test_a_schema_used_on_two_partitions_counts_its_newest_use():
    early = SchemaUse(1, 100, 40, 7, partition=1)
    late = SchemaUse(1, 100, 60, 3, partition=0)
    new = use(2, 90, 9)
    assert segments([early, new, late], retyped_between((1, 2))) == [Segment(late, 0, 60), Segment(new, 60)]


def test_without_commit_ts_the_rows_cannot_be_placed_and_follow_the_newest_schema():
    old, new = use(1, 0, 4), use(2, 0, 9)
    assert segments([old, new], retyped_between((1, 2))) == [Segment(new)]
