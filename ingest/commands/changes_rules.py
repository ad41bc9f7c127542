"""Which Delta versions of a table hold upstream's changes between two TiDB timestamps, cut where its schema
changed, and which ranges cannot be answered. Pure.

Both ends resolve as ``as-of`` resolves them: the version of the table that equals upstream at G_A, and the
one at G_B. The changes between are the change data feed of the versions after the first, up to the second.
A commit that changes the table's schema (a DDL) cuts the range into segments, one per schema, each read on
its own: the rows of a whole-table rewrite (a type change) are not changes upstream made, the DDL is. The
first segment of a table created inside the range starts at its creation, rows it was created with
included (a RENAME copies them).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from ingest.commands.asof_rules import CommitPoint
from ingest.errors import ChangesRefused
from ingest.model import FEED_PAUSED, TableId, tso_to_datetime

# Delta operations that change a table's schema (or replace the table): a segment ends before each.
SCHEMA_OPERATIONS = frozenset(
    {
        "CREATE TABLE", "CREATE OR REPLACE TABLE", "REPLACE TABLE", "CREATE TABLE AS SELECT",
        "CREATE OR REPLACE TABLE AS SELECT", "REPLACE TABLE AS SELECT", "ADD COLUMNS", "CHANGE COLUMN",
        "CHANGE COLUMNS", "RENAME COLUMN", "DROP COLUMNS", "REPLACE COLUMNS",
    }
)  # fmt: skip
# Steps (our commits' ``userMetadata``) that rebuild a table from another source than the stream: the rows
# they hand over are the mirror's correction, not upstream's changes.
_REBUILDS = ("resync of ", "initial load")
CHANGE_FEED_ON = "change feed on"
# A DDL's commits: ``ddl <commitTs> in progress`` and ``ddl <commitTs>: <identity>``.
DDL_STEP = re.compile(r"ddl (\d+)")


@dataclass(frozen=True)
class Segment:
    """Versions ``first`` to ``last`` (inclusive; empty when ``first > last``) of one schema, and the
    commits whose schema changes came just before it (none: the segment starts the range)."""

    first: int
    last: int
    started_by: tuple[CommitPoint, ...] = ()
    # A table created inside the range: the rows it held at this version (its creation done) open the
    # segment, as inserts; a copy (RENAME) is made before its feed is on, so they are not in the feed.
    snapshot: int | None = None

    @property
    def empty(self) -> bool:
        return self.first > self.last and self.snapshot is None


def segments(
    table: TableId,
    commits: Sequence[CommitPoint],
    after: int | None,
    through: int,
    key_changed_at: Collection[int] = (),
) -> list[Segment]:
    """The segments of the changes in versions ``after`` (exclusive; None: the table did not exist yet) to
    ``through`` (inclusive), in order. Empty when nothing changed. Schema changes with no version between
    them start one segment together; the last segment is kept even when empty (the range ends on a DDL).
    A version that changed the table's key (``key_changed_at``) starts one too: rows before and after it
    are matched on different columns.

    Raises:
        ChangesRefused: the range holds a re-sync or forced load of the table, or starts before the table's
            change data feed was turned on.
    """
    in_range = sorted(
        (c for c in commits if (after is None or c.version > after) and c.version <= through),
        key=lambda c: c.version,
    )
    if not in_range:
        return []
    _refuse_rebuilds(table, in_range, after)
    created: tuple[CommitPoint, ...] = ()
    first, snapshot = (after or 0) + 1, None
    if after is None:
        created = _creation(in_range)
        first, snapshot = created[-1].version + 1, created[-1].version
    _refuse_before_feed(table, in_range, first)
    found: list[Segment] = []
    started_by: tuple[CommitPoint, ...] = created
    for commit in in_range[len(created) :]:
        if own_rows(commit) and commit.version == first:
            first += 1  # a DDL's back-fill: part of the DDL, so the segment starts after it
            continue
        if not starts_segment(commit) and commit.version not in key_changed_at:
            continue
        if commit.version > first or snapshot is not None:
            found.append(Segment(first, commit.version - 1, started_by, snapshot))
            started_by, snapshot = (), None
        first, started_by = commit.version + 1, (*started_by, commit)
    found.append(Segment(first, through, started_by, snapshot))
    return found


def key_candidates(commits: Sequence[CommitPoint], after: int | None, through: int) -> list[CommitPoint]:
    """The commits in the range that may have changed the table's key (a DDL's property changes), in order."""
    return sorted(
        (
            c for c in commits
            if (after is None or c.version > after) and c.version <= through
            and c.operation == "SET TBLPROPERTIES" and c.step.startswith("ddl ")
        ),
        key=lambda c: c.version,
    )  # fmt: skip


def _creation(in_range: Sequence[CommitPoint]) -> tuple[CommitPoint, ...]:
    """The commits that created a table: its first, and those after it that change no row upstream (a
    back-fill among them: the rows the table opens with are read after it)."""
    group = [in_range[0]]
    for commit in in_range[1:]:
        if commit.operation not in SCHEMA_OPERATIONS | {"SET TBLPROPERTIES"} and not own_rows(commit):
            break
        group.append(commit)
    return tuple(group)


def own_rows(commit: CommitPoint) -> bool:
    """A commit whose rows the mirror wrote for its own reasons, not upstream's changes: the UPDATE inside a
    DDL (or a followed Avro writer schema) that gives existing rows a new column's value. Upstream changed
    no row then (TiCDC sends none); the rows' next upstream change shows the value as their before-image.
    A DDL's DELETEs (TRUNCATE, a dropped or exchanged partition) are upstream's, and so are its copies."""
    return commit.operation == "UPDATE" and commit.consistent is False


def own_versions(commits: Sequence[CommitPoint]) -> frozenset[int]:
    return frozenset(c.version for c in commits if own_rows(c))


def stamps_of(commits: Sequence[CommitPoint]) -> dict[int, int]:
    """Per version a DDL wrote, the DDL's TSO: every row it inserted, deleted or replaced changed upstream
    then (a TRUNCATE, a partition exchanged), whatever TSO the row carried before."""
    stamps = {}
    for commit in commits:
        match = DDL_STEP.match(commit.step)
        if match:
            stamps[commit.version] = int(match.group(1))
    return stamps


def starts_segment(commit: CommitPoint) -> bool:
    """A schema change, or a commit that paused the feed for a rewrite (its versions hold no change)."""
    return commit.operation in SCHEMA_OPERATIONS or commit.step.endswith(FEED_PAUSED)


def _refuse_rebuilds(table: TableId, in_range: Sequence[CommitPoint], after: int | None) -> None:
    if after is None:
        return  # created inside the range: a load that created it hands over its first rows
    for commit in in_range:
        if commit.step.startswith(_REBUILDS):
            raise ChangesRefused(
                f"{table}: was rebuilt inside the range ({commit.step}, version {commit.version}, applied up "
                f"to TSO {commit.applied_ts} ({_when(commit.applied_ts)})): its rows were replaced from "
                "another source, not changed by upstream. Ask for a range that ends before it or starts "
                "after it"
            )


def _refuse_before_feed(table: TableId, in_range: Sequence[CommitPoint], first: int) -> None:
    turned_on = [c for c in in_range if c.step == CHANGE_FEED_ON]
    if turned_on and turned_on[-1].version > first:
        start = turned_on[-1]
        raise ChangesRefused(
            f"{table}: its change data feed starts at version {start.version} (turned on when the table was "
            f"applied up to TSO {start.applied_ts}, {_when(start.applied_ts)}); the range starts before it. "
            f"Ask for changes from TSO {start.applied_ts} or later"
        )


def check_range(from_g: int, to_g: int, from_tso: int, to_tso: int) -> None:
    """Refuse a range that runs backwards.

    Raises:
        ChangesRefused: ``from_tso`` is above ``to_tso``.
    """
    if from_tso > to_tso:
        raise ChangesRefused(
            f"from TSO {from_tso} ({_when(from_tso)}) is after to TSO {to_tso} ({_when(to_tso)}): "
            "give the earlier point first"
        )
    assert from_g <= to_g, (from_g, to_g)


def bound_of(commits: Sequence[CommitPoint]) -> dict[int, int]:
    """Per version, the TSO up to which upstream was applied once that version's batch was complete: the
    applied TSO of the first consistent commit at or after it. A row a commit deleted (or the before-image
    of one it updated) was changed upstream after the table's previous such TSO and at or below this one."""
    bound: dict[int, int] = {}
    pending: list[int] = []
    for commit in sorted(commits, key=lambda c: c.version):
        pending.append(commit.version)
        if commit.consistent:
            bound.update(dict.fromkeys(pending, commit.applied_ts))
            pending = []
    last = max((c.applied_ts for c in commits), default=0)
    bound.update(dict.fromkeys(pending, last))
    return bound


def _when(tso: int) -> str:
    return tso_to_datetime(tso).isoformat()
