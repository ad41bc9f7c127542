"""Ordering decisions, pure: watermarks and G, DDL admission, segments.

Nothing here touches Spark or Delta; the pipeline
feeds it the few control events of a batch and gets back what to apply, in which order.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ingest.model import DdlEvent, PartitionId, TableId, TableState, Watermark

# Intra-commitTs order of row changes: a DELETE loses against an after-image at the same commit_ts.
RANK_DELETE = 0
RANK_UPSERT = 1


def advance_watermarks(
    current: Mapping[PartitionId, int], seen: Iterable[Watermark]
) -> dict[PartitionId, int]:
    """Each partition's watermark only moves forward; a smaller value (a replay) is ignored."""
    result = dict(current)
    for watermark in seen:
        pid = watermark.position.partition_id
        result[pid] = max(result.get(pid, 0), watermark.ts)
    return result


def global_watermark(watermarks: Mapping[PartitionId, int], partitions: Iterable[PartitionId]) -> int:
    """G: the minimum watermark over the full partition set, 0 until every partition has one."""
    values = [watermarks.get(p, 0) for p in partitions]
    return min(values) if values else 0


def ddl_is_new(state: TableState, ddl: DdlEvent) -> bool:
    """Per table, a replayed DDL (older than the last applied one, or the same one) is dropped."""
    if ddl.commit_ts < state.ddl_ts or ddl.commit_ts < state.applied_ts:
        return False
    return not (ddl.commit_ts == state.ddl_ts and ddl.identity in state.ddl_ids)


@dataclass(frozen=True, slots=True)
class Segment:
    """Apply the rows of a table with ``low <(=) commit_ts <= high``; afterwards A_T = ``high``.

    ``low`` is normally inclusive because admission is strict (a change is dropped only if its commit_ts
    is below A_T): a row at exactly A_T is applied again and made harmless by the MERGE guard (a row is
    overwritten only by a change not older than it). Right after a DDL at ``low`` it is
    exclusive: rows at the DDL's commit_ts belong before it, and re-applying their old-schema image would
    undo what the DDL did (e.g. a backfilled DEFAULT).
    """

    table: TableId
    low: int
    high: int
    low_inclusive: bool = True
    before_ddl: bool = False

    @property
    def applied_ts(self) -> int:
        """A_T once the segment is committed. Before a DDL at ``high`` the table is upstream as of
        ``high - 1``: upstream at ``high`` already includes the DDL (a TRUNCATE, say), which commits next."""
        return self.high - 1 if self.before_ddl else self.high

    @property
    def first_ts(self) -> int:
        """The smallest commit_ts the segment admits (commit_ts is an integer TSO)."""
        return self.low if self.low_inclusive else self.low + 1

    def admits(self, commit_ts: int) -> bool:
        """Whether a row at this commit_ts belongs to the segment."""
        return self.first_ts <= commit_ts <= self.high


@dataclass(frozen=True, slots=True)
class DdlStep:
    """Apply one DDL to its table, after every row with commit_ts <= its commit_ts."""

    ddl: DdlEvent


Step = Segment | DdlStep


def plan_table_steps(
    table: TableId,
    state: TableState,
    ddls: Iterable[DdlEvent],
    bound: int,
    has_rows: bool,
) -> list[Step]:
    """Cut a table's buffered rows at its eligible DDLs, up to ``bound`` (G).

    ``ddls`` are the table's admitted DDLs; those with commit_ts > bound stay pending. Rows with
    ts == D belong to the segment before the DDL at D.
    """
    steps: list[Step] = []
    low = state.applied_ts
    inclusive = not (state.ddl_ts > 0 and state.ddl_ts == state.applied_ts)
    eligible = sorted(
        (d for d in ddls if d.commit_ts <= bound), key=lambda d: (d.commit_ts, d.position.offset)
    )
    for ddl in eligible:
        if has_rows and (ddl.commit_ts > low or (inclusive and ddl.commit_ts == low)):
            steps.append(Segment(table, low, ddl.commit_ts, inclusive, before_ddl=True))
        steps.append(DdlStep(ddl))
        low, inclusive = max(low, ddl.commit_ts), False
    if has_rows and bound > 0 and (bound > low or (inclusive and bound == low)):
        steps.append(Segment(table, low, bound, inclusive))
    return steps


def drop_empty_segments(steps: Sequence[Step], row_stamps: Sequence[int]) -> list[Step]:
    """The steps without segments that no row falls into (``row_stamps``: the sorted commit_ts of the
    table's rows). A DDL-heavy stretch cuts a table into many segments between few transactions; an empty
    one would cost a MERGE of nothing and a commit. Skipping it moves no A_T: the next step does."""
    kept: list[Step] = []
    for step in steps:
        if isinstance(step, Segment):
            first = bisect_left(row_stamps, step.first_ts)
            if first == len(row_stamps) or row_stamps[first] > step.high:
                continue
        kept.append(step)
    return kept
