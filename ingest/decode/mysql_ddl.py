"""MySQL/TiDB DDL text -> a small structured statement. Pure; parsing is sqlglot's MySQL dialect.

Only the statements the mirror acts on are structured; everything else comes back as ``OtherDdl`` so the
planner can decide (reject by default) with the original text in the message.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from ingest.decode.mysql_types import UnknownTypeError, from_sqlglot
from ingest.model import Column, TableId, TableSchema


@dataclass(frozen=True, slots=True)
class CreateTable:
    table: TableId
    schema: TableSchema
    if_not_exists: bool


@dataclass(frozen=True, slots=True)
class AddColumn:
    column: Column
    first: bool = False
    after: str | None = None


@dataclass(frozen=True, slots=True)
class AlterTable:
    table: TableId
    add_columns: tuple[AddColumn, ...]


@dataclass(frozen=True, slots=True)
class TruncateTable:
    table: TableId


@dataclass(frozen=True, slots=True)
class CreateDatabase:
    schema: str


@dataclass(frozen=True, slots=True)
class OtherDdl:
    """A statement we parsed (or could not) but do not act on; ``reason`` says why."""

    reason: str


Statement = CreateTable | AlterTable | TruncateTable | CreateDatabase | OtherDdl


def parse_ddl(sql: str, default_schema: str) -> Statement:
    """Parse one DDL statement; unqualified names resolve against ``default_schema``."""
    try:
        tree = sqlglot.parse_one(sql, read="mysql")
    except ParseError as exc:
        return OtherDdl(f"cannot parse: {str(exc).splitlines()[0]}")
    try:
        if isinstance(tree, exp.Create):
            kind = str(tree.args.get("kind") or "").upper()
            if kind == "DATABASE" or kind == "SCHEMA":
                return CreateDatabase(tree.this.name)
            if kind == "TABLE" and isinstance(tree.this, exp.Schema):
                return _create_table(tree, default_schema)
            return OtherDdl(f"CREATE {kind} is not mirrored")
        if isinstance(tree, exp.Alter) and str(tree.args.get("kind") or "").upper() == "TABLE":
            return _alter_table(tree, default_schema)
        if isinstance(tree, exp.TruncateTable) and not tree.args.get("is_database"):
            tables = tree.expressions
            if len(tables) == 1:
                return TruncateTable(_table_id(tables[0], default_schema))
    except UnknownTypeError as exc:
        return OtherDdl(str(exc))
    return OtherDdl(f"{type(tree).__name__} statements are not supported yet")


def _table_id(table: exp.Expression, default_schema: str) -> TableId:
    return TableId(table.args["db"].name if table.args.get("db") else default_schema, table.name)


def _column(definition: exp.ColumnDef) -> Column:
    data_type = definition.args["kind"]
    nullable, default, has_default = True, None, False
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
    return Column(definition.name, from_sqlglot(data_type), nullable, default, has_default)


def _create_table(tree: exp.Create, default_schema: str) -> Statement:
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
    return CreateTable(table, TableSchema(tuple(columns), key), bool(tree.args.get("exists")))


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
    adds: list[AddColumn] = []
    for action in tree.args.get("actions") or []:
        if not isinstance(action, exp.ColumnDef):
            return OtherDdl(f"ALTER TABLE action {action.sql(dialect='mysql')!r} is not supported yet")
        position = action.args.get("position")
        first = bool(position is not None and position.args.get("position") == "FIRST")
        after = None
        if position is not None and position.args.get("position") == "AFTER":
            after = position.this.name
        adds.append(AddColumn(_column(action), first=first, after=after))
    if not adds:
        return OtherDdl("ALTER TABLE without actions")
    return AlterTable(table, tuple(adds))
