"""Cutting a table's versions between two TSOs into segments of one schema, and what is refused. Pure."""

from __future__ import annotations

import pytest

from ingest.commands.asof_rules import CommitPoint
from ingest.commands.changes_rules import (
    Segment,
    bound_of,
    check_range,
    key_candidates,
    own_versions,
    segments,
    stamps_of,
)
from ingest.commands.changes_sql import comment
from ingest.errors import ChangesRefused
from ingest.model import TableId

T = TableId("db", "t")


def merge(version: int, ts: int) -> CommitPoint:
    return CommitPoint(version, True, ts, "MERGE", f"merge ({ts - 10}, {ts}]")


def ddl(version: int, ts: int, operation: str = "ADD COLUMNS", *, consistent: bool = False) -> CommitPoint:
    return CommitPoint(version, consistent, ts, operation, f"ddl {ts} in progress")


def test_a_range_of_row_commits_is_one_segment_from_the_version_after_the_start():
    commits = [
        CommitPoint(0, False, 0, "CREATE TABLE", "create"),
        merge(1, 100),
        merge(2, 200),
        merge(3, 300),
    ]
    assert segments(T, commits, 1, 3) == [Segment(2, 3)]
    assert segments(T, commits, 3, 3) == []


def test_each_schema_change_starts_a_segment_and_back_to_back_ones_start_it_together():
    add, change = ddl(3, 250), ddl(4, 250, "CHANGE COLUMN")
    commits = [merge(1, 100), merge(2, 200), add, change, merge(5, 250), merge(6, 300)]
    assert segments(T, commits, 1, 6) == [Segment(2, 2), Segment(5, 6, (add, change))]


def test_a_range_that_ends_on_a_ddl_keeps_an_empty_last_segment_that_names_it():
    rewrite = ddl(3, 250, "CREATE OR REPLACE TABLE AS SELECT")
    found = segments(T, [merge(1, 100), merge(2, 200), rewrite], 1, 3)
    assert found == [Segment(2, 2), Segment(4, 3, (rewrite,))]
    assert found[-1].empty


def test_a_table_created_inside_the_range_starts_at_its_creation_with_the_rows_it_was_created_with():
    created = CommitPoint(0, False, 150, "CREATE OR REPLACE TABLE AS SELECT", "ddl 150 in progress")
    assert segments(T, [created, merge(1, 200)], None, 1) == [Segment(1, 1, (created,), snapshot=0)]
    # A copy (RENAME) turns its feed on in a second commit: the rows it holds then open the segment.
    feed_on = CommitPoint(1, True, 150, "SET TBLPROPERTIES", "ddl 150: rename")
    assert segments(T, [created, feed_on, merge(2, 200)], None, 2) == [
        Segment(2, 2, (created, feed_on), snapshot=1)
    ]


def test_a_rebuild_inside_the_range_is_refused_naming_it():
    resync = CommitPoint(3, True, 300, "CREATE OR REPLACE TABLE AS SELECT", "resync of db.t from /in")
    with pytest.raises(ChangesRefused, match=r"db\.t: was rebuilt inside the range \(resync of db\.t"):
        segments(T, [merge(1, 100), merge(2, 200), resync], 1, 3)


def test_a_range_that_starts_before_the_feed_was_turned_on_is_refused():
    on = CommitPoint(2, True, 100, "SET TBLPROPERTIES", "change feed on")
    commits = [merge(1, 100), on, merge(3, 200)]
    with pytest.raises(ChangesRefused, match="change data feed starts at version 2"):
        segments(T, commits, 0, 3)
    assert segments(T, commits, 1, 3) == [Segment(2, 3)]


def test_deletes_take_the_tso_their_batch_was_complete_at():
    commits = [merge(1, 100), ddl(2, 150), CommitPoint(3, True, 150, "SET TBLPROPERTIES", "ddl 150: x")]
    assert bound_of(commits) == {1: 100, 2: 150, 3: 150}


def test_a_range_that_runs_backwards_is_refused():
    with pytest.raises(ChangesRefused, match="give the earlier point first"):
        check_range(100, 100, 120, 110)


def test_the_commits_of_a_rewrite_with_the_feed_paused_start_the_segment_after_it():
    paused = CommitPoint(3, False, 200, "SET TBLPROPERTIES", "ddl 250 in progress (change feed paused)")
    rewrite = ddl(4, 250, "CREATE OR REPLACE TABLE AS SELECT")
    resumed = CommitPoint(5, False, 200, "SET TBLPROPERTIES", "ddl 250 in progress")
    commits = [merge(1, 100), merge(2, 200), paused, rewrite, resumed, merge(6, 300)]
    assert segments(T, commits, 1, 6) == [Segment(2, 2), Segment(5, 6, (paused, rewrite))]


def test_the_commits_that_may_change_the_key_are_a_ddls_property_changes_in_version_order():
    commits = [
        CommitPoint(4, True, 300, "SET TBLPROPERTIES", "ddl 300: ALTER TABLE t ADD PRIMARY KEY (b)"),
        merge(3, 200),
        CommitPoint(2, False, 100, "SET TBLPROPERTIES", "ddl 300 in progress"),
        CommitPoint(1, True, 100, "SET TBLPROPERTIES", "change feed on"),
    ]  # newest first, as DESCRIBE HISTORY lists them
    assert [c.version for c in key_candidates(commits, 0, 4)] == [2, 4]


def test_a_version_that_changed_the_key_starts_a_segment():
    change = CommitPoint(3, False, 250, "SET TBLPROPERTIES", "ddl 250 in progress")
    commits = [merge(1, 100), merge(2, 200), change, merge(4, 300)]
    assert segments(T, commits, 0, 4, key_changed_at=[3]) == [Segment(1, 2), Segment(4, 4, (change,))]


def test_a_new_columns_back_fill_is_the_mirrors_own_and_the_segment_starts_after_it():
    add, fill = ddl(3, 250), ddl(4, 250, "UPDATE")
    done = CommitPoint(5, True, 250, "SET TBLPROPERTIES", "ddl 250: add column")
    commits = [merge(1, 100), merge(2, 200), add, fill, done, merge(6, 300)]
    assert own_versions(commits) == {4}
    assert segments(T, commits, 1, 6) == [Segment(2, 2), Segment(5, 6, (add,))]
    # Two columns added by one DDL, each filled: one boundary, no segment of back-fills between them.
    second, refill = ddl(5, 250), ddl(6, 250, "UPDATE")
    commits = [merge(1, 100), merge(2, 200), add, fill, second, refill, merge(7, 300)]
    assert segments(T, commits, 1, 7) == [Segment(2, 2), Segment(7, 7, (add, second))]


def test_a_ddls_deletes_are_upstreams_changes_stamped_with_its_tso():
    truncate = ddl(3, 250, "DELETE")
    commits = [merge(1, 100), merge(2, 200), truncate, merge(4, 300)]
    assert own_versions(commits) == frozenset()
    assert stamps_of(commits) == {3: 250}
    assert segments(T, commits, 1, 4) == [Segment(2, 4)]


def test_a_table_created_inside_the_range_opens_with_its_rows_after_a_back_fill():
    created = CommitPoint(0, False, 150, "CREATE OR REPLACE TABLE AS SELECT", "ddl 150 in progress")
    add, fill = ddl(1, 160), ddl(2, 160, "UPDATE")
    found = segments(T, [created, add, fill, merge(3, 200)], None, 3)
    assert found == [Segment(3, 3, (created, add, fill), snapshot=2)]


def test_every_line_of_a_ddl_is_a_comment():
    assert comment("CREATE TABLE t (\n  id INT,\n\n  v TEXT\n)") == [
        "-- CREATE TABLE t (", "--   id INT,", "--", "--   v TEXT", "-- )",
    ]  # fmt: skip
