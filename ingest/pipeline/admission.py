"""What a batch reads of its decoded records before applying anything: the control events that reach the
driver (DDLs, watermarks, announced schemas), each table's row signatures and commit times, and what is
left pending above the batch's bounds. Spark reads, no Delta writes."""

from __future__ import annotations

import logging
from collections import defaultdict

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ingest.decode.codec import Codec, Decoded
from ingest.model import DdlEvent, Position, TableId, TableSignature, VersionedSchema, Watermark
from ingest.source.decoding import CONTROL_KINDS, KIND_DML
from ingest.state import schema_cache

logger = logging.getLogger(__name__)


def control_events(
    decoded: DataFrame, codec: Codec
) -> tuple[list[DdlEvent], list[Watermark], list[VersionedSchema]]:
    """DDLs, watermarks and announced table schemas: the only records that reach the driver, built by the
    codec from their decoded columns."""
    names = ("kind", "type", "database", "table", "commit_ts", "sql", "table_schema", "pre_table_schema")
    rows = decoded.where(F.col("kind").isin(*CONTROL_KINDS)).select("topic", "partition", "offset", *names)
    ddls: list[DdlEvent] = []
    watermarks: list[Watermark] = []
    schemas: list[VersionedSchema] = []
    for row in rows.collect():
        position = Position(row["topic"], row["partition"], row["offset"])
        control = codec.control(Decoded(position, **{name: row[name] for name in names}))
        schemas.extend(control.schemas)
        if isinstance(control.event, DdlEvent):
            ddls.append(control.event)
        elif control.event is not None:
            watermarks.append(control.event)
    return ddls, watermarks, schemas


def type_signatures(dml: DataFrame) -> list[TableSignature]:
    # Grouped on the map's key and value arrays as they come: sorting each row's pairs into one value
    # cost more than the aggregate itself. The same types in another key order meet again on the driver.
    rows = (
        dml.groupBy(
            "database",
            "table",
            F.map_keys("mysql_type").alias("names"),
            F.map_values("mysql_type").alias("types"),
            F.col("pk_names"),
        )
        .agg(F.min("commit_ts").alias("lo"), F.max("commit_ts").alias("hi"), F.count("*").alias("n"))
        .collect()
    )
    merged: dict[tuple[TableId, tuple[tuple[str, str], ...], tuple[str, ...]], list[int]] = {}
    for row in rows:
        pairs = tuple(sorted(zip(row["names"] or [], row["types"] or [], strict=True)))
        group = (TableId(row["database"], row["table"]), pairs, tuple(row["pk_names"] or ()))
        lo, hi, n = int(row["lo"]), int(row["hi"]), int(row["n"])
        if group in merged:
            seen = merged[group]
            lo, hi, n = min(lo, seen[0]), max(hi, seen[1]), n + seen[2]
        merged[group] = [lo, hi, n]
    return [
        TableSignature(
            table=table, mysql_types=pairs, pk_names=pk, min_commit_ts=lo, max_commit_ts=hi, rows=n
        )
        for (table, pairs, pk), (lo, hi, n) in merged.items()
    ]


def simple_signatures(dml: DataFrame) -> list[TableSignature]:
    carries = F.col("checksum_current").isNotNull() | F.col("checksum_previous").isNotNull()
    rows = (
        dml.groupBy("database", "table", "schema_version")
        .agg(
            F.min("commit_ts").alias("lo"),
            F.max("commit_ts").alias("hi"),
            F.count("*").alias("n"),
            F.count(F.when(carries, 1)).alias("checksummed"),
        )
        .collect()
    )
    return [
        TableSignature(
            table=TableId(r["database"], r["table"]),
            mysql_types=(),
            pk_names=(),
            min_commit_ts=int(r["lo"]),
            max_commit_ts=int(r["hi"]),
            rows=int(r["n"]),
            schema_version=int(r["schema_version"]),
            checksummed=int(r["checksummed"]),
        )
        for r in rows
    ]


def parked(
    signatures: list[TableSignature], schemas: dict[schema_cache.SchemaKey, VersionedSchema]
) -> dict[TableId, int]:
    """Per table, the first commit_ts of rows whose schema version is unknown (Simple only)."""
    first: dict[TableId, int] = {}
    for s in signatures:
        if s.schema_version is not None and (s.table, s.schema_version) not in schemas:
            first[s.table] = min(first.get(s.table, s.min_commit_ts), s.min_commit_ts)
            logger.warning(
                "%s: %d row(s) name schema version %d, which no BOOTSTRAP or DDL has announced yet; "
                "they wait, and the table is applied only up to commitTs %d",
                s.table,
                s.rows,
                s.schema_version,
                s.min_commit_ts - 1,
            )
    return first


def above_bound(g: int, bounds: dict[TableId, int]) -> SparkColumn:
    """Rows and DDLs not applied by this batch: above G, or above their own table's lower bound."""
    condition = F.col("commit_ts") > g
    for table, bound in bounds.items():
        mine = (F.col("database") == table.schema) & (F.col("table") == table.table)
        condition = condition | (mine & (F.col("commit_ts") > bound))
    return condition


def pending_counts(pending: DataFrame) -> tuple[dict[TableId, int], int]:
    """How many rows per table stay pending above G (DDLs are not counted as rows), and how many records
    in all (rows and DDLs): what the buffer will hold."""
    rows = pending.groupBy("kind", "database", "table").count().collect()
    per_table: dict[TableId, int] = defaultdict(int)
    for r in rows:
        if r["kind"] == KIND_DML and r["table"]:
            per_table[TableId(r["database"], r["table"])] += int(r["count"])
    return dict(per_table), sum(int(r["count"]) for r in rows)


def row_stamps(dml: DataFrame, tables: list[TableId]) -> dict[TableId, list[int]]:
    """The sorted commit_ts of each table's rows, for tables with DDLs in the batch (one Spark job)."""
    if not tables:
        return {}
    wanted = F.lit(False)
    for table in tables:
        wanted = wanted | ((F.col("database") == table.schema) & (F.col("table") == table.table))
    rows = (
        dml.where(wanted)
        .groupBy("database", "table")
        .agg(F.array_sort(F.collect_set("commit_ts")).alias("stamps"))
        .collect()
    )
    return {TableId(r["database"], r["table"]): [int(t) for t in r["stamps"]] for r in rows}
