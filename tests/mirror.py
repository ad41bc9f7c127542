"""Test helpers: read a mirrored Delta table into plain Python values and compare with upstream truth."""

from __future__ import annotations

import json
import re
import struct
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
from pyspark.sql import SparkSession
from ticdc_fixture import CORPORA, differences, expected_gone, expected_tables, handle_keys, shown_without_ddl

from ingest.apply.table import table_exists, table_info
from ingest.config import IngestConfig
from ingest.lake import delta_io
from ingest.lake.mirror import Mirror
from ingest.model import ColumnKind, TableId
from ingest.state.table_state import commit_ts_column
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


def located(root: object, table: TableId) -> str:
    """Where a path-mode mirror under ``root`` keeps ``table``: the product's own locator says."""
    return Mirror(root=str(root)).address(table)


def delta_rows(
    spark: SparkSession, root: str, table: TableId, version: int | None = None
) -> dict[tuple[Any, ...], dict[str, Any]]:
    return location_rows(spark, located(root, table), version)


def location_rows(
    spark: SparkSession, location: str, version: int | None = None
) -> dict[tuple[Any, ...], dict[str, Any]]:
    """A mirrored table's upstream columns by key, at a path or a catalog name (a ``TableName``)."""
    properties = delta_io.properties(spark, location)
    key = list(orjson.loads(properties["ticdc.keyColumns"]))
    ours = commit_ts_column(properties)
    rows = {}
    for row in delta_io.read(spark, location, version).collect():
        values = {k: normalize(v) for k, v in row.asDict().items() if k != ours}
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


def corpus_rows(spark: SparkSession, config: IngestConfig, name: str) -> list[dict] | None:
    """The rows of the mirrored table ``database.table``, upstream's columns only (None: no table there)."""
    path = config.mirror.address(TableId(*name.split(".")))
    if not table_exists(spark, path):
        return None
    return upstream_rows(spark, path)


def upstream_rows(spark: SparkSession, location: Any) -> list[dict]:
    """A mirrored table's rows without the mirror's own column, whatever upstream's columns are named."""
    ours = commit_ts_column(delta_io.properties(spark, location))
    return [
        {k: v for k, v in r.asDict().items() if k != ours} for r in delta_io.read(spark, location).collect()
    ]


def corpus_problems(
    spark: SparkSession, config: IngestConfig, corpus: Path, names: list[str] | None = None
) -> dict[str, list[str]]:
    """What differs from what TiDB returned at the end of a corpus, per table of ``names`` (default: every
    table the corpus expects, and every table gone upstream, which must not be live in the mirror; a view
    must hold nothing in the lake at all)."""
    tables = expected_tables(corpus)
    problems = {}
    for name in tables if names is None else names:
        rows = corpus_rows(spark, config, name)
        found = ["missing table"] if rows is None else differences(tables[name], rows, ours=None)
        if found:
            problems[name] = found
    return problems if names is not None else {**problems, **gone_problems(spark, config, corpus)}


# The rows RECOVER TABLE and FLASHBACK TABLE bring back in the recover corpus, as its history script wrote
# them before its DROP or TRUNCATE. The kit's TiDB (on a mock store without delete ranges) removes a dropped
# table's rows at once, so its expected.json lacks them; a real TiDB restores them, and TiCDC sends no row
# event for them either way.
RESTORED = {
    "rc.t1": [{"id": "1", "v": "a"}, {"id": "2", "v": "b"}],
    "rc.t2_back": [{"id": "1", "v": "a"}, {"id": "2", "v": "b"}],
    "rc.t3_before": [{"id": "1", "v": "a"}, {"id": "2", "v": "b"}, {"id": "3", "v": "c"}],
}


def recover_problems(spark: SparkSession, config: IngestConfig, corpus: Path) -> dict[str, list[str]]:
    """What differs from what a real TiDB holds at the end of the recover corpus: the kit's final state with
    the rows RECOVER and FLASHBACK restore, and no table gone upstream live in the mirror."""
    expected = expected_tables(corpus)
    for name, rows in RESTORED.items():
        expected[name]["rows"] = rows + expected[name]["rows"]
    problems = {}
    for name, table in expected.items():
        rows = corpus_rows(spark, config, name)
        found = ["missing table"] if rows is None else differences(table, rows, ours=None)
        if found:
            problems[name] = found
    return {**problems, **gone_problems(spark, config, corpus)}


def gone_problems(spark: SparkSession, config: IngestConfig, corpus: Path) -> dict[str, list[str]]:
    """Every table gone upstream at the end of a corpus that is live in the mirror (a view: in the lake)."""
    problems = {}
    for name in expected_gone(corpus):
        path = config.mirror.address(TableId(*name.split(".")))
        if not table_exists(spark, path):
            continue
        if not table_info(spark, path).retired:
            problems[name] = ["gone upstream, live in the mirror"]
        elif name.startswith("app.v"):
            problems[name] = ["a view, yet a table in the lake"]
    return problems


# -- Debezium: what a user gives, and what its records can show ---------------------------------------------

_DECIMAL = re.compile(r"decimal\((\d+),(\d+)\)")
_BINARY = re.compile(r"^(var)?binary\(\d+\)|^(tiny|medium|long)?blob$")
_DEFAULT = re.compile(r"\bDEFAULT\s+(?!NULL\b)", re.IGNORECASE)


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def debezium_settings(corpus: str) -> dict[str, str]:
    """table-keys and column-types as a user who knows the tables writes them: the types of tables whose
    columns kept their types (column-types holds for every version of a column)."""
    keys = handle_keys(CORPORA[corpus])
    types = []
    shown = set(shown_without_ddl(corpus))
    for name, table in expected_tables(CORPORA[corpus]).items():
        for column in table["columns"] if name in shown else ():
            typ = column["type"].lower()
            decimal = _DECIMAL.match(typ)
            if typ.startswith("bigint") and "unsigned" in typ:
                types.append(f"{name}.{column['name']}=bigint unsigned")
            elif _BINARY.match(typ) or (decimal and int(decimal.group(1)) <= 15):
                types.append(f"{name}.{column['name']}={typ.split()[0]}")
    return {
        "table-keys": ";".join(f"{table}={','.join(map(quote, key))}" for table, key in keys.items()),
        "column-types": ";".join(t for t in types if ";" not in t),
    }


def added_with_default(corpus: str) -> set[str]:
    """Tables with an ADD COLUMN … DEFAULT: Debezium cannot carry what their older rows read."""
    tables = set()
    for step in json.loads((CORPORA[corpus] / "events.json").read_text()):
        for event in step.get("events", []):
            if event["type"] == "add column" and _DEFAULT.search(event["query"]):
                tables.add(f"{event['schema']}.{event['table']}")
    return tables


def lossy_columns(table: dict) -> set[str]:
    """Columns whose values Debezium rounds: DECIMALs a double cannot hold."""
    found = set()
    for column in table["columns"]:
        decimal = _DECIMAL.match(column["type"].lower())
        if decimal and int(decimal.group(1)) > 15:
            found.add(column["name"])
    return found


def debezium_problems(spark: SparkSession, config: IngestConfig, corpus: str) -> dict[str, list[str]]:
    """What differs from TiDB's tables at the end of a corpus mirrored from its Debezium records, for every
    table they can show (no DDL they cannot show, no ADD COLUMN … DEFAULT), the lossy columns left out."""
    expected = expected_tables(CORPORA[corpus])
    shown = [name for name in shown_without_ddl(corpus) if name not in added_with_default(corpus)]
    problems: dict[str, list[str]] = {} if shown else {corpus: ["no table Debezium can show"]}
    for name in shown:
        rows = corpus_rows(spark, config, name)
        lossy = lossy_columns(expected[name])
        found = (
            ["missing table"] if rows is None else differences(expected[name], rows, None, skip_virtual=True)
        )
        kept = [p for p in found if not any(f" column {c} (" in p for c in lossy)]
        if kept:
            problems[name] = kept
    return problems
