"""MySQL/TiDB DDL text -> a small structured statement. Pure; parsing is sqlglot's MySQL dialect.

TiDB's own clauses and executable comments are normalised away first (see ``tidb_syntax``). Only the
statements the mirror acts on are structured (``ddl_statements``, re-exported here); everything else comes
back as ``OtherDdl`` so the planner can decide (reject by default) with the original text in the message.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import ClassVar

import sqlglot
from sqlglot import TokenType, exp
from sqlglot.dialects.mysql import MySQL
from sqlglot.errors import ParseError

from ingest.model import Column, ColumnKind, DdlEvent, Position, TableId, TableSchema
from ingest.mysql.columns import column_definition, default_literal, is_serial, stated_collation
from ingest.mysql.partition import (
    PartitionBy,
    parse_alter_partition,
    split_partition_clause,
)
from ingest.mysql.statements import (
    AddColumn,
    AddIndex,
    AlterDefault,
    AlterTable,
    ColumnAction,
    CreateDatabase,
    CreateTable,
    CreateTableLike,
    DatabaseOptions,
    DropColumn,
    DropDatabase,
    DropIndex,
    DropTable,
    IndexAction,
    IndexChange,
    IndexDef,
    ModifyColumn,
    NonDataObject,
    OtherDdl,
    PartitionDdl,
    PrimaryKeyChange,
    RecoverTable,
    RenameColumn,
    RenameIndex,
    RenameTables,
    Statement,
    TableOptions,
    TruncateTable,
)
from ingest.mysql.tidb_syntax import normalize
from ingest.mysql.types import UnknownTypeError

__all__ = [
    "AddColumn",
    "AddIndex",
    "AlterDefault",
    "AlterTable",
    "ColumnAction",
    "CreateDatabase",
    "CreateTable",
    "CreateTableLike",
    "DatabaseOptions",
    "DropColumn",
    "DropDatabase",
    "DropIndex",
    "DropTable",
    "IndexAction",
    "IndexChange",
    "IndexDef",
    "ModifyColumn",
    "NonDataObject",
    "OtherDdl",
    "PartitionDdl",
    "PrimaryKeyChange",
    "RecoverTable",
    "RenameColumn",
    "RenameIndex",
    "RenameTables",
    "Statement",
    "TableOptions",
    "TruncateTable",
    "ddl_event",
    "default_literal",
    "parse_ddl",
]

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


def ddl_event(
    table: TableId,
    commit_ts: int,
    sql: str,
    ddl_type: str,
    position: Position,
    handle_key: tuple[str, ...] | None = None,
) -> DdlEvent:
    """A DDL event with its statement parsed, once, where it enters: every stage after reads the parsed
    form (unqualified names resolve against the event's database). A ``handle_key`` a protocol announces
    over a VIRTUAL column the CREATE TABLE defines gives way to TiCDC's own rule: TiCDC's Simple encoder
    marks such an index NOT NULL, but TiCDC never identifies rows by it."""
    statement = parse_ddl(sql, table.schema)
    if isinstance(statement, CreateTable) and handle_key is not None:
        virtual = {c.name for c in statement.schema.columns if c.virtual}
        if virtual & set(handle_key):
            handle_key = statement.schema.key
    return DdlEvent(table, commit_ts, sql, ddl_type, position, handle_key, statement)


class TiDB(MySQL):
    """sqlglot's MySQL dialect where TiDB's column types differ: ``FLOAT[(M,D)] UNSIGNED`` parses (as
    ``types.UNSIGNED_FLOAT``); UNSIGNED DOUBLE and DECIMAL, and ZEROFILL on all three, MySQL's reads (type
    synonyms are spelled out before, in ``tidb_syntax``)."""

    class Parser(MySQL.Parser):  # type: ignore[misc,valid-type]  # a class attribute in sqlglot 30
        SIGNED_TO_UNSIGNED_TYPE_TOKEN: ClassVar = {
            **MySQL.Parser.SIGNED_TO_UNSIGNED_TYPE_TOKEN,
            TokenType.FLOAT: TokenType.SMALLMONEY,
        }


def parse_ddl(sql: str, default_schema: str) -> Statement:
    """Parse one DDL statement; unqualified names resolve against ``default_schema``."""
    normalized = normalize(sql)
    sql = normalized.sql
    shortcut = _by_text(sql, default_schema, normalized.dropped)
    if shortcut is not None:
        return shortcut
    partition_by = None
    if _CREATE_TABLE.match(sql):
        # sqlglot reads few partition clauses (see mysql.partition); it gets the table without it.
        sql, partition_by = split_partition_clause(sql)
    try:
        tree = sqlglot.parse_one(sql, read=TiDB)
    except ParseError as exc:
        return OtherDdl(f"cannot parse: {str(exc).splitlines()[0]}")
    if isinstance(tree, exp.Command):
        return OtherDdl("cannot parse: not a statement sqlglot's MySQL dialect reads")
    try:
        if isinstance(tree, exp.Create):
            return _create(tree, default_schema, partition_by)
        if isinstance(tree, exp.Alter) and str(tree.args.get("kind") or "").upper() == "TABLE":
            return _alter_table(tree, default_schema)
        if isinstance(tree, exp.Drop):
            return _drop(tree, default_schema)
        if (
            isinstance(tree, exp.TruncateTable)
            and not tree.args.get("is_database")
            and len(tree.expressions) == 1
        ):
            return TruncateTable(_table_id(tree.expressions[0], default_schema))
    except UnknownTypeError as exc:
        return OtherDdl(str(exc))
    return OtherDdl(f"{type(tree).__name__} statements are not supported yet")


def _by_text(sql: str, default_schema: str, dropped: tuple[str, ...]) -> Statement | None:
    """The statements read from their text: those sqlglot's MySQL dialect leaves opaque or refuses."""
    non_data = _non_data_object(sql, default_schema)
    if non_data is not None:
        return non_data
    alter_options = _ALTER_WITHOUT_ACTIONS.match(sql)
    if alter_options:
        # TiCDC's owner writes `ALTER TABLE t TTL_ENABLE = 'OFF'` as `ALTER TABLE t`: no action at all.
        table_id = _qualified(alter_options.group(1), default_schema)
        return TableOptions(table_id, ", ".join(dropped) or "no change")
    database = _ALTER_DATABASE.match(sql)
    if database:
        return DatabaseOptions(_qualified(database.group(1), default_schema).table)
    recover = _recover(sql, default_schema)
    if recover is not None:
        return recover
    rename = re.match(r"\s*RENAME\s+TABLES?\s+(.*?)\s*;?\s*$", sql, re.IGNORECASE | re.DOTALL)
    if rename:
        return _rename_tables(rename.group(1), default_schema)
    alter_rename = _ALTER_RENAME.match(sql)
    if alter_rename:
        # ALTER TABLE a RENAME [TO|AS] b; TiCDC's owner writes it with AS, which sqlglot does not read.
        old = _qualified(alter_rename.group(1), default_schema)
        return RenameTables(((old, _qualified(alter_rename.group(2), default_schema)),))
    primary = _PRIMARY_KEY.match(sql)
    if primary:
        # sqlglot leaves ADD PRIMARY KEY ... [NON]CLUSTERED as an opaque Command and rejects DROP PRIMARY KEY.
        columns = primary.group(2)
        key = None if columns is None else tuple(_key_names(columns))
        return PrimaryKeyChange(_qualified(primary.group(1), default_schema), key)
    alter = _ALTER_TABLE.match(sql)
    action = parse_alter_partition(sql) if alter else None
    if alter and action is not None:
        return PartitionDdl(_qualified(alter.group(1), default_schema), action)
    return None


def _create(tree: exp.Create, default_schema: str, partition_by: PartitionBy | None) -> Statement:
    kind = str(tree.args.get("kind") or "").upper()
    if kind == "DATABASE" or kind == "SCHEMA":
        return CreateDatabase(_database_name(tree.this))
    if kind == "TABLE" and isinstance(tree.this, exp.Schema):
        return _create_table(tree, default_schema, partition_by)
    if kind == "INDEX":
        unique = bool(tree.args.get("unique"))
        index = tree.this
        params = index.args.get("params") if isinstance(index, exp.Index) else None
        parts = (params.args.get("columns") or []) if params is not None else []
        columns = tuple(_key_part_name(e) for e in parts)
        added = (AddIndex(IndexDef(index.name or None, columns)),) if unique and columns else ()
        return IndexChange(adds_unique=unique, actions=added)
    like = tree.find(exp.LikeProperty)
    if kind == "TABLE" and like is not None and isinstance(like.this, exp.Table):
        return CreateTableLike(_table_id(tree.this, default_schema), _table_id(like.this, default_schema))
    return OtherDdl(f"CREATE {kind} is not mirrored")


def _drop(tree: exp.Drop, default_schema: str) -> Statement:
    kind = str(tree.args.get("kind") or "").upper()
    targets = tree.args.get("tables") or []
    if kind in ("DATABASE", "SCHEMA") and len(targets) == 1:
        return DropDatabase(_database_name(targets[0]))
    if kind == "TABLE" and len(targets) == 1:
        return DropTable(_table_id(targets[0], default_schema))
    if kind == "INDEX":
        return IndexChange(adds_unique=False, actions=tuple(DropIndex(t.name) for t in targets))
    return OtherDdl(f"DROP {kind} is not mirrored")


def _database_name(node: exp.Expression) -> str:
    # sqlglot reads the name after CREATE/DROP SCHEMA [IF [NOT] EXISTS] as a table's database part.
    database = node.args.get("db")
    return node.name or (database.name if database is not None else "")


def _table_id(table: exp.Expression, default_schema: str) -> TableId:
    return TableId(table.args["db"].name if table.args.get("db") else default_schema, table.name)


def _create_table(tree: exp.Create, default_schema: str, partition_by: PartitionBy | None) -> Statement:
    schema_node = tree.this
    table = _table_id(schema_node.this, default_schema)
    columns: list[Column] = []
    primary: tuple[str, ...] = ()
    uniques: list[tuple[str, ...]] = []
    # TiDB numbers the table-level key definitions first, then the column-level ones.
    table_level: list[IndexDef] = []
    column_level: list[IndexDef] = []
    for item in schema_node.expressions:
        if isinstance(item, exp.ColumnDef):
            columns.append(column_definition(item))
            for constraint in item.constraints:
                if isinstance(constraint.args["kind"], exp.PrimaryKeyColumnConstraint):
                    primary = (item.name,)
                    column_level.append(IndexDef(None, primary, primary=True))
                elif isinstance(constraint.args["kind"], exp.UniqueColumnConstraint):
                    uniques.append((item.name,))
                    column_level.append(IndexDef(None, (item.name,)))
            if is_serial(item):
                uniques.append((item.name,))
                column_level.append(IndexDef(None, (item.name,)))
        elif isinstance(item, exp.PrimaryKey):
            primary = tuple(_key_part_name(e) for e in item.expressions)
            table_level.append(IndexDef(None, primary, primary=True))
        elif isinstance(item, exp.UniqueColumnConstraint):
            schema = item.this
            parts = schema.expressions if isinstance(schema, exp.Schema) else item.expressions
            uniques.append(tuple(_key_part_name(e) for e in parts))
            name = schema.this if isinstance(schema, exp.Schema) else None
            table_level.append(IndexDef(name.name if name is not None else None, uniques[-1]))
    if primary:
        # A PRIMARY KEY column is NOT NULL even when its definition does not say so.
        columns = [replace(c, nullable=False) if c.name in primary else c for c in columns]
    columns = _with_table_collation(columns, tree)
    by_name = {c.name: c for c in columns}
    key = primary or _handle_from_uniques(uniques, by_name)
    return CreateTable(
        table,
        TableSchema(tuple(columns), key),
        bool(tree.args.get("exists")),
        partition_by,
        (*table_level, *column_level),
    )


_TEXT_KINDS = (ColumnKind.CHAR, ColumnKind.VARCHAR, ColumnKind.TEXT, ColumnKind.ENUM, ColumnKind.SET)


def _with_table_collation(columns: list[Column], tree: exp.Create) -> list[Column]:
    """The text columns that state no collation take the table's default, where its options give one."""
    properties = tree.args.get("properties")
    collation = stated_collation(properties.expressions) if properties is not None else None
    if collation is None:
        return columns
    return [
        replace(c, collation=collation) if c.collation is None and c.type.kind in _TEXT_KINDS else c
        for c in columns
    ]


# What an expression key part stands for: TiDB indexes ``(a + 10)`` through a hidden VIRTUAL column
# (``_V$_<index>_<n>``), which no table column is named as and which TiCDC never takes into a handle key.
EXPRESSION_PART = "_V$_expression"


def _key_part_name(node: exp.Expression) -> str:
    # Key parts may carry a prefix length (`name`(10)) or ordering; the column is the identifier inside.
    if isinstance(node, exp.Ordered):
        node = node.this
    if isinstance(node, exp.Identifier | exp.Column):
        return node.name
    if isinstance(node, exp.ColumnPrefix):
        return str(node.this.name)
    if isinstance(node, exp.Paren):
        return EXPRESSION_PART
    ident = node.find(exp.Identifier)
    return ident.name if ident is not None else node.name


def _handle_from_uniques(uniques: list[tuple[str, ...]], by_name: dict[str, Column]) -> tuple[str, ...]:
    """TiCDC's handle key without a PK: the unique index with the fewest columns (first wins) whose columns
    are all NOT NULL and none VIRTUAL generated (see ``plan.keys``)."""
    candidates = [
        u for u in uniques
        if u and all(n in by_name and not by_name[n].nullable and not by_name[n].virtual for n in u)
    ]  # fmt: skip
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
    on_unique = tuple(i for a in index_actions for i in _unique_index_actions(a))
    if len(index_actions) == len(all_actions):
        return IndexChange(adds_unique=adds_unique, actions=on_unique)
    actions: list[ColumnAction] = []
    for action in all_actions:
        if _is_index_action(action):
            continue
        if isinstance(action, exp.RenameColumn):
            actions.append(RenameColumn(action.this.name, action.args["to"].name))
            continue
        if isinstance(action, exp.ModifyColumn):
            definition = column_definition(action.this)
            renamed_from = action.args.get("rename_from")
            old = renamed_from.name if renamed_from is not None else definition.name
            first, after = _position(action.this)
            actions.append(ModifyColumn(old, definition, first=first, after=after))
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
        first, after = _position(action)
        actions.append(AddColumn(column_definition(action), first=first, after=after))
        # ADD COLUMN c … UNIQUE adds a unique index named after the column.
        if any(isinstance(c.args["kind"], exp.UniqueColumnConstraint) for c in action.constraints):
            adds_unique = True
            on_unique += (AddIndex(IndexDef(None, (action.name,))),)
    return AlterTable(table, tuple(actions), adds_unique=adds_unique, index_actions=on_unique)


def _position(definition: exp.Expression) -> tuple[bool, str | None]:
    """A column definition's FIRST or AFTER <column>."""
    position = definition.args.get("position")
    # sqlglot keeps FIRST/AFTER as written: `after` and `First` mean the same.
    where = str(position.args.get("position") or "").upper() if position is not None else ""
    after = position.this.name if position is not None and where == "AFTER" else None
    return where == "FIRST", after


def _unique_index_actions(action: exp.Expression) -> tuple[IndexAction, ...]:
    """What one ALTER TABLE index action does to unique indexes (a non-unique index is none of theirs, but
    its DROP or RENAME is kept: the name alone does not say, and a name not held is ignored)."""
    if isinstance(action, exp.Drop):
        kind = str(action.args.get("kind") or "").upper()
        return (
            tuple(DropIndex(t.name) for t in action.args.get("tables") or [])
            if kind in ("INDEX", "KEY")
            else ()
        )
    if isinstance(action, exp.RenameIndex):
        return (RenameIndex(action.this.name, action.args["to"].name),)
    unique = action.find(exp.UniqueColumnConstraint)
    if isinstance(action, exp.AddConstraint) and unique is not None:
        schema = unique.this
        parts = schema.expressions if isinstance(schema, exp.Schema) else unique.expressions
        name = schema.this if isinstance(schema, exp.Schema) else None
        if name is None:
            constraint = action.find(exp.Constraint)
            name = constraint.this if constraint is not None else None
        columns = tuple(_key_part_name(e) for e in parts)
        return (AddIndex(IndexDef(name.name if name is not None else None, columns)),) if columns else ()
    return ()


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


_RECOVER = re.compile(rf"\s*RECOVER\s+TABLE\s+(?:BY\s+JOB\s+\d+|{_QUALIFIED})\s*;?\s*$", re.IGNORECASE)
_FLASHBACK = re.compile(
    rf"\s*FLASHBACK\s+TABLE\s+{_QUALIFIED}(?:\s+TO\s+{_QUALIFIED})?\s*;?\s*$", re.IGNORECASE
)


def _recover(sql: str, default_schema: str) -> RecoverTable | None:
    """RECOVER TABLE and FLASHBACK TABLE (TiDB's ways to undo a DROP or TRUNCATE; sqlglot reads neither)."""
    recover = _RECOVER.match(sql)
    if recover:
        named = _qualified(recover.group(1), default_schema) if recover.group(1) else None
        return RecoverTable(named, named)
    flashback = _FLASHBACK.match(sql)
    if flashback:
        source = _qualified(flashback.group(1), default_schema)
        target = flashback.group(2)
        return RecoverTable(_qualified(target, source.schema) if target else source, source)
    return None


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


_VIEW_OPTIONS = (
    r"(?:ALGORITHM\s*=\s*\w+\s+)?(?:DEFINER\s*=\s*(?:CURRENT_USER(?:\s*\(\s*\))?|\S+)\s+)?"
    r"(?:SQL\s+SECURITY\s+\w+\s+)?"
)
_VIEW = re.compile(
    rf"^\s*(?:(?:CREATE(?:\s+OR\s+REPLACE)?|ALTER)\s+{_VIEW_OPTIONS}|DROP\s+)VIEW\s+(?:IF\s+EXISTS\s+)?{_QUALIFIED}",
    re.IGNORECASE,
)
_OTHER_OBJECT = re.compile(
    rf"^\s*(?:CREATE|ALTER|DROP)\s+(SEQUENCE|PLACEMENT\s+POLICY|RESOURCE\s+GROUP)\b(?:\s+IF\s+(?:NOT\s+)?EXISTS)?"
    rf"\s*{_QUALIFIED}?",
    re.IGNORECASE,
)
_ALTER_DATABASE = re.compile(rf"^\s*ALTER\s+(?:DATABASE|SCHEMA)\s+{_QUALIFIED}", re.IGNORECASE)


def _non_data_object(sql: str, default_schema: str) -> NonDataObject | None:
    view = _VIEW.match(sql)
    if view:
        return NonDataObject("view", _qualified(view.group(1), default_schema))
    other = _OTHER_OBJECT.match(sql)
    if other:
        what = " ".join(other.group(1).lower().split())
        named = what == "sequence" and other.group(2)
        return NonDataObject(what, _qualified(other.group(2), default_schema) if named else None)
    return None


_ALTER_RENAME = re.compile(
    rf"^\s*ALTER\s+TABLE\s+{_QUALIFIED}\s+RENAME\s+(?:TO\s+|AS\s+)?{_QUALIFIED}\s*;?\s*$", re.IGNORECASE
)
_ALTER_WITHOUT_ACTIONS = re.compile(
    rf"^\s*ALTER\s+(?:IGNORE\s+)?TABLE\s+{_QUALIFIED}\s*;?\s*$", re.IGNORECASE
)
_ALTER_TABLE = re.compile(rf"^\s*ALTER\s+(?:IGNORE\s+)?TABLE\s+{_QUALIFIED}", re.IGNORECASE)
_CREATE_TABLE = re.compile(r"^\s*CREATE\s+(?:TEMPORARY\s+)?TABLE\s", re.IGNORECASE)
_PRIMARY_KEY = re.compile(
    rf"^\s*ALTER\s+TABLE\s+{_QUALIFIED}\s+{_PRIMARY_KEY_ACTION}[^,;]*;?\s*$", re.IGNORECASE | re.DOTALL
)
