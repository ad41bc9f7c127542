"""A tiny upstream TiDB and the TiCDC stream it produces. Pure; used by the demo and the tests.

``Stream`` records committed changes as TiCDC would emit them, in Canal-JSON (``enable-tidb-extension=true``:
DDL on partition 0 only) or in the Simple protocol, JSON flavour (DDL broadcast to every partition, a
BOOTSTRAP ahead of a table's first row on every partition, rows naming their schema version): one Kafka
record per event, rows routed to partitions by key hash (``index-value`` dispatch), watermarks broadcast to
every partition. It also keeps its own model of the upstream tables, so a test can ask for the upstream
state at any TSO without trusting the code under test.

``build_sample()`` is the bundled demo stream; ``python -m testkit.sample DIR`` writes it.
"""

from __future__ import annotations

import base64
import hashlib
import io
import random
import struct
import sys
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import fastavro
import orjson

from ingest.decode import canal_json as cj
from ingest.decode import simple as sp
from ingest.decode.compression import Compression, compress
from ingest.model import (
    Column,
    ColumnKind,
    ColumnType,
    TableId,
    TableSchema,
    tso_from_datetime,
    tso_to_datetime,
)
from ingest.mysql.ddl import CreateTable, parse_ddl
from ingest.mysql.types import parse_mysql_type
from testkit.ddl_spelling import respell

Row = dict[str, Any]
Key = tuple[Any, ...]


def wire_text(value: Any, column_type: ColumnType, tz: ZoneInfo) -> str | None:
    """A Python value as Canal-JSON puts it in ``data``/``old``."""
    if value is None:
        return None
    kind = column_type.kind
    if kind in (ColumnKind.BINARY, ColumnKind.VARBINARY, ColumnKind.BLOB):
        return cj.binary_to_wire(bytes(value))
    if kind is ColumnKind.ENUM and isinstance(value, str):
        # Upstream holds the label; the wire carries its 1-based index ("" is index 0).
        return str(column_type.elements.index(value) + 1 if value else 0)
    if kind is ColumnKind.SET and isinstance(value, str):
        members = {m for m in value.split(",") if m}
        return str(sum(1 << i for i, e in enumerate(column_type.elements) if e in members))
    if isinstance(value, str):
        return value  # e.g. zero dates ("0000-00-00"), TIME beyond 24h: sent verbatim
    if kind is ColumnKind.DECIMAL:
        scale = column_type.scale or 0
        return f"{Decimal(value):.{scale}f}"
    if kind is ColumnKind.FLOAT:
        return _fixed(_shortest_float32(float(value)))
    if kind is ColumnKind.DOUBLE:
        return _fixed(repr(float(value)))
    if kind is ColumnKind.DATETIME:
        return _datetime_text(value, column_type.length or 0)
    if kind is ColumnKind.TIMESTAMP:
        local = value.astimezone(tz).replace(tzinfo=None)
        return _datetime_text(local, column_type.length or 0)
    if kind is ColumnKind.DATE:
        return value.isoformat() if isinstance(value, date) else str(value)
    return str(value)


def simple_wire_value(value: Any, column_type: ColumnType, tz_name: str) -> Any:
    """A Python value as the Simple protocol's JSON flavour puts it in ``data``/``old``."""
    if value is None:
        return None
    kind = column_type.kind
    if kind in (ColumnKind.BINARY, ColumnKind.VARBINARY, ColumnKind.BLOB):
        return sp.binary_to_wire(bytes(value))
    if kind is ColumnKind.TIMESTAMP:
        return {
            sp.TIMESTAMP_LOCATION: tz_name,
            sp.TIMESTAMP_VALUE: wire_text(value, column_type, ZoneInfo(tz_name)),
        }
    return wire_text(value, column_type, ZoneInfo(tz_name))


_AVRO = "com.pingcap.simple.avro."
_INTEGER_KINDS = (
    ColumnKind.TINYINT, ColumnKind.SMALLINT, ColumnKind.MEDIUMINT, ColumnKind.INT, ColumnKind.BIGINT,
    ColumnKind.YEAR, ColumnKind.BIT,
)  # fmt: skip


def simple_avro_value(value: Any, column_type: ColumnType, tz_name: str) -> Any:
    """A Python value as a Simple Avro ``data``/``old`` union branch, as a fastavro (name, value)."""
    if value is None:
        return None
    kind = column_type.kind
    if kind is ColumnKind.BIGINT and column_type.unsigned:
        wrapped = int(value) - (1 << 64) if int(value) >= 1 << 63 else int(value)
        return (_AVRO + "UnsignedBigint", {"value": wrapped})
    if kind is ColumnKind.BIT:
        number = int(value)
        return ("long", number - (1 << 64) if number >= 1 << 63 else number)
    if kind in _INTEGER_KINDS:
        return ("long", int(value))
    if kind in (ColumnKind.ENUM, ColumnKind.SET):
        return ("long", int(wire_text(value, column_type, ZoneInfo(tz_name)) or 0))
    if kind is ColumnKind.FLOAT:
        return ("float", float(value))
    if kind is ColumnKind.DOUBLE:
        return ("double", float(value))
    if kind in (ColumnKind.BINARY, ColumnKind.VARBINARY, ColumnKind.BLOB):
        return ("bytes", bytes(value))
    if kind is ColumnKind.TIMESTAMP:
        return (_AVRO + "Timestamp", simple_wire_value(value, column_type, tz_name))
    return ("string", wire_text(value, column_type, ZoneInfo(tz_name)))


def _avro_table_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    def data_type(d: Mapping[str, Any]) -> dict[str, Any]:
        numeric = d["charset"] == "binary" and d["mysqlType"] not in ("binary", "varbinary", "blob")
        return {
            "mysqlType": d["mysqlType"], "charset": d["charset"], "collate": d["collate"],
            "length": d.get("length", -1),
            "decimal": d.get("decimal") if d["mysqlType"] == "decimal" else None,
            "elements": d.get("elements"),
            "unsigned": bool(d.get("unsigned")) if numeric else None,
            "zerofill": False if numeric else None,
        }  # fmt: skip

    return {
        "database": schema["schema"], "table": schema["table"], "tableID": schema["tableID"],
        "version": schema["version"],
        "columns": [
            {"name": c["name"], "dataType": data_type(c["dataType"]), "nullable": c["nullable"],
             "default": None if c["default"] is None else str(c["default"])}
            for c in schema["columns"]
        ],
        "indexes": schema["indexes"],
    }  # fmt: skip


def _simple_avro_bytes(message: Mapping[str, Any]) -> bytes:
    """A Simple message (JSON-flavour dict; row values already Avro branches) as TiCDC's Avro bytes."""
    import io

    import fastavro

    typ = message["type"]
    base = {"version": 1, "buildTs": message["buildTs"]}
    if typ == sp.TYPE_WATERMARK:
        kind, payload = "WATERMARK", ("Watermark", {**base, "commitTs": message["commitTs"]})
    elif typ == sp.TYPE_BOOTSTRAP:
        kind = "BOOTSTRAP"
        payload = ("Bootstrap", {**base, "tableSchema": _avro_table_schema(message["tableSchema"])})
    elif typ in sp.DML_TYPES:
        kind = "DML"
        payload = ("DML", {
            **base, "database": message["database"], "table": message["table"], "tableID": message["tableID"],
            "type": typ, "commitTs": message["commitTs"], "schemaVersion": message["schemaVersion"],
            "claimCheckLocation": message.get("claimCheckLocation"),
            "handleKeyOnly": message.get("handleKeyOnly"), "checksum": None,
            "data": message.get("data"), "old": message.get("old"),
        })  # fmt: skip
    else:
        kind = "DDL"
        payload = ("DDL", {
            **base, "type": typ, "sql": message["sql"], "commitTs": message["commitTs"],
            "tableSchema": _avro_table_schema(message["tableSchema"]) if "tableSchema" in message else None,
            "preTableSchema": (
                _avro_table_schema(message["preTableSchema"]) if "preTableSchema" in message else None
            ),
        })  # fmt: skip
    buffer = io.BytesIO()
    datum = {"type": kind, "payload": (_AVRO + payload[0], payload[1])}
    fastavro.schemaless_writer(buffer, sp.avro_schema(), (_AVRO + "Message", datum))
    return buffer.getvalue()


_BINARY_KINDS = (ColumnKind.BINARY, ColumnKind.VARBINARY, ColumnKind.BLOB)
_TEXT_KINDS = (ColumnKind.CHAR, ColumnKind.VARCHAR, ColumnKind.TEXT, ColumnKind.ENUM, ColumnKind.SET)


def simple_data_type(column_type: ColumnType) -> dict[str, Any]:
    """A ColumnType as a Simple ``dataType`` object (JSON flavour: zero/false/empty fields omitted)."""
    kind = column_type.kind
    text = kind in _TEXT_KINDS
    result: dict[str, Any] = {
        "mysqlType": kind.value,
        "charset": "utf8mb4" if text else "binary",
        "collate": "utf8mb4_bin" if text else "binary",
    }
    if kind is ColumnKind.DECIMAL:
        result["length"] = column_type.precision or 10
        if column_type.scale:
            result["decimal"] = column_type.scale
    elif kind in (ColumnKind.DATETIME, ColumnKind.TIMESTAMP, ColumnKind.TIME):
        result["length"] = 19
        if column_type.length:
            result["decimal"] = column_type.length
    elif column_type.length:
        result["length"] = column_type.length
    if column_type.elements:
        result["elements"] = list(column_type.elements)
    if column_type.unsigned:
        result["unsigned"] = True
    return result


def _default_value(column: Column) -> Any:
    if not column.has_default or column.default is None:
        return None
    text = column.default
    return text[1:-1].replace("''", "'") if text.startswith("'") and text.endswith("'") else text


def _shortest_float32(value: float) -> str:
    packed = struct.pack("<f", value)
    for digits in range(1, 10):
        text = f"{value:.{digits}g}"
        try:
            if struct.pack("<f", float(text)) == packed:
                return text
        except OverflowError:  # rounding up past FLT_MAX; more digits are needed
            continue
    return repr(value)


def _fixed(text: str) -> str:
    formatted = format(Decimal(text), "f")
    return formatted


def _datetime_text(moment: datetime, fsp: int) -> str:
    text = moment.strftime("%Y-%m-%d %H:%M:%S")
    if fsp:
        text += "." + f"{moment.microsecond:06d}"[:fsp]
    return text


# -- TiCDC Avro (Confluent wire format) ---------------------------------------------------------------
_AVRO_SMALL_INTS = (ColumnKind.TINYINT, ColumnKind.SMALLINT, ColumnKind.MEDIUMINT)


def ticdc_avro_type(column_type: ColumnType) -> dict[str, Any]:
    """The Avro type TiCDC writes for a column: the primitive plus ``connect.parameters``."""
    kind, unsigned = column_type.kind, column_type.unsigned
    parameters: dict[str, str]
    if kind in _AVRO_SMALL_INTS or (kind is ColumnKind.INT and not unsigned):
        primitive, parameters = "int", {"tidb_type": "INT UNSIGNED" if unsigned else "INT"}
    elif kind is ColumnKind.INT:
        primitive, parameters = "long", {"tidb_type": "INT UNSIGNED"}
    elif kind is ColumnKind.BIGINT:
        primitive, parameters = "long", {"tidb_type": "BIGINT UNSIGNED" if unsigned else "BIGINT"}
    elif kind is ColumnKind.DECIMAL:
        return {
            "type": "bytes", "logicalType": "decimal", "precision": column_type.precision or 10,
            "scale": column_type.scale or 0, "connect.parameters": {"tidb_type": "DECIMAL"},
        }  # fmt: skip
    elif kind in (ColumnKind.FLOAT, ColumnKind.DOUBLE):
        primitive, parameters = kind.value, {"tidb_type": kind.value.upper()}
    elif kind in (ColumnKind.CHAR, ColumnKind.VARCHAR, ColumnKind.TEXT):
        primitive, parameters = "string", {"tidb_type": "TEXT"}
    elif kind in (ColumnKind.BINARY, ColumnKind.VARBINARY, ColumnKind.BLOB):
        primitive, parameters = "bytes", {"tidb_type": "BLOB"}
    elif kind in (ColumnKind.ENUM, ColumnKind.SET):
        allowed = ",".join(e.replace(",", "\\,") for e in column_type.elements)
        primitive, parameters = "string", {"tidb_type": kind.value.upper(), "allowed": allowed}
    elif kind is ColumnKind.BIT:
        primitive, parameters = "bytes", {"tidb_type": "BIT", "length": str(column_type.length or 1)}
    elif kind is ColumnKind.YEAR:
        primitive, parameters = "int", {"tidb_type": "YEAR"}
    elif kind is ColumnKind.VECTOR:
        primitive, parameters = "string", {"tidb_type": "TiDBVECTORFloat32"}
    else:  # DATE, DATETIME, TIMESTAMP, TIME, JSON: text
        primitive, parameters = "string", {"tidb_type": kind.value.upper()}
    return {"type": primitive, "connect.parameters": parameters}


def ticdc_avro_value(value: Any, column_type: ColumnType, tz: ZoneInfo) -> Any:
    """A Python value as TiCDC's Avro encoder writes it."""
    if value is None:
        return None
    kind = column_type.kind
    if kind is ColumnKind.BIGINT and column_type.unsigned:
        number = int(value)
        return number - (1 << 64) if number >= 1 << 63 else number  # "long" mode wraps
    if kind is ColumnKind.BIT:
        number = int(value)
        return number.to_bytes(max(1, (number.bit_length() + 7) // 8), "big")
    if kind in (*_AVRO_SMALL_INTS, ColumnKind.INT, ColumnKind.BIGINT, ColumnKind.YEAR):
        return int(value)
    if kind is ColumnKind.DECIMAL:
        return Decimal(value)
    if kind in (ColumnKind.FLOAT, ColumnKind.DOUBLE):
        return float(value)
    if kind in (ColumnKind.BINARY, ColumnKind.VARBINARY, ColumnKind.BLOB):
        return bytes(value)
    if kind is ColumnKind.SET and isinstance(value, str):
        members = set(value.split(","))
        return ",".join(e for e in column_type.elements if e in members)
    if kind is ColumnKind.ENUM:
        return str(value)
    return wire_text(value, column_type, tz)


def _avro_default(value: Any, column_type: ColumnType, tz: ZoneInfo) -> Any:
    """A column DEFAULT as an Avro field default, as TiCDC writes it: bytes as base64 text (Go's JSON encoding
    of a byte slice), not the Avro specification's one character per byte."""
    encoded = ticdc_avro_value(value, column_type, tz)
    if isinstance(encoded, bytes):
        return base64.b64encode(encoded).decode()
    return encoded


def confluent_frame(schema_id: int, schema: Any, datum: Mapping[str, Any]) -> bytes:
    """Magic byte 0, the 4-byte big-endian schema id, then the Avro binary body."""
    body = io.BytesIO()
    fastavro.schemaless_writer(body, fastavro.parse_schema(schema), dict(datum))
    return b"\x00" + schema_id.to_bytes(4, "big") + body.getvalue()


def ticdc_avro_subject(topic: str, part: str) -> str:
    """TiCDC's subject: the topic with every dot made an underscore, then ``-key``/``-value``."""
    return f"{topic.replace('.', '_')}-{part}"


@dataclass
class _Table:
    schema: TableSchema
    columns: dict[str, ColumnType]
    added_at: dict[str, int] = field(default_factory=dict)
    # (ts, column names after the CREATE or column DDL at ts); table_columns(at=) reads the last one <= at.
    reshaped: list[tuple[int, tuple[str, ...]]] = field(default_factory=list)
    # Every type a column name ever had (DROP keeps it here, for questions about the past).
    types_ever: dict[str, ColumnType] = field(default_factory=dict)
    # DEFAULTs of columns added with one (TiCDC Avro puts them in the writer schema).
    defaults: dict[str, Any] = field(default_factory=dict)

    def key_of(self, row: Mapping[str, Any]) -> Key:
        return tuple(row[k] for k in self.schema.key)

    def mysql_types(self, names: Iterable[str]) -> dict[str, str]:
        return {n: _mysql_type_text(self.columns[n]) for n in names}


def _mysql_type_text(column_type: ColumnType) -> str:
    # Default (non content-compatible) mysqlType: bare type name, then "unsigned".
    text = column_type.kind.value
    if column_type.kind in (ColumnKind.TEXT,) and column_type.length is not None:
        text = "text"
    return text + (" unsigned" if column_type.unsigned else "")


def _sql_type_code(column_type: ColumnType) -> int:
    codes = {
        ColumnKind.TINYINT: -6, ColumnKind.SMALLINT: 5, ColumnKind.MEDIUMINT: 4, ColumnKind.INT: 4,
        ColumnKind.BIGINT: -5, ColumnKind.FLOAT: 7, ColumnKind.DOUBLE: 8, ColumnKind.DECIMAL: 3,
        ColumnKind.CHAR: 1, ColumnKind.VARCHAR: 12, ColumnKind.TEXT: 2005, ColumnKind.BINARY: 2004,
        ColumnKind.VARBINARY: 2004, ColumnKind.BLOB: 2004, ColumnKind.DATE: 91, ColumnKind.DATETIME: 93,
        ColumnKind.TIMESTAMP: 93, ColumnKind.TIME: 92, ColumnKind.YEAR: 12, ColumnKind.ENUM: 4,
        ColumnKind.SET: -7, ColumnKind.BIT: -7, ColumnKind.JSON: 12,
    }  # fmt: skip
    return codes.get(column_type.kind, 12)


@dataclass(frozen=True)
class RangePartitions:
    """RANGE partitioning on one column, as the model computes it: ``bounds`` are (name, value the rows
    stay below, or None for MAXVALUE), ascending. NULL sorts below every value (first partition)."""

    column: str
    bounds: tuple[tuple[str, Any], ...]

    def clause(self) -> str:
        parts = ", ".join(
            f"PARTITION `{n}` VALUES LESS THAN " + ("MAXVALUE" if b is None else f"({_sql_literal(b)})")
            for n, b in self.bounds
        )
        return f"PARTITION BY RANGE (`{self.column}`) ({parts})"

    def partition_of(self, row: Mapping[str, Any]) -> str | None:
        value = row.get(self.column)
        for name, bound in self.bounds:
            if value is None or bound is None or value < bound:
                return name
        return None

    def without(self, names: Sequence[str]) -> RangePartitions:
        return RangePartitions(self.column, tuple((n, b) for n, b in self.bounds if n not in names))


@dataclass(frozen=True)
class ListPartitions:
    """LIST COLUMNS partitioning on one column: (name, values); None in values takes NULL."""

    column: str
    lists: tuple[tuple[str, tuple[Any, ...]], ...]

    def clause(self) -> str:
        parts = ", ".join(
            f"PARTITION `{n}` VALUES IN ({', '.join(_sql_literal(v) for v in values)})"
            for n, values in self.lists
        )
        return f"PARTITION BY LIST COLUMNS(`{self.column}`) ({parts})"

    def partition_of(self, row: Mapping[str, Any]) -> str | None:
        value = row.get(self.column)
        return next((n for n, values in self.lists if value in values), None)

    def without(self, names: Sequence[str]) -> ListPartitions:
        return ListPartitions(self.column, tuple((n, v) for n, v in self.lists if n not in names))


@dataclass(frozen=True)
class HashPartitions:
    """HASH partitioning on one integer column, ``count`` partitions p0 … p<count-1>: TiDB takes
    ``value % count`` (the sign of the value, as in Go) and negates a negative result; NULL goes to p0."""

    column: str
    count: int

    def clause(self) -> str:
        return f"PARTITION BY HASH (`{self.column}`) PARTITIONS {self.count}"

    def partition_of(self, row: Mapping[str, Any]) -> str | None:
        value = row.get(self.column)
        if value is None:
            return "p0"
        # Go's value % count carries the value's sign, and TiDB negates a negative result.
        return f"p{abs(value) % self.count}"

    def without(self, names: Sequence[str]) -> HashPartitions:
        raise AssertionError("DROP PARTITION is not for HASH partitions")


Partitions = RangePartitions | ListPartitions | HashPartitions


def _sql_literal(value: Any) -> str:
    if value is None:
        return "NULL"
    return f"'{value.isoformat()}'" if isinstance(value, date) else str(value)


@dataclass(frozen=True)
class _Change:
    ts: int
    seq: int
    table: TableId
    action: str  # "put", "delete", "truncate", "add_column"
    key: Key = ()
    row: Row | None = None
    column: str = ""
    default: Any = None


@dataclass
class Stream:
    """Builds a TiCDC stream (Canal-JSON, or Simple JSON) and remembers the upstream truth."""

    topic: str = "tidb_cdc"
    partitions: int = 2
    tz_name: str = "UTC"
    start: datetime = datetime(2026, 11, 20, 9, 0, 0, tzinfo=timezone.utc)
    records: list[dict[str, Any]] = field(default_factory=list)
    _offsets: dict[tuple[str, int], int] = field(default_factory=dict)  # next offset per (topic, partition)
    _tables: dict[TableId, _Table] = field(default_factory=dict)
    _changes: list[_Change] = field(default_factory=list)
    _clock_ms: int = 0
    _announced: dict[int, int] = field(default_factory=dict)
    protocol: str = "canal-json"  # or "simple", or "avro" (TiCDC Avro: one topic per table)
    encoding: str = "json"  # Simple only: "json" or "avro"
    compression: Compression = Compression.NONE
    # Claim-check: where TiCDC writes the full messages of rows sent with large=True.
    claim_check_dir: Path | None = None
    claim_check_raw: bool = False
    _large: bool = False
    _versions: dict[TableId, int] = field(default_factory=dict)
    _bootstrapped: set[TableId] = field(default_factory=set)
    # TiCDC Avro: registers a schema under a subject and returns its id (a schema registry's POST).
    register: Callable[[str, str], int] | None = None
    _registered: dict[tuple[str, str], int] = field(default_factory=dict)
    _partitions: dict[TableId, Partitions] = field(default_factory=dict)
    # When set, CREATE TABLE and ADD COLUMN texts are spelt again in TiDB's varied forms (same meaning).
    ddl_seed: int | None = None
    _spelling: random.Random | None = None

    # -- time -------------------------------------------------------------------------------------------
    def tso(self, seconds: float) -> int:
        """The TSO ``seconds`` after the stream's start (logical part 0)."""
        return tso_from_datetime(self.start + timedelta(seconds=seconds))

    # -- raw records ------------------------------------------------------------------------------------
    def append_raw(
        self, partition: int, value: bytes | None, key: bytes | None = None, topic: str | None = None
    ) -> int:
        """Append one record to a partition (of the stream's topic, unless given); returns its offset."""
        topic = topic or self.topic
        offset = self._offsets.get((topic, partition), 0)
        self._offsets[(topic, partition)] = offset + 1
        self._clock_ms += 7
        self.records.append(
            {
                "topic": topic,
                "partition": partition,
                "offset": offset,
                "timestamp": int(self.start.timestamp() * 1000) + self._clock_ms,
                "key": base64.b64encode(key).decode() if key is not None else None,
                "value": base64.b64encode(value).decode() if value is not None else None,
            }
        )
        return offset

    def append_message(self, partition: int, message: Mapping[str, Any]) -> int:
        if self.protocol == "simple" and self.encoding == "avro":
            value = _simple_avro_bytes(message)
        else:
            value = orjson.dumps(message)
        return self.append_raw(partition, compress(value, self.compression))

    def replay(self, partition: int, first_offset: int, last_offset: int, topic: str | None = None) -> None:
        """Re-send records of a partition (TiCDC at-least-once), at new offsets."""
        topic = topic or self.topic
        again = [
            r for r in self.records
            if (r["topic"], r["partition"]) == (topic, partition)
            and first_offset <= r["offset"] <= last_offset
        ]  # fmt: skip
        for record in again:
            value = base64.b64decode(record["value"]) if record["value"] else None
            key = base64.b64decode(record["key"]) if record["key"] else None
            self.append_raw(partition, value, key, topic)

    # -- DDL ---------------------------------------------------------------------------------------------
    def ddl(
        self, schema: str, table: str, sql: str, ts: int, ddl_type: str = "QUERY", change: Any = None
    ) -> None:
        """A DDL message (Canal-JSON: on partition 0; Simple: on every partition) and its effect on the model.

        ``change`` updates the model for DDLs other than CREATE TABLE, before the post-DDL schema is taken.
        """
        statement = parse_ddl(sql, schema)
        table_id = TableId(schema, table)
        pre = self._simple_table_schema(table_id) if table_id in self._tables else None
        if isinstance(statement, CreateTable):
            ddl_type = "CREATE"
            table_id = statement.table
            pre = None
            self._tables[statement.table] = _Table(
                statement.schema,
                {c.name: c.type for c in statement.schema.columns},
                reshaped=[(ts, tuple(c.name for c in statement.schema.columns))],
            )
        self._emit_ddl(table_id, sql, ts, ddl_type, pre, change)

    def _emit_ddl(
        self,
        table: TableId,
        sql: str,
        ts: int,
        ddl_type: str,
        pre: dict[str, Any] | None,
        change: Any = None,
    ) -> None:
        if change is not None:
            change()
        if self.protocol == "avro":
            return  # Avro carries no DDL: the next row's writer schema shows the change
        if self.protocol != "simple":
            self.append_message(
                0, self._envelope(table.schema, table.table, ddl_type, ts, sql=sql, is_ddl=True)
            )
            return
        message: dict[str, Any] = {
            "version": 1, "type": ddl_type, "sql": sql, "commitTs": ts, "buildTs": (ts >> 18) + 3,
        }  # fmt: skip
        if table in self._tables and table.table:
            self._versions[table] = ts
            message["tableSchema"] = self._simple_table_schema(table)
            if pre is not None:
                message["preTableSchema"] = pre
        for p in range(self.partitions):
            self.append_message(p, message)

    def _simple_table_schema(self, table: TableId) -> dict[str, Any]:
        entry = self._tables[table]
        return {
            "schema": table.schema,
            "table": table.table,
            "tableID": 100 + sorted(self._tables).index(table),
            "version": self._versions.get(table, 1),
            "columns": [
                {
                    "name": c.name,
                    "dataType": simple_data_type(entry.columns[c.name]),
                    "nullable": c.nullable,
                    "default": _default_value(c),
                }
                for c in entry.schema.columns
            ],
            "indexes": [
                {
                    "name": "primary",
                    "unique": True,
                    "primary": True,
                    "nullable": False,
                    "columns": list(entry.schema.key),
                },
            ],
        }

    def create_table(self, sql: str, ts: int, partitions: Partitions | None = None) -> TableId:
        """CREATE TABLE; with ``partitions``, its PARTITION BY clause is appended and the model follows it."""
        sql = self._respelt(sql, "")
        if partitions is not None:
            sql = f"{sql}\n{partitions.clause()}"
        statement = parse_ddl(sql, "")
        assert isinstance(statement, CreateTable), sql
        self.ddl(statement.table.schema, statement.table.table, sql, ts, "CREATE")
        if partitions is not None:
            self._partitions[statement.table] = partitions
        return statement.table

    def truncate_partition(self, table: TableId, names: Sequence[str], ts: int) -> None:
        """ALTER TABLE … TRUNCATE PARTITION: the rows the model puts in those partitions are gone."""
        self._partition_ddl(table, "TRUNCATE", names, ts)

    def drop_partition(self, table: TableId, names: Sequence[str], ts: int) -> None:
        """ALTER TABLE … DROP PARTITION: rows gone, and the partitions too (RANGE neighbours take over)."""
        self._partition_ddl(table, "DROP", names, ts)
        self._partitions[table] = self._partitions[table].without(names)

    def add_partition(self, table: TableId, partition: tuple[str, Any], ts: int) -> None:
        """ALTER TABLE … ADD PARTITION: (name, bound) for RANGE, (name, values) for LIST; no row changes."""
        spec = self._partitions[table]
        name, value = partition
        assert not isinstance(spec, HashPartitions), "ADD PARTITION (…) is for RANGE and LIST"
        if isinstance(spec, RangePartitions):
            definition = "VALUES LESS THAN " + ("MAXVALUE" if value is None else f"({_sql_literal(value)})")
            self._partitions[table] = RangePartitions(spec.column, (*spec.bounds, partition))
        else:
            definition = f"VALUES IN ({', '.join(_sql_literal(v) for v in value)})"
            self._partitions[table] = ListPartitions(spec.column, (*spec.lists, partition))
        sql = f"ALTER TABLE `{table.schema}`.`{table.table}` ADD PARTITION (PARTITION `{name}` {definition})"
        self.ddl(table.schema, table.table, sql, ts, "ALTER")

    def _partition_ddl(self, table: TableId, verb: str, names: Sequence[str], ts: int) -> None:
        listed = ", ".join(f"`{n}`" for n in names)
        sql = f"ALTER TABLE `{table.schema}`.`{table.table}` {verb} PARTITION {listed}"
        self.ddl(table.schema, table.table, sql, ts, "ALTER")
        spec = self._partitions[table]
        self._changes.append(
            _Change(
                ts, len(self._changes), table, "delete_partitions", row={"spec": spec, "names": tuple(names)}
            )
        )

    def add_column(
        self, table: TableId, sql: str, ts: int, name: str, type_text: str, default: Any = None
    ) -> None:
        """ALTER TABLE ... ADD COLUMN; existing rows read ``default`` upstream afterwards."""

        def change() -> None:
            entry = self._tables[table]
            column_type = parse_mysql_type(type_text)
            entry.columns[name] = column_type
            entry.added_at[name] = ts
            if default is not None:
                entry.defaults[name] = default
            entry.schema = TableSchema((*entry.schema.columns, Column(name, column_type)), entry.schema.key)
            entry.reshaped.append((ts, tuple(c.name for c in entry.schema.columns)))

        self.ddl(table.schema, table.table, self._respelt(sql, table.schema), ts, "ALTER", change)
        self._changes.append(
            _Change(ts, len(self._changes), table, "add_column", column=name, default=default)
        )

    def _respelt(self, sql: str, default_schema: str) -> str:
        if self.ddl_seed is None:
            return sql
        if self._spelling is None:
            self._spelling = random.Random(self.ddl_seed)
        return respell(sql, default_schema, self._spelling)

    def drop_column(self, table: TableId, name: str, ts: int) -> None:
        """ALTER TABLE ... DROP COLUMN (not a key column)."""

        def change() -> None:
            entry = self._tables[table]
            entry.types_ever.setdefault(name, entry.columns.pop(name))
            entry.schema = TableSchema(
                tuple(c for c in entry.schema.columns if c.name != name), entry.schema.key
            )
            entry.reshaped.append((ts, tuple(c.name for c in entry.schema.columns)))

        sql = f"ALTER TABLE `{table.schema}`.`{table.table}` DROP COLUMN {_quoted(name)}"
        self.ddl(table.schema, table.table, sql, ts, "ALTER", change)
        self._changes.append(_Change(ts, len(self._changes), table, "drop_column", column=name))

    def rename_column(self, table: TableId, old: str, new: str, ts: int) -> None:
        """ALTER TABLE ... RENAME COLUMN (not a key column)."""

        def change() -> None:
            entry = self._tables[table]
            entry.types_ever.setdefault(old, entry.columns[old])
            entry.columns = {(new if k == old else k): v for k, v in entry.columns.items()}
            entry.types_ever[new] = entry.columns[new]
            entry.added_at[new] = entry.added_at.get(old, 0)
            columns = tuple(Column(new, c.type, c.nullable, c.default, c.has_default) if c.name == old else c
                            for c in entry.schema.columns)  # fmt: skip
            entry.schema = TableSchema(columns, entry.schema.key)
            entry.reshaped.append((ts, tuple(c.name for c in entry.schema.columns)))

        sql = f"ALTER TABLE `{table.schema}`.`{table.table}` RENAME COLUMN {_quoted(old)} TO {_quoted(new)}"
        self.ddl(table.schema, table.table, sql, ts, "ALTER", change)
        self._changes.append(_Change(ts, len(self._changes), table, "rename_column", column=old, default=new))

    def modify_column(self, table: TableId, name: str, type_text: str, ts: int) -> None:
        """ALTER TABLE ... MODIFY COLUMN to a type that holds every old value (values do not change)."""

        def change() -> None:
            entry = self._tables[table]
            entry.columns[name] = parse_mysql_type(type_text)
            entry.types_ever[name] = entry.columns[name]

        target = f"`{table.schema}`.`{table.table}`"
        sql = f"ALTER TABLE {target} MODIFY COLUMN {_quoted(name)} {type_text} DEFAULT NULL"
        self.ddl(table.schema, table.table, sql, ts, "ALTER", change)

    def change_key(
        self, table: TableId, key: tuple[str, ...], sql: str, ts: int, ddl_type: str = "CINDEX"
    ) -> None:
        """ADD/DROP PRIMARY KEY (or an index DDL) after which TiCDC identifies rows by ``key``."""

        def change() -> None:
            entry = self._tables[table]
            entry.schema = TableSchema(entry.schema.columns, key)

        self.ddl(table.schema, table.table, sql, ts, ddl_type, change)
        self._changes.append(_Change(ts, len(self._changes), table, "rekey_table", row={"key": key}))

    def rename_table(self, table: TableId, new: TableId, ts: int) -> None:
        """RENAME TABLE: the rows move to the new name; questions about the old name still answer the past."""
        sql = f"RENAME TABLE `{table.schema}`.`{table.table}` TO `{new.schema}`.`{new.table}`"
        self._emit_ddl(new, sql, ts, "RENAME", None)
        old = self._tables[table]
        shape = (ts, tuple(c.name for c in old.schema.columns))
        self._tables[new] = _Table(old.schema, dict(old.columns), dict(old.added_at), [*old.reshaped, shape],
                                   dict(old.types_ever))  # fmt: skip
        self._changes.append(_Change(ts, len(self._changes), table, "rename_table", row={"to": new}))

    def drop_table(self, table: TableId, ts: int) -> None:
        """DROP TABLE: upstream has no rows under that name any more (until a CREATE TABLE reuses it)."""
        self.ddl(table.schema, table.table, f"DROP TABLE `{table.schema}`.`{table.table}`", ts, "ERASE")
        self._changes.append(_Change(ts, len(self._changes), table, "truncate"))

    def truncate(self, table: TableId, ts: int) -> None:
        self.ddl(
            table.schema, table.table, f"TRUNCATE TABLE `{table.schema}`.`{table.table}`", ts, "TRUNCATE"
        )
        self._changes.append(_Change(ts, len(self._changes), table, "truncate"))

    # -- DML ---------------------------------------------------------------------------------------------
    def insert(
        self, table: TableId, row: Row, ts: int, partition: int | None = None, *, large: bool = False
    ) -> None:
        """An INSERT; ``large`` sends it as TiCDC's claim-check: the full message to an object, a reference
        with the key columns only to Kafka."""
        self._large = large
        entry = self._tables[table]
        full = {c: row.get(c) for c in entry.columns}
        self._emit(table, cj.TYPE_INSERT, full, None, ts, partition)
        self._changes.append(_Change(ts, len(self._changes), table, "put", entry.key_of(full), full))

    def update(self, table: TableId, key: Key, values: Row, ts: int, partition: int | None = None) -> None:
        """An UPDATE. If it changes the key, TiCDC splits it into DELETE(old) + INSERT(new), same ts."""
        entry = self._tables[table]
        old = self.state_at(ts)[table][key]
        new = {**old, **values}
        new_key = entry.key_of(new)
        if new_key != key:
            self._emit(table, cj.TYPE_DELETE, old, None, ts, partition)
            self._emit(table, cj.TYPE_INSERT, new, None, ts, partition)
            self._changes.append(_Change(ts, len(self._changes), table, "delete", key))
        else:
            self._emit(table, cj.TYPE_UPDATE, new, old, ts, partition)
        self._changes.append(_Change(ts, len(self._changes), table, "put", new_key, new))

    def delete(self, table: TableId, key: Key, ts: int, partition: int | None = None) -> None:
        old = self.state_at(ts)[table][key]
        self._emit(table, cj.TYPE_DELETE, old, None, ts, partition)
        self._changes.append(_Change(ts, len(self._changes), table, "delete", key))

    # -- watermarks ------------------------------------------------------------------------------------
    def watermark(self, ts: int, partitions: Sequence[int] | None = None) -> None:
        for p in range(self.partitions) if partitions is None else partitions:
            self._announced[p] = max(self._announced.get(p, 0), ts)
            if self.protocol == "avro":
                continue  # production Avro has no watermarks
            message: dict[str, Any] = {
                "id": 0, "database": "", "table": "", "pkNames": None, "isDdl": False,
                "type": cj.TYPE_WATERMARK, "es": ts >> 18, "ts": (ts >> 18) + 5, "sql": "", "sqlType": None,
                "mysqlType": None, "data": None, "old": None, "_tidb": {cj.TIDB_WATERMARK_TS: ts},
            }  # fmt: skip
            if self.protocol == "simple":
                message = {"version": 1, "type": sp.TYPE_WATERMARK, "commitTs": ts, "buildTs": (ts >> 18) + 5}
            self.append_message(p, message)

    # -- truth -------------------------------------------------------------------------------------------
    def complete_watermark(self) -> int:
        """The highest TSO that every partition has announced a watermark for (0 if one has none)."""
        return min((self._announced.get(p, 0) for p in range(self.partitions)), default=0)

    def state_at(self, ts: int) -> dict[TableId, dict[Key, Row]]:
        """The upstream tables after every change with commit_ts <= ts, keyed by primary key."""
        state: dict[TableId, dict[Key, Row]] = {t: {} for t in self._tables}
        for change in sorted(self._changes, key=lambda c: (c.ts, c.seq)):
            if change.ts > ts:
                break
            rows = state.setdefault(change.table, {})
            if change.action == "put" and change.row is not None:
                rows[change.key] = dict(change.row)
            elif change.action == "delete":
                rows.pop(change.key, None)
            elif change.action == "truncate":
                rows.clear()
            elif change.action == "delete_partitions" and change.row is not None:
                spec, names = change.row["spec"], change.row["names"]
                for key in [k for k, r in rows.items() if spec.partition_of(r) in names]:
                    del rows[key]
            elif change.action == "add_column":
                for row in rows.values():
                    row.setdefault(change.column, change.default)
            elif change.action == "drop_column":
                for row in rows.values():
                    row.pop(change.column, None)
            elif change.action == "rename_column":
                for row in rows.values():
                    row[change.default] = row.pop(change.column, None)
            elif change.action == "rekey_table" and change.row is not None:
                names = change.row["key"]
                rekeyed = {tuple(r[n] for n in names): r for r in rows.values()}
                rows.clear()
                rows.update(rekeyed)
            elif change.action == "rename_table" and change.row is not None:
                state[change.row["to"]] = {k: dict(v) for k, v in rows.items()}
                rows.clear()
        return state

    def column_type(self, table: TableId, column: str) -> ColumnType:
        entry = self._tables[table]
        return entry.columns.get(column) or entry.types_ever[column]

    def table_columns(self, table: TableId, at: int | None = None) -> list[str]:
        """The table's columns, or those it had at TSO ``at``."""
        entry = self._tables[table]
        if at is None:
            return [c.name for c in entry.schema.columns]
        shapes = [names for ts, names in entry.reshaped if ts <= at]
        return list(shapes[-1]) if shapes else list(entry.reshaped[0][1] if entry.reshaped else ())

    # -- output ------------------------------------------------------------------------------------------
    def write(self, directory: Path, files: int = 2) -> list[Path]:
        """Write the records as JSON Lines, spread over ``files`` files out of offset order."""
        directory.mkdir(parents=True, exist_ok=True)
        paths = [directory / f"records-{i:03d}.jsonl" for i in range(files)]
        buckets: list[list[bytes]] = [[] for _ in paths]
        for index, record in enumerate(self.records):
            # Later records land in earlier files, so file order never matches offset order.
            buckets[(files - 1 - index * files // max(len(self.records), 1)) % files].append(
                orjson.dumps(record)
            )
        for path, lines in zip(paths, buckets, strict=True):
            path.write_bytes(b"".join(line + b"\n" for line in lines))
        return paths

    def write_kcat(self, directory: Path, files: int = 2) -> list[Path]:
        """Write the records as `kcat -C -J` prints them: payload and key as JSON strings, never base64."""
        directory.mkdir(parents=True, exist_ok=True)
        paths = [directory / f"kcat-{i:03d}.json" for i in range(files)]
        lines: list[list[bytes]] = [[] for _ in paths]
        for index, record in enumerate(self.records):
            envelope = {
                "topic": record["topic"], "partition": record["partition"], "offset": record["offset"],
                "tstype": "create", "ts": record["timestamp"], "broker": 1,
                "key": base64.b64decode(record["key"]).decode() if record["key"] is not None else None,
                "payload": base64.b64decode(record["value"]).decode() if record["value"] else None,
            }  # fmt: skip
            lines[index % files].append(orjson.dumps(envelope))
        for path, chunk in zip(paths, lines, strict=True):
            path.write_bytes(b"".join(line + b"\n" for line in chunk))
        return paths

    # -- encoding ----------------------------------------------------------------------------------------
    def _emit(
        self, table: TableId, typ: str, data: Row, old: Row | None, ts: int, partition: int | None
    ) -> None:
        entry = self._tables[table]
        tz = ZoneInfo(self.tz_name)
        names = list(entry.columns)
        if partition is None:
            partition = self._dispatch(table, entry.key_of(data))
        if self.protocol == "simple":
            self._emit_simple(table, typ, data, old, ts, partition)
            return
        if self.protocol == "avro":
            self._emit_avro(table, typ, data, ts, partition)
            return
        message = self._envelope(table.schema, table.table, typ, ts)
        message.update(
            pkNames=list(entry.schema.key),
            sqlType={n: _sql_type_code(entry.columns[n]) for n in names},
            mysqlType=entry.mysql_types(names),
            data=[{n: wire_text(data.get(n), entry.columns[n], tz) for n in names}],
            old=[{n: wire_text(old.get(n), entry.columns[n], tz) for n in names}]
            if old is not None
            else None,
        )
        self._send(partition, message, entry.schema.key)

    def _send(self, partition: int, message: dict[str, Any], key: tuple[str, ...]) -> None:
        if not self._large:
            self.append_message(partition, message)
            return
        self._large = False
        assert self.claim_check_dir is not None, "large=True needs claim_check_dir"
        value = compress(
            _simple_avro_bytes(message) if self.protocol == "simple" and self.encoding == "avro"
            else orjson.dumps(message),
            self.compression,
        )  # fmt: skip
        name = str(uuid.UUID(bytes=hashlib.md5(value).digest())) + ".json"
        self.claim_check_dir.mkdir(parents=True, exist_ok=True)
        body = (
            value
            if self.claim_check_raw
            else orjson.dumps({"key": None, "value": base64.b64encode(value).decode()})
        )
        (self.claim_check_dir / name).write_bytes(body)
        location = f"s3://claim-check-bucket/changefeed-1/{name}"
        reference = dict(message)
        for image in ("data", "old"):
            rows = reference.get(image)
            if isinstance(rows, list):
                reference[image] = [{k: v for k, v in r.items() if k in key} for r in rows]
            elif isinstance(rows, dict):
                reference[image] = {k: v for k, v in rows.items() if k in key}
        if self.protocol == "simple":
            reference.update(claimCheckLocation=location, handleKeyOnly=True)
        else:
            for types in ("mysqlType", "sqlType"):
                reference[types] = {k: v for k, v in reference[types].items() if k in key}
            reference["_tidb"] = {
                cj.TIDB_COMMIT_TS: message["_tidb"][cj.TIDB_COMMIT_TS],
                cj.TIDB_CLAIM_CHECK: location,
            }
        self.append_message(partition, reference)

    def _emit_simple(
        self, table: TableId, typ: str, data: Row, old: Row | None, ts: int, partition: int
    ) -> None:
        if table not in self._bootstrapped:
            # TiCDC queues a BOOTSTRAP ahead of a table's first row, to every partition.
            self._bootstrapped.add(table)
            bootstrap = {"version": 1, "type": sp.TYPE_BOOTSTRAP, "commitTs": 0, "buildTs": (ts >> 18) + 1,
                         "tableSchema": self._simple_table_schema(table)}  # fmt: skip
            for p in range(self.partitions):
                self.append_message(p, bootstrap)
        entry = self._tables[table]

        def image(row: Row) -> dict[str, Any]:
            if self.encoding == "avro":
                return {
                    n: simple_avro_value(row.get(n), entry.columns[n], self.tz_name) for n in entry.columns
                }
            return {n: simple_wire_value(row.get(n), entry.columns[n], self.tz_name) for n in entry.columns}

        message: dict[str, Any] = {
            "version": 1, "database": table.schema, "table": table.table,
            "tableID": 100 + sorted(self._tables).index(table), "type": typ, "commitTs": ts,
            "buildTs": (ts >> 18) + 3, "schemaVersion": self._versions.get(table, 1),
        }  # fmt: skip
        if typ == cj.TYPE_DELETE:
            message["old"] = image(data)
        else:
            message["data"] = image(data)
            if old is not None:
                message["old"] = image(old)
        self._send(partition, message, self._tables[table].schema.key)

    def avro_topic(self, table: TableId) -> str:
        """TiCDC Avro needs a topic per table (a topic rule with {schema} and {table})."""
        return f"{self.topic}_{table.schema}_{table.table}"

    def avro_schemas(self, table: TableId) -> tuple[dict[str, Any], dict[str, Any]]:
        """The key and value writer schemas TiCDC registers for a table as it is now."""
        entry = self._tables[table]
        tz = ZoneInfo(self.tz_name)

        def field_of(column: Column, in_key: bool) -> dict[str, Any]:
            avro = ticdc_avro_type(entry.columns[column.name])
            name = column.name
            default = entry.defaults.get(name)
            if in_key or (not column.nullable and default is None):
                return {"name": name, "type": avro}
            if default is None or avro.get("logicalType") == "decimal":
                return {"name": name, "type": ["null", avro], "default": None}
            return {"name": name, "type": [avro, "null"],
                    "default": _avro_default(default, entry.columns[name], tz)}  # fmt: skip

        base = {"type": "record", "name": table.table, "namespace": f"default.{table.schema}"}
        key_fields = [field_of(c, True) for c in entry.schema.columns if c.name in entry.schema.key]
        value_fields = [field_of(c, c.name in entry.schema.key) for c in entry.schema.columns]
        value_fields += [
            {"name": "_tidb_op", "type": "string", "default": ""},
            {"name": "_tidb_commit_ts", "type": "long", "default": 0},
            {"name": "_tidb_commit_physical_time", "type": "long", "default": 0},
        ]
        return {**base, "fields": key_fields}, {**base, "fields": value_fields}

    def _schema_id(self, subject: str, schema: Mapping[str, Any]) -> int:
        assert self.register is not None, 'protocol "avro" needs register= (a schema registry)'
        text = orjson.dumps(schema).decode()
        if (subject, text) not in self._registered:
            self._registered[(subject, text)] = self.register(subject, text)
        return self._registered[(subject, text)]

    def _emit_avro(self, table: TableId, typ: str, data: Row, ts: int, partition: int) -> None:
        entry = self._tables[table]
        tz = ZoneInfo(self.tz_name)
        topic = self.avro_topic(table)
        key_schema, value_schema = self.avro_schemas(table)
        key_id = self._schema_id(ticdc_avro_subject(topic, "key"), key_schema)
        key_datum = {k: ticdc_avro_value(data.get(k), entry.columns[k], tz) for k in entry.schema.key}
        key = confluent_frame(key_id, key_schema, key_datum)
        if typ == cj.TYPE_DELETE:
            self.append_raw(partition, None, key, topic)  # a tombstone: no commitTs, no op
            return
        value_id = self._schema_id(ticdc_avro_subject(topic, "value"), value_schema)
        datum = {n: ticdc_avro_value(data.get(n), entry.columns[n], tz) for n in entry.columns}
        datum.update(
            _tidb_op="u" if typ == cj.TYPE_UPDATE else "c",
            _tidb_commit_ts=ts,
            _tidb_commit_physical_time=ts >> 18,
        )
        self.append_raw(partition, confluent_frame(value_id, value_schema, datum), key, topic)

    def _dispatch(self, table: TableId, key: Key) -> int:
        digest = hashlib.md5(repr((table.schema, table.table, key)).encode()).digest()
        return digest[0] % self.partitions

    def _envelope(
        self, schema: str, table: str, typ: str, ts: int, *, sql: str = "", is_ddl: bool = False
    ) -> dict[str, Any]:
        return {
            "id": 0, "database": schema, "table": table, "pkNames": None, "isDdl": is_ddl, "type": typ,
            "es": ts >> 18, "ts": (ts >> 18) + 3, "sql": sql, "sqlType": None, "mysqlType": None,
            "data": None, "old": None, "_tidb": {cj.TIDB_COMMIT_TS: ts},
        }  # fmt: skip


class StorageSinkWriter:
    """Writes a stream the way TiCDC's storage sink does for Canal-JSON.

    Each :meth:`flush` writes the records added since the last one into new ``CDC<index>.json`` files
    (never rewriting a file), a schema file per DDL, and the ``metadata`` file with the checkpoint-ts.
    DML lands in ``<db>/<table>/<table-version>/<date>/``, the table version being its last DDL's commitTs;
    watermarks are not written (the checkpoint-ts replaces them), as in TiCDC.
    """

    def __init__(self, stream: Stream, root: Path, rows_per_file: int = 5) -> None:
        self.stream, self.root, self.rows_per_file = stream, root, rows_per_file
        self._written = 0
        self._versions: dict[TableId, int] = {}
        self._next_index: dict[Path, int] = {}

    def flush(self, checkpoint_ts: int | None = None) -> None:
        """Write what is new, and set the checkpoint-ts (default: the stream's complete watermark)."""
        pending: dict[Path, list[bytes]] = {}
        for record in self.stream.records[self._written :]:
            message = orjson.loads(base64.b64decode(record["value"]))
            ts = message["_tidb"].get(cj.TIDB_COMMIT_TS)
            if message["type"] == cj.TYPE_WATERMARK:
                continue
            table = TableId(message["database"], message["table"])
            if message["isDdl"]:
                self._versions[table] = ts
                self._write_schema(table, ts, message)
                continue
            day = tso_to_datetime(ts).date().isoformat()
            folder = self.root / table.schema / table.table / str(self._versions[table]) / day
            pending.setdefault(folder, []).append(orjson.dumps(message))
        self._written = len(self.stream.records)
        for folder, lines in pending.items():
            folder.mkdir(parents=True, exist_ok=True)
            for first in range(0, len(lines), self.rows_per_file):
                index = self._next_index.get(folder, 1)
                self._next_index[folder] = index + 1
                chunk = lines[first : first + self.rows_per_file]
                (folder / f"CDC{index:020d}.json").write_bytes(b"".join(line + b"\r\n" for line in chunk))
            (folder / "meta").mkdir(exist_ok=True)
            (folder / "meta" / "CDC.index").write_text(f"CDC{self._next_index[folder] - 1:020d}.json\n")
        checkpoint = self.stream.complete_watermark() if checkpoint_ts is None else checkpoint_ts
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "metadata").write_bytes(orjson.dumps({"checkpoint-ts": checkpoint}))

    def _write_schema(self, table: TableId, ts: int, message: Mapping[str, Any]) -> None:
        sql = message["sql"]
        folder = (
            self.root / table.schema / (table.table or "") / "meta"
            if table.table
            else (self.root / table.schema / "meta")
        )
        folder.mkdir(parents=True, exist_ok=True)
        columns = self.stream._tables[table].schema.columns if table in self.stream._tables else ()
        body = {
            "Table": table.table, "Schema": table.schema, "Version": 1, "TableVersion": ts, "Query": sql,
            "Type": {"CREATE": 3, "TRUNCATE": 11, "ALTER": 5}.get(message["type"], 0),
            "TableColumns": [
                {"ColumnName": c.name, "ColumnType": c.type.kind.value.upper()} for c in columns
            ],
            "TableColumnsTotal": len(columns),
        }  # fmt: skip
        crc = hashlib.md5(orjson.dumps(body)).hexdigest()[:8]
        (folder / f"schema_{ts}_{int(crc, 16)}.json").write_bytes(orjson.dumps(body))


CUSTOMERS = """CREATE TABLE `shop`.`customers` (
  `id` bigint(20) NOT NULL,
  `name` varchar(64) NOT NULL,
  `email` varchar(128) DEFAULT NULL,
  `balance` decimal(12,2) NOT NULL DEFAULT '0.00',
  `vip` tinyint(1) NOT NULL DEFAULT '0',
  `signed_up_at` timestamp(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  `birthday` date DEFAULT NULL,
  PRIMARY KEY (`id`) /*T![clustered_index] CLUSTERED */
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"""

ORDERS = """CREATE TABLE `shop`.`orders` (
  `order_id` bigint(20) unsigned NOT NULL,
  `customer_id` bigint(20) NOT NULL,
  `amount` decimal(10,2) NOT NULL,
  `status` varchar(16) NOT NULL DEFAULT 'new',
  `weight_kg` float DEFAULT NULL,
  `score` double DEFAULT NULL,
  `placed_at` datetime(6) NOT NULL,
  `note` text DEFAULT NULL,
  `payload` varbinary(64) DEFAULT NULL,
  PRIMARY KEY (`order_id`) /*T![clustered_index] CLUSTERED */
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"""

ORDER_ITEMS = """CREATE TABLE `shop`.`order_items` (
  `order_id` bigint(20) unsigned NOT NULL,
  `line_no` smallint(5) unsigned NOT NULL,
  `sku` char(8) NOT NULL,
  `qty` int(11) NOT NULL,
  `unit_price` decimal(10,2) NOT NULL,
  PRIMARY KEY (`order_id`,`line_no`) /*T![clustered_index] NONCLUSTERED */
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"""

STOCK = """CREATE TABLE `inventory`.`stock` (
  `sku` char(8) NOT NULL,
  `on_hand` int(10) unsigned NOT NULL,
  `reserved` mediumint(8) unsigned NOT NULL DEFAULT '0',
  `checksum` binary(4) NOT NULL,
  `thumbnail` blob DEFAULT NULL,
  `updated_at` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (`sku`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"""

SIMPLE_FOR_TESTS = (
    "CREATE TABLE `app`.`t` (`id` int(11) NOT NULL, `v` varchar(20) DEFAULT NULL, PRIMARY KEY (`id`))"
)

ADD_POINTS = (
    "ALTER TABLE `shop`.`customers` ADD COLUMN `points` int(11) NOT NULL DEFAULT '100' AFTER `balance`"
)


def build_sample(
    timezone_name: str = "UTC",
    protocol: str = "canal-json",
    encoding: str = "json",
    compression: Compression = Compression.NONE,
) -> Stream:
    """The bundled demo stream: two databases, four tables, two partitions, under a hundred records.

    Covers inserts, updates, deletes, a primary-key change (split into DELETE+INSERT at one commitTs),
    an ADD COLUMN with a DEFAULT between rows, BIGINT UNSIGNED at its maximum, binary bytes above 0x7f,
    TIMESTAMP text in the changefeed's zone, and a tail of rows above the last watermark that must stay
    pending.
    """
    s = Stream(
        topic="tidb_cdc",
        partitions=2,
        tz_name=timezone_name,
        protocol=protocol,
        encoding=encoding,
        compression=compression,
    )
    customers = s.create_table(CUSTOMERS, s.tso(1))
    orders = s.create_table(ORDERS, s.tso(2))
    items = s.create_table(ORDER_ITEMS, s.tso(3))
    stock = s.create_table(STOCK, s.tso(4))
    s.watermark(s.tso(4))
    names = ["Ada Lovelace", "Grace Hopper", "Edsger Dijkstra", "Barbara Liskov", "Donald Knuth",
             "Frances Allen", "Ken Thompson", "Radia Perlman"]  # fmt: skip
    t = 10.0
    for i, name in enumerate(names):
        s.insert(customers, {
            "id": 1001 + i, "name": name, "email": f"{name.split()[0].lower()}@example.com",
            "balance": Decimal(f"{(i + 1) * 137.25:.2f}"), "vip": (i % 3 == 0 and 1) or 0,
            "signed_up_at": datetime(2024, 3, 10, 1 + i, 59, 59, 123000, tzinfo=timezone.utc),
            "birthday": date(1970 + i, 1 + i, 10 + i) if i % 4 else None,
        }, s.tso(t))  # fmt: skip
        t += 0.5
    skus = [f"SKU-{n:04d}" for n in range(1, 7)]
    for n, sku in enumerate(skus):
        s.insert(stock, {
            "sku": sku, "on_hand": 4294967295 if n == 0 else 100 * (n + 1), "reserved": n * 3,
            "checksum": bytes([0x00, 0x7F, 0x80 + n, 0xFF]),
            "thumbnail": (
                bytes(range(256)) if n == 0 else (bytes([0xE9, 0x00, 0x3C, 0x26, n]) if n % 2 else None)
            ),
            "updated_at": datetime(2026, 3, 29, 0, 59, 0, tzinfo=timezone.utc) + timedelta(hours=n),
        }, s.tso(t))  # fmt: skip
        t += 0.25
    s.watermark(s.tso(t))
    order_ids = [9_000_000_000_000_000_000 + n for n in range(1, 11)] + [18446744073709551615]
    for n, order_id in enumerate(order_ids):
        t += 1
        ts = s.tso(t)
        s.insert(orders, {
            "order_id": order_id, "customer_id": 1001 + n % len(names),
            "amount": Decimal(f"{19.99 * (n + 1):.2f}"), "status": "new",
            "weight_kg": [0.1, 2.5, 3.14, 1e-3, 12.75][n % 5],
            "score": [0.1, 2.718281828459045, 1e16, -0.5][n % 4],
            "placed_at": datetime(2026, 11, 20, 9, n, 30, 250000 + n),
            "note": None if n % 3 else f"Gift wrap ✓ #{n} — «fragile»",
            "payload": bytes([n, 0x80 | n, 0x3C, 0x26, 0x0A, 0x22, 0x5C]),
        }, ts)  # fmt: skip
        for line in range(1, 1 + n % 3 + 1):
            s.insert(
                items,
                {
                    "order_id": order_id,
                    "line_no": line,
                    "sku": skus[(n + line) % len(skus)],
                    "qty": line * 2,
                    "unit_price": Decimal(f"{4.5 * line + n:.2f}"),
                },
                ts,
            )
        if n % 4 == 1:
            s.watermark(s.tso(t + 0.5))
    t += 1
    s.watermark(s.tso(t))
    # ADD COLUMN with a DEFAULT: existing rows read 100 upstream; later rows carry their own value.
    t += 1
    s.add_column(customers, ADD_POINTS, s.tso(t), "points", "int", default=100)
    t += 1
    s.update(customers, (1002,), {"points": 250, "balance": Decimal("1999.50")}, s.tso(t))
    s.insert(customers, {
        "id": 1009, "name": "Margaret Hamilton", "email": "margaret@example.com", "balance": Decimal("0.00"),
        "points": 5, "vip": 1, "signed_up_at": datetime(2026, 11, 20, 9, 30, 0, 500000, tzinfo=timezone.utc),
        "birthday": date(1936, 8, 17),
    }, s.tso(t))  # fmt: skip
    s.watermark(s.tso(t + 0.5))
    t += 1
    for n, order_id in enumerate(order_ids[:6]):
        s.update(orders, (order_id,), {"status": "paid" if n % 2 else "shipped"}, s.tso(t + n * 0.2))
    t += 2
    # A primary-key change arrives as DELETE(old key) + INSERT(new key) at one commitTs.
    s.update(customers, (1003,), {"id": 2003, "email": "edsger@cs.utexas.edu"}, s.tso(t))
    s.delete(orders, (order_ids[9],), s.tso(t + 0.5))
    s.delete(items, (order_ids[9], 1), s.tso(t + 0.5))
    s.update(stock, ("SKU-0002",), {"on_hand": 0, "reserved": 0}, s.tso(t + 0.7))
    s.watermark(s.tso(t + 1))
    t += 2
    s.update(orders, (order_ids[0],), {"note": "left at the door", "payload": bytes([0xFF] * 8)}, s.tso(t))
    s.delete(customers, (1008,), s.tso(t + 0.1))
    s.watermark(s.tso(t + 0.5))
    # Committed upstream but not yet covered by a watermark on every partition: must stay pending.
    t += 1
    s.insert(customers, {"id": 1010, "name": "Alan Kay", "email": None, "balance": Decimal("10.00"),
                         "points": 1, "vip": 0,
                         "signed_up_at": datetime(2026, 11, 20, 9, 45, tzinfo=timezone.utc),
                         "birthday": None}, s.tso(t))  # fmt: skip
    s.update(orders, (order_ids[1],), {"status": "refunded"}, s.tso(t + 0.1))
    s.watermark(s.tso(t + 0.5), partitions=[0])
    return s


def main(argv: Sequence[str] | None = None) -> int:
    """Write the bundled sample stream: ``python -m testkit.sample DIR``."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m testkit.sample OUTPUT_DIR", file=sys.stderr)
        return 2
    stream = build_sample()
    for path in stream.write(Path(args[0])):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


def _quoted(name: str) -> str:
    """A column name as MySQL quotes it: in backticks, a backtick doubled."""
    return "`" + name.replace("`", "``") + "`"
