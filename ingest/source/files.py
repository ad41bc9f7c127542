"""Kafka records from files: captured records, ``kcat -J`` envelopes, or TiCDC's storage-sink layout. I/O.

Line formats (JSON Lines; files may overlap or split partitions arbitrarily; order comes from offsets):

- captured records: ``{"topic", "partition", "offset", "timestamp" (ms or null), "key" (base64 or null),
  "value" (base64 or null)}``;
- ``kcat -C -J`` envelopes: ``{"topic", "partition", "offset", "tstype", "ts" (ms), "broker", "headers",
  "key", "payload"}``, where key and payload are the message bytes as a JSON string (kcat never
  base64-encodes them) or null. kcat always writes ``broker``, which is how a line is recognised as kcat.

``input-format=auto`` reads a storage-sink root (a ``metadata`` file with a checkpoint-ts) with
:mod:`ingest.source.storage_sink`, and otherwise decides per line, so a folder may mix both line formats.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ingest.config import InputFormat
from ingest.decode.storage_csv import CsvOptions
from ingest.model import PartitionId
from ingest.source import at_or_after, storage_sink

LINE_SCHEMA = T.StructType(
    [
        T.StructField("topic", T.StringType()),
        T.StructField("partition", T.IntegerType()),
        T.StructField("offset", T.LongType()),
        T.StructField("timestamp", T.LongType()),
        T.StructField("key", T.StringType()),
        T.StructField("value", T.StringType()),
        # kcat -J
        T.StructField("ts", T.LongType()),
        T.StructField("broker", T.IntegerType()),
        T.StructField("payload", T.StringType()),
    ]
)


def resolve_format(spark: SparkSession, input_path: str, requested: InputFormat) -> InputFormat:
    """``auto`` becomes ``storage`` when the input is a storage-sink root; the rest stay as asked."""
    if requested is InputFormat.AUTO and storage_sink.read_checkpoint(spark, input_path) is not None:
        return InputFormat.STORAGE
    return requested


def read_messages(
    spark: SparkSession,
    input_path: str,
    start: Mapping[PartitionId, int],
    input_format: InputFormat = InputFormat.AUTO,
    csv: CsvOptions | None = None,
) -> DataFrame:
    """Read records at or after each partition's start offset, as Kafka-shaped rows.

    A record that appears in several files (overlapping captures) comes back once per file: the pipeline
    keeps each position once (``pipeline.cache_once_per_position``), after decoding. Lines that are not a
    record at all (no topic/partition/offset) come back with ``partition`` null and are quarantined.
    """
    chosen = resolve_format(spark, input_path, input_format)
    if chosen is InputFormat.STORAGE or csv is not None:
        return storage_sink.read_messages(spark, input_path, start, csv)
    raw = spark.read.schema(LINE_SCHEMA).option("mode", "PERMISSIVE").json(input_path)
    detected = F.lit(chosen is InputFormat.AUTO) & F.col("broker").isNotNull()
    kcat = F.lit(chosen is InputFormat.KCAT) | detected
    millis = F.when(kcat, F.col("ts")).otherwise(F.col("timestamp"))
    messages = raw.select(
        "topic",
        "partition",
        "offset",
        F.when(millis.isNotNull(), F.timestamp_millis(millis)).alias("timestamp"),
        F.when(kcat, F.encode("key", "UTF-8")).otherwise(F.unbase64("key")).alias("key"),
        F.when(kcat, F.encode("payload", "UTF-8")).otherwise(F.unbase64("value")).alias("value"),
    )
    if start:
        messages = messages.where(at_or_after(start))
    return messages


@dataclass(frozen=True)
class PartitionStats:
    """What a run is about to read from one partition."""

    records: int
    bytes: int
    last_offset: int


def input_stats(messages: DataFrame) -> dict[PartitionId, PartitionStats]:
    """Records, bytes and last offset per partition, for progress lines (one pass over the input)."""
    rows = (
        messages.where(F.col("partition").isNotNull())
        .groupBy("topic", "partition")
        .agg(
            F.count("*").alias("n"),
            F.sum(F.coalesce(F.length("value"), F.lit(0))).alias("bytes"),
            F.max("offset").alias("last"),
        )
        .collect()
    )
    return {
        PartitionId(r["topic"], int(r["partition"])): PartitionStats(
            int(r["n"]), int(r["bytes"]), int(r["last"])
        )
        for r in rows
    }


def describe_stats(
    stats: Mapping[PartitionId, PartitionStats], resume: Mapping[PartitionId, int], *, before: bool
) -> list[str]:
    """Progress lines: one summary, then offsets done / offsets in the input per partition."""
    records = sum(s.records for s in stats.values())
    size = sum(s.bytes for s in stats.values())
    phase = "reading" if before else "done"
    lines = [f"{phase}: {records} records, {size / 1e6:.2f} MB in {len(stats)} partitions"]
    for pid, s in sorted(stats.items()):
        total = s.last_offset + 1
        done = min(resume.get(pid, 0), total)
        lines.append(
            f"  {pid}: offsets done {done}/{total} ({done / total:.0%})" if total else f"  {pid}: empty"
        )
    return lines
