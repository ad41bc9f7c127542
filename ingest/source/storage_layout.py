"""The columns each table version's CSV records hold, from the storage sink's schema files. Pure.

A schema file lists every column of its table version in table order, VIRTUAL generated ones and TiDB's
hidden expression-index columns included, with no mark on them, and names no ENUM or SET member. Records
leave the virtual columns out and write members as labels. What the schema files do not say comes from
the DDLs they carry: their statements are replayed in commit order over each table's columns, as far as
columns go (CREATE, CREATE ... LIKE, ALTER column actions, RENAME, RECOVER and FLASHBACK). A table whose
DDLs are not in the sink (it existed before the changefeed) is taken as having no virtual column but
TiDB's hidden ones; if its records disagree, their field count says so and they are quarantined.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
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
        columns[action.column.name.lower()] = action.column
    elif isinstance(action, st.DropColumn):
        columns.pop(action.name.lower(), None)
    elif isinstance(action, st.RenameColumn):
        moved = columns.pop(action.old.lower(), None)
        if moved is not None:
            columns[action.new.lower()] = moved
    elif isinstance(action, st.ModifyColumn):
        columns.pop(action.old.lower(), None)
        columns[action.column.name.lower()] = action.column


def _csv_column(entry: Mapping[str, Any], known: Column | None) -> CsvColumn | None:
    """A schema-file column as its records carry it; None for a column they leave out."""
    name = str(entry.get("ColumnName") or "")
    if (known is not None and known.virtual) or name.lower().startswith(HIDDEN_PREFIX):
        return None
    members: tuple[str, ...] = ()
    if known is not None and known.type.kind in (ColumnKind.ENUM, ColumnKind.SET):
        members = known.type.elements
    return CsvColumn(name, mysql_type(str(entry.get("ColumnType") or "")), members)


def _layout(schema_file: Mapping[str, Any], known: Columns, options: CsvOptions) -> Layout:
    entries = schema_file.get("TableColumns") or []
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
