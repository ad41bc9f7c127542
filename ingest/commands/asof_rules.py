"""Which committed run answers a TiDB timestamp, and which Delta version of a table holds it. Pure.

A committed run applied every table it touched to one global watermark G, so at that run each mirrored
table equals upstream at G: touched tables in the version the run committed, untouched ones in their last
version (nothing upstream changed them between their applied TSO and G). The version of a table that holds
upstream at G is therefore its newest commit marked consistent whose applied TSO is at or below G.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from ingest.errors import AsOfRefused
from ingest.model import TableId, tso_to_datetime


@dataclass(frozen=True)
class RunPoint:
    """A committed run as seen by as-of reads: the TSO every table it knew equals upstream at."""

    run_id: int
    committed_at: datetime
    point: int


@dataclass(frozen=True)
class CommitPoint:
    """One Delta commit of a mirrored table, as its ``userMetadata`` describes it (None: not ours)."""

    version: int
    consistent: bool | None
    applied_ts: int
    operation: str = ""  # Delta's name of the commit's operation (MERGE, ADD COLUMNS, ...)
    step: str = ""  # why the mirror made it (our userMetadata's step)


def run_point(global_watermark: int, applied: Sequence[int]) -> int | None:
    """The TSO a run's tables all equal upstream at, given G and each table's applied TSO after the run.

    A streamed run applies every table to at most G: its point is G. An initial load sets every loaded table
    to the snapshot TSO S above G; when all tables the run knew are at that one S (a load into an empty
    mirror), its point is S. A load that left other tables behind S is no point at all: those tables are not
    known to equal upstream at S. A run with nothing applied yet (G = 0, no table) is no point either.
    """
    highest = max(applied, default=0)
    if highest <= global_watermark:
        return global_watermark or None
    return highest if min(applied) == highest else None


def choose_run(runs: Sequence[RunPoint], tso: int) -> RunPoint:
    """The newest run whose point is at or below ``tso``.

    Raises:
        AsOfRefused: no run yet, ``tso`` before the first run's point, or after the newest point (the
            mirror does not know upstream beyond it yet).
    """
    if not runs:
        raise AsOfRefused(
            "the mirror has no committed run to read as of; run the mirror (or an initial load) first"
        )
    newest = max(runs, key=lambda r: r.point)
    if tso > newest.point:
        raise AsOfRefused(
            f"TSO {tso} ({_when(tso)}) is after the newest global watermark G = {newest.point} "
            f"({_when(newest.point)}, run {newest.run_id}): the mirror does not know upstream past it yet. "
            f"Ask for a TSO at or below {newest.point}, or let the mirror catch up first"
        )
    eligible = [r for r in runs if r.point <= tso]
    if not eligible:
        first = min(runs, key=lambda r: r.point)
        raise AsOfRefused(
            f"TSO {tso} ({_when(tso)}) is before the mirror started: its first run applied upstream up to "
            f"G = {first.point} ({_when(first.point)}, run {first.run_id}). Ask for a TSO at or after "
            f"{first.point}; older states were never mirrored"
        )
    return max(eligible, key=lambda r: (r.point, r.run_id))


def choose_version(table: TableId, commits: Sequence[CommitPoint], g: int) -> int | None:
    """The version of ``table`` that equals upstream at ``g``: its newest consistent commit with applied
    TSO at or below ``g``. None when the table's complete history has none (it did not exist yet at ``g``).

    Raises:
        AsOfRefused: the history that remains starts after version 0 (its log was cleaned up) and holds no
            such commit, so the version that answered ``g`` is gone.
    """
    ours = [c for c in commits if c.consistent and c.applied_ts <= g]
    if ours:
        return max(c.version for c in ours)
    oldest = min((c.version for c in commits), default=0)
    if oldest > 0:
        raise AsOfRefused(
            f"{table}: the version that held upstream at TSO {g} ({_when(g)}) is no longer in its Delta "
            f"history (the oldest version left is {oldest}; older log entries were cleaned up). Ask for a "
            "TSO inside the retained history, or keep more with delta.logRetentionDuration"
        )
    return None


def _when(tso: int) -> str:
    return tso_to_datetime(tso).isoformat()
