"""One line of a Dumpling data file (an INSERT of SQL tuples, or a CSV record) -> each row's values as the
stream's wire text, so the load and the stream convert them alike. Pure."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ingest.model import ColumnKind, ColumnType
from ingest.mysql.dumpling import CsvDialect, DataFormat, DumplingFormatError

_BINARY_KINDS = (ColumnKind.BINARY, ColumnKind.VARBINARY, ColumnKind.BLOB)
_UNESCAPE = {ord("0"): b"\x00", ord("b"): b"\b", ord("n"): b"\n", ord("r"): b"\r", ord("t"): b"\t",
             ord("Z"): b"\x1a"}  # fmt: skip
_BACKSLASH = 0x5C

# A raw value as the file spells it: its bytes (unescaped) and whether it was a quoted string, a hex/bit
# literal, or a bare SQL token (a number). Every CSV field counts as quoted: Dumpling writes the server's
# text there whether it quotes it or not (BIT as its bytes, ENUM/SET as labels). None is SQL NULL.
QUOTED, HEX, BARE = "quoted", "hex", "bare"
RawValue = tuple[str, bytes] | None


@dataclass(frozen=True, slots=True)
class DecodedLine:
    """What one physical line of a data file holds: rows of raw values, and a column list if it names one."""

    rows: tuple[tuple[RawValue, ...], ...] = ()
    columns: tuple[str, ...] | None = None


_SKIP_PREFIXES = (b"/*", b"--", b"SET ", b"set ", b"LOCK ", b"UNLOCK ", b"USE ")
_INSERT = re.compile(rb"^\s*(?:INSERT|REPLACE)\s+(?:IGNORE\s+)?INTO\s+", re.IGNORECASE)
_VALUES = re.compile(rb"\)?\s*VALUES\s*", re.IGNORECASE)
_IDENTIFIER = re.compile(rb"`((?:[^`]|``)*)`|([\w$]+)")


def decode_sql_line(line: bytes) -> DecodedLine:
    """One line of a Dumpling (or mysqldump) SQL data file -> its rows.

    Dumpling puts ``INSERT INTO `t` [(cols)] VALUES`` on a line of its own and one tuple per line after it;
    mysqldump puts a whole statement on one line. Both are read.

    Raises:
        DumplingFormatError: the line is neither a statement we skip, an INSERT, nor value tuples.
    """
    text = line.strip()
    if not text or text.startswith(_SKIP_PREFIXES):
        return DecodedLine()
    columns: tuple[str, ...] | None = None
    position = 0
    insert = _INSERT.match(text)
    if insert:
        position = _skip_identifier(text, insert.end())
        position = _skip_space(text, position)
        if position < len(text) and text[position] == ord("("):
            close = text.find(b")", position)
            if close < 0:
                raise DumplingFormatError("INSERT column list is not closed")
            columns = tuple(
                (quoted.replace(b"``", b"`") if quoted else bare).decode("utf-8")
                for quoted, bare in _IDENTIFIER.findall(text[position + 1 : close])
            )
            position = close + 1
        values = _VALUES.match(text, _skip_space(text, position))
        if not values:
            raise DumplingFormatError("INSERT without VALUES")
        position = values.end()
    rows: list[tuple[RawValue, ...]] = []
    while True:
        position = _skip_space(text, position)
        if position >= len(text) or text[position] == ord(";"):
            break
        if text[position] != ord("("):
            raise DumplingFormatError(
                f"expected '(' at byte {position}, got {text[position : position + 20]!r}"
            )
        row, position = _tuple(text, position + 1)
        rows.append(row)
        position = _skip_space(text, position)
        if position < len(text) and text[position] == ord(","):
            position += 1
    return DecodedLine(tuple(rows), columns)


def _skip_space(text: bytes, position: int) -> int:
    while position < len(text) and text[position] in b" \t\r\n":
        position += 1
    return position


def _skip_identifier(text: bytes, position: int) -> int:
    """Past a (possibly qualified, possibly backticked) table name."""
    while True:
        match = _IDENTIFIER.match(text, position)
        if not match:
            raise DumplingFormatError("INSERT without a table name")
        position = match.end()
        if position < len(text) and text[position] == ord("."):
            position += 1
            continue
        return position


def _tuple(text: bytes, position: int) -> tuple[tuple[RawValue, ...], int]:
    values: list[RawValue] = []
    while True:
        position = _skip_space(text, position)
        value, position = _sql_value(text, position)
        values.append(value)
        position = _skip_space(text, position)
        if position >= len(text):
            raise DumplingFormatError("value tuple is not closed (a row must fit on one line)")
        if text[position] == ord(")"):
            return tuple(values), position + 1
        if text[position] != ord(","):
            raise DumplingFormatError(f"expected ',' or ')' at byte {position}")
        position += 1


def _sql_value(text: bytes, position: int) -> tuple[RawValue, int]:
    if text.startswith(b"_binary", position):
        position = _skip_space(text, position + len(b"_binary"))
    if position >= len(text):
        raise DumplingFormatError("value missing at end of line")
    first = text[position]
    if first in b"'\"":
        raw, position = _quoted(text, position + 1, first)
        return (QUOTED, raw), position
    if first in b"xX" and text.startswith(b"'", position + 1):
        end = text.find(b"'", position + 2)
        if end < 0:
            raise DumplingFormatError("hex literal is not closed")
        return (HEX, _hex(text[position + 2 : end])), end + 1
    if first in b"bB" and text.startswith(b"'", position + 1):
        end = text.find(b"'", position + 2)
        if end < 0:
            raise DumplingFormatError("bit literal is not closed")
        return (HEX, _bits(text[position + 2 : end])), end + 1
    end = position
    while end < len(text) and text[end] not in b",) \t":
        end += 1
    token = text[position:end]
    if not token:
        raise DumplingFormatError(f"empty value at byte {position}")
    if token.upper() == b"NULL":
        return None, end
    if token[:2] in (b"0x", b"0X"):
        return (HEX, _hex(token[2:])), end
    return (BARE, token), end


def _quoted(text: bytes, position: int, quote: int) -> tuple[bytes, int]:
    out = bytearray()
    while position < len(text):
        byte = text[position]
        if byte == _BACKSLASH and position + 1 < len(text):
            escaped = text[position + 1]
            out += _UNESCAPE.get(escaped, bytes([escaped]))
            position += 2
        elif byte == quote:
            if position + 1 < len(text) and text[position + 1] == quote:  # '' inside '...'
                out.append(quote)
                position += 2
            else:
                return bytes(out), position + 1
        else:
            out.append(byte)
            position += 1
    raise DumplingFormatError("string is not closed (a row must fit on one line; keep --escape-backslash on)")


def _hex(digits: bytes) -> bytes:
    try:
        return bytes.fromhex(("0" if len(digits) % 2 else "") + digits.decode("ascii"))
    except ValueError as exc:
        raise DumplingFormatError(f"bad hex literal {digits[:40]!r}") from exc


def _bits(digits: bytes) -> bytes:
    if not digits or set(digits) - set(b"01"):
        raise DumplingFormatError(f"bad bit literal {digits[:40]!r}")
    value = int(digits, 2)
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def decode_csv_line(line: bytes, dialect: CsvDialect) -> tuple[RawValue, ...]:
    """One CSV record of a Dumpling export (backslash escaping) -> its raw values.

    Raises:
        DumplingFormatError: an unclosed quote or text between a closing delimiter and the separator.
    """
    sep, quote = dialect.separator, dialect.delimiter
    values: list[RawValue] = []
    position, size = 0, len(line)
    while True:
        if quote and line.startswith(quote, position):
            out = bytearray()
            position += len(quote)
            while True:
                if position >= size:
                    raise DumplingFormatError(
                        "quoted field is not closed (a record must be one line; keep --escape-backslash on)"
                    )
                byte = line[position]
                if byte == _BACKSLASH and position + 1 < size:
                    escaped = line[position + 1]
                    out += _UNESCAPE.get(escaped, bytes([escaped]))
                    position += 2
                elif line.startswith(quote, position):
                    position += len(quote)
                    break
                else:
                    out.append(byte)
                    position += 1
            values.append((QUOTED, bytes(out)))
        else:
            end = _unquoted_end(line, position, sep)
            token = line[position:end]
            position = end
            if token == dialect.null_value:
                values.append(None)
            else:
                # Quoted or not, a CSV field is the server's text (BIT: its bytes; ENUM/SET: labels).
                values.append((QUOTED, _unescape(token)))
        if position >= size:
            return tuple(values)
        if not line.startswith(sep, position):
            raise DumplingFormatError(f"expected the separator {sep!r} at byte {position}")
        position += len(sep)
        if position == size:  # a trailing separator ends an empty last field
            values.append((QUOTED, b""))
            return tuple(values)


def _unquoted_end(line: bytes, position: int, sep: bytes) -> int:
    while position < len(line):
        if line[position] == _BACKSLASH:
            position += 2
        elif line.startswith(sep, position):
            return position
        else:
            position += 1
    return len(line)


def _unescape(token: bytes) -> bytes:
    if _BACKSLASH not in token:
        return token
    out, position = bytearray(), 0
    while position < len(token):
        if token[position] == _BACKSLASH and position + 1 < len(token):
            out += _UNESCAPE.get(token[position + 1], bytes([token[position + 1]]))
            position += 2
        else:
            out.append(token[position])
            position += 1
    return bytes(out)


def csv_header(line: bytes, dialect: CsvDialect) -> tuple[str, ...]:
    """The column names of a CSV header line."""
    return tuple(v[1].decode("utf-8") if v is not None else "" for v in decode_csv_line(line, dialect))


# -- values ------------------------------------------------------------------------------------------------


def wire_text(value: RawValue, column_type: ColumnType) -> str | None:
    """A raw value as Canal-JSON text for a column of ``column_type`` (what ``apply.convert`` reads).

    Raises:
        DumplingFormatError: the value cannot be this column's (e.g. invalid UTF-8 text, an unknown ENUM
            label); the row is quarantined.
    """
    if value is None:
        return None
    spelling, raw = value
    kind = column_type.kind
    if kind in _BINARY_KINDS:
        return raw.decode("latin-1")  # binary as Canal-JSON carries it: one character per byte
    if kind is ColumnKind.BIT and spelling != BARE:
        return str(int.from_bytes(raw, "big"))  # Dumpling writes BIT as its bytes; Canal-JSON as a number
    text = _utf8(raw)
    if kind is ColumnKind.ENUM and spelling == QUOTED:
        return str(_enum_index(text, column_type.elements))
    if kind is ColumnKind.SET and spelling == QUOTED:
        return str(_set_bits(text, column_type.elements))
    return text


def _utf8(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DumplingFormatError(f"text is not UTF-8: {raw[:40]!r}") from exc


def _enum_index(label: str, elements: Sequence[str]) -> int:
    # Canal-JSON sends an ENUM as its 1-based index (0 for the '' error value), Dumpling as its label.
    if label == "" and "" not in elements:
        return 0
    folded = [e.lower() for e in elements]
    if label.lower() not in folded:
        raise DumplingFormatError(f"{label!r} is not one of the ENUM values {list(elements)}")
    return folded.index(label.lower()) + 1


def _set_bits(labels: str, elements: Sequence[str]) -> int:
    # Canal-JSON sends a SET as its bitmask: bit i for the i-th member.
    folded = [e.lower() for e in elements]
    bits = 0
    for label in filter(None, labels.split(",")):
        if label.lower() not in folded:
            raise DumplingFormatError(f"{label!r} is not one of the SET values {list(elements)}")
        bits |= 1 << folded.index(label.lower())
    return bits


def decode_row(values: Sequence[RawValue], types: Sequence[ColumnType]) -> list[str | None]:
    """A row's raw values -> Canal-JSON text per column, in column order.

    Raises:
        DumplingFormatError: the row has another number of values than the table has columns, or a value
            does not fit its column.
    """
    if len(values) != len(types):
        raise DumplingFormatError(f"row has {len(values)} values, the table has {len(types)} columns")
    return [wire_text(v, t) for v, t in zip(values, types, strict=True)]


DecodedRow = tuple[list[str | None] | None, str | None]


def decode_data_line(
    line: bytes,
    *,
    starts_file: bool,
    data_format: DataFormat,
    dialect: CsvDialect,
    names: Sequence[str],
    types: Sequence[ColumnType],
) -> list[DecodedRow]:
    """One physical line of a data file -> ``(values as Canal-JSON text, None)`` per row it holds, or
    ``(None, error)`` for a line or row that cannot be read. ``starts_file``: the line is the file's first.

    A CSV header and an INSERT column list must name the table's columns in CREATE TABLE order (Dumpling
    writes them so); anything else is reported instead of guessed.
    """
    try:
        if data_format is DataFormat.CSV:
            if not line.strip(b"\r\n"):
                return []
            if starts_file and dialect.header:
                header = csv_header(line, dialect)
                if tuple(header) != tuple(names):
                    raise DumplingFormatError(
                        f"CSV header {list(header)} differs from the columns of CREATE TABLE {list(names)}"
                    )
                return []
            rows: Sequence[Sequence[RawValue]] = [decode_csv_line(line, dialect)]
        else:
            decoded = decode_sql_line(line)
            if decoded.columns is not None and tuple(decoded.columns) != tuple(names):
                raise DumplingFormatError(
                    f"INSERT names columns {list(decoded.columns)}, CREATE TABLE has {list(names)}"
                )
            rows = decoded.rows
    except DumplingFormatError as exc:
        return [(None, str(exc))]
    result: list[DecodedRow] = []
    for row in rows:
        try:
            result.append((decode_row(row, types), None))
        except DumplingFormatError as exc:
            result.append((None, str(exc)))
    return result
