"""Synthetic TiCDC workloads at benchmark scale. Pure: no Spark, no I/O except :func:`write_records`.

``testkit.sample.Stream`` replays its whole change log on every UPDATE to find the old image, which is
right for a hundred records and hopeless for a million. ``Workload`` keeps only the current row per key
and emits the same wire format: one Kafka record per event, rows routed to partitions by key, the CREATE
TABLE on partition 0, watermarks on every partition (TiCDC Avro has neither DDL nor watermarks, and a
topic per table). A unit test replays a small workload through ``Stream`` and expects the same bytes.

Knobs (:class:`WorkloadSpec`): number of tables, row width, operation mix, key distribution, partitions
and protocol. A protocol is an :class:`Encoder`; adding one means adding an encoder to ``ENCODERS``.
Row values are plain ints and strings (DECIMAL as the unscaled integer, DATETIME as microseconds since
the epoch), so every encoder renders them its own way.

Rows that exist before the stream starts (``preloaded``) have values that are a function of the key
alone (:func:`preloaded_value`), so a benchmark can build a big table with Spark and the stream still
carries the right old images.
"""

from __future__ import annotations

import base64
import math
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import Decimal
from enum import Enum
from pathlib import Path
from typing import Any, Protocol

import fastavro
import orjson

from ingest.config import Protocol as WireProtocol
from ingest.decode import canal_json as cj
from ingest.decode import open_protocol
from ingest.decode import simple as sp
from ingest.decode import ticdc_avro as ta
from ingest.model import ColumnKind, ColumnType, TableId
from ingest.mysql.ddl import CreateTable, parse_ddl

# Wire details shared with the sample generator, so both streams are encoded by one set of rules.
from testkit.sample import (
    Stream,
    _mysql_type_text,
    _simple_avro_bytes,
    _sql_type_code,
    confluent_frame,
    ticdc_avro_subject,
)

Value = int | str | None

# Column kinds of a generated table after its BIGINT key, repeated to reach the row width.
COLUMN_CYCLE: tuple[tuple[ColumnKind, str], ...] = (
    (ColumnKind.INT, "int(11) DEFAULT NULL"),
    (ColumnKind.VARCHAR, "varchar(64) DEFAULT NULL"),
    (ColumnKind.DECIMAL, "decimal(12,2) DEFAULT NULL"),
    (ColumnKind.DATETIME, "datetime(6) DEFAULT NULL"),
)
DECIMAL_SCALE = 2
# 2026-01-01T00:00:00 UTC: preloaded DATETIME values count seconds from here.
DATETIME_BASE_MICROS = 1_767_225_600 * 1_000_000
START_MS = 1_795_165_200_000  # 2026-11-20T09:00:00 UTC, as in the sample stream
TSO_LOGICAL_BITS = 18


class Mix(Enum):
    """The operation mix of the generated changes."""

    INSERT_ONLY = "insert-only"
    UPDATE_HEAVY = "update-heavy"  # 80% updates, 15% inserts, 5% deletes
    DELETE_HEAVY = "delete-heavy"  # 60% deletes, 20% updates, 20% inserts


# (insert, update, delete) shares.
MIX_SHARES: Mapping[Mix, tuple[float, float, float]] = {
    Mix.INSERT_ONLY: (1.0, 0.0, 0.0),
    Mix.UPDATE_HEAVY: (0.15, 0.80, 0.05),
    Mix.DELETE_HEAVY: (0.20, 0.20, 0.60),
}


class KeyDistribution(Enum):
    """How UPDATEs and DELETEs pick an existing key."""

    UNIFORM = "uniform"
    ZIPF = "zipf"  # a few hot keys take most changes (exponent ``zipf_s``)


@dataclass(frozen=True)
class WorkloadSpec:
    """What to generate. ``width`` counts every column, the BIGINT key included."""

    tables: int = 1
    width: int = 8
    mix: Mix = Mix.UPDATE_HEAVY
    keys: KeyDistribution = KeyDistribution.UNIFORM
    partitions: int = 2
    protocol: str = cj.PROTOCOL
    database: str = "bench"
    topic: str = "tidb_cdc"
    zipf_s: float = 1.1
    watermark_every: int = 10_000
    seed: int = 7

    def __post_init__(self) -> None:
        if self.tables < 1 or self.width < 2 or self.partitions < 1:
            raise ValueError(f"tables >= 1, width >= 2 and partitions >= 1 needed, got {self}")
        if self.protocol not in ENCODERS:
            raise ValueError(
                f"protocol {self.protocol!r} has no encoder yet; implemented: {', '.join(sorted(ENCODERS))}"
            )


@dataclass(frozen=True)
class TableDef:
    """One generated table: its CREATE TABLE text and its columns (key first)."""

    table: TableId
    create_sql: str
    names: tuple[str, ...]
    types: tuple[ColumnType, ...]

    @property
    def kinds(self) -> tuple[ColumnKind, ...]:
        return tuple(t.kind for t in self.types)


def table_def(database: str, name: str, width: int) -> TableDef:
    """A table with a BIGINT primary key ``id`` and ``width - 1`` columns cycling through COLUMN_CYCLE."""
    columns = ["`id` bigint(20) NOT NULL"]
    for i in range(1, width):
        _, text = COLUMN_CYCLE[(i - 1) % len(COLUMN_CYCLE)]
        columns.append(f"`c{i}` {text}")
    sql = (
        f"CREATE TABLE `{database}`.`{name}` ({', '.join(columns)}, PRIMARY KEY (`id`)) "
        "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"
    )
    statement = parse_ddl(sql, database)
    assert isinstance(statement, CreateTable), sql
    schema = statement.schema
    return TableDef(
        statement.table, sql, tuple(c.name for c in schema.columns), tuple(c.type for c in schema.columns)
    )


def preloaded_value(kind: ColumnKind, column: int, key: int) -> Value:
    """The value of column ``column`` (1-based) of a row that existed before the stream, from its key.

    ``bench`` builds the same values with Spark SQL; both sides must change together.
    """
    if kind is ColumnKind.INT:
        return (key * 31 + column) % 1_000_000
    if kind is ColumnKind.VARCHAR:
        return f"v{column}-{key}"
    if kind is ColumnKind.DECIMAL:
        return (key * 7 + column) % 10_000_000
    if kind is ColumnKind.DATETIME:
        return DATETIME_BASE_MICROS + key * 1_000_000
    raise ValueError(f"no preloaded value for {kind}")


# -- encoders --------------------------------------------------------------------------------------------


class Op(Enum):
    INSERT = "insert"
    UPDATE = "update"
    DELETE = "delete"


@dataclass(frozen=True, slots=True)
class Keyed:
    """A record that names its own topic and key, for protocols that need them (TiCDC Avro)."""

    topic: str
    key: bytes
    value: bytes | None  # None: a tombstone


class Encoder(Protocol):
    """One TiCDC protocol: turns events into Kafka record values (None: the protocol sends nothing)."""

    def create_table(self, table: TableDef, ts: int) -> bytes | Keyed | None: ...

    def row(
        self, table: TableDef, op: Op, data: Sequence[Value], old: Sequence[Value] | None, ts: int
    ) -> bytes | Keyed: ...

    def watermark(self, ts: int) -> bytes | Keyed | None: ...


def _decimal_text(unscaled: Value) -> str | None:
    if unscaled is None:
        return None
    assert isinstance(unscaled, int)
    sign, magnitude = ("-" if unscaled < 0 else ""), abs(unscaled)
    whole, fraction = divmod(magnitude, 10**DECIMAL_SCALE)
    return f"{sign}{whole}.{fraction:0{DECIMAL_SCALE}d}"


_DAY_MICROS = 86_400 * 1_000_000
_EPOCH = date(1970, 1, 1)
_day_text: dict[int, str] = {}


def _datetime6_text(micros: Value) -> str | None:
    """DATETIME(6) as TiDB prints it, without building a datetime per value (hot loop)."""
    if micros is None:
        return None
    assert isinstance(micros, int)
    day, rest = divmod(micros, _DAY_MICROS)
    text = _day_text.get(day)
    if text is None:
        text = _day_text[day] = (_EPOCH + timedelta(days=day)).isoformat()
    seconds, us = divmod(rest, 1_000_000)
    hours, seconds = divmod(seconds, 3600)
    minutes, seconds = divmod(seconds, 60)
    return f"{text} {hours:02d}:{minutes:02d}:{seconds:02d}.{us:06d}"


def _text(value: Value) -> str | None:
    return None if value is None else str(value)


_CANAL_TEXT: Mapping[ColumnKind, Callable[[Value], str | None]] = {
    ColumnKind.BIGINT: _text,
    ColumnKind.INT: _text,
    ColumnKind.VARCHAR: _text,
    ColumnKind.DECIMAL: _decimal_text,
    ColumnKind.DATETIME: _datetime6_text,
}

_CANAL_TYPE = {Op.INSERT: cj.TYPE_INSERT, Op.UPDATE: cj.TYPE_UPDATE, Op.DELETE: cj.TYPE_DELETE}


class CanalJsonEncoder:
    """Canal-JSON with ``enable-tidb-extension=true``, key for key as ``testkit.sample.Stream`` writes it."""

    def __init__(self) -> None:
        self._static: dict[TableId, tuple[list[str], dict[str, int], dict[str, str]]] = {}
        self._render: dict[TableId, list[Callable[[Value], str | None]]] = {}

    def _envelope(self, table: TableId, typ: str, ts: int, *, sql: str = "", is_ddl: bool = False) -> dict:  # type: ignore[type-arg]
        return {
            "id": 0, "database": table.schema, "table": table.table, "pkNames": None, "isDdl": is_ddl,
            "type": typ, "es": ts >> 18, "ts": (ts >> 18) + 3, "sql": sql, "sqlType": None,
            "mysqlType": None, "data": None, "old": None, "_tidb": {cj.TIDB_COMMIT_TS: ts},
        }  # fmt: skip

    def create_table(self, table: TableDef, ts: int) -> bytes:
        self._static[table.table] = (
            ["id"],
            {n: _sql_type_code(t) for n, t in zip(table.names, table.types, strict=True)},
            {n: _mysql_type_text(t) for n, t in zip(table.names, table.types, strict=True)},
        )
        self._render[table.table] = [_CANAL_TEXT[k] for k in table.kinds]
        return orjson.dumps(self._envelope(table.table, "CREATE", ts, sql=table.create_sql, is_ddl=True))

    def row(
        self, table: TableDef, op: Op, data: Sequence[Value], old: Sequence[Value] | None, ts: int
    ) -> bytes:
        pk_names, sql_type, mysql_type = self._static[table.table]
        render, names = self._render[table.table], table.names
        message = self._envelope(table.table, _CANAL_TYPE[op], ts)
        message["pkNames"] = pk_names
        message["sqlType"] = sql_type
        message["mysqlType"] = mysql_type
        message["data"] = [{n: r(v) for n, r, v in zip(names, render, data, strict=True)}]
        if old is not None:
            message["old"] = [{n: r(v) for n, r, v in zip(names, render, old, strict=True)}]
        return orjson.dumps(message)

    def watermark(self, ts: int) -> bytes:
        return orjson.dumps(
            {
                "id": 0,
                "database": "",
                "table": "",
                "pkNames": None,
                "isDdl": False,
                "type": cj.TYPE_WATERMARK,
                "es": ts >> 18,
                "ts": (ts >> 18) + 5,
                "sql": "",
                "sqlType": None,
                "mysqlType": None,
                "data": None,
                "old": None,
                "_tidb": {cj.TIDB_WATERMARK_TS: ts},
            }
        )


_SIMPLE_TYPE = {Op.INSERT: sp.TYPE_INSERT, Op.UPDATE: sp.TYPE_UPDATE, Op.DELETE: sp.TYPE_DELETE}
# Simple Avro carries integer columns as longs and every other kind used here as its wire text.
_AVRO_LONG = (ColumnKind.BIGINT, ColumnKind.INT)


class SimpleEncoder:
    """The Simple protocol, JSON or Avro, message for message as ``testkit.sample.Stream`` writes it.

    DDL messages come from an upstream model of the tables (``Stream``), so their table schemas are the
    model's; rows and watermarks are built here, with the same keys in the same order, and encoded by the
    model's own functions. Differences from TiCDC's queueing, on purpose: no BOOTSTRAP ahead of a table's
    first row (the CREATE TABLE in the stream announces the same schema).
    """

    ddl_on_every_partition = True  # Simple sends DDLs to every partition

    def __init__(self, encoding: str = "json") -> None:
        self._avro = encoding == "avro"
        self._model = Stream(protocol=sp.PROTOCOL, encoding=encoding, partitions=1)
        self._static: dict[TableId, tuple[int, int]] = {}  # table -> (tableID, schemaVersion)
        self._render: dict[TableId, list[Callable[[Value], object]]] = {}

    def _encode(self, message: Mapping[str, object]) -> bytes:
        return _simple_avro_bytes(message) if self._avro else orjson.dumps(message)

    def create_table(self, table: TableDef, ts: int) -> bytes:
        self._model.create_table(table.create_sql, ts)
        value = base64.b64decode(self._model.records[-1]["value"])
        # Rows name the table's id among all tables the model knows, and the version its last DDL set.
        tables = sorted(self._model._tables)
        for known in tables:
            self._static[known] = (100 + tables.index(known), self._model._versions.get(known, 1))
        render: list[Callable[[Value], object]] = []
        for kind in table.kinds:
            text = _CANAL_TEXT[kind]  # Simple's JSON text equals Canal-JSON's for these kinds
            if not self._avro:
                render.append(text)
            elif kind in _AVRO_LONG:
                render.append(lambda v: None if v is None else ("long", v))
            else:
                render.append(lambda v, text=text: None if v is None else ("string", text(v)))  # type: ignore[misc]
        self._render[table.table] = render
        return value

    def row(
        self, table: TableDef, op: Op, data: Sequence[Value], old: Sequence[Value] | None, ts: int
    ) -> bytes:
        table_id, version = self._static[table.table]
        render, names = self._render[table.table], table.names
        message: dict[str, object] = {
            "version": 1, "database": table.table.schema, "table": table.table.table, "tableID": table_id,
            "type": _SIMPLE_TYPE[op], "commitTs": ts, "buildTs": (ts >> 18) + 3, "schemaVersion": version,
        }  # fmt: skip
        image = {n: r(v) for n, r, v in zip(names, render, data, strict=True)}
        if op is Op.DELETE:
            message["old"] = image
        else:
            message["data"] = image
            if old is not None:
                message["old"] = {n: r(v) for n, r, v in zip(names, render, old, strict=True)}
        return self._encode(message)

    def watermark(self, ts: int) -> bytes:
        return self._encode(
            {"version": 1, "type": sp.TYPE_WATERMARK, "commitTs": ts, "buildTs": (ts >> 18) + 5}
        )


class InProcessRegistry:
    """Hands out schema ids as a Confluent-compatible registry does, with no registry process.

    The decoders take the writer schemas by id (the pipeline's driver fetches them once per batch), so a
    generated stream only needs ids that map to the texts; :attr:`schemas` is that map.
    """

    def __init__(self) -> None:
        self.schemas: dict[int, str] = {}
        self._ids: dict[str, int] = {}

    def register(self, subject: str, schema: str) -> int:
        # Confluent gives a schema text one id, whatever the subject it is registered under.
        found = self._ids.get(schema)
        if found is None:
            found = self._ids[schema] = len(self._ids) + 1
            self.schemas[found] = schema
        return found


def _ticdc_avro_decimal(unscaled: Value) -> Decimal | None:
    if unscaled is None:
        return None
    assert isinstance(unscaled, int)
    return Decimal(unscaled).scaleb(-DECIMAL_SCALE)  # fastavro writes a Decimal as the unscaled bytes


def _same(value: Value) -> Value:
    return value


# What ``testkit.sample.ticdc_avro_value`` makes of these kinds: integers as they are, DECIMAL as a Decimal,
# the rest as their wire text (the same text as Canal-JSON's).
_TICDC_AVRO_VALUE: Mapping[ColumnKind, Callable[[Value], object]] = {
    ColumnKind.BIGINT: _same,
    ColumnKind.INT: _same,
    ColumnKind.VARCHAR: _text,
    ColumnKind.DECIMAL: _ticdc_avro_decimal,
    ColumnKind.DATETIME: _datetime6_text,
}


@dataclass
class _AvroTable:
    topic: str
    key_schema: dict[str, Any]  # as the model registers it
    value_schema: dict[str, Any]
    key_parsed: Any  # as fastavro parsed it: confluent_frame passes it through
    value_parsed: Any
    key_columns: tuple[int, ...]
    render: list[Callable[[Value], object]]
    # Registered at first use, in the order the model registers them, so a replay gets the same ids.
    key_id: int | None = None
    value_id: int | None = None


class TicdcAvroEncoder:
    """TiCDC Avro in the Confluent wire format, record for record as ``Stream(protocol="avro")``.

    The model (``Stream``) holds the tables and gives each its topic, subjects and writer schemas; rows are
    framed here with those schemas parsed once, by the model's ``confluent_frame``. Ids come from an
    :class:`InProcessRegistry`. The protocol has no DDL and no watermarks, so ``create_table`` and
    ``watermark`` send nothing, and a DELETE is a tombstone: the key and no value.
    """

    def __init__(self, topic: str) -> None:
        self.registry = InProcessRegistry()
        self._model = Stream(topic=topic, protocol=TICDC_AVRO, partitions=1, register=self.registry.register)
        self._tables: dict[TableId, _AvroTable] = {}

    def create_table(self, table: TableDef, ts: int) -> None:
        self._model.create_table(table.create_sql, ts)
        key_schema, value_schema = self._model.avro_schemas(table.table)
        topic = self._model.avro_topic(table.table)
        key = self._model._tables[table.table].schema.key
        self._tables[table.table] = _AvroTable(
            topic=topic,
            key_schema=key_schema,
            value_schema=value_schema,
            key_parsed=fastavro.parse_schema(key_schema),
            value_parsed=fastavro.parse_schema(value_schema),
            key_columns=tuple(table.names.index(n) for n in key),
            render=[_TICDC_AVRO_VALUE[k] for k in table.kinds],
        )

    def row(
        self, table: TableDef, op: Op, data: Sequence[Value], old: Sequence[Value] | None, ts: int
    ) -> Keyed:
        state = self._tables[table.table]
        if state.key_id is None:
            state.key_id = self._model._schema_id(ticdc_avro_subject(state.topic, "key"), state.key_schema)
        names, render = table.names, state.render
        key_datum = {names[i]: render[i](data[i]) for i in state.key_columns}
        key = confluent_frame(state.key_id, state.key_parsed, key_datum)
        if op is Op.DELETE:
            return Keyed(state.topic, key, None)
        if state.value_id is None:
            subject = ticdc_avro_subject(state.topic, "value")
            state.value_id = self._model._schema_id(subject, state.value_schema)
        datum = {n: r(v) for n, r, v in zip(names, render, data, strict=True)}
        datum.update(
            _tidb_op=ta.OP_UPDATE if op is Op.UPDATE else ta.OP_INSERT,
            _tidb_commit_ts=ts,
            _tidb_commit_physical_time=ts >> TSO_LOGICAL_BITS,
        )
        return Keyed(state.topic, key, confluent_frame(state.value_id, state.value_parsed, datum))

    def watermark(self, ts: int) -> None:
        return None


SIMPLE_AVRO = "simple-avro"
# Open Protocol column type codes and flags of the generated kinds (BINARY flag on numbers and times, as
# TiDB sets it; HANDLE and PK flags on the key; NULLABLE on the rest).
_OPEN_COLUMN: Mapping[ColumnKind, tuple[int, int]] = {
    ColumnKind.BIGINT: (8, 0x01 | 0x02 | 0x08),
    ColumnKind.INT: (3, 0x01 | 0x40),
    ColumnKind.VARCHAR: (15, 0x40),
    ColumnKind.DECIMAL: (246, 0x01 | 0x40),
    ColumnKind.DATETIME: (12, 0x01 | 0x40),
}
_OPEN_VALUE: Mapping[ColumnKind, Callable[[Value], Value]] = {
    ColumnKind.BIGINT: _same,
    ColumnKind.INT: _same,
    ColumnKind.VARCHAR: _same,
    ColumnKind.DECIMAL: _decimal_text,
    ColumnKind.DATETIME: _datetime6_text,
}
_OPEN_IMAGE = {Op.INSERT: "u", Op.UPDATE: "u", Op.DELETE: "d"}


def _open_entry(payload: bytes) -> bytes:
    return len(payload).to_bytes(open_protocol.LENGTH_BYTES, "big") + payload


class OpenProtocolEncoder:
    """TiCDC Open Protocol with its defaults (``output-old-value``): one event per record here;
    :func:`open_protocol_batches` packs row records as TiCDC's batch encoder does."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self._columns: dict[TableId, list[tuple[str, int, int, Callable[[Value], Value]]]] = {}

    def _record(self, key: Mapping[str, object], value: bytes) -> Keyed:
        version = open_protocol.BATCH_VERSION.to_bytes(open_protocol.LENGTH_BYTES, "big")
        return Keyed(self.topic, version + _open_entry(orjson.dumps(key)), _open_entry(value))

    def create_table(self, table: TableDef, ts: int) -> Keyed:
        self._columns[table.table] = sorted(
            (name, *_OPEN_COLUMN[kind], _OPEN_VALUE[kind])
            for name, kind in zip(table.names, table.kinds, strict=True)
        )
        key = {"ts": ts, "scm": table.table.schema, "tbl": table.table.table, "t": open_protocol.DDL}
        return self._record(key, orjson.dumps({"q": table.create_sql, "t": 3}))

    def _image(self, table: TableDef, values: Sequence[Value]) -> dict[str, object]:
        by_name = dict(zip(table.names, values, strict=True))
        return {
            name: {"t": code, **({"h": True} if flags & 0x02 else {}), "f": flags, "v": render(by_name[name])}
            for name, code, flags, render in self._columns[table.table]
        }

    def row(
        self, table: TableDef, op: Op, data: Sequence[Value], old: Sequence[Value] | None, ts: int
    ) -> Keyed:
        key = {"ts": ts, "scm": table.table.schema, "tbl": table.table.table, "t": open_protocol.ROW}
        value: dict[str, object] = {_OPEN_IMAGE[op]: self._image(table, data)}
        if old is not None:
            value["p"] = self._image(table, old)
        return self._record(key, orjson.dumps(value))

    def watermark(self, ts: int) -> Keyed:
        version = open_protocol.BATCH_VERSION.to_bytes(open_protocol.LENGTH_BYTES, "big")
        key = version + _open_entry(orjson.dumps({"ts": ts, "t": open_protocol.RESOLVED}))
        return Keyed(self.topic, key, _open_entry(b""))


def open_protocol_batches(records: Iterable[Record], max_batch: int = 16) -> list[Record]:
    """Row records packed ``max_batch`` events to a record per partition, in order, as TiCDC's batch
    encoder packs them; a DDL or resolved record closes the partition's open batch and stays alone."""
    version = open_protocol.LENGTH_BYTES
    out: list[Record] = []
    open_: dict[int, list[Record]] = {}

    def close(partition: int) -> None:
        batch = open_.pop(partition, [])
        if batch:
            keys = [r.key or b"" for r in batch]
            key = keys[0][:version] + b"".join(k[version:] for k in keys)
            value = b"".join(r.value or b"" for r in batch)
            out.append(Record(partition, 0, value, key, batch[0].topic))

    for record in records:
        assert record.key is not None and record.value is not None
        kind = orjson.loads(record.key[2 * version :])["t"]
        if kind != open_protocol.ROW:
            close(record.partition)
            out.append(record)
            continue
        open_.setdefault(record.partition, []).append(record)
        if len(open_[record.partition]) == max_batch:
            close(record.partition)
    for partition in list(open_):
        close(partition)
    offsets: dict[int, int] = {}
    numbered = []
    for record in out:
        offsets[record.partition] = offsets.get(record.partition, -1) + 1
        numbered.append(
            Record(record.partition, offsets[record.partition], record.value, record.key, record.topic)
        )
    return numbered


# TiCDC's storage-sink CSV (defaults: `,`, `"`, `\N`, include-commit-ts) of the generated kinds, and
# each kind's schema-file entry.
_CSV_OP = {Op.INSERT: "I", Op.UPDATE: "U", Op.DELETE: "D"}
_CSV_SCHEMA: Mapping[ColumnKind, dict[str, str]] = {
    ColumnKind.BIGINT: {"ColumnType": "BIGINT", "ColumnPrecision": "20"},
    ColumnKind.INT: {"ColumnType": "INT", "ColumnPrecision": "11"},
    ColumnKind.VARCHAR: {"ColumnType": "VARCHAR", "ColumnPrecision": "64"},
    ColumnKind.DECIMAL: {"ColumnType": "DECIMAL", "ColumnPrecision": "12", "ColumnScale": str(DECIMAL_SCALE)},
    ColumnKind.DATETIME: {"ColumnType": "DATETIME", "ColumnScale": "6"},
}


def _csv_field(kind: ColumnKind, value: Value) -> str:
    if value is None:
        return "\\N"
    if kind in (ColumnKind.BIGINT, ColumnKind.INT):
        return str(value)
    text = _OPEN_VALUE[kind](value)
    return '"' + str(text).replace('"', '""') + '"'


class StorageCsvEncoder:
    """Storage-sink CSV: a record per row change, named by its table's folder (``topic``); the CREATE
    TABLE is its table's schema file (key ``schema``). :func:`write_storage_sink` lays them out."""

    def create_table(self, table: TableDef, ts: int) -> Keyed:
        columns = [
            {"ColumnName": name, **_CSV_SCHEMA[kind], **({"ColumnNullable": "false", "ColumnIsPk": "true"}
                                                         if i == 0 else {})}
            for i, (name, kind) in enumerate(zip(table.names, table.kinds, strict=True))
        ]  # fmt: skip
        schema = {
            "Table": table.table.table, "Schema": table.table.schema, "Version": 1, "TableVersion": ts,
            "Query": table.create_sql, "Type": 3, "TableColumns": columns, "TableColumnsTotal": len(columns),
        }  # fmt: skip
        return Keyed(_folder(table.table), b"schema", orjson.dumps(schema, option=orjson.OPT_INDENT_2))

    def row(
        self, table: TableDef, op: Op, data: Sequence[Value], old: Sequence[Value] | None, ts: int
    ) -> Keyed:
        head = f'"{_CSV_OP[op]}","{table.table.table}","{table.table.schema}",{ts}'
        fields = ",".join(_csv_field(k, v) for k, v in zip(table.kinds, data, strict=True))
        return Keyed(_folder(table.table), b"row", f"{head},{fields}\r\n".encode())

    def watermark(self, ts: int) -> None:
        return None


def _folder(table: TableId) -> str:
    """The table's folder in TiCDC's storage sink (its layout, not the mirror's)."""
    return "/".join((table.schema, table.table))


def write_storage_sink(
    records: Iterable[Record], root: Path, checkpoint_ts: int, *, rows_per_file: int = 50_000
) -> None:
    """The folders TiCDC's storage sink writes for :class:`StorageCsvEncoder` records: ``metadata``, each
    table's schema file, and its rows in ``CDC<n>.csv`` files of one table version and day."""
    schemas: dict[str, dict[str, Any]] = {}
    rows: dict[str, list[bytes]] = {}
    for record in records:
        assert record.topic is not None and record.value is not None
        if record.key == b"schema":
            schemas[record.topic] = orjson.loads(record.value)
            (root / record.topic / "meta").mkdir(parents=True, exist_ok=True)
            version = schemas[record.topic]["TableVersion"]
            (root / record.topic / "meta" / f"schema_{version}_0123456789.json").write_bytes(record.value)
        else:
            rows.setdefault(record.topic, []).append(record.value)
    for folder, lines in rows.items():
        day = root / folder / str(schemas[folder]["TableVersion"]) / "2026-11-20"
        (day / "meta").mkdir(parents=True, exist_ok=True)
        names = []
        for number, at in enumerate(range(0, len(lines), rows_per_file), start=1):
            names.append(f"CDC{number:020d}.csv")
            (day / names[-1]).write_bytes(b"".join(lines[at : at + rows_per_file]))
        (day / "meta" / "CDC.index").write_text(names[-1] + "\n")
    (root / "metadata").write_text(orjson.dumps({"checkpoint-ts": checkpoint_ts}).decode())


TICDC_AVRO = WireProtocol.AVRO.value
OPEN_PROTOCOL = open_protocol.PROTOCOL
STORAGE_CSV = WireProtocol.CSV.value
ENCODERS: Mapping[str, Callable[[WorkloadSpec], Encoder]] = {
    cj.PROTOCOL: lambda spec: CanalJsonEncoder(),
    sp.PROTOCOL: lambda spec: SimpleEncoder(),
    SIMPLE_AVRO: lambda spec: SimpleEncoder("avro"),
    TICDC_AVRO: lambda spec: TicdcAvroEncoder(spec.topic),
    OPEN_PROTOCOL: lambda spec: OpenProtocolEncoder(spec.topic),
    STORAGE_CSV: lambda spec: StorageCsvEncoder(),
}


def _ddl_everywhere(encoder: Encoder) -> bool:
    return bool(getattr(encoder, "ddl_on_every_partition", False))


# -- the generator ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Record:
    """One Kafka record: where it went, its value and, for TiCDC Avro, its key and its table's topic."""

    partition: int
    offset: int
    value: bytes | None
    key: bytes | None = None
    topic: str | None = None  # None: the workload's topic


@dataclass(frozen=True, slots=True)
class TraceEntry:
    """One generated event, for tests that replay a workload through the upstream model."""

    action: str  # "create", "insert", "update", "delete", "watermark"
    table: int
    key: int
    values: tuple[Value, ...]
    ts: int
    partition: int


@dataclass
class _TableState:
    definition: TableDef
    # keys preload_lo..preload_hi-1 exist with preloaded values unless changed since
    preload_lo: int = 0
    preload_hi: int = 0
    next_key: int = 0
    rows: dict[int, tuple[Value, ...]] = field(default_factory=dict)
    deleted: set[int] = field(default_factory=set)
    live: list[int] = field(default_factory=list)  # keys that may be updated or deleted
    slot: dict[int, int] = field(default_factory=dict)  # key -> index in ``live``


class Workload:
    """Generates a TiCDC stream phase by phase, remembering the current upstream rows.

    Call :meth:`create_tables`, then any of :meth:`insert_rows` / :meth:`changes`; each phase ends with a
    watermark on every partition (in protocols that have them). :meth:`take` returns the records produced
    since the last call.
    """

    def __init__(self, spec: WorkloadSpec, *, trace: bool = False) -> None:
        self.spec = spec
        self.encoder = ENCODERS[spec.protocol](spec)
        self.tables = [_TableState(table_def(spec.database, f"t{i}", spec.width)) for i in range(spec.tables)]
        self.trace: list[TraceEntry] | None = [] if trace else None
        self._rng = random.Random(spec.seed)
        self._offsets: dict[tuple[str | None, int], int] = {}  # next offset per (topic, partition)
        self._records: list[Record] = []
        self._clock_ms = 0
        self._since_watermark = 0
        # (table, key) changed since the last take(): the rows a batch of these records leaves behind.
        self.touched: set[tuple[int, int]] = set()

    # -- time and records ----------------------------------------------------------------------------
    def _next_ts(self) -> int:
        self._clock_ms += 1
        return (START_MS + self._clock_ms) << TSO_LOGICAL_BITS

    @property
    def last_ts(self) -> int:
        return (START_MS + self._clock_ms) << TSO_LOGICAL_BITS

    def _append(
        self, partition: int, value: bytes | None, key: bytes | None = None, topic: str | None = None
    ) -> None:
        offset = self._offsets.get((topic, partition), 0)
        self._offsets[(topic, partition)] = offset + 1
        self._records.append(Record(partition, offset, value, key, topic))

    def _append_encoded(self, partition: int, encoded: bytes | Keyed) -> None:
        if isinstance(encoded, Keyed):
            self._append(partition, encoded.value, encoded.key, encoded.topic)
        else:
            self._append(partition, encoded)

    @property
    def writer_schemas(self) -> dict[int, str | None]:
        """TiCDC Avro: the writer schema text of every id the records name; empty for other protocols."""
        registry = getattr(self.encoder, "registry", None)
        return dict(registry.schemas) if isinstance(registry, InProcessRegistry) else {}

    def _dispatch(self, table: int, key: int) -> int:
        # index-value dispatch: a key always goes to the same partition.
        return ((key * 2_654_435_761) >> 7 ^ table) % self.spec.partitions

    def take(self) -> list[Record]:
        records, self._records = self._records, []
        self.touched = set()
        return records

    # -- phases ----------------------------------------------------------------------------------------
    def create_tables(self, *, preloaded: int = 0, preload_from: int = 0, first_new_key: int = 0) -> None:
        """CREATE TABLE for every table (partition 0, or every partition for Simple), then a watermark.

        TiCDC Avro sends neither; its encoder still learns the tables.

        ``preloaded`` rows (keys ``preload_from`` up to ``preload_from + preloaded - 1``) are taken to exist
        already, with :func:`preloaded_value` values; new keys start at the larger of ``first_new_key`` and
        the key after the last preloaded one.
        """
        ts = self._next_ts()
        lo, hi = preload_from, preload_from + preloaded
        for index, state in enumerate(self.tables):
            state.preload_lo, state.preload_hi = lo, hi
            state.next_key = max(hi, first_new_key)
            state.live = list(range(lo, hi))
            state.slot = {k: i for i, k in enumerate(state.live)}
            value = self.encoder.create_table(state.definition, ts)
            partitions = self.spec.partitions if _ddl_everywhere(self.encoder) else 1
            if value is not None:
                for partition in range(partitions):
                    self._append_encoded(partition, value)
            self._log("create", index, 0, (), ts, 0)
        self.watermark()

    def insert_rows(self, rows_per_table: int) -> None:
        """Insert-only load of ``rows_per_table`` new rows into every table, then a watermark."""
        for _ in range(rows_per_table):
            for index in range(len(self.tables)):
                self._insert(index)
                self._tick()
        self.watermark()

    def changes(self, events: int, mix: Mix | None = None) -> None:
        """``events`` DML events over all tables in the spec's (or the given) mix, then a watermark."""
        insert_share, update_share, _ = MIX_SHARES[mix or self.spec.mix]
        rng, tables = self._rng, len(self.tables)
        for _ in range(events):
            index = rng.randrange(tables)
            draw = rng.random()
            if draw < insert_share or not self.tables[index].live:
                self._insert(index)
            elif draw < insert_share + update_share:
                self._update(index)
            else:
                self._delete(index)
            self._tick()
        self.watermark()

    def watermark(self) -> None:
        """A watermark at the last commit ts, on every partition (none in TiCDC Avro)."""
        ts = self.last_ts
        value = self.encoder.watermark(ts)
        if value is not None:
            for partition in range(self.spec.partitions):
                self._append_encoded(partition, value)
        self._log("watermark", -1, 0, (), ts, -1)
        self._since_watermark = 0

    def _tick(self) -> None:
        self._since_watermark += 1
        if self._since_watermark >= self.spec.watermark_every:
            self.watermark()

    # -- rows ------------------------------------------------------------------------------------------
    def row(self, index: int, key: int) -> tuple[Value, ...] | None:
        """The current upstream row of a key, or None if it does not exist."""
        state = self.tables[index]
        if key in state.rows:
            return state.rows[key]
        if state.preload_lo <= key < state.preload_hi and key not in state.deleted:
            kinds = state.definition.kinds
            return (key, *(preloaded_value(kinds[c], c, key) for c in range(1, len(kinds))))
        return None

    def _new_values(self, state: _TableState, key: int) -> tuple[Value, ...]:
        rng = self._rng
        values: list[Value] = [key]
        for column, kind in enumerate(state.definition.kinds[1:], start=1):
            if kind is ColumnKind.INT:
                values.append(rng.randrange(-(2**31), 2**31))
            elif kind is ColumnKind.VARCHAR:
                values.append(f"value {column} of {key} at {self._clock_ms}")
            elif kind is ColumnKind.DECIMAL:
                values.append(rng.randrange(-(10**10), 10**10))
            else:
                values.append(DATETIME_BASE_MICROS + self._clock_ms * 1000 + rng.randrange(1_000_000))
        return tuple(values)

    def _pick(self, state: _TableState) -> int:
        n = len(state.live)
        if self.spec.keys is KeyDistribution.UNIFORM:
            return state.live[self._rng.randrange(n)]
        # Inverse CDF of a continuous Zipf(s) on [1, n]: rank 1 (the oldest live key) is the hottest.
        s = self.spec.zipf_s
        u = self._rng.random()
        rank = ((n ** (1 - s) - 1) * u + 1) ** (1 / (1 - s)) if not math.isclose(s, 1.0) else n**u
        return state.live[min(int(rank) - 1, n - 1)]

    def _insert(self, index: int) -> None:
        state = self.tables[index]
        key = state.next_key
        state.next_key += 1
        values = self._new_values(state, key)
        state.rows[key] = values
        state.slot[key] = len(state.live)
        state.live.append(key)
        self._emit(index, Op.INSERT, key, values, None)

    def _update(self, index: int) -> None:
        state = self.tables[index]
        key = self._pick(state)
        old = self.row(index, key)
        values = self._new_values(state, key)
        state.rows[key] = values
        self._emit(index, Op.UPDATE, key, values, old)

    def _delete(self, index: int) -> None:
        state = self.tables[index]
        key = self._pick(state)
        old = self.row(index, key)
        assert old is not None
        state.rows.pop(key, None)
        state.deleted.add(key)
        # Swap-remove keeps picking O(1).
        position = state.slot.pop(key)
        last = state.live.pop()
        if last != key:
            state.live[position] = last
            state.slot[last] = position
        self._emit(index, Op.DELETE, key, old, None)

    def _emit(
        self, index: int, op: Op, key: int, data: tuple[Value, ...], old: tuple[Value, ...] | None
    ) -> None:
        ts = self._next_ts()
        partition = self._dispatch(index, key)
        self._append_encoded(partition, self.encoder.row(self.tables[index].definition, op, data, old, ts))
        self.touched.add((index, key))
        self._log(op.value, index, key, data, ts, partition)

    def _log(
        self, action: str, table: int, key: int, values: tuple[Value, ...], ts: int, partition: int
    ) -> None:
        if self.trace is not None:
            self.trace.append(TraceEntry(action, table, key, values, ts, partition))

    def live_rows(self, index: int) -> int:
        """How many rows the table holds upstream now."""
        return len(self.tables[index].live)


def write_records(records: Iterable[Record], directory: Path, *, topic: str, files: int = 2) -> list[Path]:
    """Write records as captured Kafka records (JSON Lines, base64 keys and values), round-robin over
    ``files``; ``topic`` is that of records that do not name their own."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = [directory / f"records-{i:03d}.jsonl" for i in range(files)]
    handles = [path.open("wb") for path in paths]
    try:
        for index, record in enumerate(records):
            line = orjson.dumps(
                {
                    "topic": record.topic or topic,
                    "partition": record.partition,
                    "offset": record.offset,
                    "timestamp": START_MS + index,
                    "key": None if record.key is None else base64.b64encode(record.key).decode(),
                    "value": None if record.value is None else base64.b64encode(record.value).decode(),
                }
            )
            handles[index % files].write(line + b"\n")
    finally:
        for handle in handles:
            handle.close()
    return paths
