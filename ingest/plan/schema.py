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
from ingest.model import Column, ColumnKind, DdlEvent, TableId, TableSchema


@dataclass(frozen=True, slots=True)
class CreateTable:
    table: TableId
    schema: TableSchema


@dataclass(frozen=True, slots=True)
class AddColumn:
    """Add ``column``; when ``backfill`` is not None, existing rows get that value (wire text)."""

    table: TableId
    column: Column
    first: bool
    after: str | None
    backfill: str | None


@dataclass(frozen=True, slots=True)
class Truncate:
    table: TableId


@dataclass(frozen=True, slots=True)
class RecordOnly:
    """Nothing to change in Delta; the DDL is still recorded as applied."""

    reason: str


@dataclass(frozen=True, slots=True)
class Reject:
    """A change we do not apply; the run stops before this DDL and progress does not move past it."""

    reason: str


SchemaChange = CreateTable | AddColumn | Truncate | RecordOnly | Reject

_NUMERIC = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
_BIT_LITERAL = re.compile(r"^b'([01]+)'$", re.IGNORECASE)
_HEX_LITERAL = re.compile(r"^(?:0x([0-9a-f]+)|x'([0-9a-f]*)')$", re.IGNORECASE)
_ZERO_VALUES = {
    ColumnKind.TINYINT: "0", ColumnKind.SMALLINT: "0", ColumnKind.MEDIUMINT: "0", ColumnKind.INT: "0",
    ColumnKind.BIGINT: "0", ColumnKind.DECIMAL: "0", ColumnKind.FLOAT: "0", ColumnKind.DOUBLE: "0",
    ColumnKind.CHAR: "", ColumnKind.VARCHAR: "", ColumnKind.TEXT: "", ColumnKind.BINARY: "",
    ColumnKind.VARBINARY: "", ColumnKind.BLOB: "", ColumnKind.BIT: "0", ColumnKind.YEAR: "0",
}  # fmt: skip


def plan_schema_changes(ddl: DdlEvent, existing_columns: Collection[str] | None) -> list[SchemaChange]:
    """What a DDL means for its table. ``existing_columns`` is None when the table does not exist in Delta."""
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
        if existing_columns is not None:
            return [RecordOnly(f"{statement.table} already exists")]
        return [CreateTable(statement.table, statement.schema)]
    if isinstance(statement, mysql_ddl.TruncateTable):
        return [Truncate(statement.table)]
    if isinstance(statement, mysql_ddl.AlterTable):
        if existing_columns is None:
            return [Reject(f"ALTER TABLE on {statement.table}, which the mirror has never seen created")]
        # A column that already exists is still planned: reaching here means the DDL is not recorded as
        # applied (replays are filtered by D_T first), so a crash may have come between the ALTER and the
        # back-fill. Applying adds if absent and back-fills, which is idempotent until later rows land.
        changes: list[SchemaChange] = []
        for add in statement.add_columns:
            backfill = _backfill_value(add.column)
            if isinstance(backfill, Reject):
                return [backfill]
            changes.append(AddColumn(statement.table, add.column, add.first, add.after, backfill))
        return changes
    return [Reject(f"{statement.reason}: {ddl.sql!r}")]


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
