"""The statements a DDL text is read into (``mysql_ddl.parse_ddl``): what the planner decides on.

Pure data."""

from __future__ import annotations

from dataclasses import dataclass

from ingest.model import Column, TableId, TableSchema
from ingest.mysql.partition import PartitionAction, PartitionBy


@dataclass(frozen=True, slots=True)
class IndexDef:
    """A unique index or primary key as a DDL defines it; ``name`` None: unnamed (TiDB names it)."""

    name: str | None
    columns: tuple[str, ...]
    primary: bool = False


@dataclass(frozen=True, slots=True)
class AddIndex:
    index: IndexDef


@dataclass(frozen=True, slots=True)
class DropIndex:
    name: str


@dataclass(frozen=True, slots=True)
class RenameIndex:
    old: str
    new: str


IndexAction = AddIndex | DropIndex | RenameIndex


@dataclass(frozen=True, slots=True)
class CreateTable:
    """``indexes``: the unique indexes and primary key, in the order TiDB numbers them (table-level
    definitions first, then column-level ones)."""

    table: TableId
    schema: TableSchema
    if_not_exists: bool
    partition_by: PartitionBy | None = None
    indexes: tuple[IndexDef, ...] = ()


@dataclass(frozen=True, slots=True)
class CreateTableLike:
    table: TableId
    source: TableId


@dataclass(frozen=True, slots=True)
class AddColumn:
    column: Column
    first: bool = False
    after: str | None = None


@dataclass(frozen=True, slots=True)
class DropColumn:
    name: str


@dataclass(frozen=True, slots=True)
class RenameColumn:
    old: str
    new: str


@dataclass(frozen=True, slots=True)
class ModifyColumn:
    """MODIFY COLUMN, or CHANGE COLUMN (``old`` differs from ``column.name`` when it renames too)."""

    old: str
    column: Column
    first: bool = False
    after: str | None = None


@dataclass(frozen=True, slots=True)
class AlterDefault:
    """ALTER COLUMN ... SET/DROP DEFAULT: affects future inserts only, which arrive as full rows."""

    name: str


ColumnAction = AddColumn | DropColumn | RenameColumn | ModifyColumn | AlterDefault


@dataclass(frozen=True, slots=True)
class AlterTable:
    """Column changes in order; ``adds_unique``: index actions among them add a unique key (indexes are
    otherwise not mirrored); ``index_actions``: what they do to unique indexes, in order."""

    table: TableId
    actions: tuple[ColumnAction, ...]
    adds_unique: bool = False
    index_actions: tuple[IndexAction, ...] = ()

    @property
    def add_columns(self) -> tuple[AddColumn, ...]:
        return tuple(a for a in self.actions if isinstance(a, AddColumn))


@dataclass(frozen=True, slots=True)
class DropTable:
    table: TableId


@dataclass(frozen=True, slots=True)
class DropDatabase:
    schema: str


@dataclass(frozen=True, slots=True)
class RenameTables:
    """``RENAME TABLE a TO b[, c TO d]`` or ``ALTER TABLE a RENAME TO b``: (old, new) pairs in order."""

    pairs: tuple[tuple[TableId, TableId], ...]


@dataclass(frozen=True, slots=True)
class TruncateTable:
    table: TableId


@dataclass(frozen=True, slots=True)
class RecoverTable:
    """``RECOVER TABLE t``, ``RECOVER TABLE BY JOB n`` or ``FLASHBACK TABLE t [TO t2]``: the dropped table
    ``source`` comes back, with the rows it had at its DROP, as ``table`` (None for ``BY JOB``, whose text
    names no table: the DDL event's own table is both)."""

    table: TableId | None
    source: TableId | None


@dataclass(frozen=True, slots=True)
class CreateDatabase:
    schema: str


@dataclass(frozen=True, slots=True)
class IndexChange:
    """CREATE/DROP INDEX, ALTER TABLE ADD/DROP INDEX or KEY: no data changes, unless a unique key moves.

    ``actions``: what the statement does to unique indexes (adding a non-unique one is none)."""

    adds_unique: bool
    actions: tuple[IndexAction, ...] = ()


@dataclass(frozen=True, slots=True)
class PrimaryKeyChange:
    """ALTER TABLE ADD PRIMARY KEY (cols) or DROP PRIMARY KEY: the handle key TiCDC identifies rows by moves.

    ``key`` is None for DROP PRIMARY KEY: the new handle (a NOT NULL unique index) is not in the SQL.
    """

    table: TableId
    key: tuple[str, ...] | None


@dataclass(frozen=True, slots=True)
class PartitionDdl:
    """ALTER TABLE … TRUNCATE/DROP/ADD/EXCHANGE/REORGANIZE … PARTITION and the like."""

    table: TableId
    action: PartitionAction


@dataclass(frozen=True, slots=True)
class TableOptions:
    """ALTER TABLE that changes only how the table is stored or described (COMMENT, AUTO_INCREMENT, ENGINE,
    charset, TiFlash replicas, placement, TTL, ...): no column, key or row changes."""

    table: TableId
    what: str


@dataclass(frozen=True, slots=True)
class NonDataObject:
    """CREATE/ALTER/DROP of an object that holds no rows (a view, a sequence, a placement policy, a resource
    group): recorded, nothing to mirror. ``name`` is the object's qualified name where it has one."""

    what: str
    name: TableId | None


@dataclass(frozen=True, slots=True)
class DatabaseOptions:
    """ALTER DATABASE: a database's default charset, collation or placement; no table changes."""

    schema: str


@dataclass(frozen=True, slots=True)
class OtherDdl:
    """A statement we parsed (or could not) but do not act on; ``reason`` says why."""

    reason: str


Statement = (
    CreateTable
    | CreateTableLike
    | AlterTable
    | TruncateTable
    | RecoverTable
    | CreateDatabase
    | DropTable
    | DropDatabase
    | RenameTables
    | IndexChange
    | PrimaryKeyChange
    | PartitionDdl
    | TableOptions
    | NonDataObject
    | DatabaseOptions
    | OtherDdl
)
