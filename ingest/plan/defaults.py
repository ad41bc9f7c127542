"""What existing rows read after ADD COLUMN: a DEFAULT literal (or the type's implicit value) as the wire
text a row of that column would carry. Pure."""

from __future__ import annotations

import re

from ingest.model import Column, ColumnKind, ColumnType, TableId
from ingest.plan.changes import Reject

_NUMERIC = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
_BIT_LITERAL = re.compile(r"^b'([01]*)'$", re.IGNORECASE)
_HEX_LITERAL = re.compile(r"^(?:0x([0-9a-f]+)|x'([0-9a-f]*)')$", re.IGNORECASE)
_NUMBER_KINDS = {
    ColumnKind.TINYINT, ColumnKind.SMALLINT, ColumnKind.MEDIUMINT, ColumnKind.INT, ColumnKind.BIGINT,
    ColumnKind.DECIMAL, ColumnKind.FLOAT, ColumnKind.DOUBLE, ColumnKind.BIT, ColumnKind.YEAR,
}  # fmt: skip
_BINARY_KINDS = {ColumnKind.BINARY, ColumnKind.VARBINARY, ColumnKind.BLOB}
# What existing rows read upstream after ADD COLUMN … NOT NULL without DEFAULT: the type's implicit value
# (an ENUM's is its first element). Zero dates are the mirror's NULL.
_ZERO_VALUES = {
    **dict.fromkeys(_NUMBER_KINDS, "0"),
    **dict.fromkeys((ColumnKind.CHAR, ColumnKind.VARCHAR, ColumnKind.TEXT, ColumnKind.SET), ""),
    **dict.fromkeys(_BINARY_KINDS, ""),
    ColumnKind.JSON: "null", ColumnKind.TIME: "00:00:00", ColumnKind.DATE: "0000-00-00",
    ColumnKind.DATETIME: "0000-00-00 00:00:00", ColumnKind.TIMESTAMP: "0000-00-00 00:00:00",
}  # fmt: skip


def backfill_value(column: Column, table: TableId, given: str | None = None) -> str | Reject | None:
    """The value existing rows of ``table`` read upstream after ADD COLUMN, as wire text (None: SQL NULL).

    ``given``: the value the user says they read (``column-defaults``), for a DEFAULT that is no literal."""
    kind = column.type.kind
    if column.has_default:
        if column.default is None:
            return None
        literal = literal_wire_text(column.default, column.type)
        if literal is None and given is not None:
            return given
        if literal is None:
            return Reject(
                f"ADD COLUMN {column.name} DEFAULT {column.default}: the value existing rows read upstream "
                "is the moment the DDL ran (or an expression's), which no protocol carries; to go on, give "
                f"it as TiDB shows it for rows older than the DDL (--column-defaults "
                f"'{table}.{column.name}=<value>'), or load the table again from a Dumpling export taken "
                "after the DDL (ticdc-ingest load --force)"
            )
        return literal
    if column.nullable:
        return None
    if kind is ColumnKind.ENUM and column.type.elements:
        return column.type.elements[0]
    zero = _ZERO_VALUES.get(kind)
    if zero is None:
        return Reject(
            f"ADD COLUMN {column.name} {column.type} NOT NULL without DEFAULT: the implicit value "
            "of existing rows is not known for this type"
        )
    return _binary_wire_text(b"", column.type) if kind in _BINARY_KINDS else zero


def literal_wire_text(sql_literal: str, column_type: ColumnType) -> str | None:
    """A DEFAULT literal (canonical, as ``mysql_ddl.default_literal`` writes it) as the wire text a row
    of a ``column_type`` column carries for that value; None when it is not a literal.

    Bytes (``X'…'``, ``b'…'``) are a number in a numeric or BIT column and the bytes themselves in a
    binary one; a string in a binary column is its UTF-8 bytes. BINARY(n) values are padded with 0x00 to
    n bytes, as TiDB reads them.
    """
    text = sql_literal.strip()
    kind = column_type.kind
    if _NUMERIC.match(text):
        return text
    if len(text) >= 2 and text[0] == text[-1] == "'":
        value = text[1:-1].replace("''", "'")
        if kind in _BINARY_KINDS:
            return _binary_wire_text(value.encode("utf-8"), column_type)
        if kind is ColumnKind.BIT:
            return str(int.from_bytes(value.encode("utf-8"), "big"))
        return value
    bits = _BIT_LITERAL.match(text)
    hexa = _HEX_LITERAL.match(text)
    if bits:
        number = int(bits.group(1) or "0", 2)
        data = number.to_bytes(max(1, (len(bits.group(1)) + 7) // 8), "big")
    elif hexa:
        digits = hexa.group(1) or hexa.group(2) or ""
        data = bytes.fromhex(digits if len(digits) % 2 == 0 else "0" + digits)
        number = int.from_bytes(data, "big")
    else:
        return None
    if kind in _NUMBER_KINDS:
        return str(number)
    # TiDB keeps a column's DEFAULT as text in its JSON table info, where every byte that is not part of
    # valid UTF-8 becomes U+FFFD: upstream reads DEFAULT x'00ff' back as 00 EF BF BD.
    data = go_json_text(data).encode("utf-8")
    if kind in _BINARY_KINDS:
        return _binary_wire_text(data, column_type)
    return data.decode("utf-8")


def _binary_wire_text(data: bytes, column_type: ColumnType) -> str:
    """Bytes as binary wire text (latin-1, one character per byte), BINARY(n) padded to n bytes."""
    if column_type.kind is ColumnKind.BINARY and column_type.length:
        data = data.ljust(column_type.length, b"\x00")
    return data.decode("latin-1")


_VALID_UTF8 = re.compile(
    rb"[\x00-\x7f]|[\xc2-\xdf][\x80-\xbf]|\xe0[\xa0-\xbf][\x80-\xbf]|[\xe1-\xec\xee\xef][\x80-\xbf]{2}"
    rb"|\xed[\x80-\x9f][\x80-\xbf]|\xf0[\x90-\xbf][\x80-\xbf]{2}|[\xf1-\xf3][\x80-\xbf]{3}|\xf4[\x80-\x8f][\x80-\xbf]{2}"
)


def go_json_text(data: bytes) -> str:
    """Bytes as Go's JSON encoder writes them into a string: valid UTF-8 kept, each other byte U+FFFD."""
    out, i = [], 0
    while i < len(data):
        match = _VALID_UTF8.match(data, i)
        if match:
            out.append(match.group().decode("utf-8"))
            i = match.end()
        else:
            out.append("\ufffd")
            i += 1
    return "".join(out)
