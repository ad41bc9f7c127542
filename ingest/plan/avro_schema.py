"""TiCDC Avro: a new writer schema against the mirrored table -> schema changes. Pure.

Avro carries no DDL; a schema change shows only as rows under a new writer
schema id. The mirror follows the newest writer schema: columns it adds are added (existing rows get the
field's default, as upstream's ADD COLUMN ... DEFAULT gives them), columns it lacks are dropped, changed
types go through the type-change policy, and a new key schema moves the merge key. A renamed column looks
like a drop and an add: its values come back only with the rows TiCDC sends again.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ingest.decode.ticdc_avro import WriterSchema
from ingest.model import ColumnType, TableId
from ingest.plan.schema import AddColumn, ChangeKey, ChangeType, DropColumn


@dataclass(frozen=True)
class SchemaUse:
    """How a batch's rows of one table used one writer schema: its id and the newest change under it."""

    value_schema: int
    key_schema: int
    max_commit_ts: int  # 0 when the changefeed sends no commitTs (no TiDB extension)
    max_offset: int
    partition: int


def newest(uses: Sequence[SchemaUse]) -> SchemaUse:
    """The writer schema of the table's newest row: by commitTs, then (without commitTs) by offset."""
    return max(uses, key=lambda u: (u.max_commit_ts, u.partition, u.max_offset))


@dataclass(frozen=True)
class Segment:
    """Rows of a table's batch merged under one writer schema: commitTs in (after_ts, through_ts]."""

    use: SchemaUse
    after_ts: int = 0
    through_ts: int | None = None  # None: to the batch's end


def segments(uses: Sequence[SchemaUse], retyped: Callable[[int, int], bool]) -> list[Segment]:
    """The writer schemas a table's batch follows in turn. Where a later schema changes a column's type
    (``retyped(older_id, newer_id)``), the rows under the older one are merged first, as upstream wrote
    them before its MODIFY COLUMN, so the table's rewrite converts them as TiDB converted its own; every
    other change (columns added or dropped) is followed at once, under the newest schema. One segment when
    the rows carry no commitTs to place them by."""
    last = newest(uses)
    per_schema: dict[int, SchemaUse] = {}
    for use in uses:
        if use.value_schema not in per_schema or newest([per_schema[use.value_schema], use]) is use:
            per_schema[use.value_schema] = use
    ordered = sorted(per_schema.values(), key=lambda u: (u.max_commit_ts, u.partition, u.max_offset))
    if any(u.max_commit_ts == 0 for u in ordered):
        return [Segment(last)]
    result: list[Segment] = []
    after = 0
    for use, later in itertools.pairwise(ordered):
        if retyped(use.value_schema, later.value_schema):
            result.append(Segment(use, after, use.max_commit_ts))
            after = use.max_commit_ts
    return [*result, Segment(last, after)]


def retyped(older: WriterSchema, newer: WriterSchema) -> bool:
    """Whether a column both writer schemas hold has another type in the newer one."""
    before = {c.column.name: c.column.type for c in older.columns}
    return any(before.get(c.column.name, c.column.type) != c.column.type for c in newer.columns)


Change = AddColumn | DropColumn | ChangeType | ChangeKey


def plan_evolution(
    table: TableId,
    current: Sequence[tuple[str, ColumnType | None]],
    current_key: tuple[str, ...],
    target: WriterSchema,
    target_key: tuple[str, ...],
) -> list[Change]:
    """What turns the mirrored table (``current`` columns with their recorded TiDB types) into ``target``."""
    changes: list[Change] = []
    names = {name for name, _ in current}
    wanted = set(target.names)
    for name, _ in current:
        if name not in wanted and name not in target_key:
            changes.append(DropColumn(table, name))
    previous: str | None = None
    for avro_column in target.columns:
        column = avro_column.column
        if column.name not in names:
            changes.append(
                AddColumn(
                    table, column, first=previous is None, after=previous, backfill=avro_column.backfill
                )
            )
        previous = column.name
    recorded = dict(current)
    for avro_column in target.columns:
        column = avro_column.column
        old = recorded.get(column.name)
        if column.name in names and old is not None and old != column.type:
            changes.append(ChangeType(table, column.name, column.type))
    if target_key and target_key != current_key:
        changes.append(ChangeKey(table, target_key))
    return changes


def describe(changes: Sequence[Change]) -> str:
    """One line for logs and the DDL history."""
    parts = []
    for change in changes:
        if isinstance(change, AddColumn):
            parts.append(f"add {change.column.name} {change.column.type}")
        elif isinstance(change, DropColumn):
            parts.append(f"drop {change.name}")
        elif isinstance(change, ChangeType):
            parts.append(f"modify {change.name} {change.type}")
        else:
            parts.append(f"key ({', '.join(change.key)})")
    return "; ".join(parts) or "no column change"
