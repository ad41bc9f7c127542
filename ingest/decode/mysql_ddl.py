"""MySQL/TiDB DDL text -> a small structured statement. Pure; parsing is sqlglot's MySQL dialect.

TiDB's own clauses and executable comments are normalised away first (see ``tidb_syntax``). Only the
statements the mirror acts on are structured; everything else comes back as ``OtherDdl`` so the planner can
decide (reject by default) with the original text in the message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from ingest.decode.mysql_partition import (
    PartitionAction,
    PartitionBy,
    parse_alter_partition,
    split_partition_clause,
)
from ingest.decode.mysql_types import UnknownTypeError, from_sqlglot
from ingest.decode.tidb_syntax import normalize
from ingest.model import Column, TableId, TableSchema


@dataclass(frozen=True, slots=True)
class CreateTable:
    table: TableId
    schema: TableSchema
    if_not_exists: bool
    partition_by: PartitionBy | None = None


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


@dataclass(frozen=True, slots=True)
class AlterDefault:
    """ALTER COLUMN ... SET/DROP DEFAULT: affects future inserts only, which arrive as full rows."""

    name: str


ColumnAction = AddColumn | DropColumn | RenameColumn | ModifyColumn | AlterDefault


@dataclass(frozen=True, slots=True)
class AlterTable:
    """Column changes in order; ``adds_unique``: index actions among them add a unique key (indexes are
    otherwise not mirrored)."""

    table: TableId
    actions: tuple[ColumnAction, ...]
    adds_unique: bool = False

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
class CreateDatabase:
    schema: str


@dataclass(frozen=True, slots=True)
class IndexChange:
    """CREATE/DROP INDEX, ALTER TABLE ADD/DROP INDEX or KEY: no data changes, unless a unique key moves."""

    adds_unique: bool


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
class OtherDdl:
    """A statement we parsed (or could not) but do not act on; ``reason`` says why."""

    reason: str


Statement = (
    CreateTable
    | CreateTableLike
    | AlterTable
    | TruncateTable
    | CreateDatabase
    | DropTable
    | DropDatabase
    | RenameTables
    | IndexChange
    | PrimaryKeyChange
    | PartitionDdl
    | TableOptions
    | OtherDdl
)

# ALTER TABLE t ADD [CONSTRAINT [c]] PRIMARY KEY [USING BTREE] (a, b(10)) [NON]CLUSTERED, or DROP PRIMARY KEY.
_PRIMARY_KEY_ACTION = (
    r"(?:ADD\s+(?:CONSTRAINT\s+(?:`[^`]*`|\w+)?\s*)?PRIMARY\s+KEY\s*(?:USING\s+\w+\s*)?\(((?:[^()]|\(\d+\))*)\)"
    r"|DROP\s+PRIMARY\s+KEY)"
)


def _key_names(columns: str) -> list[str]:
    names = []
    for part in columns.split(","):
        name = re.sub(r"\(\d+\)", "", part).strip().split()[0]
        names.append(name[1:-1].replace("``", "`") if name.startswith("`") else name)
    return names


# sqlglot's MySQL dialect leaves RENAME TABLE unparsed (an opaque Command); this reads its name pairs.
_NAME = r"(?:`(?:[^`]|``)+`|[\w$]+)"
_QUALIFIED = rf"({_NAME}(?:\s*\.\s*{_NAME})?)"
_RENAME_PAIR = re.compile(rf"\s*{_QUALIFIED}\s+TO\s+{_QUALIFIED}\s*(?:,|$)", re.IGNORECASE)


def parse_ddl(sql: str, default_schema: str) -> Statement:
    """Parse one DDL statement; unqualified names resolve against ``default_schema``."""
    normalized = normalize(sql)
    sql = normalized.sql
    alter_options = _ALTER_WITHOUT_ACTIONS.match(sql)
    if alter_options and normalized.dropped:
        table_id = _qualified(alter_options.group(1), default_schema)
        return TableOptions(table_id, ", ".join(normalized.dropped))
    rename = re.match(r"\s*RENAME\s+TABLES?\s+(.*?)\s*;?\s*$", sql, re.IGNORECASE | re.DOTALL)
    if rename:
        return _rename_tables(rename.group(1), default_schema)
    primary = _PRIMARY_KEY.match(sql)
    if primary:
        # sqlglot leaves ADD PRIMARY KEY ... [NON]CLUSTERED as an opaque Command and rejects DROP PRIMARY KEY.
        table = _qualified(primary.group(1), default_schema)
        columns = primary.group(2)
        key = None if columns is None else tuple(_key_names(columns))
        return PrimaryKeyChange(table, key)
    alter = _ALTER_TABLE.match(sql)
    if alter:
        action = parse_alter_partition(sql)
        if action is not None:
            return PartitionDdl(_qualified(alter.group(1), default_schema), action)
    partition_by = None
    if _CREATE_TABLE.match(sql):
        # sqlglot reads few partition clauses (see mysql_partition); it gets the table without it.
        sql, partition_by = split_partition_clause(sql)
    try:
        tree = sqlglot.parse_one(sql, read="mysql")
    except ParseError as exc:
        return OtherDdl(f"cannot parse: {str(exc).splitlines()[0]}")
    if isinstance(tree, exp.Command):
        return OtherDdl("cannot parse: not a statement sqlglot's MySQL dialect reads")
    try:
        if isinstance(tree, exp.Create):
            kind = str(tree.args.get("kind") or "").upper()
            if kind == "DATABASE" or kind == "SCHEMA":
                return CreateDatabase(_database_name(tree.this))
            if kind == "TABLE" and isinstance(tree.this, exp.Schema):
                return _create_table(tree, default_schema, partition_by)
            if kind == "INDEX":
                return IndexChange(adds_unique=bool(tree.args.get("unique")))
            like = tree.find(exp.LikeProperty)
            if kind == "TABLE" and like is not None and isinstance(like.this, exp.Table):
                return CreateTableLike(
                    _table_id(tree.this, default_schema), _table_id(like.this, default_schema)
                )
            return OtherDdl(f"CREATE {kind} is not mirrored")
        if isinstance(tree, exp.Alter) and str(tree.args.get("kind") or "").upper() == "TABLE":
            return _alter_table(tree, default_schema)
        if isinstance(tree, exp.Drop):
            kind = str(tree.args.get("kind") or "").upper()
            targets = tree.args.get("tables") or []
            if kind in ("DATABASE", "SCHEMA") and len(targets) == 1:
                return DropDatabase(_database_name(targets[0]))
            if kind == "TABLE" and len(targets) == 1:
                return DropTable(_table_id(targets[0], default_schema))
            if kind == "INDEX":
                return IndexChange(adds_unique=False)
            return OtherDdl(f"DROP {kind} is not mirrored")
        if isinstance(tree, exp.TruncateTable) and not tree.args.get("is_database"):
            tables = tree.expressions
            if len(tables) == 1:
                return TruncateTable(_table_id(tables[0], default_schema))
    except UnknownTypeError as exc:
        return OtherDdl(str(exc))
    return OtherDdl(f"{type(tree).__name__} statements are not supported yet")


def _database_name(node: exp.Expression) -> str:
    # sqlglot reads the name after CREATE/DROP SCHEMA [IF [NOT] EXISTS] as a table's database part.
    database = node.args.get("db")
    return node.name or (database.name if database is not None else "")


def _table_id(table: exp.Expression, default_schema: str) -> TableId:
    return TableId(table.args["db"].name if table.args.get("db") else default_schema, table.name)


def _column(definition: exp.ColumnDef) -> Column:
    data_type = definition.args["kind"]
    zerofill = any(isinstance(c.args["kind"], exp.ZeroFillColumnConstraint) for c in definition.constraints)
    # SERIAL is BIGINT UNSIGNED NOT NULL AUTO_INCREMENT UNIQUE.
    nullable = not _is_serial(definition)
    default, has_default = None, False
    for constraint in definition.constraints:
        kind = constraint.args["kind"]
        if isinstance(kind, exp.NotNullColumnConstraint):
            nullable = bool(kind.args.get("allow_null"))
        elif isinstance(kind, exp.PrimaryKeyColumnConstraint):
            nullable = False
        elif isinstance(kind, exp.DefaultColumnConstraint):
            has_default = True
            value = kind.this
            default = None if isinstance(value, exp.Null) else value.sql(dialect="mysql")
    return Column(definition.name, from_sqlglot(data_type, zerofill), nullable, default, has_default)


def _is_serial(definition: exp.ColumnDef) -> bool:
    data_type = definition.args.get("kind")
    return isinstance(data_type, exp.DataType) and data_type.this == exp.DataType.Type.SERIAL


def _create_table(tree: exp.Create, default_schema: str, partition_by: PartitionBy | None) -> Statement:
    schema_node = tree.this
    table = _table_id(schema_node.this, default_schema)
    columns: list[Column] = []
    primary: tuple[str, ...] = ()
    uniques: list[tuple[str, ...]] = []
    for item in schema_node.expressions:
        if isinstance(item, exp.ColumnDef):
            columns.append(_column(item))
            for constraint in item.constraints:
                if isinstance(constraint.args["kind"], exp.PrimaryKeyColumnConstraint):
                    primary = (item.name,)
                elif isinstance(constraint.args["kind"], exp.UniqueColumnConstraint):
                    uniques.append((item.name,))
            if _is_serial(item):
                uniques.append((item.name,))
        elif isinstance(item, exp.PrimaryKey):
            primary = tuple(_key_part_name(e) for e in item.expressions)
        elif isinstance(item, exp.UniqueColumnConstraint):
            schema = item.this
            parts = schema.expressions if isinstance(schema, exp.Schema) else item.expressions
            uniques.append(tuple(_key_part_name(e) for e in parts))
    if primary:
        # A PRIMARY KEY column is NOT NULL even when its definition does not say so.
        columns = [
            Column(c.name, c.type, False, c.default, c.has_default) if c.name in primary else c
            for c in columns
        ]
    by_name = {c.name: c for c in columns}
    key = primary or _handle_from_uniques(uniques, by_name)
    return CreateTable(table, TableSchema(tuple(columns), key), bool(tree.args.get("exists")), partition_by)


def _key_part_name(node: exp.Expression) -> str:
    # Key parts may carry a prefix length (`name`(10)) or ordering; the column is the identifier inside.
    if isinstance(node, exp.Identifier | exp.Column):
        return node.name
    ident = node.find(exp.Identifier)
    return ident.name if ident is not None else node.name


def _handle_from_uniques(uniques: list[tuple[str, ...]], by_name: dict[str, Column]) -> tuple[str, ...]:
    """TiCDC's handle key without a PK: the NOT NULL unique index with the fewest columns (first wins)."""
    candidates = [u for u in uniques if u and all(n in by_name and not by_name[n].nullable for n in u)]
    return min(candidates, key=len) if candidates else ()


def _alter_table(tree: exp.Alter, default_schema: str) -> Statement:
    table = _table_id(tree.this, default_schema)
    all_actions = [a for a in tree.args.get("actions") or [] if not isinstance(a, exp.Property)]
    if not all_actions:
        options = [*(tree.args.get("options") or []), *(tree.args.get("actions") or [])]
        if options:
            return TableOptions(table, ", ".join(o.sql(dialect="mysql") for o in options))
        return OtherDdl("ALTER TABLE without actions")
    index_actions = [a for a in all_actions if _is_index_action(a)]
    adds_unique = any(a.find(exp.UniqueColumnConstraint) is not None for a in index_actions)
    if len(index_actions) == len(all_actions):
        return IndexChange(adds_unique=adds_unique)
    actions: list[ColumnAction] = []
    for action in all_actions:
        if _is_index_action(action):
            continue
        if isinstance(action, exp.RenameColumn):
            actions.append(RenameColumn(action.this.name, action.args["to"].name))
            continue
        if isinstance(action, exp.ModifyColumn):
            definition = _column(action.this)
            renamed_from = action.args.get("rename_from")
            actions.append(
                ModifyColumn(renamed_from.name if renamed_from is not None else definition.name, definition)
            )
            continue
        if isinstance(action, exp.AlterColumn) and (
            action.args.get("default") is not None or action.args.get("drop")
        ):
            actions.append(AlterDefault(action.this.name))
            continue
        if isinstance(action, exp.AlterRename) and len(all_actions) == 1:
            return RenameTables(((table, _table_id(action.this, table.schema)),))
        if isinstance(action, exp.Drop) and str(action.args.get("kind") or "").upper() == "COLUMN":
            actions.extend(DropColumn(column.name) for column in action.args.get("tables") or [])
            continue
        if not isinstance(action, exp.ColumnDef):
            return OtherDdl(f"ALTER TABLE action {action.sql(dialect='mysql')!r} is not supported yet")
        position = action.args.get("position")
        # sqlglot keeps FIRST/AFTER as written: `after` and `First` mean the same.
        where = str(position.args.get("position") or "").upper() if position is not None else ""
        first = where == "FIRST"
        after = position.this.name if position is not None and where == "AFTER" else None
        actions.append(AddColumn(_column(action), first=first, after=after))
    return AlterTable(table, tuple(actions), adds_unique=adds_unique)


def _is_index_action(action: exp.Expression) -> bool:
    if isinstance(action, exp.Drop):
        # DROP INDEX/KEY, DROP FOREIGN KEY, DROP CHECK/CONSTRAINT: nothing of these exists in the mirror.
        return str(action.args.get("kind") or "").upper() in (
            "INDEX", "KEY", "FOREIGN KEY", "CHECK", "CONSTRAINT",
        )  # fmt: skip
    if isinstance(action, exp.RenameIndex | exp.AlterIndex):
        return True
    # ADD INDEX / ADD KEY / ADD UNIQUE KEY; ADD PRIMARY KEY changes the merge key and is not one of these.
    return (
        isinstance(action, exp.AddConstraint)
        and action.find(exp.PrimaryKey, exp.PrimaryKeyColumnConstraint) is None
    )


def _rename_tables(text: str, default_schema: str) -> Statement:
    pairs: list[tuple[TableId, TableId]] = []
    position = 0
    while position < len(text):
        match = _RENAME_PAIR.match(text, position)
        if not match:
            return OtherDdl(f"cannot read RENAME TABLE {text!r}")
        pairs.append((_qualified(match.group(1), default_schema), _qualified(match.group(2), default_schema)))
        position = match.end()
    return RenameTables(tuple(pairs)) if pairs else OtherDdl("RENAME TABLE without tables")


def _qualified(text: str, default_schema: str) -> TableId:
    parts = [p.strip() for p in re.findall(_NAME, text)]
    names = [p[1:-1].replace("``", "`") if p.startswith("`") else p for p in parts]
    return TableId(names[0], names[1]) if len(names) == 2 else TableId(default_schema, names[0])


_ALTER_WITHOUT_ACTIONS = re.compile(
    rf"^\s*ALTER\s+(?:IGNORE\s+)?TABLE\s+{_QUALIFIED}\s*;?\s*$", re.IGNORECASE
)
_ALTER_TABLE = re.compile(rf"^\s*ALTER\s+(?:IGNORE\s+)?TABLE\s+{_QUALIFIED}", re.IGNORECASE)
_CREATE_TABLE = re.compile(r"^\s*CREATE\s+(?:TEMPORARY\s+)?TABLE\s", re.IGNORECASE)
_PRIMARY_KEY = re.compile(
    rf"^\s*ALTER\s+TABLE\s+{_QUALIFIED}\s+{_PRIMARY_KEY_ACTION}[^,;]*;?\s*$", re.IGNORECASE | re.DOTALL
)
