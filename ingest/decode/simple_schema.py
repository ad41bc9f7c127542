"""The Simple protocol's table schemas (``tableSchema`` / ``preTableSchema``): field names, column types,
handle keys. Pure.

BOOTSTRAP and DDL messages carry them; rows name the version they follow. The Avro flavour names the
database field ``database``; it is read as the JSON flavour's ``schema``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from ingest.model import Column, ColumnKind, ColumnType, TableId, TableSchema, VersionedSchema

# TableSchema (JSON flavour; Avro calls the database field "database" and is renamed on decoding).
SCHEMA_DATABASE = "schema"
SCHEMA_DATABASE_AVRO = "database"
SCHEMA_TABLE = "table"
SCHEMA_VERSION = "version"
SCHEMA_COLUMNS = "columns"
SCHEMA_INDEXES = "indexes"
COLUMN_NAME = "name"
COLUMN_DATA_TYPE = "dataType"
COLUMN_NULLABLE = "nullable"
COLUMN_DEFAULT = "default"
TYPE_MYSQL_TYPE = "mysqlType"
TYPE_CHARSET = "charset"
TYPE_COLLATE = "collate"
TYPE_LENGTH = "length"
TYPE_DECIMAL = "decimal"
TYPE_ELEMENTS = "elements"
TYPE_UNSIGNED = "unsigned"
TYPE_ZEROFILL = "zerofill"
INDEX_NAME = "name"
INDEX_UNIQUE = "unique"
INDEX_PRIMARY = "primary"
INDEX_NULLABLE = "nullable"
INDEX_COLUMNS = "columns"

_KIND_ALIASES = {
    "tinytext": ColumnKind.TEXT,
    "mediumtext": ColumnKind.TEXT,
    "longtext": ColumnKind.TEXT,
    "tinyblob": ColumnKind.BLOB,
    "mediumblob": ColumnKind.BLOB,
    "longblob": ColumnKind.BLOB,
    # The hidden column of an expression index (`_V$_<index>_0`) is typed by TiDB's internal names.
    "var_string": ColumnKind.VARCHAR,
    "string": ColumnKind.CHAR,
}
_FSP_KINDS = (ColumnKind.DATETIME, ColumnKind.TIMESTAMP, ColumnKind.TIME)


def column_type(data_type: Mapping[str, Any]) -> ColumnType:
    """A TableSchema ``dataType`` -> ColumnType.

    Raises:
        ValueError: the mysqlType is not one we know.
    """
    name = str(data_type.get(TYPE_MYSQL_TYPE) or "").lower()
    kind = _KIND_ALIASES.get(name)
    if kind is None:
        kind = ColumnKind(name)
    unsigned = bool(data_type.get(TYPE_UNSIGNED))
    length = data_type.get(TYPE_LENGTH)
    decimal = data_type.get(TYPE_DECIMAL)
    if kind in (ColumnKind.ENUM, ColumnKind.SET):
        return ColumnType(kind, elements=tuple(data_type.get(TYPE_ELEMENTS) or ()))
    if kind is ColumnKind.DECIMAL:
        precision = int(length) if length and int(length) > 0 else 10
        return ColumnType(kind, unsigned=unsigned, precision=precision, scale=int(decimal or 0))
    if kind in _FSP_KINDS:
        # JSON carries the fsp in "decimal"; the Avro flavour has no fsp for temporal types.
        return ColumnType(kind, length=int(decimal) if decimal else None)
    if kind in (ColumnKind.FLOAT, ColumnKind.DOUBLE, ColumnKind.JSON, ColumnKind.DATE, ColumnKind.YEAR):
        return ColumnType(kind, unsigned=unsigned)
    if kind in (ColumnKind.TEXT, ColumnKind.BLOB):
        return ColumnType(kind)
    return ColumnType(kind, unsigned=unsigned, length=int(length) if length and int(length) > 0 else None)


def handle_key(indexes: list[Mapping[str, Any]]) -> tuple[str, ...]:
    """The handle key TiCDC uses: the primary index, else the NOT NULL unique index with fewest columns."""
    for index in indexes:
        if index.get(INDEX_PRIMARY):
            return tuple(index.get(INDEX_COLUMNS) or ())
    candidates = [
        tuple(i.get(INDEX_COLUMNS) or ())
        for i in indexes
        if i.get(INDEX_UNIQUE) and not i.get(INDEX_NULLABLE) and i.get(INDEX_COLUMNS)
    ]
    return min(candidates, key=len) if candidates else ()


# TiDB's type of a view's columns: a view holds no rows, so its schema announces nothing to decode.
VIEW_COLUMN_TYPE = "unspecified"


def view_name(raw: Mapping[str, Any] | str) -> TableId | None:
    """The view a ``tableSchema`` describes (every column typed ``unspecified``), or None for a table."""
    obj: Mapping[str, Any] = orjson.loads(raw) if isinstance(raw, str) else raw
    columns = obj.get(SCHEMA_COLUMNS) or ()
    if not columns or any(
        str((c.get(COLUMN_DATA_TYPE) or {}).get(TYPE_MYSQL_TYPE) or "").lower() != VIEW_COLUMN_TYPE
        for c in columns
    ):
        return None
    database = obj.get(SCHEMA_DATABASE, obj.get(SCHEMA_DATABASE_AVRO))
    return TableId(str(database), str(obj.get(SCHEMA_TABLE)))


def parse_table_schema(raw: Mapping[str, Any] | str) -> VersionedSchema:
    """A ``tableSchema`` object (or its JSON text) -> VersionedSchema.

    Raises:
        ValueError: a required field is missing or a type is unknown.
    """
    obj: Mapping[str, Any] = orjson.loads(raw) if isinstance(raw, str) else raw
    database = obj.get(SCHEMA_DATABASE, obj.get(SCHEMA_DATABASE_AVRO))
    table = obj.get(SCHEMA_TABLE)
    version = obj.get(SCHEMA_VERSION)
    if database is None or table is None or version is None:
        raise ValueError("tableSchema without schema, table or version")
    columns = []
    for column in obj.get(SCHEMA_COLUMNS) or ():
        default = column.get(COLUMN_DEFAULT)
        columns.append(
            Column(
                name=str(column[COLUMN_NAME]),
                type=column_type(column.get(COLUMN_DATA_TYPE) or {}),
                nullable=bool(column.get(COLUMN_NULLABLE, True)),
                default=None if default is None else _default_literal(default),
                has_default=default is not None,
            )
        )
    key = handle_key(list(obj.get(SCHEMA_INDEXES) or ()))
    normalized = dict(obj)
    if SCHEMA_DATABASE not in normalized:
        normalized[SCHEMA_DATABASE] = normalized.pop(SCHEMA_DATABASE_AVRO)
    return VersionedSchema(
        TableId(str(database), str(table)),
        int(version),
        TableSchema(tuple(columns), key),
        orjson.dumps(normalized, option=orjson.OPT_SORT_KEYS).decode(),
    )


def _default_literal(value: Any) -> str:
    # Column.default holds SQL literal text, as parsed from CREATE TABLE: quote strings, keep numbers.
    if isinstance(value, bool | int | float):
        return str(int(value) if isinstance(value, bool) else value)
    text = str(value)
    if text.upper().startswith("CURRENT_TIMESTAMP"):
        return text
    return "'" + text.replace("'", "''") + "'"
