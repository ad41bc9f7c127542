"""TiCDC's storage-sink CSV (``protocol=csv``): records, fields, and each record as Canal-JSON. Pure.

A CSV record says nothing about its columns: no header, values in table order with VIRTUAL generated
columns left out, and the meta fields before them depend on the changefeed's ``[sink.csv]`` options. The
storage source therefore sends each record with a :class:`Layout` as its key: the columns of the record's
table version (from the schema file of its directory, with what the table's DDLs say of virtual columns
and ENUM/SET members) and the options. :func:`split` turns the record into the Canal-JSON message with the
TiDB extension that says the same thing, and the mirror reads it as Canal-JSON from there, as it does Open
Protocol: one decoding and one set of rules.

Values become Canal-JSON's text forms: bytes (base64 or hex in CSV) as latin-1, ENUM and SET labels as the
index and bitmask Canal-JSON sends, so that a member spelled as a number is never read as an index.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from functools import cache, partial
from typing import Any

import orjson

from ingest.decode import canal_json as cj
from ingest.decode import codec as c
from ingest.decode.compression import Compression

PROTOCOL = "csv"
OP_INSERT, OP_UPDATE, OP_DELETE = "I", "U", "D"
_OPS = {OP_INSERT: cj.TYPE_INSERT, OP_UPDATE: cj.TYPE_UPDATE, OP_DELETE: cj.TYPE_DELETE}
BINARY_ENCODINGS = ("base64", "hex")

# Field 4 onwards of a record, by option (csv_message.go encodeMeta): commitTs, is-updated, the row handle.
META_FIELDS = 3


class CsvError(ValueError):
    """A record that is not what the sink writes for its table version."""


@dataclass(frozen=True, slots=True)
class CsvOptions:
    """The changefeed's ``[sink.csv]`` settings, which a reader must know: the records do not say them."""

    delimiter: str = ","
    quote: str = '"'
    null: str = "\\N"
    include_commit_ts: bool = True
    output_old_value: bool = False
    output_handle_key: bool = False
    binary_encoding: str = "base64"

    @property
    def meta_fields(self) -> int:
        return META_FIELDS + self.include_commit_ts + self.output_old_value + self.output_handle_key


@dataclass(frozen=True, slots=True)
class CsvColumn:
    """A column as its records carry it: its name, Canal-JSON mysqlType word, and ENUM/SET members (empty
    when no DDL said them)."""

    name: str
    mysql_type: str
    members: tuple[str, ...] = ()

    @property
    def binary(self) -> bool:
        return cj.is_binary_mysql_type(self.mysql_type)


@dataclass(frozen=True, slots=True)
class Layout:
    """What the records of one table version directory hold: the columns in record order (virtual ones
    left out), the primary key, and the options."""

    columns: tuple[CsvColumn, ...]
    pk_names: tuple[str, ...]
    options: CsvOptions

    def to_key(self) -> bytes:
        return orjson.dumps(
            {
                "columns": [[col.name, col.mysql_type, list(col.members)] for col in self.columns],
                "pk": list(self.pk_names),
                "options": asdict(self.options),
            }
        )

    @staticmethod
    def from_key(key: bytes) -> Layout:
        parsed = orjson.loads(key)
        columns = tuple(CsvColumn(name, typ, tuple(members)) for name, typ, members in parsed["columns"])
        return Layout(columns, tuple(parsed["pk"]), CsvOptions(**parsed["options"]))


def options_problem(options: CsvOptions) -> str | None:
    """What is wrong with the settings, as TiCDC's own check says (pkg/config/sink.go), or what the mirror
    cannot do with them; None when they are fine."""
    if not 1 <= len(options.delimiter.encode()) <= 3 or any(ch in options.delimiter for ch in "\r\n"):
        return "sink-csv-delimiter: 1 to 3 bytes, neither CR nor LF, as the changefeed's [sink.csv] delimiter"
    if len(options.quote) > 1 or options.quote in ("\r", "\n"):
        return "sink-csv-quote: one character (not CR or LF), or empty, as the changefeed's [sink.csv] quote"
    if options.quote and options.quote in options.delimiter:
        return "sink-csv-quote and sink-csv-delimiter share a character, which TiCDC refuses"
    if options.binary_encoding not in BINARY_ENCODINGS:
        return "sink-csv-binary-encoding-method: base64 or hex"
    if not options.include_commit_ts:
        return (
            "sink-csv-include-commit-ts: the mirror needs every row's commit ts, to order rows by it, to "
            "place DDLs and to skip what the sink writes again after a restart; set include-commit-ts = true "
            "in the changefeed's [sink.csv]"
        )
    return None


# -- records and fields -----------------------------------------------------------------------------------


def records(content: bytes, quote: str) -> list[bytes]:
    """A file's records, without their terminators (CRLF or LF). With a quote, a record may hold raw line
    breaks inside quoted values: a line joins the next while the record's quotes are unbalanced."""
    mark = quote.encode()
    found: list[bytes] = []
    pending: list[bytes] = []
    open_quotes = 0
    for line in content.split(b"\n"):
        pending.append(line)
        if mark:
            open_quotes += line.count(mark)
            if open_quotes % 2:
                continue
        record = b"\n".join(pending)
        pending, open_quotes = [], 0
        if record.endswith(b"\r"):
            record = record[:-1]
        if record:
            found.append(record)
    if pending and b"\n".join(pending):
        found.append(b"\n".join(pending))  # an unterminated last record: its fields say whether it is whole
    return found


def fields(record: str, options: CsvOptions) -> list[str | None]:
    """A record's fields; None is NULL (the ``null`` string unquoted). Quoted values have doubled quotes;
    without a quote, backslash escapes (csv_message.go formatWithQuotes, formatWithEscapes)."""
    if options.quote:
        return _quoted_fields(record, options.delimiter, options.quote, options.null)
    return _escaped_fields(record, options.delimiter, options.null)


def _quoted_fields(record: str, delimiter: str, quote: str, null: str) -> list[str | None]:
    values: list[str | None] = []
    at, end = 0, len(record)
    while True:
        if record.startswith(quote, at):
            text, at = _quoted_value(record, at + 1, quote)
            values.append(text)
            if at < end and not record.startswith(delimiter, at):
                raise CsvError(f"text after a closing quote at character {at}")
        else:
            stop = record.find(delimiter, at)
            stop = end if stop < 0 else stop
            raw = record[at:stop]
            values.append(None if raw == null else raw)
            at = stop
        if at >= end:
            return values
        at += len(delimiter)


def _quoted_value(record: str, at: int, quote: str) -> tuple[str, int]:
    """The value of a quoted field starting just after its opening quote, and where it ends."""
    parts: list[str] = []
    while True:
        close = record.find(quote, at)
        if close < 0:
            raise CsvError("a quoted value is not closed")
        parts.append(record[at:close])
        if record.startswith(quote, close + 1):
            parts.append(quote)
            at = close + 2
            continue
        return "".join(parts), close + 1


_UNESCAPE = {"\\": "\\", "r": "\r", "n": "\n"}


def _escaped_fields(record: str, delimiter: str, null: str) -> list[str | None]:
    values: list[str | None] = []
    current: list[str] = []
    raw: list[str] = []  # the field as written, to tell the null string from an escaped one
    at, end = 0, len(record)
    while at < end:
        ch = record[at]
        if ch == "\\" and at + 1 < end:
            following = record[at + 1]
            current.append(_UNESCAPE.get(following, following))
            raw.append(ch + following)
            at += 2
        elif record.startswith(delimiter, at):
            values.append(_escaped_value(current, raw, null))
            current, raw = [], []
            at += len(delimiter)
        else:
            current.append(ch)
            raw.append(ch)
            at += 1
    values.append(_escaped_value(current, raw, null))
    return values


def _escaped_value(current: list[str], raw: list[str], null: str) -> str | None:
    return None if "".join(raw) == null else "".join(current)


# -- a record as Canal-JSON -------------------------------------------------------------------------------


def _bytes_text(text: str, encoding: str) -> str:
    try:
        data = bytes.fromhex(text) if encoding == "hex" else base64.b64decode(text, validate=True)
    except (ValueError, binascii.Error) as exc:
        raise CsvError(f"not {encoding}: {text[:40]!r}") from exc
    return cj.binary_to_wire(data)


def _member_text(column: CsvColumn, text: str) -> str:
    """An ENUM label as its 1-based index, SET labels as their bitmask (Canal-JSON's forms)."""
    kind = column.mysql_type.split(" ")[0]
    if not column.members or kind not in ("enum", "set"):
        return text
    index = {member.lower(): i for i, member in enumerate(column.members)}
    if kind == "enum":
        found = index.get(text.lower())
        return text if found is None else str(found + 1)
    mask = 0
    for label in text.split(",") if text else ():
        found = index.get(label.lower())
        if found is None:
            return text
        mask |= 1 << found
    return str(mask)


def _values(layout: Layout, texts: Sequence[str | None]) -> dict[str, str | None]:
    row: dict[str, str | None] = {}
    for column, text in zip(layout.columns, texts, strict=True):
        if text is not None and column.binary:
            text = _bytes_text(text, layout.options.binary_encoding)
        elif text is not None:
            text = _member_text(column, text)
        row[column.name] = text
    return row


def message(layout: Layout, record: str) -> dict[str, Any]:
    """The Canal-JSON message of one record.

    Raises:
        CsvError: the record does not have the fields its layout says, or a value is not its encoding.
    """
    options = layout.options
    values = fields(record, options)
    expected = options.meta_fields + len(layout.columns)
    if len(values) != expected:
        raise CsvError(
            f"{len(values)} fields where the table version's {len(layout.columns)} columns and "
            f"{options.meta_fields} leading fields make {expected}: check the sink-csv-* settings against "
            "the changefeed's [sink.csv]"
        )
    op, table, database = values[0], values[1], values[2]
    if op not in _OPS:
        raise CsvError(f"operation {op!r} is none of I, U and D")
    commit_ts = values[3] if options.include_commit_ts else None
    if commit_ts is not None and not commit_ts.isdigit():
        raise CsvError(f"commit ts {commit_ts!r} is not a number")
    return {
        cj.FIELD_DATABASE: database,
        cj.FIELD_TABLE: table,
        cj.FIELD_PK_NAMES: list(layout.pk_names),
        cj.FIELD_IS_DDL: False,
        cj.FIELD_TYPE: _OPS[op],
        cj.FIELD_MYSQL_TYPE: {col.name: col.mysql_type for col in layout.columns},
        cj.FIELD_DATA: [_values(layout, values[options.meta_fields :])],
        cj.FIELD_OLD: None,
        cj.FIELD_TIDB: {cj.TIDB_COMMIT_TS: int(commit_ts)} if commit_ts is not None else None,
    }


def split(key: bytes | None, value: bytes | None, compression: Compression) -> list[c.SplitEvent]:
    """A record with a layout key as its Canal-JSON message, or why it is bad; a record without a key is a
    control message the source wrote as Canal-JSON (a schema file's DDL, the checkpoint) and passes."""
    del compression  # the storage sink does not compress
    if key is None:
        return [(value, None)]
    if not key:
        return [(None, f"{PROTOCOL}: no schema file describes the table version directory of this record")]
    try:
        layout = Layout.from_key(key)
        return [(orjson.dumps(message(layout, (value or b"").decode("utf-8"))), None)]
    except UnicodeDecodeError as exc:
        return [(None, f"{PROTOCOL}: record is not UTF-8: {exc}")]
    except CsvError as exc:
        return [(None, f"{PROTOCOL}: {exc}")]


@cache
def codec() -> c.Codec:
    """Storage-sink CSV: Canal-JSON's envelope, rules and control events over the messages :func:`split`
    makes. A ``U`` record holds the new row only (``output-old-value`` writes a ``D`` and an ``I``)."""
    return replace(
        cj.codec(),
        name=PROTOCOL,
        has_old_image=False,
        split=lambda compression: partial(split, compression=compression),
    )
