"""TiCDC's Debezium (``protocol=debezium``): each record read as the TiCDC Avro change it amounts to. Pure.

TiCDC v8.3.0 writes one row change per record with a null key, the Kafka Connect schema of the row beside
the payload, and no DDL and no watermark. So the mirror reads it as it reads TiCDC Avro: in offset order,
per key, each table following the row schema its newest rows carry. Each distinct row schema becomes a
writer schema (:func:`writer_schema`) under a stable id taken from its text; the key comes from the
``table-keys`` setting, since nothing in a record says which columns identify a row.

What the encoding loses (TiCDC's ``pkg/sink/codec/debezium/codec.go``): a DECIMAL is sent as a double, so it
mirrors as DOUBLE unless ``column-types`` names a DECIMAL of at most 15 digits (which a double holds
exactly); INT UNSIGNED and BIGINT share ``int64``, so BIGINT UNSIGNED above 2^63 arrives negative unless
``column-types`` says the column is unsigned; binary strings are base64 under ``string``, text unless
``column-types`` names a binary type; zero dates arrive as 1970-01-01 or NULL; no DEFAULT is sent.
"""

from __future__ import annotations

import base64
import fnmatch
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, timedelta
from typing import Any

import orjson

from ingest.decode import codec as c
from ingest.decode import ticdc_avro as ta
from ingest.model import Column, ColumnKind, ColumnType, TableId

PROTOCOL = "debezium"
# Commit ts on every change, deletes included; a DELETE carries the whole old row.
CODEC = replace(ta.CODEC, name=PROTOCOL, commit_ts_on_delete=True)

OP_CREATE, OP_UPDATE, OP_DELETE = "c", "u", "d"
_TYPES = {OP_CREATE: c.TYPE_INSERT, OP_UPDATE: c.TYPE_UPDATE, OP_DELETE: c.TYPE_DELETE}
_TWO_TO_64 = 1 << 64
_ID_BITS = (1 << 62) - 1

# A double holds every decimal of up to 15 significant digits exactly, and its shortest text gives them back.
EXACT_DECIMAL_DIGITS = 15
_BINARY = (ColumnKind.BINARY, ColumnKind.VARBINARY, ColumnKind.BLOB)

# Kafka Connect (type, name) -> the TiDB type it carries (TINYINT..INT share int16/int32, as in Avro's INT).
_PLAIN = {
    ("int16", None): ColumnType(ColumnKind.INT),
    ("int32", None): ColumnType(ColumnKind.INT),
    ("int64", None): ColumnType(ColumnKind.BIGINT),
    ("float", None): ColumnType(ColumnKind.FLOAT),
    ("double", None): ColumnType(ColumnKind.DOUBLE),
    ("boolean", None): ColumnType(ColumnKind.BIT, length=1),
    ("string", None): ColumnType(ColumnKind.TEXT),
    ("int32", "io.debezium.time.Date"): ColumnType(ColumnKind.DATE),
    ("int32", "io.debezium.time.Year"): ColumnType(ColumnKind.YEAR),
    ("int64", "io.debezium.time.Timestamp"): ColumnType(ColumnKind.DATETIME),
    ("int64", "io.debezium.time.MicroTimestamp"): ColumnType(ColumnKind.DATETIME),
    ("int64", "io.debezium.time.MicroTime"): ColumnType(ColumnKind.TIME),
    ("string", "io.debezium.time.ZonedTimestamp"): ColumnType(ColumnKind.TIMESTAMP),
    ("string", "io.debezium.data.Json"): ColumnType(ColumnKind.JSON),
}
_MILLIS = "io.debezium.time.Timestamp"
_BITS = "io.debezium.data.Bits"
_ENUM, _SET = "io.debezium.data.Enum", "io.debezium.data.EnumSet"


class NotDebezium(ValueError):
    """A record that is not a row change as TiCDC's Debezium encoder writes it."""


@dataclass(frozen=True)
class RowSchema:
    """One distinct row schema of a batch: its table and the Connect fields of its columns."""

    table: TableId
    fields: tuple[Mapping[str, Any], ...]

    @property
    def text(self) -> str:
        return orjson.dumps(
            [self.table.schema, self.table.table, self.fields], option=orjson.OPT_SORT_KEYS
        ).decode()

    @property
    def id(self) -> int:
        return schema_id(self.text)


def schema_id(text: str) -> int:
    """A stable id for a schema's text, the same on every executor and run."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big") & _ID_BITS


def row_schema(message: Mapping[str, Any]) -> RowSchema:
    """The row schema of a parsed message: the fields of its ``before`` struct (``after`` has the same).

    Raises:
        NotDebezium: no schema (``debezium-disable-schema``), or not TiCDC's envelope.
    """
    schema, payload = message.get("schema"), message.get("payload")
    if not isinstance(payload, Mapping):
        raise NotDebezium("no payload object")
    if not isinstance(schema, Mapping):
        raise NotDebezium(
            "no schema beside the payload: the mirror takes each table's columns from it; set the "
            "changefeed's debezium-disable-schema to false"
        )
    source = payload.get("source")
    if not isinstance(source, Mapping) or not source.get("db") or not source.get("table"):
        raise NotDebezium("payload.source does not name the database and table")
    structs = [f for f in schema.get("fields") or () if isinstance(f, Mapping) and f.get("field") == "before"]
    if not structs or not isinstance(structs[0].get("fields"), list):
        raise NotDebezium("the schema has no 'before' struct of the row's columns")
    return RowSchema(TableId(str(source["db"]), str(source["table"])), tuple(structs[0]["fields"]))


# -- the writer schema a row schema amounts to --------------------------------------------------------------


def column_type(entry: Mapping[str, Any], override: ColumnType | None = None) -> ColumnType:
    """The TiDB type a Connect field carries, as ``override`` (``column-types``) narrows it.

    Raises:
        NotDebezium: a Connect type TiCDC does not write for a column, or an override its values cannot fill.
    """
    connect, name = str(entry.get("type")), entry.get("name")
    allowed = str((entry.get("parameters") or {}).get("allowed", ""))
    if name in (_ENUM, _SET) and connect == "string":
        found = ColumnType(
            ColumnKind.ENUM if name == _ENUM else ColumnKind.SET, elements=ta.split_allowed(allowed)
        )
    elif name == _BITS and connect == "bytes":
        found = ColumnType(ColumnKind.BIT, length=int((entry.get("parameters") or {}).get("length", 64)))
    elif (connect, name) in _PLAIN:
        found = _PLAIN[(connect, name)]
    else:
        raise NotDebezium(
            f"column {entry.get('field')!r}: Connect type {connect} {name or ''} is not one TiCDC writes"
        )
    return found if override is None else _narrowed(entry, found, override)


def _narrowed(entry: Mapping[str, Any], found: ColumnType, override: ColumnType) -> ColumnType:
    column = entry.get("field")
    if found.kind is ColumnKind.DOUBLE and override.kind is ColumnKind.DECIMAL:
        if override.precision is not None and override.precision <= EXACT_DECIMAL_DIGITS:
            return override
        raise NotDebezium(
            f"column {column!r}: Debezium sends a DECIMAL as a double, which holds at most "
            f"{EXACT_DECIMAL_DIGITS} digits exactly; {override} would be rounded (leave it out of "
            "column-types to mirror the column as DOUBLE, or use another protocol)"
        )
    if found.kind is ColumnKind.BIGINT and override.kind is ColumnKind.BIGINT and override.unsigned:
        return override
    if found.kind is ColumnKind.TEXT and override.kind in _BINARY:
        return override
    raise NotDebezium(
        f"column {column!r}: column-types {override} does not fit Debezium's {found}; it can name a DECIMAL "
        f"of at most {EXACT_DECIMAL_DIGITS} digits for a double, BIGINT UNSIGNED for an int64, or a binary "
        "type for a string"
    )


def writer_schema(row: RowSchema, overrides: Mapping[str, ColumnType]) -> ta.WriterSchema:
    """The writer schema of a row schema. Every column's DEFAULT is unknown: Debezium carries none.

    Raises:
        NotDebezium: see :func:`column_type`.
    """
    columns = tuple(
        ta.AvroColumn(
            Column(
                str(f["field"]),
                column_type(f, overrides.get(str(f["field"]))),
                nullable=bool(f.get("optional")),
            ),
            str(f.get("type")),
            default_unknown=True,
        )
        for f in row.fields
    )
    return ta.WriterSchema(row.id, row.table, columns, True, row.text)


def key_schema(table: TableId, key: Sequence[str], value: ta.WriterSchema) -> ta.WriterSchema:
    """The key writer schema of a table's key columns (their types as ``value`` gives them)."""
    columns = tuple(c for name in key for c in value.columns if c.column.name == name)
    text = orjson.dumps(["key", table.schema, table.table, list(key)]).decode()
    return ta.WriterSchema(schema_id(text), table, columns, False, text)


# -- table keys ---------------------------------------------------------------------------------------------


def parse_table_keys(text: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """``db.table=a,b;db.*=id``: the key columns per table pattern (``fnmatch``), the first match counts. A
    column name with a comma, a semicolon or spaces at its ends is quoted in backticks (```a,b```, a
    backtick in it doubled).

    Raises:
        ValueError: an entry without a pattern or columns, or an unclosed backtick.
    """
    rules: list[tuple[str, tuple[str, ...]]] = []
    for entry in _entries(text):
        pattern, sep, names = entry.partition("=")
        columns = _names(names)
        if not sep or "." not in pattern or not columns:
            raise ValueError(
                f"expected 'database.table=column,column' entries separated by ';', got {entry!r}"
            )
        rules.append((pattern.strip(), columns))
    return tuple(rules)


def _entries(text: str) -> list[str]:
    """``text`` split at the semicolons outside backticks."""
    entries: list[str] = []
    current: list[str] = []
    quoted = False
    for char in text:
        if char == "`":
            quoted = not quoted
        if char == ";" and not quoted:
            entries.append("".join(current))
            current = []
            continue
        current.append(char)
    if quoted:
        raise ValueError(f"an unclosed backtick in {text!r}")
    entries.append("".join(current))
    return [e.strip() for e in entries if e.strip()]


def _names(text: str) -> tuple[str, ...]:
    names: list[str] = []
    at, n = 0, len(text)
    while at < n:
        while at < n and text[at] in " ,":
            at += 1
        if at >= n:
            break
        if text[at] == "`":
            name, at = _quoted(text, at + 1)
        else:
            end = text.find(",", at)
            end = n if end < 0 else end
            name, at = text[at:end].strip(), end
        names.append(name)
    return tuple(names)


def _quoted(text: str, at: int) -> tuple[str, int]:
    out = []
    while at < len(text):
        if text[at] == "`":
            if text[at + 1 : at + 2] == "`":
                out.append("`")
                at += 2
                continue
            return "".join(out), at + 1
        out.append(text[at])
        at += 1
    raise ValueError(f"an unclosed backtick in {text!r}")


def key_of(table: TableId, rules: Sequence[tuple[str, tuple[str, ...]]]) -> tuple[str, ...] | None:
    name = f"{table.schema}.{table.table}"
    return next((columns for pattern, columns in rules if fnmatch.fnmatchcase(name, pattern)), None)


# -- one record -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reader:
    """What an executor needs to read records: each table's key schema id and its ``column-types``; it
    keeps each row schema's columns, read once."""

    key_ids: Mapping[TableId, int]
    column_types: Mapping[TableId, Mapping[str, ColumnType]]
    _columns: dict[str, tuple[_Field, ...]] = field(default_factory=dict, compare=False, repr=False)

    def columns(self, row: RowSchema, text: str) -> tuple[_Field, ...]:
        known = self._columns.get(text)
        if known is None:
            overrides = self.column_types.get(row.table, {})
            known = self._columns[text] = tuple(
                _Field(str(f["field"]), f, column_type(f, overrides.get(str(f["field"])))) for f in row.fields
            )
        return known


@dataclass(frozen=True)
class _Field:
    name: str
    entry: Mapping[str, Any]
    type: ColumnType


class SettingsProblem(ValueError):
    """``table-keys`` or ``column-types`` that the batch's row schemas cannot work with."""


def schema_book(
    rows: Sequence[RowSchema],
    table_keys: Sequence[tuple[str, tuple[str, ...]]],
    column_types: Mapping[TableId, Mapping[str, ColumnType]],
) -> tuple[ta.SchemaBook, Reader]:
    """The writer and key schemas of a batch's row schemas, and what its executors read records with.

    Raises:
        SettingsProblem: a table that ``table-keys`` gives no key, or a key column its rows lack, or
            ``column-types`` its values cannot fill (the message names the setting).
    """
    keys = {row.table: key_of(row.table, table_keys) for row in rows}
    keyless = sorted(str(table) for table, key in keys.items() if key is None)
    if keyless:
        raise SettingsProblem(
            f"table-keys: no key for {', '.join(keyless)}; Debezium records do not say which columns "
            f"identify a row, so name them, e.g. --table-keys '{keyless[0]}=id'"
        )
    book, key_ids = ta.SchemaBook({}, {}), {}
    for row in rows:
        try:
            writer = writer_schema(row, column_types.get(row.table, {}))
        except NotDebezium as exc:
            raise SettingsProblem(f"column-types: {row.table}: {exc}") from exc
        key = keys[row.table] or ()
        if missing := [name for name in key if name not in writer.names]:
            raise SettingsProblem(
                f"table-keys: {row.table} has no column {', '.join(missing)} (its columns: "
                f"{', '.join(writer.names)}); name its key columns before a pattern that matches it"
            )
        key_writer = key_schema(row.table, key, writer)
        book.schemas[writer.id] = (writer, None)
        book.schemas[key_writer.id] = (key_writer, None)
        key_ids[row.table] = key_writer.id
    return book, Reader(key_ids, column_types)


def decode_record(value: bytes | None, reader: Reader) -> ta.Change:
    """One record's change, its values as the wire text the apply stage converts.

    Raises:
        NotDebezium: the bytes are not a TiCDC Debezium row change, or its table has no key.
    """
    if value is None:
        raise NotDebezium("a record without a value (TiCDC's Debezium encoder never sends a tombstone)")
    try:
        message = orjson.loads(value)
    except orjson.JSONDecodeError as exc:
        raise NotDebezium(f"not JSON: {exc}") from exc
    if not isinstance(message, Mapping):
        raise NotDebezium("not a JSON object")
    row = row_schema(message)
    payload = message["payload"]
    op, commit_ts = payload.get("op"), payload["source"].get("commit_ts")
    if op not in _TYPES:
        raise NotDebezium(f"op {op!r} is not c, u or d")
    if not isinstance(commit_ts, int) or commit_ts <= 0:
        raise NotDebezium("payload.source has no commit_ts")
    key_id = reader.key_ids.get(row.table)
    if key_id is None:
        raise NotDebezium(f"{row.table} has no key: name its key columns in table-keys")
    image = payload.get("before" if op == OP_DELETE else "after")
    if not isinstance(image, Mapping):
        raise NotDebezium(f"op {op} without its {'before' if op == OP_DELETE else 'after'} image")
    text = row.text
    data = {f.name: wire_text(image.get(f.name), f.entry, f.type) for f in reader.columns(row, text)}
    return ta.Change(row.table, _TYPES[op], commit_ts, data, schema_id(text), key_id)


def classify(
    value: bytes | None, partition: int | None, reader: Reader
) -> tuple[str, str | None, ta.Change | None]:
    """One record's kind, why it is bad (if it is), and its change (if it decodes)."""
    if partition is None:
        return c.KIND_BAD, c.NOT_A_RECORD, None
    try:
        return c.KIND_DML, None, decode_record(value, reader)
    except (NotDebezium, ValueError, TypeError, KeyError) as exc:
        return c.KIND_BAD, f"Debezium: {exc}", None


_EPOCH = date(1970, 1, 1)


def wire_text(value: Any, entry: Mapping[str, Any], typ: ColumnType) -> str | None:
    """A Debezium value as the text the apply stage converts (Canal-JSON's forms: an ENUM's 1-based index,
    a SET's bitmask, BIT's number; binary stays base64); ``typ`` is the column's type as ``column-types``
    narrows it, so a BIGINT UNSIGNED is unwrapped.

    Raises:
        NotDebezium: a value its Connect type cannot hold.
    """
    if value is None:
        return None
    connect, name = entry.get("type"), entry.get("name")
    if typ.kind is ColumnKind.ENUM and value in typ.elements:
        # A label that looks like a number (ENUM('1','2')) would otherwise be taken for an index.
        return str(typ.elements.index(value) + 1)
    if typ.kind is ColumnKind.SET and isinstance(value, str):
        members = set(value.split(",")) - {""}
        if members <= set(typ.elements):
            return str(sum(1 << i for i, e in enumerate(typ.elements) if e in members))
        return value
    if isinstance(value, bool):
        return "1" if value else "0"
    if name == _BITS:
        return str(int.from_bytes(base64.b64decode(value), "little"))
    if name == "io.debezium.time.Date":
        return (_EPOCH + timedelta(days=int(value))).isoformat()
    if name in (_MILLIS, "io.debezium.time.MicroTimestamp"):
        micros = int(value) * (1000 if name == _MILLIS else 1)
        day, rest = divmod(micros, 86_400_000_000)
        return f"{(_EPOCH + timedelta(days=day)).isoformat()} {_clock(rest)}"
    if name == "io.debezium.time.MicroTime":
        return ("-" if value < 0 else "") + _clock(abs(int(value)))
    if name == "io.debezium.time.ZonedTimestamp":
        return str(value).removesuffix("Z").replace("T", " ")
    if connect == "int64" and typ.unsigned and isinstance(value, int) and value < 0:
        return str(value + _TWO_TO_64)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (int, str)):
        return str(value)
    raise NotDebezium(f"column {entry.get('field')!r}: value {value!r} is not a {connect}")


def _clock(micros: int) -> str:
    seconds, fraction = divmod(micros, 1_000_000)
    hours, seconds = divmod(seconds, 3600)
    minutes, seconds = divmod(seconds, 60)
    return f"{hours:02d}:{minutes:02d}:{seconds:02d}.{fraction:06d}"
