"""Test helpers: read a mirrored Delta table into plain Python values and compare with upstream truth."""

from __future__ import annotations

import struct
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any

import orjson
from pyspark.sql import SparkSession

from ingest import delta_io
from ingest.model import ColumnKind, TableId
from testkit.sample import Stream


def normalize(value: Any) -> Any:
    """Make upstream model values and Spark-collected values comparable."""
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    if isinstance(value, datetime) and value.tzinfo is not None:
        # Spark returns TIMESTAMP as naive local time of the session zone, which the tests pin to UTC.
        return value.astimezone(timezone.utc).replace(tzinfo=None)
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float):
        return value
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else value.normalize()
    return value


def delta_rows(
    spark: SparkSession, root: str, table: TableId, version: int | None = None
) -> dict[tuple[Any, ...], dict[str, Any]]:
    return location_rows(spark, f"{root}/{table.schema}/{table.table}", version)


def location_rows(
    spark: SparkSession, location: str, version: int | None = None
) -> dict[tuple[Any, ...], dict[str, Any]]:
    """A mirrored table's upstream columns by key, at a path or a catalog name (a ``TableName``)."""
    key = list(orjson.loads(delta_io.properties(spark, location)["ticdc.keyColumns"]))
    rows = {}
    for row in delta_io.read(spark, location, version).collect():
        values = {k: normalize(v) for k, v in row.asDict().items() if not k.startswith("_tidb_")}
        rows[tuple(values[k] for k in key)] = values
    return rows


def expected_rows(stream: Stream, table: TableId, ts: int) -> dict[tuple[Any, ...], dict[str, Any]]:
    state = stream.state_at(ts).get(table, {})
    columns = stream.table_columns(table, at=ts)
    result = {}
    float32 = {c for c in columns if stream.column_type(table, c).kind is ColumnKind.FLOAT}
    for key, row in state.items():
        values = {c: normalize(row.get(c)) for c in columns}
        for c in float32:
            if values[c] is not None:
                values[c] = struct.unpack("<f", struct.pack("<f", values[c]))[0]
        result[tuple(normalize(k) for k in key)] = values
    return result
