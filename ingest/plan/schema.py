"""DDL + current table schema -> schema changes to apply, ignore or reject. Pure.

Every DDL the mirror meets is planned here, per table it touches: applied (the changes in
``plan.changes``), only recorded, or rejected with the reason and what to do. A DDL is never skipped
silently: that would let the mirror diverge. Partition DDL is planned in ``plan.partition_ddl``, the value
existing rows read after ADD COLUMN in ``plan.defaults``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from ingest.model import Column, ColumnType, DdlEvent, TableId, TableSchema
from ingest.mysql import ddl as mysql_ddl
from ingest.mysql import expr as mysql_expr
from ingest.mysql.columns import folds_case
from ingest.plan import partitions
from ingest.plan.changes import (
    AddColumn,
    ChangeGenerated,
    ChangeKey,
    ChangeType,
    CopyFrom,
    CreateLike,
    CreateTable,
    CreateTableReplacing,
    DeletePartitionRows,
    DropColumn,
    ExchangeRows,
    RecordOnly,
    Reject,
    RenameColumn,
    Retire,
    Revive,
    SchemaChange,
    SetPartitioning,
    SetUniqueKeys,
    Truncate,
)
from ingest.plan.ddl_scope import (
    affected_tables,
    exchange_tables,
    is_rename,
    reads_other_tables,
    rename_pairs,
    statement_of,
)
from ingest.plan.defaults import backfill_value, go_json_text, literal_wire_text
from ingest.plan.keys import UniqueKeys
from ingest.plan.partition_ddl import ExchangeSides, plan_partition_ddl
from ingest.plan.partitions import Partitioning
from ingest.plan.renames import RenameGroup

__all__ = [
    "AddColumn", "ChangeGenerated", "ChangeKey", "ChangeType", "CopyFrom", "CreateLike", "CreateTable",
    "CreateTableReplacing",
    "DeletePartitionRows", "DropColumn", "ExchangeRows", "ExchangeSides", "RecordOnly", "Reject",
    "RenameColumn", "Retire", "Revive", "SchemaChange", "SetPartitioning", "SetUniqueKeys", "Truncate",
    "affected_tables", "exchange_tables", "go_json_text", "is_rename", "literal_wire_text",
    "plan_schema_changes", "reads_other_tables", "rename_pairs", "statement_of",
]  # fmt: skip


def unique_keys_of(statement: mysql_ddl.CreateTable) -> UniqueKeys:
    """The unique indexes a CREATE TABLE defines, named and ordered as TiDB does."""
    keys = UniqueKeys((), frozenset(c.name for c in statement.schema.columns if _can_be_handle(c)))
    for index in statement.indexes:
        keys = keys.add(index.name, index.columns, primary=index.primary)
    return keys


def _can_be_handle(column: Column) -> bool:
    """Whether TiCDC lets the column be in a handle key (``IsIndexUniqueAndNotNull``): NOT NULL, and not a
    VIRTUAL generated column (which has no value in a row event)."""
    return not column.nullable and not column.virtual


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
                keys = keys.set_nullable(action.column.name, nullable or action.column.virtual)
            elif isinstance(action, mysql_ddl.AddColumn) and _can_be_handle(action.column):
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
    # Simple's announced key wins, but for an index over a VIRTUAL column: TiCDC's Simple encoder marks such
    # an index NOT NULL, while TiCDC itself never identifies rows by it.
    announced = ddl.handle_key is not None and set(ddl.handle_key) <= after.not_null
    handle = ddl.handle_key if announced and ddl.handle_key is not None else after.handle()
    if not handle:
        return [
            Reject(
                f"after {ddl.sql!r} the table has no primary key and no unique key of NOT NULL "
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
                f"after {ddl.sql!r} TiCDC identifies rows by a NOT NULL unique index that the SQL "
                "does not name (or by nothing); mirror the table with the Simple protocol, which announces "
                "it, or re-create the table's mirror"
            )
        ]
    missing = [c for c in new_key if c not in existing_columns]
    if missing:
        return [Reject(f"the new key names column(s) {', '.join(missing)}, which the mirror lacks")]
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
    case_insensitive: Collection[str] = (),
) -> list[SchemaChange]:
    """What a DDL means for one table it affects (``table``, by default the DDL's own).

    ``existing_columns`` is None when the table does not exist in Delta; ``retired`` when it exists but
    its upstream table was dropped or renamed away. ``partitioning`` is the recorded partition definition
    (None: none recorded, e.g. a table created from DML); ``unique_keys`` likewise the table's unique
    indexes; ``column_types`` the upstream types of its columns, where known. ``exchange``: both tables of
    an EXCHANGE PARTITION as they were before it. ``rename_group``: every pair of the RENAME statement this
    DDL is one event of; the table gets its end result with the first of those events that names it
    (``first_of_group``), the others only record. ``given_defaults``: the ``column-defaults`` the user gave
    for this table's columns. ``case_insensitive``: the columns whose collation folds case.
    """
    target = Target(
        ddl, table or ddl.table, existing_columns, tuple(key), retired, drop_keeps_rows, partitioning,
        unique_keys, column_types, exchange, rename_group, first_of_group, dict(given_defaults or {}),
        tuple(case_insensitive),
    )  # fmt: skip
    statement = statement_of(ddl)
    for kinds, planner in _PLANNERS:
        if isinstance(statement, kinds):
            return planner(target, statement)
    assert isinstance(statement, mysql_ddl.OtherDdl)
    return [Reject(f"{statement.reason}: {ddl.sql!r}. {UNKNOWN_DDL_TODO}", unknown=True)]


@dataclass(frozen=True)
class Target:
    """One table a DDL affects, as the mirror holds it (see :func:`plan_schema_changes`)."""

    ddl: DdlEvent
    table: TableId
    existing_columns: Collection[str] | None
    key: tuple[str, ...]
    retired: bool
    drop_keeps_rows: bool
    partitioning: Partitioning | None
    unique_keys: UniqueKeys | None
    column_types: Mapping[str, ColumnType] | None
    exchange: ExchangeSides | None
    rename_group: RenameGroup | None
    first_of_group: bool
    given_defaults: Mapping[str, str]
    case_insensitive: Collection[str] = ()


def _plan_recorded(target: Target, statement: mysql_ddl.Statement) -> list[SchemaChange]:
    """Statements that change no table of the mirror."""
    if isinstance(statement, mysql_ddl.CreateDatabase):
        return [RecordOnly(f"CREATE DATABASE {statement.schema}: databases are directories")]
    if isinstance(statement, mysql_ddl.DatabaseOptions):
        return [RecordOnly(f"ALTER DATABASE {statement.schema} changes no table")]
    if isinstance(statement, mysql_ddl.NonDataObject):
        return [RecordOnly(f"a {statement.what} holds no rows: nothing to mirror")]
    assert isinstance(statement, mysql_ddl.TableOptions)
    return [RecordOnly(f"table options change no rows or columns: {statement.what}"[:300])]


def _plan_create(target: Target, statement: mysql_ddl.Statement) -> list[SchemaChange]:
    assert isinstance(statement, mysql_ddl.CreateTable)
    if not statement.schema.key:
        return [
            Reject(
                f"CREATE TABLE {statement.table} has no primary key and no NOT NULL unique key; "
                "rows cannot be merged exactly"
            )
        ]
    defined = partitions.from_clause(statement.partition_by, statement.schema)
    kept, left_out = _computable(statement.schema.columns)
    stored = TableSchema(kept, statement.schema.key)
    keys = unique_keys_of(statement)
    if target.existing_columns is None:
        return [CreateTable(statement.table, stored, defined, keys), *left_out]
    if target.retired:
        return [CreateTableReplacing(statement.table, stored, defined, keys), *left_out]
    return [RecordOnly(f"{statement.table} already exists")]


def _plan_truncate(target: Target, statement: mysql_ddl.Statement) -> list[SchemaChange]:
    assert isinstance(statement, mysql_ddl.TruncateTable)
    return [Truncate(statement.table)]


def _plan_partitions(target: Target, statement: mysql_ddl.Statement) -> list[SchemaChange]:
    assert isinstance(statement, mysql_ddl.PartitionDdl)
    return plan_partition_ddl(
        target.ddl, target.table, statement, target.existing_columns, target.partitioning,
        target.column_types, target.exchange,
    )  # fmt: skip


def _plan_keys(target: Target, statement: mysql_ddl.Statement) -> list[SchemaChange]:
    """PRIMARY KEY and index DDL: the key TiCDC identifies rows by may move."""
    assert isinstance(statement, mysql_ddl.PrimaryKeyChange | mysql_ddl.IndexChange)
    ddl, table, columns, key = target.ddl, target.table, target.existing_columns, target.key
    if target.unique_keys is not None and columns is not None:
        return _plan_unique_keys(ddl, table, statement, target.unique_keys, columns, key)
    if isinstance(statement, mysql_ddl.PrimaryKeyChange):
        return _plan_key_change(ddl, table, statement.key or ddl.handle_key, columns, key)
    if ddl.handle_key is not None and columns is not None:
        # Simple announces the table's indexes after the DDL: the handle key is known either way.
        return _plan_key_change(ddl, table, ddl.handle_key, columns, key)
    if statement.adds_unique:
        return [_new_unique_index(ddl, table)]
    return [RecordOnly("indexes do not exist in the mirror")]


def _plan_drop(target: Target, statement: mysql_ddl.Statement) -> list[SchemaChange]:
    if target.existing_columns is None:
        return [RecordOnly(f"{target.table} does not exist in the mirror")]
    reason = f"dropped by {target.ddl.identity[:120]}"
    return [Retire(target.table, reason, keep_rows=target.drop_keeps_rows)]


def _plan_rename(target: Target, statement: mysql_ddl.Statement) -> list[SchemaChange]:
    assert isinstance(statement, mysql_ddl.RenameTables)
    table, ddl = target.table, target.ddl
    held = () if target.existing_columns is None else (table,)
    group = target.rename_group or RenameGroup.of(statement.pairs, held)
    if not target.first_of_group:
        return [RecordOnly(f"{table}: applied with the first event of its RENAME statement")]
    source = group.source_of(table)
    if source is not None:
        return [CopyFrom(table, source, ddl.commit_ts)]
    if group.retires(table) and target.existing_columns is not None:
        holder = next((new for new, old in group.holders().items() if old == table), None)
        reason = f"renamed to {holder}" if holder is not None else f"renamed away by {ddl.identity[:120]}"
        return [Retire(table, reason, keep_rows=True)]
    return [RecordOnly(f"{table} is not moved by {ddl.identity[:120]}")]


def _plan_alter(target: Target, statement: mysql_ddl.Statement) -> list[SchemaChange]:
    assert isinstance(statement, mysql_ddl.AlterTable)
    columns, table = target.existing_columns, target.table
    if columns is None:
        return [Reject(f"ALTER TABLE on {statement.table}, which the mirror has never seen created")]
    if statement.adds_unique and target.ddl.handle_key is None and target.unique_keys is None:
        return [_new_unique_index(target.ddl, table)]
    # A column that already exists is still planned: reaching here means the DDL is not recorded as
    # applied (replays are filtered by D_T first), so a crash may have come between the ALTER and the
    # back-fill. Applying adds if absent and back-fills, which is idempotent until later rows land.
    alter: list[SchemaChange] = []
    for action in statement.actions:
        planned = _plan_column_action(target, statement.table, action)
        if planned and isinstance(planned[0], Reject):
            return planned
        alter.extend(planned)
    if target.unique_keys is not None:
        keyed = _plan_unique_keys(target.ddl, table, statement, target.unique_keys, columns, target.key)
        if any(isinstance(c, Reject) for c in keyed):
            return keyed
        alter.extend(c for c in keyed if not isinstance(c, RecordOnly))
    return alter


def _plan_column_action(target: Target, table: TableId, action: mysql_ddl.ColumnAction) -> list[SchemaChange]:
    """One column action of an ALTER TABLE; a refusal comes first in the list."""
    assert target.existing_columns is not None
    if isinstance(action, mysql_ddl.DropColumn):
        if action.name in target.key:
            return [Reject(f"DROP COLUMN {action.name} removes part of the merge key of {table}. {KEY_TODO}")]
        return [DropColumn(table, action.name)]
    if isinstance(action, mysql_ddl.RenameColumn):
        return [RenameColumn(table, action.old, action.new)]
    if isinstance(action, mysql_ddl.ModifyColumn | mysql_ddl.AddColumn) and action.column.virtual:
        return _plan_virtual(
            table, action, target.existing_columns, target.column_types, target.case_insensitive
        )
    if isinstance(action, mysql_ddl.ModifyColumn):
        renamed: list[SchemaChange] = []
        if action.old != action.column.name:
            renamed.append(RenameColumn(table, action.old, action.column.name))
        # Nullability, DEFAULT and position are recorded only: TiCDC sends full row images and every
        # mirrored column is nullable.
        return [*renamed, ChangeType(table, action.column.name, action.column.type, action.column.collation)]
    if isinstance(action, mysql_ddl.AlterDefault):
        return [RecordOnly(f"DEFAULT of {action.name} changes future inserts only")]
    backfill = backfill_value(action.column, target.table, target.given_defaults.get(action.column.name))
    if isinstance(backfill, Reject):
        return [backfill]
    return [AddColumn(table, action.column, action.first, action.after, backfill)]


def _plan_like(target: Target, statement: mysql_ddl.Statement) -> list[SchemaChange]:
    assert isinstance(statement, mysql_ddl.CreateTableLike)
    if target.table == statement.source:
        return [RecordOnly(f"source of CREATE TABLE {statement.table} LIKE {statement.source}")]
    if target.existing_columns is not None and not target.retired:
        return [RecordOnly(f"{statement.table} already exists")]
    return [CreateLike(statement.table, statement.source, target.ddl.commit_ts)]


def _plan_recover(target: Target, statement: mysql_ddl.Statement) -> list[SchemaChange]:
    assert isinstance(statement, mysql_ddl.RecoverTable)
    table = statement.table or target.table
    source = statement.source or table
    if target.table != table:
        return [RecordOnly(f"the dropped table {source} comes back as {table}")]
    # Planned even where the table is live: that may be this DDL's own revival, cut short before the DDL
    # was marked applied, which only its commits tell (the apply step reads them, and refuses otherwise).
    return [Revive(table, source, target.ddl.commit_ts)]


_Planner = Callable[[Target, mysql_ddl.Statement], list[SchemaChange]]
_PLANNERS: tuple[tuple[type | tuple[type, ...], _Planner], ...] = (
    ((mysql_ddl.CreateDatabase, mysql_ddl.DatabaseOptions, mysql_ddl.NonDataObject, mysql_ddl.TableOptions),
     _plan_recorded),
    (mysql_ddl.CreateTable, _plan_create),
    (mysql_ddl.TruncateTable, _plan_truncate),
    (mysql_ddl.PartitionDdl, _plan_partitions),
    ((mysql_ddl.PrimaryKeyChange, mysql_ddl.IndexChange), _plan_keys),
    ((mysql_ddl.DropTable, mysql_ddl.DropDatabase), _plan_drop),
    (mysql_ddl.RenameTables, _plan_rename),
    (mysql_ddl.AlterTable, _plan_alter),
    (mysql_ddl.CreateTableLike, _plan_like),
    (mysql_ddl.RecoverTable, _plan_recover),
)  # fmt: skip


def _computable(columns: tuple[Column, ...]) -> tuple[tuple[Column, ...], list[RecordOnly]]:
    """A new table's columns the mirror holds (every stored one, and each VIRTUAL one whose expression it
    computes exactly), and a warning for each VIRTUAL one it leaves out."""
    kept: list[Column] = []
    left_out: list[RecordOnly] = []
    for column in columns:
        folding = [c.name for c in kept if folds_case(c.collation)]
        why = _not_computable(column, {c.name: c.type for c in kept}, folding) if column.virtual else ""
        if why:
            left_out.append(_virtual_left_out(column, why))
        else:
            kept.append(column)
    return tuple(kept), left_out


def _not_computable(
    column: Column, columns: Mapping[str, ColumnType] | None, case_insensitive: Collection[str] = ()
) -> str:
    if column.expression is None:
        return "its expression is not known"
    if columns is None:
        return "the types of the table's columns are not known"
    return mysql_expr.check(column.expression, columns, column.type, case_insensitive)


def _plan_virtual(
    table: TableId,
    action: mysql_ddl.ModifyColumn | mysql_ddl.AddColumn,
    existing_columns: Collection[str],
    column_types: Mapping[str, ColumnType] | None,
    case_insensitive: Collection[str] = (),
) -> list[SchemaChange]:
    """ADD or MODIFY of a VIRTUAL column: computed by the mirror where it can be exactly, else left out."""
    column = action.column
    old = action.old if isinstance(action, mysql_ddl.ModifyColumn) else column.name
    others = None if column_types is None else {k: v for k, v in column_types.items() if k not in (old,)}
    why = _not_computable(column, others, case_insensitive)
    renamed: list[SchemaChange] = []
    if old != column.name and old in existing_columns:
        renamed.append(RenameColumn(table, old, column.name))
    present = old in existing_columns
    if why:
        gone: list[SchemaChange] = [DropColumn(table, column.name)] if present else []
        return [*renamed, *gone, _virtual_left_out(column, why)]
    if present:
        return [*renamed, ChangeGenerated(table, column)]
    first = isinstance(action, mysql_ddl.AddColumn) and action.first
    after = action.after if isinstance(action, mysql_ddl.AddColumn) else None
    return [AddColumn(table, column, first, after, backfill=None)]


def _virtual_left_out(column: Column, why: str) -> RecordOnly:
    return RecordOnly(
        f"VIRTUAL generated column {column.name} left out of the mirror: no protocol carries its values "
        f"(TiDB computes them on read), and the mirror does not compute it exactly: {why}",
        warning=True,
    )


KEY_TODO = (
    "The stream does not say which key TiCDC identifies the rows by now: mirror the table with the Simple "
    "protocol, which announces it, or load it again from a Dumpling export taken after the DDL "
    "(ticdc-ingest load --force)"
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
