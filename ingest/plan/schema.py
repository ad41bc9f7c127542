"""DDL + current table schema -> schema changes to apply, ignore or reject. Pure.

The walking skeleton applies CREATE TABLE, ADD COLUMN (with the DEFAULT back-filled into existing rows, as
upstream reads them), TRUNCATE TABLE and CREATE DATABASE. Every other DDL stops the stream before progress
moves, naming the statement and its position: silently skipping a DDL would let the mirror diverge.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from ingest.decode import mysql_ddl
from ingest.decode import mysql_partition as mp
from ingest.model import Column, ColumnKind, ColumnType, DdlEvent, TableId, TableSchema
from ingest.plan import partitions
from ingest.plan.keys import UniqueKeys
from ingest.plan.partitions import Partitioning, PartitionRows
from ingest.plan.renames import RenameGroup


@dataclass(frozen=True, slots=True)
class CreateTable:
    table: TableId
    schema: TableSchema
    partitioning: Partitioning = partitions.NOT_PARTITIONED
    unique_keys: UniqueKeys | None = None


@dataclass(frozen=True, slots=True)
class AddColumn:
    """Add ``column``; when ``backfill`` is not None, existing rows get that value (wire text)."""

    table: TableId
    column: Column
    first: bool
    after: str | None
    backfill: str | None


@dataclass(frozen=True, slots=True)
class CreateLike:
    """CREATE TABLE ... LIKE: a new empty table with the source's columns and key, as the source was just
    before ``before_ts`` (the DDL's commitTs)."""

    table: TableId
    source: TableId
    before_ts: int | None = None


@dataclass(frozen=True, slots=True)
class CreateTableReplacing(CreateTable):
    """CREATE TABLE of a name whose earlier table was dropped or renamed away: a new table identity."""


@dataclass(frozen=True, slots=True)
class DropColumn:
    table: TableId
    name: str


@dataclass(frozen=True, slots=True)
class RenameColumn:
    table: TableId
    old: str
    new: str


@dataclass(frozen=True, slots=True)
class ChangeType:
    """A column's TiDB type changes. Apply widens the Delta type when Delta allows it, else refuses."""

    table: TableId
    name: str
    type: ColumnType


@dataclass(frozen=True, slots=True)
class Truncate:
    table: TableId


@dataclass(frozen=True, slots=True)
class Retire:
    """The upstream table is gone (dropped, or renamed away): keep a retired mark so replays stay out.

    ``keep_rows``: the DROP TABLE policy ``archive`` keeps the last rows readable, ``delete`` removes
    them. A rename's source always keeps them: the target copies them, possibly after a crash between
    the two steps.
    """

    table: TableId
    reason: str
    keep_rows: bool


@dataclass(frozen=True, slots=True)
class CopyFrom:
    """RENAME: the new table starts as the old one's rows, schema and key, as the old one was just before
    ``before_ts`` (the RENAME's commitTs)."""

    table: TableId
    source: TableId
    before_ts: int | None = None


@dataclass(frozen=True, slots=True)
class ChangeKey:
    """The handle key TiCDC identifies rows by is now ``key``: the mirror merges on it from here on."""

    table: TableId
    key: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SetUniqueKeys:
    """Record the table's unique indexes as they are after the DDL (the handle key follows from them)."""

    table: TableId
    keys: UniqueKeys


@dataclass(frozen=True, slots=True)
class DeletePartitionRows:
    """TRUNCATE/DROP PARTITION: delete the partitions' rows, then record the definition left after it."""

    table: TableId
    names: tuple[str, ...]
    rows: PartitionRows
    partitioning: Partitioning


@dataclass(frozen=True, slots=True)
class ExchangeRows:
    """EXCHANGE PARTITION, one side of it: the partitioned table's ``rows`` (its partition) trade places with
    all rows of the other table. ``partitioned``: this is the partitioned table, whose partition now holds
    the other table's rows; otherwise this table now holds exactly that partition's rows. Both sides read
    each other as they were just before ``before_ts``, so either may go first and a replay changes nothing.
    """

    table: TableId
    partner: TableId
    rows: PartitionRows
    partitioned: bool
    before_ts: int


@dataclass(frozen=True, slots=True)
class SetPartitioning:
    """ADD PARTITION, ALTER TABLE … PARTITION BY, REMOVE PARTITIONING: no row changes, a new definition."""

    table: TableId
    partitioning: Partitioning


@dataclass(frozen=True, slots=True)
class RecordOnly:
    """Nothing to change in Delta; the DDL is still recorded as applied. ``warning``: the user should
    know (the mirror differs from upstream by design here, e.g. a VIRTUAL column left out)."""

    reason: str
    warning: bool = False


@dataclass(frozen=True, slots=True)
class Reject:
    """A change we do not apply; the run stops before this DDL and progress does not move past it.

    ``unknown``: the statement is one we do not know (or cannot parse), which the ``skip`` policy for
    unknown DDL lets pass with an audit record; a known change we refuse is never skipped.
    """

    reason: str
    unknown: bool = False


SchemaChange = (
    CreateTable
    | AddColumn
    | DropColumn
    | RenameColumn
    | ChangeType
    | Truncate
    | Retire
    | CopyFrom
    | CreateLike
    | ChangeKey
    | SetUniqueKeys
    | DeletePartitionRows
    | ExchangeRows
    | SetPartitioning
    | RecordOnly
    | Reject
)

_NUMERIC = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
_BIT_LITERAL = re.compile(r"^b'([01]*)'$", re.IGNORECASE)
_HEX_LITERAL = re.compile(r"^(?:0x([0-9a-f]+)|x'([0-9a-f]*)')$", re.IGNORECASE)
_NUMBER_KINDS = {
    ColumnKind.TINYINT, ColumnKind.SMALLINT, ColumnKind.MEDIUMINT, ColumnKind.INT, ColumnKind.BIGINT,
    ColumnKind.DECIMAL, ColumnKind.FLOAT, ColumnKind.DOUBLE, ColumnKind.BIT, ColumnKind.YEAR,
}  # fmt: skip
_BINARY_KINDS = {ColumnKind.BINARY, ColumnKind.VARBINARY, ColumnKind.BLOB}
# What existing rows read upstream after ADD COLUMN … NOT NULL without DEFAULT: the type's implicit value
# (an ENUM's is its first element). Zero dates are the mirror's NULL.
_ZERO_VALUES = {
    **dict.fromkeys(_NUMBER_KINDS, "0"),
    **dict.fromkeys((ColumnKind.CHAR, ColumnKind.VARCHAR, ColumnKind.TEXT, ColumnKind.SET), ""),
    **dict.fromkeys(_BINARY_KINDS, ""),
    ColumnKind.JSON: "null", ColumnKind.TIME: "00:00:00", ColumnKind.DATE: "0000-00-00",
    ColumnKind.DATETIME: "0000-00-00 00:00:00", ColumnKind.TIMESTAMP: "0000-00-00 00:00:00",
}  # fmt: skip


def affected_tables(ddl: DdlEvent, known: Collection[TableId]) -> list[TableId]:
    """Every table a DDL changes, in the order their steps must run (a rename's source before its target).

    ``known`` are the tables the mirror knows, for DROP DATABASE. An empty list means a database-level DDL
    that touches no table.
    """
    statement = mysql_ddl.parse_ddl(ddl.sql, ddl.table.schema)
    if isinstance(statement, mysql_ddl.RenameTables):
        return [t for pair in statement.pairs for t in pair]
    if isinstance(statement, mysql_ddl.DropDatabase):
        return sorted(t for t in known if t.schema == statement.schema)
    if isinstance(statement, mysql_ddl.CreateTableLike):
        return [statement.source, statement.table]
    if isinstance(statement, mysql_ddl.CreateTable | mysql_ddl.DropTable | mysql_ddl.TruncateTable):
        return [statement.table]
    if isinstance(statement, mysql_ddl.PartitionDdl) and isinstance(statement.action, mp.ExchangePartition):
        return [statement.table, exchange_partner(statement)]
    if isinstance(statement, mysql_ddl.AlterTable | mysql_ddl.PartitionDdl | mysql_ddl.TableOptions):
        return [statement.table]
    if isinstance(statement, mysql_ddl.CreateDatabase | mysql_ddl.DatabaseOptions):
        return []
    if isinstance(statement, mysql_ddl.NonDataObject):
        return [statement.name] if statement.name is not None else []
    return [ddl.table] if ddl.table.table else []


def is_rename(ddl: DdlEvent) -> bool:
    """Whether a DDL renames tables (its affected tables then come in (source, target) pairs)."""
    return isinstance(mysql_ddl.parse_ddl(ddl.sql, ddl.table.schema), mysql_ddl.RenameTables)


def rename_pairs(ddl: DdlEvent) -> tuple[tuple[TableId, TableId], ...]:
    """The (old, new) pairs a RENAME event moves (none for any other DDL)."""
    statement = mysql_ddl.parse_ddl(ddl.sql, ddl.table.schema)
    return statement.pairs if isinstance(statement, mysql_ddl.RenameTables) else ()


def exchange_partner(statement: mysql_ddl.PartitionDdl) -> TableId:
    """The non-partitioned table of an EXCHANGE PARTITION (unqualified: the partitioned table's database)."""
    assert isinstance(statement.action, mp.ExchangePartition)
    other = statement.action.other
    return TableId(*other) if len(other) == 2 else TableId(statement.table.schema, other[0])


def exchange_tables(ddl: DdlEvent) -> tuple[TableId, TableId] | None:
    """(partitioned, other) of an EXCHANGE PARTITION event; None for any other DDL."""
    statement = mysql_ddl.parse_ddl(ddl.sql, ddl.table.schema)
    if isinstance(statement, mysql_ddl.PartitionDdl) and isinstance(statement.action, mp.ExchangePartition):
        return statement.table, exchange_partner(statement)
    return None


def reads_other_tables(ddl: DdlEvent) -> bool:
    """Whether applying a DDL to one table reads another (RENAME, CREATE TABLE … LIKE, EXCHANGE PARTITION):
    every table it names must then be applied up to just before it first, and each reads the others as
    they were just before it."""
    statement = mysql_ddl.parse_ddl(ddl.sql, ddl.table.schema)
    return isinstance(statement, mysql_ddl.RenameTables | mysql_ddl.CreateTableLike) or (
        isinstance(statement, mysql_ddl.PartitionDdl) and isinstance(statement.action, mp.ExchangePartition)
    )


def unique_keys_of(statement: mysql_ddl.CreateTable) -> UniqueKeys:
    """The unique indexes a CREATE TABLE defines, named and ordered as TiDB does."""
    keys = UniqueKeys((), frozenset(c.name for c in statement.schema.columns if not c.nullable))
    for index in statement.indexes:
        keys = keys.add(index.name, index.columns, primary=index.primary)
    return keys


def evolve_unique_keys(
    keys: UniqueKeys, statement: mysql_ddl.AlterTable | mysql_ddl.IndexChange | mysql_ddl.PrimaryKeyChange
) -> UniqueKeys:
    """A table's unique indexes after a DDL: column renames, drops and nullability, then index actions."""
    if isinstance(statement, mysql_ddl.PrimaryKeyChange):
        keys = keys.drop_primary()
        return keys if statement.key is None else keys.add(None, statement.key, primary=True)
    if isinstance(statement, mysql_ddl.AlterTable):
        primary = {c for i in keys.indexes if i.primary for c in i.columns}
        for action in statement.actions:
            if isinstance(action, mysql_ddl.DropColumn):
                keys = keys.drop_column(action.name)
            elif isinstance(action, mysql_ddl.RenameColumn):
                keys = keys.rename_column(action.old, action.new)
            elif isinstance(action, mysql_ddl.ModifyColumn):
                if action.old != action.column.name:
                    keys = keys.rename_column(action.old, action.column.name)
                # A primary key column stays NOT NULL whatever its new definition says.
                nullable = action.column.nullable and action.old not in primary
                keys = keys.set_nullable(action.column.name, nullable)
            elif isinstance(action, mysql_ddl.AddColumn) and not action.column.nullable:
                keys = keys.set_nullable(action.column.name, False)
    for index_action in (
        statement.index_actions if isinstance(statement, mysql_ddl.AlterTable) else statement.actions
    ):
        if isinstance(index_action, mysql_ddl.AddIndex):
            keys = keys.add(
                index_action.index.name, index_action.index.columns, primary=index_action.index.primary
            )
        elif isinstance(index_action, mysql_ddl.DropIndex):
            keys = keys.drop(index_action.name)
        else:
            keys = keys.rename_index(index_action.old, index_action.new)
    return keys


def _plan_unique_keys(
    ddl: DdlEvent,
    table: TableId,
    statement: mysql_ddl.AlterTable | mysql_ddl.IndexChange | mysql_ddl.PrimaryKeyChange,
    keys: UniqueKeys,
    existing_columns: Collection[str],
    key: Collection[str],
) -> list[SchemaChange]:
    """Key DDL on a table whose unique indexes the mirror follows: record them as they are after the DDL,
    and move the merge key where TiCDC's rule now puts the handle (Simple announces it: that wins)."""
    after = evolve_unique_keys(keys, statement)
    handle = ddl.handle_key if ddl.handle_key is not None else after.handle()
    if not handle:
        return [
            Reject(
                f"{table}: after {ddl.sql!r} the table has no primary key and no unique key of NOT NULL "
                "columns, so TiCDC no longer replicates it"
            )
        ]
    columns = set(existing_columns)
    if isinstance(statement, mysql_ddl.AlterTable):
        for action in statement.actions:
            if isinstance(action, mysql_ddl.AddColumn):
                columns.add(action.column.name)
            elif isinstance(action, mysql_ddl.RenameColumn | mysql_ddl.ModifyColumn):
                columns.add(action.new if isinstance(action, mysql_ddl.RenameColumn) else action.column.name)
    changes: list[SchemaChange] = [] if after == keys else [SetUniqueKeys(table, after)]
    moved = _plan_key_change(ddl, table, tuple(handle), columns, key)
    return [*changes, *moved] if changes or not isinstance(moved[0], RecordOnly) else moved


def _plan_key_change(
    ddl: DdlEvent,
    table: TableId,
    new_key: tuple[str, ...] | None,
    existing_columns: Collection[str] | None,
    key: Collection[str],
) -> list[SchemaChange]:
    if existing_columns is None:
        return [RecordOnly(f"{table} does not exist in the mirror")]
    if not new_key:
        return [
            Reject(
                f"{table}: after {ddl.sql!r} TiCDC identifies rows by a NOT NULL unique index that the SQL "
                "does not name (or by nothing); mirror the table with the Simple protocol, which announces "
                "it, or re-create the table's mirror"
            )
        ]
    missing = [c for c in new_key if c not in existing_columns]
    if missing:
        return [Reject(f"{table}: the new key names column(s) {', '.join(missing)}, which the mirror lacks")]
    if tuple(new_key) == tuple(key):
        return [RecordOnly("the handle key is unchanged")]
    return [ChangeKey(table, tuple(new_key))]


def plan_schema_changes(
    ddl: DdlEvent,
    existing_columns: Collection[str] | None,
    *,
    table: TableId | None = None,
    key: Collection[str] = (),
    retired: bool = False,
    drop_keeps_rows: bool = True,
    partitioning: Partitioning | None = None,
    unique_keys: UniqueKeys | None = None,
    column_types: Mapping[str, ColumnType] | None = None,
    exchange: ExchangeSides | None = None,
    rename_group: RenameGroup | None = None,
    first_of_group: bool = True,
    given_defaults: Mapping[str, str] | None = None,
) -> list[SchemaChange]:
    """What a DDL means for one table it affects (``table``, by default the DDL's own).

    ``existing_columns`` is None when the table does not exist in Delta; ``retired`` when it exists but
    its upstream table was dropped or renamed away. ``partitioning`` is the recorded partition definition
    (None: none recorded, e.g. a table created from DML); ``unique_keys`` likewise the table's unique
    indexes; ``column_types`` the upstream types of its columns, where known. ``exchange``: both tables of
    an EXCHANGE PARTITION as they were before it. ``rename_group``: every pair of the RENAME statement this
    DDL is one event of; the table gets its end result with the first of those events that names it
    (``first_of_group``), the others only record. ``given_defaults``: the ``column-defaults`` the user gave
    for this table's columns.
    """
    table = table or ddl.table
    given_defaults = given_defaults or {}
    statement = mysql_ddl.parse_ddl(ddl.sql, ddl.table.schema)
    if isinstance(statement, mysql_ddl.CreateDatabase):
        return [RecordOnly(f"CREATE DATABASE {statement.schema}: databases are directories")]
    if isinstance(statement, mysql_ddl.DatabaseOptions):
        return [RecordOnly(f"ALTER DATABASE {statement.schema} changes no table")]
    if isinstance(statement, mysql_ddl.NonDataObject):
        return [RecordOnly(f"a {statement.what} holds no rows: nothing to mirror")]
    if isinstance(statement, mysql_ddl.CreateTable):
        if not statement.schema.key:
            return [
                Reject(
                    f"CREATE TABLE {statement.table} has no primary key and no NOT NULL unique key; "
                    "rows cannot be merged exactly"
                )
            ]
        defined = partitions.from_clause(statement.partition_by, statement.schema)
        stored = TableSchema(
            tuple(c for c in statement.schema.columns if not c.virtual), statement.schema.key
        )
        left_out = [_virtual_left_out(c) for c in statement.schema.columns if c.virtual]
        keys = unique_keys_of(statement)
        if existing_columns is None:
            return [CreateTable(statement.table, stored, defined, keys), *left_out]
        if retired:
            return [CreateTableReplacing(statement.table, stored, defined, keys), *left_out]
        return [RecordOnly(f"{statement.table} already exists")]
    if isinstance(statement, mysql_ddl.TruncateTable):
        return [Truncate(statement.table)]
    if isinstance(statement, mysql_ddl.PartitionDdl):
        return _plan_partition_ddl(
            ddl, table, statement, existing_columns, partitioning, column_types, exchange
        )
    if isinstance(statement, mysql_ddl.PrimaryKeyChange):
        if unique_keys is not None and existing_columns is not None:
            return _plan_unique_keys(ddl, table, statement, unique_keys, existing_columns, key)
        return _plan_key_change(ddl, table, statement.key or ddl.handle_key, existing_columns, key)
    if isinstance(statement, mysql_ddl.TableOptions):
        return [RecordOnly(f"table options change no rows or columns: {statement.what}"[:300])]
    if isinstance(statement, mysql_ddl.IndexChange):
        if unique_keys is not None and existing_columns is not None:
            return _plan_unique_keys(ddl, table, statement, unique_keys, existing_columns, key)
        if ddl.handle_key is not None and existing_columns is not None:
            # Simple announces the table's indexes after the DDL: the handle key is known either way.
            return _plan_key_change(ddl, table, ddl.handle_key, existing_columns, key)
        if statement.adds_unique:
            return [_new_unique_index(ddl, table)]
        return [RecordOnly("indexes do not exist in the mirror")]
    if isinstance(statement, mysql_ddl.DropTable | mysql_ddl.DropDatabase):
        if existing_columns is None:
            return [RecordOnly(f"{table} does not exist in the mirror")]
        return [Retire(table, f"dropped by {ddl.identity[:120]}", keep_rows=drop_keeps_rows)]
    if isinstance(statement, mysql_ddl.RenameTables):
        group = rename_group or RenameGroup.of(statement.pairs, () if existing_columns is None else (table,))
        if not first_of_group:
            return [RecordOnly(f"{table}: applied with the first event of its RENAME statement")]
        source = group.source_of(table)
        if source is not None:
            return [CopyFrom(table, source, ddl.commit_ts)]
        if group.retires(table) and existing_columns is not None:
            holder = next((new for new, old in group.holders().items() if old == table), None)
            reason = f"renamed to {holder}" if holder is not None else f"renamed away by {ddl.identity[:120]}"
            return [Retire(table, reason, keep_rows=True)]
        return [RecordOnly(f"{table} is not moved by {ddl.identity[:120]}")]
    if isinstance(statement, mysql_ddl.AlterTable):
        if existing_columns is None:
            return [Reject(f"ALTER TABLE on {statement.table}, which the mirror has never seen created")]
        if statement.adds_unique and ddl.handle_key is None and unique_keys is None:
            return [_new_unique_index(ddl, table)]
        # A column that already exists is still planned: reaching here means the DDL is not recorded as
        # applied (replays are filtered by D_T first), so a crash may have come between the ALTER and the
        # back-fill. Applying adds if absent and back-fills, which is idempotent until later rows land.
        alter: list[SchemaChange] = []
        for action in statement.actions:
            if isinstance(action, mysql_ddl.DropColumn):
                if action.name in key:
                    return [Reject(f"DROP COLUMN {action.name} removes part of the merge key of {table}")]
                alter.append(DropColumn(statement.table, action.name))
                continue
            if isinstance(action, mysql_ddl.RenameColumn):
                alter.append(RenameColumn(statement.table, action.old, action.new))
                continue
            if isinstance(action, mysql_ddl.ModifyColumn | mysql_ddl.AddColumn) and action.column.virtual:
                alter.append(_virtual_left_out(action.column))
                continue
            if isinstance(action, mysql_ddl.ModifyColumn):
                if action.old != action.column.name:
                    alter.append(RenameColumn(statement.table, action.old, action.column.name))
                # Nullability, DEFAULT and position are recorded only: TiCDC sends full row images and
                # every mirrored column is nullable.
                alter.append(ChangeType(statement.table, action.column.name, action.column.type))
                continue
            if isinstance(action, mysql_ddl.AlterDefault):
                alter.append(RecordOnly(f"DEFAULT of {action.name} changes future inserts only"))
                continue
            backfill = _backfill_value(action.column, given_defaults.get(action.column.name))
            if isinstance(backfill, Reject):
                return [backfill]
            alter.append(AddColumn(statement.table, action.column, action.first, action.after, backfill))
        if unique_keys is not None:
            keyed = _plan_unique_keys(ddl, table, statement, unique_keys, existing_columns, key)
            if any(isinstance(c, Reject) for c in keyed):
                return keyed
            alter.extend(c for c in keyed if not isinstance(c, RecordOnly))
        return alter
    if isinstance(statement, mysql_ddl.CreateTableLike):
        if table == statement.source:
            return [RecordOnly(f"source of CREATE TABLE {statement.table} LIKE {statement.source}")]
        if existing_columns is not None and not retired:
            return [RecordOnly(f"{statement.table} already exists")]
        return [CreateLike(statement.table, statement.source, ddl.commit_ts)]
    return [Reject(f"{statement.reason}: {ddl.sql!r}. {UNKNOWN_DDL_TODO}", unknown=True)]


def _virtual_left_out(column: Column) -> RecordOnly:
    return RecordOnly(
        f"VIRTUAL generated column {column.name} left out of the mirror: no protocol carries its values "
        "(TiDB computes them on read)",
        warning=True,
    )


UNKNOWN_DDL_TODO = (
    "If this statement changes no columns, keys or rows of mirrored tables, run again with --unknown-ddl "
    "skip (it is recorded as skipped in the DDL history); if it does, load the table again from a Dumpling "
    "export taken after it (ticdc-ingest load --force)"
)


def _new_unique_index(ddl: DdlEvent, table: TableId) -> Reject:
    return Reject(
        f"a new unique index on {table} may change the key TiCDC identifies rows by, and "
        f"Canal-JSON does not say which key it uses now; not supported yet: {ddl.sql!r}"
    )


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


def _plan_partition_ddl(
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


def _backfill_value(column: Column, given: str | None = None) -> str | Reject | None:
    """The value existing rows read upstream after ADD COLUMN, as wire text (None: SQL NULL); ``given``:
    the value the user says they read (``column-defaults``), for a DEFAULT that is not a literal."""
    kind = column.type.kind
    if column.has_default:
        if column.default is None:
            return None
        literal = literal_wire_text(column.default, column.type)
        if literal is None and given is not None:
            return given
        if literal is None:
            return Reject(
                f"ADD COLUMN {column.name} DEFAULT {column.default}: the value existing rows read upstream "
                "is the moment the DDL ran (or an expression's), which no protocol carries; to go on, give "
                f"it as TiDB shows it for rows older than the DDL (--column-defaults "
                f"<database>.<table>.{column.name}=<value>), or load the table again from a Dumpling export "
                "taken after the DDL (ticdc-ingest load --force)"
            )
        return literal
    if column.nullable:
        return None
    if kind is ColumnKind.ENUM and column.type.elements:
        return column.type.elements[0]
    zero = _ZERO_VALUES.get(kind)
    if zero is None:
        return Reject(
            f"ADD COLUMN {column.name} {column.type} NOT NULL without DEFAULT: the implicit value "
            "of existing rows is not known for this type"
        )
    return _binary_wire_text(b"", column.type) if kind in _BINARY_KINDS else zero


def literal_wire_text(sql_literal: str, column_type: ColumnType) -> str | None:
    """A DEFAULT literal (canonical, as ``mysql_ddl.default_literal`` writes it) as the wire text a row
    of a ``column_type`` column carries for that value; None when it is not a literal.

    Bytes (``X'…'``, ``b'…'``) are a number in a numeric or BIT column and the bytes themselves in a
    binary one; a string in a binary column is its UTF-8 bytes. BINARY(n) values are padded with 0x00 to
    n bytes, as TiDB reads them.
    """
    text = sql_literal.strip()
    kind = column_type.kind
    if _NUMERIC.match(text):
        return text
    if len(text) >= 2 and text[0] == text[-1] == "'":
        value = text[1:-1].replace("''", "'")
        if kind in _BINARY_KINDS:
            return _binary_wire_text(value.encode("utf-8"), column_type)
        if kind is ColumnKind.BIT:
            return str(int.from_bytes(value.encode("utf-8"), "big"))
        return value
    bits = _BIT_LITERAL.match(text)
    hexa = _HEX_LITERAL.match(text)
    if bits:
        number = int(bits.group(1) or "0", 2)
        data = number.to_bytes(max(1, (len(bits.group(1)) + 7) // 8), "big")
    elif hexa:
        digits = hexa.group(1) or hexa.group(2) or ""
        data = bytes.fromhex(digits if len(digits) % 2 == 0 else "0" + digits)
        number = int.from_bytes(data, "big")
    else:
        return None
    if kind in _NUMBER_KINDS:
        return str(number)
    # TiDB keeps a column's DEFAULT as text in its JSON table info, where every byte that is not part of
    # valid UTF-8 becomes U+FFFD: upstream reads DEFAULT x'00ff' back as 00 EF BF BD.
    data = go_json_text(data).encode("utf-8")
    if kind in _BINARY_KINDS:
        return _binary_wire_text(data, column_type)
    return data.decode("utf-8")


def _binary_wire_text(data: bytes, column_type: ColumnType) -> str:
    """Bytes as binary wire text (latin-1, one character per byte), BINARY(n) padded to n bytes."""
    if column_type.kind is ColumnKind.BINARY and column_type.length:
        data = data.ljust(column_type.length, b"\x00")
    return data.decode("latin-1")


_VALID_UTF8 = re.compile(
    rb"[\x00-\x7f]|[\xc2-\xdf][\x80-\xbf]|\xe0[\xa0-\xbf][\x80-\xbf]|[\xe1-\xec\xee\xef][\x80-\xbf]{2}"
    rb"|\xed[\x80-\x9f][\x80-\xbf]|\xf0[\x90-\xbf][\x80-\xbf]{2}|[\xf1-\xf3][\x80-\xbf]{3}|\xf4[\x80-\x8f][\x80-\xbf]{2}"
)


def go_json_text(data: bytes) -> str:
    """Bytes as Go's JSON encoder writes them into a string: valid UTF-8 kept, each other byte U+FFFD."""
    out, i = [], 0
    while i < len(data):
        match = _VALID_UTF8.match(data, i)
        if match:
            out.append(match.group().decode("utf-8"))
            i = match.end()
        else:
            out.append("\ufffd")
            i += 1
    return "".join(out)
