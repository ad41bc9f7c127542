"""Test helper: write what TiDB Dumpling would export for the upstream model's state at a TSO.

Written from Dumpling's own rules (dumpling/export/sql_type.go, writer_util.go), not from our reader:
strings (and dates, times, years) between quotes with Dumpling's backslash escapes, numbers bare, binary
columns as x'hex' in SQL and as escaped raw bytes in CSV, BIT as its bytes, ENUM/SET as labels, NULL as
NULL (SQL) or the CSV null value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from ingest.model import ColumnKind, ColumnType, TableId
from ingest.mysql.ddl import CreateTable, parse_ddl
from testkit.sample import Stream, wire_text

NUMBERS = (ColumnKind.TINYINT, ColumnKind.SMALLINT, ColumnKind.MEDIUMINT, ColumnKind.INT, ColumnKind.BIGINT,
           ColumnKind.DECIMAL, ColumnKind.FLOAT, ColumnKind.DOUBLE)  # fmt: skip
BYTES = (ColumnKind.BINARY, ColumnKind.VARBINARY, ColumnKind.BLOB, ColumnKind.BIT)


@dataclass(frozen=True)
class Dialect:
    """Dumpling's CSV flags."""

    separator: str = ","
    delimiter: str = '"'
    null_value: str = "\\N"
    header: bool = True
    line_terminator: str = "\r\n"


def escape_sql(raw: bytes) -> bytes:
    """escapeBackslashSQL."""
    table = {0: b"\\0", 10: b"\\n", 13: b"\\r", 92: b"\\\\", 39: b"\\'", 34: b'\\"', 26: b"\\Z"}
    return b"".join(table.get(b, bytes([b])) for b in raw)


def escape_csv(raw: bytes, dialect: Dialect) -> bytes:
    """escapeBackslashCSV: \\0 \\r \\n \\\\ and the first byte of the delimiter (or of the separator)."""
    special = (dialect.delimiter or dialect.separator).encode()[0]
    table = {0: b"\\0", 13: b"\\r", 10: b"\\n", 92: b"\\\\", special: b"\\" + bytes([special])}
    return b"".join(table.get(b, bytes([b])) for b in raw)


def _raw(value: Any, column_type: ColumnType, tz: ZoneInfo) -> tuple[str, bytes]:
    """('bare' | 'quoted' | 'bytes', bytes) as Dumpling would get the value from TiDB's text protocol."""
    kind = column_type.kind
    if kind is ColumnKind.BIT:
        width = max(1, ((column_type.length or 1) + 7) // 8)
        return "bytes", int(value).to_bytes(width, "big")
    if kind in BYTES:
        return "bytes", bytes(value)
    if kind in (ColumnKind.ENUM, ColumnKind.SET):
        return "quoted", str(value).encode()  # the model holds labels, as TiDB's text protocol returns them
    text = wire_text(value, column_type, tz)
    assert text is not None
    return ("bare" if kind in NUMBERS else "quoted"), text.encode("utf-8")


def sql_literal(value: Any, column_type: ColumnType, tz: ZoneInfo) -> bytes:
    if value is None:
        return b"NULL"
    spelling, raw = _raw(value, column_type, tz)
    if spelling == "bytes":
        return b"x'" + raw.hex().encode() + b"'"
    if spelling == "bare":
        return raw
    return b"'" + escape_sql(raw) + b"'"


def csv_field(value: Any, column_type: ColumnType, tz: ZoneInfo, dialect: Dialect) -> bytes:
    if value is None:
        return dialect.null_value.encode()
    spelling, raw = _raw(value, column_type, tz)
    if spelling == "bare":
        return raw
    quote = dialect.delimiter.encode()
    return quote + escape_csv(raw, dialect) + quote


def unqualified(create_sql: str) -> str:
    """Dumpling's CREATE TABLE names the table without its database."""
    return re.sub(r"CREATE TABLE `[^`]+`\.`([^`]+)`", r"CREATE TABLE `\1`", create_sql, count=1)


def write_export(
    stream: Stream,
    snapshot_ts: int,
    directory: Path,
    creates: dict[TableId, str],
    *,
    data_format: str,
    dialect: Dialect = Dialect(),
    rows_per_file: int = 3,
    rows_per_statement: int = 2,
    complete_insert: bool = False,
) -> Path:
    """Write a Dumpling export of ``stream``'s tables as of ``snapshot_ts``; ``creates`` holds each
    table's CREATE TABLE as of the snapshot (column order decides the order of values)."""
    directory.mkdir(parents=True, exist_ok=True)
    tz = ZoneInfo(stream.tz_name)
    (directory / "metadata").write_text(
        "Started dump at: 2026-11-20 10:00:00\nSHOW MASTER STATUS:\n\tLog: tidb-binlog\n"
        f"\tPos: {snapshot_ts}\n\tGTID:\n\nFinished dump at: 2026-11-20 10:00:01\n"
    )
    state = stream.state_at(snapshot_ts)
    for database in sorted({t.schema for t in creates}):
        (directory / f"{database}-schema-create.sql").write_text(
            "/*!40101 SET NAMES binary*/;\n"
            f"CREATE DATABASE `{database}` /*!40100 DEFAULT CHARACTER SET utf8mb4 */;\n"
        )
    for table, create_sql in creates.items():
        statement = parse_ddl(create_sql, table.schema)
        assert isinstance(statement, CreateTable)
        (directory / f"{table.schema}.{table.table}-schema.sql").write_text(
            "/*!40101 SET NAMES binary*/;\n" + unqualified(create_sql) + ";\n"
        )
        columns = statement.schema.columns
        rows = sorted(state.get(table, {}).items(), key=lambda kv: repr(kv[0]))
        for index in range(0, len(rows), rows_per_file):
            chunk = [row for _, row in rows[index : index + rows_per_file]]
            name = f"{table.schema}.{table.table}.{index // rows_per_file:09d}.{data_format}"
            if data_format == "sql":
                body = _sql_file(table, chunk, columns, tz, rows_per_statement, complete_insert)
            else:
                body = _csv_file(chunk, columns, tz, dialect)
            (directory / name).write_bytes(body)
    return directory


def _sql_file(table, rows, columns, tz, rows_per_statement, complete_insert) -> bytes:
    out = [b"/*!40101 SET NAMES binary*/;\n/*!40014 SET FOREIGN_KEY_CHECKS=0*/;\n"]
    names = (
        b"(" + b",".join(b"`" + c.name.encode() + b"`" for c in columns) + b") " if complete_insert else b""
    )
    for start in range(0, len(rows), rows_per_statement):
        batch = rows[start : start + rows_per_statement]
        out.append(b"INSERT INTO `" + table.table.encode() + b"` " + names + b"VALUES\n")
        for i, row in enumerate(batch):
            values = b",".join(sql_literal(row.get(c.name), c.type, tz) for c in columns)
            out.append(b"(" + values + b")" + (b";\n" if i == len(batch) - 1 else b",\n"))
    return b"".join(out)


def _csv_file(rows, columns, tz, dialect: Dialect) -> bytes:
    sep, end, quote = dialect.separator.encode(), dialect.line_terminator.encode(), dialect.delimiter.encode()
    lines = []
    if dialect.header:
        lines.append(sep.join(quote + escape_csv(c.name.encode(), dialect) + quote for c in columns))
    for row in rows:
        lines.append(sep.join(csv_field(row.get(c.name), c.type, tz, dialect) for c in columns))
    return b"".join(line + end for line in lines)
