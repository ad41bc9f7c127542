"""The columns each table version's CSV records hold, from the storage sink's schema files. Pure.

A schema file lists every column of its table version in table order, VIRTUAL generated ones and TiDB's
hidden expression-index columns included, with no mark on them, and names no ENUM or SET member. Records
leave the virtual columns out and write members as labels. What the schema files do not say comes from
the DDLs they carry: their statements are replayed in commit order over each table's columns, as far as
columns go (CREATE, CREATE ... LIKE, ALTER column actions with FIRST and AFTER, RENAME, RECOVER and
FLASHBACK). The DDLs also give the order of the columns in a record, which the schema file's order is not
after a column was placed with FIRST or AFTER or rewritten by MODIFY COLUMN. A table whose
DDLs are not in the sink (it existed before the changefeed) is taken as having no virtual column but
TiDB's hidden ones; if its records disagree, their field count says so and they are quarantined.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from ingest.decode.storage_csv import CsvColumn, CsvOptions, Layout
from ingest.model import Column, ColumnKind, TableId
from ingest.mysql import statements as st
from ingest.mysql.ddl import parse_ddl

# TiDB names the hidden VIRTUAL column of an expression index `_V$_<index>_<n>`.
HIDDEN_PREFIX = "_v$_"
# Schema-file words that Canal-JSON's mysqlType spells otherwise: every BIT and YEAR is "UNSIGNED" there.
_MYSQL_TYPE = {"bit unsigned": "bit", "year unsigned": "year"}

Columns = dict[str, Column]  # by lower-cased name
VersionKey = tuple[str, str, int]  # database, table, table version


def mysql_type(column_type: str) -> str:
    """A schema file's ``ColumnType`` as the mysqlType word Canal-JSON would send."""
    lowered = column_type.strip().lower()
    return _MYSQL_TYPE.get(lowered, lowered)


def _apply(state: dict[TableId, Columns], statement: st.Statement, own: TableId) -> None:
    """One DDL's effect on the tracked columns of the tables it touches."""
    if isinstance(statement, st.CreateTable):
        state[statement.table] = {col.name.lower(): col for col in statement.schema.columns}
    elif isinstance(statement, st.CreateTableLike):
        state[statement.table] = dict(state.get(statement.source, {}))
    elif isinstance(statement, st.AlterTable):
        columns = state.setdefault(statement.table, {})
        for action in statement.actions:
            _apply_column_action(columns, action)
    elif isinstance(statement, st.RenameTables):
        for old, new in statement.pairs:  # in order: `a TO tmp, b TO a, tmp TO b` rotates
            state[new] = state.pop(old, {})
    elif isinstance(statement, st.RecoverTable):
        source = statement.source or own
        state[statement.table or own] = dict(state.get(source, {}))


def _apply_column_action(columns: Columns, action: st.ColumnAction) -> None:
    if isinstance(action, st.AddColumn):
        _place(columns, action.column, action.first, action.after)
    elif isinstance(action, st.DropColumn):
        columns.pop(action.name.lower(), None)
    elif isinstance(action, st.RenameColumn):
        moved = columns.get(action.old.lower())
        if moved is not None:
            _replace(columns, action.old, replace(moved, name=action.new))
    elif isinstance(action, st.ModifyColumn):
        if action.first or action.after:
            columns.pop(action.old.lower(), None)
            _place(columns, action.column, action.first, action.after)
        else:
            _replace(columns, action.old, action.column)


def _replace(columns: Columns, old: str, column: Column) -> None:
    """``column`` where ``old`` was, in its place (at the end if it was unknown)."""
    items = [(column.name.lower(), column) if key == old.lower() else (key, c) for key, c in columns.items()]
    if old.lower() not in columns:
        items.append((column.name.lower(), column))
    columns.clear()
    columns.update(items)


def _place(columns: Columns, column: Column, first: bool, after: str | None) -> None:
    """``column`` first, after ``after``, or last, as TiDB orders a table's columns (their offsets)."""
    items = [(key, c) for key, c in columns.items() if key != column.name.lower()]
    at = len(items)
    if first:
        at = 0
    elif after is not None:
        at = next((i + 1 for i, (key, _) in enumerate(items) if key == after.lower()), len(items))
    items.insert(at, (column.name.lower(), column))
    columns.clear()
    columns.update(items)


def _csv_column(entry: Mapping[str, Any], known: Column | None) -> CsvColumn | None:
    """A schema-file column as its records carry it; None for a column they leave out."""
    name = str(entry.get("ColumnName") or "")
    if (known is not None and known.virtual) or name.lower().startswith(HIDDEN_PREFIX):
        return None
    members: tuple[str, ...] = ()
    if known is not None and known.type.kind in (ColumnKind.ENUM, ColumnKind.SET):
        members = known.type.elements
    return CsvColumn(name, mysql_type(str(entry.get("ColumnType") or "")), members)


def _in_row_order(entries: list[Mapping[str, Any]], known: Columns) -> list[Mapping[str, Any]]:
    """The schema file's columns in the order records hold them. The file lists them in TiDB's slice
    order, which after ADD COLUMN ... FIRST/AFTER or a MODIFY COLUMN that rewrites is not the column order
    (their offsets) the records use; the DDLs give that order. Unknown DDLs: the file's order."""

    def key(entry: Mapping[str, Any]) -> str:
        return str(entry.get("ColumnName") or "").lower()

    listed = [key(e) for e in entries if not key(e).startswith(HIDDEN_PREFIX)]
    if sorted(listed) != sorted(known):
        return entries
    order = {name: i for i, name in enumerate(known)}
    return sorted(entries, key=lambda e: order.get(key(e), len(order)))


def _layout(schema_file: Mapping[str, Any], known: Columns, options: CsvOptions) -> Layout:
    entries = _in_row_order(list(schema_file.get("TableColumns") or []), known)
    columns = [_csv_column(e, known.get(str(e.get("ColumnName") or "").lower())) for e in entries]
    pk = tuple(str(e.get("ColumnName")) for e in entries if str(e.get("ColumnIsPk")).lower() == "true")
    return Layout(tuple(col for col in columns if col is not None), pk, options)


def layouts(schema_files: Iterable[Mapping[str, Any]], options: CsvOptions) -> dict[VersionKey, Layout]:
    """The layout of every table version a schema file describes, by (database, table, version)."""
    ordered = sorted(
        (f for f in schema_files if isinstance(f.get("TableVersion"), int)),
        key=lambda f: (f["TableVersion"], f.get("Table") or ""),
    )
    state: dict[TableId, Columns] = {}
    applied: set[tuple[int, str]] = set()  # a DDL over several tables writes one file per table
    result: dict[VersionKey, Layout] = {}
    for schema_file in ordered:
        database, table = str(schema_file.get("Schema") or ""), str(schema_file.get("Table") or "")
        version, query = schema_file["TableVersion"], str(schema_file.get("Query") or "")
        own = TableId(database, table)
        if query and (version, query) not in applied:
            applied.add((version, query))
            _apply(state, parse_ddl(query, database), own)
        if table:
            result[(database, table, version)] = _layout(schema_file, state.get(own, {}), options)
    return result
