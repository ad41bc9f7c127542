"""Which run and version answer a TSO; how chunk checksums and differences are judged."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from ingest.commands.asof_rules import CommitPoint, RunPoint, choose_run, choose_version, run_point
from ingest.commands.verify_rules import Checksum, DiffKind, RowDiff, chunk_count, differing_chunks
from ingest.errors import AsOfRefused
from ingest.model import TableId

AT = datetime(2026, 11, 20, tzinfo=timezone.utc)
T = TableId("shop", "t")


def test_a_run_is_a_point_at_g_or_at_a_load_snapshot_every_table_shares():
    assert run_point(100, [90, 100]) == 100
    assert run_point(0, [500, 500]) == 500  # an initial load into an empty mirror
    assert run_point(100, [90, 500]) is None  # a load that left a table behind its snapshot
    assert run_point(0, []) is None


def test_the_newest_run_at_or_below_the_tso_answers_it():
    runs = [RunPoint(1, AT, 100), RunPoint(2, AT, 200), RunPoint(3, AT, 200), RunPoint(4, AT, 300)]
    assert choose_run(runs, 100).run_id == 1
    assert choose_run(runs, 299).run_id == 3
    assert choose_run(runs, 300).run_id == 4
    with pytest.raises(AsOfRefused, match="before the mirror started"):
        choose_run(runs, 99)
    with pytest.raises(AsOfRefused, match="after the newest global watermark G = 300"):
        choose_run(runs, 301)
    with pytest.raises(AsOfRefused, match="no committed run"):
        choose_run([], 1)


def test_the_newest_consistent_commit_at_or_below_g_is_the_version():
    commits = [
        CommitPoint(0, False, 0),  # create
        CommitPoint(1, True, 100),
        CommitPoint(2, False, 100),  # a DDL in progress
        CommitPoint(3, True, 150),
        CommitPoint(4, None, 0),  # not ours (OPTIMIZE)
        CommitPoint(5, True, 300),
    ]
    assert [choose_version(T, commits, g) for g in (99, 100, 149, 150, 299, 300)] == [None, 1, 1, 3, 3, 5]
    with pytest.raises(AsOfRefused, match="oldest version left is 4"):
        choose_version(T, commits[4:], 150)


def test_chunks_and_checksums():
    assert [chunk_count(n, 10) for n in (0, 10, 11, 10**9)] == [1, 1, 2, 50_000]
    left = {0: Checksum(2, 10, 3), 1: Checksum(1, 5, 5)}
    assert differing_chunks(left, {0: Checksum(2, 10, 3), 2: Checksum(1, 5, 5)}) == [1, 2]
    assert left[0] + left[1] == Checksum(3, 15, 6)
    kinds = [RowDiff("k", "a", None).kind, RowDiff("k", None, "b").kind, RowDiff("k", "a", "b").kind]
    assert kinds == [DiffKind.ONLY_LEFT, DiffKind.ONLY_RIGHT, DiffKind.DIFFERENT]
