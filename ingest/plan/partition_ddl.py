"""Partition DDL (TRUNCATE/DROP/ADD/REORGANIZE/COALESCE/EXCHANGE PARTITION, re-partitioning) planned for one
table from its recorded partition definition. Pure."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from ingest.model import Column, ColumnType, DdlEvent, TableId, TableSchema
from ingest.mysql import ddl as mysql_ddl
from ingest.mysql import partition as mp
from ingest.plan import partitions
from ingest.plan.changes import (
    DeletePartitionRows,
    ExchangeRows,
    RecordOnly,
    Reject,
    SchemaChange,
    SetPartitioning,
    Truncate,
)
from ingest.plan.partitions import Partitioning


@dataclass(frozen=True, slots=True)
class ExchangeSides:
    """An EXCHANGE PARTITION as both its tables were just before it: the partitioned table's recorded
    definition (None: none recorded), and whether each table is in the mirror. Both sides plan from the
    same facts, so they apply together or stop together."""

    partitioned: TableId
    other: TableId
    partitioning: Partitioning | None
    partitioned_exists: bool
    other_exists: bool


def _plan_exchange(
    ddl: DdlEvent, table: TableId, action: mp.ExchangePartition, sides: ExchangeSides | None
) -> list[SchemaChange]:
    todo = (
        f"to go on, load both {sides.partitioned if sides else table} and the other table again from a "
        f"Dumpling export taken after commitTs {ddl.commit_ts} (ticdc-ingest load --force)"
    )
    if sides is None:
        return [Reject(f"{ddl.sql!r}: the tables of the exchange are not known here; {todo}")]
    if not sides.partitioned_exists and not sides.other_exists:
        return [RecordOnly("neither table of the exchange is in the mirror")]
    if not (sides.partitioned_exists and sides.other_exists):
        missing = sides.other if sides.partitioned_exists else sides.partitioned
        return [Reject(f"{ddl.sql!r} moves rows of {missing}, which the mirror does not hold; {todo}")]
    current = sides.partitioning
    if current is None or not current.followed or current.find(action.name) is None:
        reason = (
            "the mirror never saw its CREATE TABLE … PARTITION BY"
            if current is None
            else current.reason
            if not current.followed
            else f"the recorded definition has no partition {action.name}"
        )
        return [
            Reject(
                f"{ddl.sql!r} trades the rows of partition {action.name} with {sides.other}, but the mirror "
                f"cannot tell which rows that partition holds ({reason}); it stops both tables rather than "
                f"diverge; {todo}"
            )
        ]
    rows = partitions.rows_of(current, (action.name,))
    partitioned = table == sides.partitioned
    partner = sides.other if partitioned else sides.partitioned
    return [ExchangeRows(table, partner, rows, partitioned, ddl.commit_ts)]


def plan_partition_ddl(
    ddl: DdlEvent,
    table: TableId,
    statement: mysql_ddl.PartitionDdl,
    existing_columns: Collection[str] | None,
    current: Partitioning | None,
    column_types: Mapping[str, ColumnType] | None,
    exchange: ExchangeSides | None,
) -> list[SchemaChange]:
    action = statement.action
    if isinstance(action, mp.ExchangePartition):
        return _plan_exchange(ddl, table, action, exchange)
    if isinstance(action, mp.Unapplicable):
        # Never skippable (unknown=False): the upstream rows changed in a way the mirror cannot follow.
        return [
            Reject(
                f"{action.reason}: {ddl.sql!r}. The mirror would silently diverge, so it stops. To go on, "
                f"load the table again from a Dumpling export taken after commitTs {ddl.commit_ts} "
                "(ticdc-ingest load --force)"
            )
        ]
    if existing_columns is None:
        return [RecordOnly(f"{table} does not exist in the mirror")]
    if isinstance(action, mp.NoRowChange):
        return [RecordOnly(f"{action.what} changes no rows")]
    if isinstance(action, mp.Recount):
        if current is not None and current.method == partitions.HASH:
            return [SetPartitioning(table, partitions.recount(current, action.by))]
        return [RecordOnly("rows move between partitions of the table; none changes")]
    if isinstance(action, mp.Reorganize):
        if current is None or not current.followed:
            return [RecordOnly("rows move between partitions of the table; none changes")]
        if action.unreadable:
            return [
                SetPartitioning(table, partitions.unsupported(f"REORGANIZE PARTITION: {action.unreadable}"))
            ]
        return [SetPartitioning(table, partitions.reorganize(current, action.names, action.partitions))]
    if isinstance(action, mp.Repartition):
        if action.partition_by is None:
            return [SetPartitioning(table, partitions.NOT_PARTITIONED)]
        if column_types is None:
            return [SetPartitioning(table, partitions.unsupported(f"repartitioned by {ddl.sql[:200]!r}"))]
        columns = TableSchema(tuple(Column(n, t) for n, t in column_types.items()), ())
        return [SetPartitioning(table, partitions.from_clause(action.partition_by, columns))]
    if isinstance(action, mp.AddPartitions):
        if current is None or not current.followed:
            return [RecordOnly("the partition definition is not followed; rows do not change")]
        if action.unreadable:
            return [SetPartitioning(table, partitions.unsupported(f"ADD PARTITION: {action.unreadable}"))]
        return [SetPartitioning(table, partitions.add(current, action.partitions))]
    if isinstance(action, mp.TruncatePartitions) and action.every:
        return [Truncate(table)]
    names = action.names
    what = f"{ddl.sql!r} deletes the rows of partition(s) {', '.join(names)}"
    todo = (
        f"to go on, load the table again from a Dumpling export taken after commitTs {ddl.commit_ts} "
        "(ticdc-ingest load --force), which records its partitions"
    )
    if current is None:
        return [
            Reject(
                f"{what}, but the mirror never saw the table's CREATE TABLE … PARTITION BY, so it cannot "
                f"tell which rows those are; {todo}"
            )
        ]
    if current.method == partitions.NONE:
        return [Reject(f"{what}, but the mirror knows the table as not partitioned; {todo}")]
    if not current.followed:
        return [Reject(f"{what}, but the mirror cannot tell which rows those are: {current.reason}; {todo}")]
    missing = [n for n in names if current.find(n) is None]
    if isinstance(action, mp.DropPartitions) and current.method == partitions.HASH:
        return [Reject(f"{what}, but DROP PARTITION does not apply to HASH partitions; {todo}")]
    if isinstance(action, mp.TruncatePartitions) and missing:
        return [Reject(f"{what}, but the recorded definition has no partition {', '.join(missing)}; {todo}")]
    if current.column not in existing_columns:
        return [Reject(f"{what}, but the partition column {current.column} is not in the mirror; {todo}")]
    # DROP of a name already gone deleted nothing more upstream (IF EXISTS), or is this DDL's replay
    # after a crash that came between its delete and its commit: its rows are already deleted.
    after = partitions.drop(current, names) if isinstance(action, mp.DropPartitions) else current
    return [DeletePartitionRows(table, names, partitions.rows_of(current, names), after)]
