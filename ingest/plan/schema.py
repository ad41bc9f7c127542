"""DDL + current table schema -> schema changes to apply, ignore or reject. Pure.

The walking skeleton applies CREATE TABLE, ADD COLUMN (with the DEFAULT back-filled into existing rows, as
upstream reads them), TRUNCATE TABLE and CREATE DATABASE. Every other DDL stops the stream before progress
moves, naming the statement and its position: silently skipping a DDL would let the mirror diverge.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from ingest.decode import mysql_ddl
from ingest.decode import mysql_partition as mp
from ingest.model import Column, ColumnKind, ColumnType, DdlEvent, TableId, TableSchema
from ingest.plan import partitions
from ingest.plan.partitions import Partitioning, PartitionRows


@dataclass(frozen=True, slots=True)
class CreateTable:
    table: TableId
    schema: TableSchema
    partitioning: Partitioning = partitions.NOT_PARTITIONED


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
    """CREATE TABLE ... LIKE: a new empty table with the source's columns and key."""

    table: TableId
    source: TableId


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
    """RENAME: the new table starts as the old one's rows, schema and key."""

    table: TableId
    source: TableId


@dataclass(frozen=True, slots=True)
class ChangeKey:
    """The handle key TiCDC identifies rows by is now ``key``: the mirror merges on it from here on."""

    table: TableId
    key: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DeletePartitionRows:
    """TRUNCATE/DROP PARTITION: delete the partitions' rows, then record the definition left after it."""

    table: TableId
    names: tuple[str, ...]
    rows: PartitionRows
    partitioning: Partitioning


@dataclass(frozen=True, slots=True)
class SetPartitioning:
    """ADD PARTITION, ALTER TABLE … PARTITION BY, REMOVE PARTITIONING: no row changes, a new definition."""

    table: TableId
    partitioning: Partitioning


@dataclass(frozen=True, slots=True)
class RecordOnly:
    """Nothing to change in Delta; the DDL is still recorded as applied."""

    reason: str


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
    | DeletePartitionRows
    | SetPartitioning
    | RecordOnly
    | Reject
)

_NUMERIC = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
_BIT_LITERAL = re.compile(r"^b'([01]+)'$", re.IGNORECASE)
_HEX_LITERAL = re.compile(r"^(?:0x([0-9a-f]+)|x'([0-9a-f]*)')$", re.IGNORECASE)
_ZERO_VALUES = {
    ColumnKind.TINYINT: "0", ColumnKind.SMALLINT: "0", ColumnKind.MEDIUMINT: "0", ColumnKind.INT: "0",
    ColumnKind.BIGINT: "0", ColumnKind.DECIMAL: "0", ColumnKind.FLOAT: "0", ColumnKind.DOUBLE: "0",
    ColumnKind.CHAR: "", ColumnKind.VARCHAR: "", ColumnKind.TEXT: "", ColumnKind.BINARY: "",
    ColumnKind.VARBINARY: "", ColumnKind.BLOB: "", ColumnKind.BIT: "0", ColumnKind.YEAR: "0",
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
    if isinstance(statement, mysql_ddl.AlterTable | mysql_ddl.PartitionDdl | mysql_ddl.TableOptions):
        return [statement.table]
    if isinstance(statement, mysql_ddl.CreateDatabase):
        return []
    return [ddl.table] if ddl.table.table else []


def is_rename(ddl: DdlEvent) -> bool:
    """Whether a DDL renames tables (its affected tables then come in (source, target) pairs)."""
    return isinstance(mysql_ddl.parse_ddl(ddl.sql, ddl.table.schema), mysql_ddl.RenameTables)


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
) -> list[SchemaChange]:
    """What a DDL means for one table it affects (``table``, by default the DDL's own).

    ``existing_columns`` is None when the table does not exist in Delta; ``retired`` when it exists but
    its upstream table was dropped or renamed away. ``partitioning`` is the recorded partition definition
    (None: none recorded, e.g. a table created from DML).
    """
    table = table or ddl.table
    statement = mysql_ddl.parse_ddl(ddl.sql, ddl.table.schema)
    if isinstance(statement, mysql_ddl.CreateDatabase):
        return [RecordOnly(f"CREATE DATABASE {statement.schema}: databases are directories")]
    if isinstance(statement, mysql_ddl.CreateTable):
        if not statement.schema.key:
            return [
                Reject(
                    f"CREATE TABLE {statement.table} has no primary key and no NOT NULL unique key; "
                    "rows cannot be merged exactly"
                )
            ]
        defined = partitions.from_clause(statement.partition_by, statement.schema)
        if existing_columns is None:
            return [CreateTable(statement.table, statement.schema, defined)]
        if retired:
            return [CreateTableReplacing(statement.table, statement.schema, defined)]
        return [RecordOnly(f"{statement.table} already exists")]
    if isinstance(statement, mysql_ddl.TruncateTable):
        return [Truncate(statement.table)]
    if isinstance(statement, mysql_ddl.PartitionDdl):
        return _plan_partition_ddl(ddl, statement, existing_columns, partitioning)
    if isinstance(statement, mysql_ddl.PrimaryKeyChange):
        return _plan_key_change(ddl, table, statement.key or ddl.handle_key, existing_columns, key)
    if isinstance(statement, mysql_ddl.TableOptions):
        return [RecordOnly(f"table options change no rows or columns: {statement.what}"[:300])]
    if isinstance(statement, mysql_ddl.IndexChange):
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
        changes: list[SchemaChange] = []
        for old, new in statement.pairs:
            if table == old and existing_columns is not None:
                changes.append(Retire(old, f"renamed to {new}", keep_rows=True))
            elif table == new:
                changes.append(CopyFrom(new, old))
        return changes or [RecordOnly(f"{table} is not part of {ddl.identity[:120]}")]
    if isinstance(statement, mysql_ddl.AlterTable):
        if existing_columns is None:
            return [Reject(f"ALTER TABLE on {statement.table}, which the mirror has never seen created")]
        if statement.adds_unique and ddl.handle_key is None:
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
            backfill = _backfill_value(action.column)
            if isinstance(backfill, Reject):
                return [backfill]
            alter.append(AddColumn(statement.table, action.column, action.first, action.after, backfill))
        return alter
    if isinstance(statement, mysql_ddl.CreateTableLike):
        if table == statement.source:
            return [RecordOnly(f"source of CREATE TABLE {statement.table} LIKE {statement.source}")]
        if existing_columns is not None and not retired:
            return [RecordOnly(f"{statement.table} already exists")]
        return [CreateLike(statement.table, statement.source)]
    return [Reject(f"{statement.reason}: {ddl.sql!r}. {UNKNOWN_DDL_TODO}", unknown=True)]


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


def _plan_partition_ddl(
    ddl: DdlEvent,
    statement: mysql_ddl.PartitionDdl,
    existing_columns: Collection[str] | None,
    current: Partitioning | None,
) -> list[SchemaChange]:
    table, action = statement.table, statement.action
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
        if action.recounts and current is not None and current.method == partitions.HASH:
            # Rows move between HASH partitions; which names they then have is not followed.
            return [
                SetPartitioning(table, partitions.unsupported(f"HASH partitions recounted by {action.what}"))
            ]
        return [RecordOnly(f"{action.what} changes no rows")]
    if isinstance(action, mp.Repartition):
        if action.partition_by is None:
            return [SetPartitioning(table, partitions.NOT_PARTITIONED)]
        # The column types are not at hand here; a later TRUNCATE/DROP PARTITION stops with this reason.
        return [SetPartitioning(table, partitions.unsupported(f"repartitioned by {ddl.sql[:200]!r}"))]
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


def _backfill_value(column: Column) -> str | Reject | None:
    """The value existing rows read upstream after ADD COLUMN, as wire text (None: SQL NULL)."""
    if column.has_default:
        if column.default is None:
            return None
        literal = _literal_wire_text(column.default)
        if literal is None:
            return Reject(
                f"ADD COLUMN {column.name} DEFAULT {column.default}: the value existing rows get "
                "upstream cannot be computed here"
            )
        return literal
    if column.nullable:
        return None
    zero = _ZERO_VALUES.get(column.type.kind)
    if zero is None:
        return Reject(
            f"ADD COLUMN {column.name} {column.type} NOT NULL without DEFAULT: the implicit value "
            "of existing rows is not known for this type"
        )
    return zero


def _literal_wire_text(sql_literal: str) -> str | None:
    text = sql_literal.strip()
    if _NUMERIC.match(text):
        return text
    if len(text) >= 2 and text[0] == text[-1] == "'":
        return text[1:-1].replace("''", "'").replace("\\'", "'")
    bits = _BIT_LITERAL.match(text)
    if bits:
        return str(int(bits.group(1), 2))
    hexa = _HEX_LITERAL.match(text)
    if hexa:
        digits = hexa.group(1) or hexa.group(2) or ""
        return bytes.fromhex(digits if len(digits) % 2 == 0 else "0" + digits).decode("latin-1")
    return None
