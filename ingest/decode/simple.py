"""TiCDC Simple protocol (JSON and Avro flavours): wire names, the codec, control events. Pure.

Row messages carry no column types: they name a ``schemaVersion``, and the types
come from BOOTSTRAP and DDL messages (``tableSchema`` / ``preTableSchema``, read by ``simple_schema``),
which the mirror keeps in a schema cache keyed by (database, table, version). The codec (:func:`codec`)
is run on Spark executors by ``ingest.source.decoding``; only control messages and table schemas are
turned into model objects on the driver.

The Avro flavour is decoded into the same field names as the JSON one (``schema`` for the database name of a
table schema, values as JSON-flavour text), so everything after the executor-side decoding is shared.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

import orjson

from ingest.decode import codec as c
from ingest.decode.codec import (
    CONTROL_KINDS,
    KIND_BAD,
    KIND_BOOTSTRAP,
    KIND_DDL,
    KIND_DML,
    KIND_FATAL,
    KIND_WATERMARK,
    BinaryText,
    Codec,
    Control,
    Decoded,
    Rule,
    TypesFrom,
    Wire,
    WireType,
    field,
    present,
)
from ingest.decode.simple_schema import (
    COLUMN_DATA_TYPE,
    SCHEMA_COLUMNS,
    SCHEMA_DATABASE,
    SCHEMA_DATABASE_AVRO,
    SCHEMA_TABLE,
    view_name,
)

# Re-exported: the table-schema reading is part of what this protocol module offers.
from ingest.decode.simple_schema import column_type as column_type
from ingest.decode.simple_schema import handle_key as handle_key
from ingest.decode.simple_schema import parse_table_schema as parse_table_schema
from ingest.errors import DecodeError
from ingest.model import (
    DdlEvent,
    Position,
    TableId,
    Watermark,
)
from ingest.model import VersionedSchema as VersionedSchema  # re-exported: the schema cache's entries
from ingest.mysql.ddl import CreateDatabase, DropDatabase, Statement, ddl_event, parse_ddl

PROTOCOL = "simple"

FIELD_VERSION = "version"
FIELD_TYPE = "type"
FIELD_DATABASE = "database"
FIELD_TABLE = "table"
FIELD_TABLE_ID = "tableID"
FIELD_COMMIT_TS = "commitTs"
FIELD_BUILD_TS = "buildTs"
FIELD_SCHEMA_VERSION = "schemaVersion"
FIELD_SQL = "sql"
FIELD_DATA = "data"
FIELD_OLD = "old"
FIELD_HANDLE_KEY_ONLY = "handleKeyOnly"
FIELD_CLAIM_CHECK = "claimCheckLocation"
FIELD_CHECKSUM = "checksum"
FIELD_TABLE_SCHEMA = "tableSchema"
FIELD_PRE_TABLE_SCHEMA = "preTableSchema"

# With row checksums on: {"version", "corrupted", "current", "previous"}, CRC-32s of the new and old image.
CHECKSUM_CURRENT = "current"
CHECKSUM_PREVIOUS = "previous"
CHECKSUM_CORRUPTED = "corrupted"

# TIMESTAMP values are objects {"location": <IANA zone>, "value": <local time text>}.
TIMESTAMP_LOCATION = "location"
TIMESTAMP_VALUE = "value"

TYPE_INSERT = c.TYPE_INSERT
TYPE_UPDATE = c.TYPE_UPDATE
TYPE_DELETE = c.TYPE_DELETE
TYPE_WATERMARK = "WATERMARK"
TYPE_BOOTSTRAP = "BOOTSTRAP"
DML_TYPES = (TYPE_INSERT, TYPE_UPDATE, TYPE_DELETE)
DDL_TYPES = ("CREATE", "ALTER", "ERASE", "RENAME", "TRUNCATE", "CINDEX", "DINDEX", "QUERY")


@dataclass(frozen=True, slots=True)
class Bootstrap:
    """A BOOTSTRAP message: TiCDC announces a table's current schema; it has no place in commit order."""

    schema: VersionedSchema
    position: Position


def binary_to_wire(value: bytes) -> str:
    """Binary column values are standard padded base64 in the JSON flavour."""
    return base64.b64encode(value).decode("ascii")


# -- the codec ---------------------------------------------------------------------------------------------

# Nested objects (tableSchema, TIMESTAMP values) are read as text: their JSON.
ENVELOPE = (
    Wire(FIELD_TYPE, WireType.TEXT),
    Wire(FIELD_DATABASE, WireType.TEXT),
    Wire(FIELD_TABLE, WireType.TEXT),
    Wire(FIELD_COMMIT_TS, WireType.LONG),
    Wire(FIELD_SCHEMA_VERSION, WireType.LONG),
    Wire(FIELD_SQL, WireType.TEXT),
    Wire(FIELD_HANDLE_KEY_ONLY, WireType.BOOLEAN),
    Wire(FIELD_CLAIM_CHECK, WireType.TEXT),
    Wire(FIELD_DATA, WireType.ROW),
    Wire(FIELD_OLD, WireType.ROW),
    Wire(FIELD_TABLE_SCHEMA, WireType.TEXT),
    Wire(FIELD_PRE_TABLE_SCHEMA, WireType.TEXT),
    Wire(
        FIELD_CHECKSUM,
        (
            Wire(CHECKSUM_CURRENT, WireType.LONG),
            Wire(CHECKSUM_PREVIOUS, WireType.LONG),
            Wire(CHECKSUM_CORRUPTED, WireType.BOOLEAN),
        ),
    ),
)

_TYPE = field(FIELD_TYPE)
_COMMIT_TS = field(FIELD_COMMIT_TS)
_DATA, _OLD = field(FIELD_DATA), field(FIELD_OLD)
_IS_DML = c.In(_TYPE, DML_TYPES)
_IS_DDL = c.In(_TYPE, DDL_TYPES)
_IS_WATERMARK = c.Eq(_TYPE, TYPE_WATERMARK)
_IS_BOOTSTRAP = c.Eq(_TYPE, TYPE_BOOTSTRAP)
_IS_INSERT, _IS_UPDATE, _IS_DELETE = (c.Eq(_TYPE, t) for t in (TYPE_INSERT, TYPE_UPDATE, TYPE_DELETE))

RULES = (
    Rule(_IS_WATERMARK & c.IsNull(_COMMIT_TS), KIND_BAD, "WATERMARK without commitTs"),
    Rule(_IS_WATERMARK, KIND_WATERMARK),
    Rule(_IS_BOOTSTRAP & c.IsNull(field(FIELD_TABLE_SCHEMA)), KIND_BAD, "BOOTSTRAP without tableSchema"),
    Rule(_IS_BOOTSTRAP, KIND_BOOTSTRAP),
    Rule(_IS_DDL & c.IsNull(_COMMIT_TS), KIND_BAD, "DDL without commitTs"),
    Rule(_IS_DDL, KIND_DDL),
    Rule(_IS_DML & c.IsNull(_COMMIT_TS), KIND_BAD, "DML without commitTs"),
    Rule(
        _IS_DML & (c.IsNull(field(FIELD_DATABASE)) | c.IsNull(field(FIELD_TABLE))),
        KIND_BAD,
        "DML without database/table",
    ),
    Rule(_IS_DML & c.IsNull(field(FIELD_SCHEMA_VERSION)), KIND_BAD, "DML without schemaVersion"),
    # The claim-check location first: a Simple reference sets both it and handleKeyOnly.
    Rule(_IS_DML & present(field(FIELD_CLAIM_CHECK)), KIND_FATAL, c.CLAIM_CHECK_NOT_CONFIGURED),
    Rule(_IS_DML & c.IsTrue(field(FIELD_HANDLE_KEY_ONLY)), KIND_FATAL, c.HANDLE_KEY_ONLY),
    Rule(
        (_IS_DELETE & c.IsNull(_OLD))
        | (c.In(_TYPE, (TYPE_INSERT, TYPE_UPDATE)) & c.IsNull(_DATA))
        | (_IS_UPDATE & c.IsNull(_OLD)),
        KIND_BAD,
        "DML without its row image (data/old)",
    ),
    Rule(_IS_DML, KIND_DML),
)


def _schema_field(name: str) -> c.Expr:
    return c.JsonField(c.Coalesce((field(FIELD_TABLE_SCHEMA), field(FIELD_PRE_TABLE_SCHEMA))), name)


COLUMNS: tuple[tuple[str, c.Expr], ...] = (
    # DDL and BOOTSTRAP messages name their table only inside the table schema.
    ("database", c.Coalesce((field(FIELD_DATABASE), _schema_field(SCHEMA_DATABASE)))),
    ("table", c.Coalesce((field(FIELD_TABLE), _schema_field(SCHEMA_TABLE)))),
    ("type", _TYPE),
    ("commit_ts", _COMMIT_TS),
    ("sql", field(FIELD_SQL)),
    # Simple puts a DELETE's row in "old"; downstream, every change's row image is in "data".
    ("data", c.When(_IS_DELETE, _OLD, _DATA)),
    ("old", c.When(_IS_UPDATE, _OLD)),
    ("schema_version", field(FIELD_SCHEMA_VERSION)),
    ("table_schema", field(FIELD_TABLE_SCHEMA)),
    ("pre_table_schema", field(FIELD_PRE_TABLE_SCHEMA)),
    ("claim_check", field(FIELD_CLAIM_CHECK)),
    ("checksum_current", c.When(_IS_DML, field(FIELD_CHECKSUM, CHECKSUM_CURRENT))),
    ("checksum_previous", c.When(_IS_DML, field(FIELD_CHECKSUM, CHECKSUM_PREVIOUS))),
    ("checksum_corrupted", c.When(_IS_DML, field(FIELD_CHECKSUM, CHECKSUM_CORRUPTED))),
)


def _event(record: Decoded) -> DdlEvent | Watermark | Bootstrap:
    position, typ = record.position, record.type
    try:
        if record.kind == KIND_WATERMARK:
            assert record.commit_ts is not None  # the rules classify a watermark without it as bad
            return Watermark(record.commit_ts, position)
        if record.kind == KIND_BOOTSTRAP:
            assert record.table_schema is not None  # the rules classify a bootstrap without it as bad
            return Bootstrap(parse_table_schema(record.table_schema), position)
        assert record.commit_ts is not None  # the rules classify a DDL without it as bad
        sql = record.sql or ""
        handle_key = None
        view = next((view_name(raw) for raw in (record.table_schema, record.pre_table_schema) if raw), None)
        if view is not None:
            table = view
        elif record.table_schema is not None:
            announced = parse_table_schema(record.table_schema)
            table, handle_key = announced.table, announced.schema.key
        elif record.pre_table_schema is not None:
            table = parse_table_schema(record.pre_table_schema).table
        else:
            # Schema-level DDL names its database only inside the SQL: parsed here, once.
            statement = parse_ddl(sql, "")
            table = TableId(_database_of(statement), "")
            return DdlEvent(table, record.commit_ts, sql, typ or "", position, None, statement)
    except ValueError as exc:
        raise DecodeError(f"bad {typ} message: {exc}", protocol=PROTOCOL, position=position) from exc
    return ddl_event(table, record.commit_ts, sql, typ or "", position, handle_key)


def control(record: Decoded) -> Control:
    """The event of a classified WATERMARK, BOOTSTRAP or DDL record (none for a BOOTSTRAP, which has no
    place in commit order), and the table schemas it announces (post- and pre-DDL).

    Raises:
        DecodeError: a table schema is malformed.
    """
    event = _event(record)
    schemas = () if record.kind == KIND_WATERMARK else tuple(schemas_of(record))
    return Control(None if isinstance(event, Bootstrap) else event, schemas)


def _avro_transcoder() -> Callable[[bytes], bytes]:
    schema = avro_schema()
    return lambda value: avro_to_json(value, schema)


@cache
def codec(avro: bool = False) -> Codec:
    """Simple, in the JSON flavour or (``avro``) the Avro one, transcoded to JSON on the executors."""
    return Codec(
        name=PROTOCOL,
        types_from=TypesFrom.ANNOUNCED,
        has_watermarks=True,
        has_ddl=True,
        has_old_image=True,
        commit_ts_on_delete=True,
        binary_text=BinaryText.BASE64,
        envelope=ENVELOPE,
        columns=COLUMNS,
        rules=RULES,
        transcode=_avro_transcoder if avro else None,
        control=control,
        has_checksums=True,
    )


CODEC = codec()


def control_event(fields: Mapping[str, Any], position: Position) -> DdlEvent | Watermark | Bootstrap:
    """The model object of a WATERMARK, BOOTSTRAP or DDL message from its parsed top-level fields.

    ``tableSchema`` / ``preTableSchema`` may be given as objects or JSON text.

    Raises:
        DecodeError: a required field is missing or malformed (the rule's message says which).
    """
    record = c.read(CODEC, fields, position)
    if record.kind in (KIND_BAD, KIND_FATAL):
        raise DecodeError(record.error or "", protocol=PROTOCOL, position=position)
    if record.kind not in CONTROL_KINDS:
        raise DecodeError(
            f"not a control message: type {record.type!r}", protocol=PROTOCOL, position=position
        )
    return _event(record)


def _database_of(statement: Statement) -> str:
    if isinstance(statement, CreateDatabase | DropDatabase):
        return statement.schema
    return ""


def schemas_of(record: Decoded) -> list[VersionedSchema]:
    """Every table schema a control record carries, for the schema cache (post- and pre-DDL)."""
    result = []
    for raw in (record.table_schema, record.pre_table_schema):
        if raw is not None and view_name(raw) is None:
            result.append(parse_table_schema(raw))
    return result


# -- Avro flavour ---------------------------------------------------------------------------------------
# TiCDC's fixed schema (pkg/sink/codec/simple/message.json): a union of named types; every value is one
# datum of its "Message" branch, with no registry, magic byte or container header.
AVRO_SCHEMA_RESOURCE = "simple_avro_schema.json"
_MESSAGE_TYPE = "type"
_MESSAGE_PAYLOAD = "payload"
_UNSIGNED_BIGINT_VALUE = "value"
_TWO_TO_64 = 1 << 64


def avro_schema() -> Any:
    """The parsed Simple Avro schema (fastavro), loaded from the package."""
    from importlib.resources import files

    import fastavro

    text = files("ingest.decode").joinpath(AVRO_SCHEMA_RESOURCE).read_bytes()
    return fastavro.parse_schema(orjson.loads(text))


def avro_to_json(value: bytes, schema: Any) -> bytes:
    """One Simple Avro message -> the same message in the JSON flavour (names and value encoding).

    Everything after decoding is then shared with the JSON flavour. Values keep their exact meaning:
    UnsignedBigint's two's-complement long becomes the unsigned text, bytes become base64, Avro floats
    (binary32 widened to a double) become text that casts back to the same binary32.

    Raises:
        ValueError: the bytes are not a Simple Avro message.
    """
    import io

    import fastavro

    try:
        # TiCDC writes a column's DEFAULT into an Avro string as it holds it, bytes that are not UTF-8
        # included (VARBINARY … DEFAULT x'00ff'); the JSON flavour's encoder turns each such byte into U+FFFD,
        # and so does this.
        datum = fastavro.schemaless_reader(io.BytesIO(value), schema, handle_unicode_errors="replace")
    except Exception as exc:  # fastavro raises many types (EOFError, UnicodeDecodeError, ...) on bad bytes
        raise ValueError(f"not a Simple Avro message: {type(exc).__name__}: {exc}") from exc
    if not isinstance(datum, dict) or _MESSAGE_PAYLOAD not in datum:
        raise ValueError("not a Simple Avro Message record")
    kind, payload = datum[_MESSAGE_TYPE], datum[_MESSAGE_PAYLOAD]
    message: dict[str, Any] = {
        FIELD_VERSION: payload.get(FIELD_VERSION),
        FIELD_BUILD_TS: payload.get(FIELD_BUILD_TS),
    }
    if kind == TYPE_WATERMARK:
        message.update({FIELD_TYPE: TYPE_WATERMARK, FIELD_COMMIT_TS: payload[FIELD_COMMIT_TS]})
    elif kind == TYPE_BOOTSTRAP:
        message.update(
            {FIELD_TYPE: TYPE_BOOTSTRAP, FIELD_TABLE_SCHEMA: _table_schema_json(payload[FIELD_TABLE_SCHEMA])}
        )
    elif kind == "DDL":
        message.update(
            {
                FIELD_TYPE: payload[FIELD_TYPE],
                FIELD_SQL: payload[FIELD_SQL],
                FIELD_COMMIT_TS: payload[FIELD_COMMIT_TS],
            }
        )
        for name in (FIELD_TABLE_SCHEMA, FIELD_PRE_TABLE_SCHEMA):
            if payload.get(name) is not None:
                message[name] = _table_schema_json(payload[name])
    else:
        message.update(
            {
                FIELD_TYPE: payload[FIELD_TYPE],
                FIELD_DATABASE: payload[FIELD_DATABASE],
                FIELD_TABLE: payload[FIELD_TABLE],
                FIELD_TABLE_ID: payload[FIELD_TABLE_ID],
                FIELD_COMMIT_TS: payload[FIELD_COMMIT_TS],
                FIELD_SCHEMA_VERSION: payload[FIELD_SCHEMA_VERSION],
            }
        )
        for name in (FIELD_CLAIM_CHECK, FIELD_HANDLE_KEY_ONLY, FIELD_CHECKSUM):
            if payload.get(name) is not None:
                message[name] = payload[name]
        for name in (FIELD_DATA, FIELD_OLD):
            if payload.get(name) is not None:
                message[name] = {k: _json_value(v) for k, v in payload[name].items()}
    return orjson.dumps(message)


def _json_value(value: Any) -> Any:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, bytes):
        return binary_to_wire(value)
    if isinstance(value, dict):
        if TIMESTAMP_LOCATION in value:
            return {TIMESTAMP_LOCATION: value[TIMESTAMP_LOCATION], TIMESTAMP_VALUE: value[TIMESTAMP_VALUE]}
        number = int(value[_UNSIGNED_BIGINT_VALUE])
        return str(number + _TWO_TO_64 if number < 0 else number)
    raise ValueError(f"unexpected Simple Avro value {value!r}")


def _table_schema_json(schema: Mapping[str, Any]) -> dict[str, Any]:
    result = {k: v for k, v in schema.items() if k != SCHEMA_DATABASE_AVRO}
    result[SCHEMA_DATABASE] = schema[SCHEMA_DATABASE_AVRO]
    result[SCHEMA_COLUMNS] = [
        {**c, COLUMN_DATA_TYPE: {k: v for k, v in c[COLUMN_DATA_TYPE].items() if v is not None}}
        for c in schema.get(SCHEMA_COLUMNS) or ()
    ]
    return result
