"""TiCDC Avro in the Confluent wire format: writer schemas and records. Pure.

A record's key and value each start with byte 0 and a 4-byte schema id; the body is Avro binary under the
writer schema the registry serves for that id. The value is the full new row (INSERT/UPDATE, with
``_tidb_op`` and ``_tidb_commit_ts`` when the changefeed has ``enable-tidb-extension``); a DELETE is a
tombstone: a key and a null value, without commitTs. Records decode to the same shape as the JSON
protocols' row images, text per column, so typing at apply time is shared; the column types come from
the writer schema's ``connect.parameters.tidb_type``.
"""

from __future__ import annotations

import base64
import io
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import fastavro
import orjson
from fastavro.schema import SchemaParseException

from ingest.decode import codec as c
from ingest.model import Column, ColumnKind, ColumnType, TableId, TableSchema
from ingest.mysql.types import UnknownTypeError

MAGIC = 0
HEADER_BYTES = 5

FIELD_OP = "_tidb_op"
FIELD_COMMIT_TS = "_tidb_commit_ts"
# With row checksums on: the CRC-32 of the new image as decimal text ("0": none to check), TiCDC's verdict.
FIELD_CHECKSUM = "_tidb_row_level_checksum"
FIELD_CORRUPTED = "_tidb_corrupted"
# Fields TiCDC adds after the columns; none of them is an upstream column.
EXTENSION_FIELDS = frozenset(
    {
        FIELD_OP,
        FIELD_COMMIT_TS,
        "_tidb_commit_physical_time",
        FIELD_CHECKSUM,
        FIELD_CORRUPTED,
        "_tidb_checksum_version",
        "_ticdc_before",
    }
)
OP_INSERT, OP_UPDATE, OP_DELETE = "c", "u", "d"
TYPE_INSERT, TYPE_UPDATE, TYPE_DELETE = c.TYPE_INSERT, c.TYPE_UPDATE, c.TYPE_DELETE

PROTOCOL = "avro"
# No watermarks, no DDL, no old images, and a DELETE is a tombstone without commitTs: applied in offset
# order, tables following the writer schemas the records name.
CODEC = c.Codec(
    name=PROTOCOL,
    types_from=c.TypesFrom.WRITER_SCHEMA,
    has_watermarks=False,
    has_ddl=False,
    has_old_image=False,
    commit_ts_on_delete=False,
    binary_text=c.BinaryText.BASE64,
    has_checksums=True,
)

_CONNECT = "connect.parameters"
_TWO_TO_64 = 1 << 64


class NotTicdcAvro(ValueError):
    """Bytes or a schema that are not TiCDC Avro in the Confluent wire format."""


def schema_id(data: bytes | None) -> int | None:
    """The registry schema id in a Confluent-framed key or value (byte 0 is MAGIC, the next four the id,
    big-endian); None for anything else."""
    if data is None or len(data) < HEADER_BYTES or data[0] != MAGIC:
        return None
    # Read unsigned, as the Spark side does (registries hand out positive ids only).
    return int.from_bytes(data[1:HEADER_BYTES], "big")


@dataclass(frozen=True)
class AvroColumn:
    """One upstream column as a writer schema describes it."""

    column: Column
    avro_type: str  # the Avro primitive of the non-null branch: int, long, bytes, string, ...
    # The value existing rows read when this column is added (the field's Avro default), as wire text.
    backfill: str | None = None
    # TiCDC writes a null default for every field of an Avro logical type (a DECIMAL in precise mode), so
    # a null default there does not say that upstream's DEFAULT is NULL: the wire cannot tell. Nor can
    # ``DEFAULT CURRENT_TIMESTAMP``, which TiCDC writes as that text: older rows read when the DDL ran.
    default_unknown: bool = False


@dataclass(frozen=True)
class WriterSchema:
    """A key or value writer schema: the table it belongs to and its columns in order."""

    id: int
    table: TableId
    columns: tuple[AvroColumn, ...]
    has_extension: bool
    text: str = field(repr=False, compare=False)
    has_checksum: bool = False  # the changefeed's integrity check put the row checksum into the value

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.column.name for c in self.columns)

    def table_schema(self, key: tuple[str, ...]) -> TableSchema:
        return TableSchema(tuple(c.column for c in self.columns), key)

    def column(self, name: str) -> AvroColumn | None:
        return next((c for c in self.columns if c.column.name == name), None)


def parse_writer_schema(schema_id: int, text: str) -> WriterSchema:
    """Read a TiCDC key or value schema.

    Raises:
        NotTicdcAvro: not a record schema with TiCDC's ``tidb_type`` parameters.
        UnknownTypeError: a ``tidb_type`` we do not know.
    """
    try:
        schema = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise NotTicdcAvro(f"schema {schema_id} is not JSON: {exc}") from exc
    if not isinstance(schema, dict) or schema.get("type") != "record" or "fields" not in schema:
        raise NotTicdcAvro(f"schema {schema_id} is not an Avro record schema")
    namespace = str(schema.get("namespace") or "")
    # namespace = "<changefeed namespace>.<database>"; sanitised names never contain a dot.
    database = namespace.rsplit(".", 1)[-1]
    table = TableId(database, str(schema["name"]))
    columns: list[AvroColumn] = []
    extension = checksum = False
    for entry in schema["fields"]:
        name = str(entry["name"])
        if name in EXTENSION_FIELDS:
            extension = extension or name == FIELD_COMMIT_TS
            checksum = checksum or name == FIELD_CHECKSUM
            continue
        columns.append(_column(schema_id, name, entry))
    return WriterSchema(schema_id, table, tuple(columns), extension, text, checksum)


def _column(schema_id: int, name: str, entry: Mapping[str, Any]) -> AvroColumn:
    avro = entry["type"]
    nullable = False
    if isinstance(avro, list):
        branches = [b for b in avro if b != "null"]
        nullable = len(branches) < len(avro)
        if len(branches) != 1:
            raise NotTicdcAvro(f"schema {schema_id}: field {name} is a union of {avro}")
        avro = branches[0]
    parameters: Mapping[str, Any] = {}
    logical: Mapping[str, Any] = {}
    if isinstance(avro, str):
        primitive = avro
    else:
        primitive = str(avro.get("type"))
        parameters = avro.get(_CONNECT) or {}
        logical = avro
    tidb_type = parameters.get("tidb_type")
    if tidb_type is None:
        raise NotTicdcAvro(f"schema {schema_id}: field {name} has no connect.parameters.tidb_type")
    column_type = column_type_of(str(tidb_type), primitive, parameters, logical)
    has_default = "default" in entry
    default = entry.get("default")
    moment = isinstance(default, str) and _NOW.match(default) is not None
    backfill = _default_text(default, column_type) if has_default and not moment else None
    return AvroColumn(
        Column(name, column_type, nullable=nullable, has_default=has_default and default is not None),
        primitive,
        backfill,
        default_unknown=moment or (has_default and default is None and "logicalType" in logical),
    )


# A DEFAULT of the moment a row is written, as TiCDC writes it into an Avro field's default.
_NOW = re.compile(
    r"^\s*(CURRENT_TIMESTAMP|NOW|LOCALTIME|LOCALTIMESTAMP|CURRENT_DATE|CURDATE|UTC_TIMESTAMP)\b", re.I
)


def column_type_of(
    tidb_type: str, primitive: str, parameters: Mapping[str, Any], logical: Mapping[str, Any]
) -> ColumnType:
    """The narrowest TiDB type that holds every value the writer schema can carry.

    Avro folds TINYINT..INT into ``INT`` (an Avro int), so they mirror as INT; ``INT UNSIGNED`` is an Avro
    long for INT and an Avro int for the smaller ones (which MEDIUMINT UNSIGNED holds).
    """
    text = tidb_type.strip().upper()
    if text == "INT":
        return ColumnType(ColumnKind.INT)
    if text == "INT UNSIGNED":
        kind = ColumnKind.INT if primitive == "long" else ColumnKind.MEDIUMINT
        return ColumnType(kind, unsigned=True)
    if text in ("BIGINT", "BIGINT UNSIGNED"):
        return ColumnType(ColumnKind.BIGINT, unsigned=text.endswith("UNSIGNED"))
    if text == "DECIMAL":
        if logical.get("logicalType") == "decimal":
            return ColumnType(
                ColumnKind.DECIMAL, precision=int(logical["precision"]), scale=int(logical.get("scale", 0))
            )
        return ColumnType(ColumnKind.DECIMAL)  # string mode: the schema does not say the precision
    if text in ("ENUM", "SET"):
        kind = ColumnKind.ENUM if text == "ENUM" else ColumnKind.SET
        return ColumnType(kind, elements=split_allowed(str(parameters.get("allowed", ""))))
    if text == "BIT":
        length = parameters.get("length")
        return ColumnType(ColumnKind.BIT, length=int(length) if length is not None else 64)
    if text == "TIDBVECTORFLOAT32":
        return ColumnType(ColumnKind.VECTOR)
    simple = {
        "FLOAT": ColumnKind.FLOAT, "DOUBLE": ColumnKind.DOUBLE, "TEXT": ColumnKind.TEXT,
        "BLOB": ColumnKind.BLOB, "DATE": ColumnKind.DATE, "DATETIME": ColumnKind.DATETIME,
        "TIMESTAMP": ColumnKind.TIMESTAMP, "TIME": ColumnKind.TIME, "YEAR": ColumnKind.YEAR,
        "JSON": ColumnKind.JSON,
    }  # fmt: skip
    if text in simple:
        return ColumnType(simple[text])
    raise UnknownTypeError(f"unknown TiCDC Avro tidb_type {tidb_type!r}")


def split_allowed(allowed: str) -> tuple[str, ...]:
    """ENUM/SET members from ``allowed``: comma-joined, a comma inside a member escaped as ``\\,``."""
    if allowed == "":
        return ()
    return tuple(m.replace("\\,", ",") for m in re.split(r"(?<!\\),", allowed))


def _default_text(default: Any, column_type: ColumnType) -> str | None:
    """An Avro field default as the text a backfill converts.

    TiCDC writes the default of a ``bytes`` field (BIT, BINARY, BLOB) as base64 text, as Go's JSON encoder
    writes a byte slice, not as the Avro specification's one character per byte: binary defaults stay base64
    (the binary wire text of this codec), a BIT default becomes its number.
    """
    if default is None:
        return None
    if column_type.kind is ColumnKind.BIT and isinstance(default, str):
        return str(int.from_bytes(base64.b64decode(default), "big"))
    if column_type.kind is ColumnKind.BIGINT and column_type.unsigned and isinstance(default, int):
        return str(default + _TWO_TO_64 if default < 0 else default)
    if isinstance(default, bool):
        return str(int(default))
    return str(default)


@dataclass(frozen=True)
class Change:
    """One decoded record: an upsert (INSERT/UPDATE) or a tombstone DELETE with only the key columns."""

    table: TableId
    type: str
    commit_ts: int | None
    data: dict[str, str | None]
    value_schema: int | None
    key_schema: int
    checksum: int | None = None  # the row checksum the record carries (None: its schema has none)
    corrupted: bool | None = None


@dataclass(frozen=True)
class SchemaBook:
    """Writer schemas by id, each with its fastavro form, and why the others cannot be used."""

    schemas: dict[int, tuple[WriterSchema, Any]]
    problems: dict[int, str]


def decode_record(key: bytes | None, value: bytes | None, book: SchemaBook) -> Change:
    """Decode one Kafka record with the writer schemas (parsed, and as fastavro parsed them) by id.

    Raises:
        NotTicdcAvro: the bytes are not a TiCDC Avro record, or name a schema id that is not known.
    """
    key_id = schema_id(key)
    if key_id is None or key is None:
        raise NotTicdcAvro("key is not in the Confluent wire format (magic byte 0, 4-byte schema id)")
    key_schema = _schema(key_id, book)
    if value is None:
        datum = _read(key, key_schema[1], key_id)
        data = {c.column.name: wire_text(datum.get(c.column.name), c) for c in key_schema[0].columns}
        return Change(key_schema[0].table, TYPE_DELETE, None, data, None, key_id)
    value_id = schema_id(value)
    if value_id is None:
        raise NotTicdcAvro("value is not in the Confluent wire format (magic byte 0, 4-byte schema id)")
    writer, parsed = _schema(value_id, book)
    datum = _read(value, parsed, value_id)
    op = datum.get(FIELD_OP)
    data = {c.column.name: wire_text(datum.get(c.column.name), c) for c in writer.columns}
    commit_ts = datum.get(FIELD_COMMIT_TS) if writer.has_extension else None
    if op == OP_DELETE:  # avro-include-before-value: a delete with a value and a commitTs
        before = datum.get("_ticdc_before") or {}
        data = {c.column.name: wire_text(before.get(c.column.name), c) for c in writer.columns}
        return Change(writer.table, TYPE_DELETE, commit_ts or None, data, value_id, key_id)
    typ = TYPE_UPDATE if op == OP_UPDATE else TYPE_INSERT
    checksum, corrupted = _checksum(datum)
    return Change(writer.table, typ, commit_ts or None, data, value_id, key_id, checksum, corrupted)


def _checksum(datum: Mapping[str, Any]) -> tuple[int | None, bool | None]:
    """The row checksum and TiCDC's verdict, where the writer schema has them; text that is not a number
    reads as a checksum no row can match, so the row is quarantined rather than taken as unchecked."""
    if FIELD_CHECKSUM not in datum:
        return None, None
    text = str(datum[FIELD_CHECKSUM] or "0")
    return (int(text) if text.isdigit() else -1), bool(datum.get(FIELD_CORRUPTED))


def classify(
    key: bytes | None, value: bytes | None, partition: int | None, book: SchemaBook
) -> tuple[str, str | None, Change | None]:
    """One Kafka record's kind, why it is bad (if it is), and its change (if it decodes)."""
    if partition is None:
        return c.KIND_BAD, c.NOT_A_RECORD, None
    try:
        return c.KIND_DML, None, decode_record(key, value, book)
    except NotTicdcAvro as exc:
        return c.KIND_BAD, f"TiCDC Avro: {exc}", None


def _schema(schema_id: int, book: SchemaBook) -> tuple[WriterSchema, Any]:
    found = book.schemas.get(schema_id)
    if found is None:
        reason = book.problems.get(schema_id, "the registry does not serve it")
        raise NotTicdcAvro(f"schema id {schema_id}: {reason}")
    return found


def _read(data: bytes, parsed: Any, schema_id: int) -> dict[str, Any]:
    try:
        datum = fastavro.schemaless_reader(io.BytesIO(data[HEADER_BYTES:]), parsed)
    except Exception as exc:  # fastavro raises many types (EOFError, UnicodeDecodeError, ...) on bad bytes
        raise NotTicdcAvro(
            f"body does not decode with schema {schema_id}: {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(datum, dict):
        raise NotTicdcAvro(f"body under schema {schema_id} is not a record")
    return datum


def wire_text(value: Any, column: AvroColumn) -> str | None:
    """An Avro value as the text the apply stage converts (as Canal-JSON, binary in base64)."""
    if value is None:
        return None
    kind = column.column.type.kind
    if isinstance(value, bytes):
        if kind is ColumnKind.BIT:
            return str(int.from_bytes(value, "big"))
        return base64.b64encode(value).decode("ascii")
    if kind is ColumnKind.ENUM and isinstance(value, str) and value in column.column.type.elements:
        # Canal-JSON's convention (1-based index), which apply turns back into the label: a label that
        # looks like a number (ENUM('1','2')) would otherwise be taken for an index.
        return str(column.column.type.elements.index(value) + 1)
    if kind is ColumnKind.SET and isinstance(value, str):
        members = set(value.split(",")) - {""}
        elements = column.column.type.elements
        if members <= set(elements):
            return str(sum(1 << i for i, e in enumerate(elements) if e in members))
        return value
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int):
        if kind is ColumnKind.BIGINT and column.column.type.unsigned and value < 0:
            return str(value + _TWO_TO_64)  # BIGINT UNSIGNED in "long" mode wraps
        return str(value)
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, float):
        # A binary32 FLOAT widened to a double prints digits the float cast reads back to the same value.
        return repr(value)
    return str(value)


def schema_book(texts: Mapping[int, str | None]) -> SchemaBook:
    """Parse the writer schemas the registry served (None: it does not know the id)."""
    book = SchemaBook({}, {})
    for sid, text in texts.items():
        if text is None:
            book.problems[sid] = "the registry does not know this schema id"
            continue
        try:
            writer = parse_writer_schema(sid, text)
            # TiCDC writes a DOUBLE column's DEFAULT 1e3 as the JSON number 1000 (and NOT NULL's 0 as 0),
            # which fastavro's check of defaults refuses for a double; decoding with the writer schema never
            # reads a default (the mirror reads them from the schema itself), so the check is skipped. The
            # parsed marker keeps the reader from parsing (and checking) the schema again per record.
            parsed = fastavro.parse_schema(orjson.loads(text), _ignore_default_error=True)
        except (NotTicdcAvro, UnknownTypeError) as exc:
            book.problems[sid] = str(exc)
            continue
        except (ValueError, KeyError, TypeError, SchemaParseException) as exc:  # fastavro: a malformed schema
            book.problems[sid] = f"not a valid Avro schema: {type(exc).__name__}: {exc}"
            continue
        book.schemas[sid] = (writer, parsed)
    return book
