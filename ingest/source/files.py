"""Captured Kafka records from a directory of JSON Lines files.

One record per line: ``{"topic", "partition", "offset", "timestamp" (ms or null), "key" (base64 or null),
"value" (base64 or null)}``. Files may overlap or split partitions arbitrarily; order comes from offsets.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ingest.model import PartitionId
from ingest.source import at_or_after

RECORD_SCHEMA = T.StructType(
    [
        T.StructField("topic", T.StringType()),
        T.StructField("partition", T.IntegerType()),
        T.StructField("offset", T.LongType()),
        T.StructField("timestamp", T.LongType()),
        T.StructField("key", T.StringType()),
        T.StructField("value", T.StringType()),
    ]
)


def read_messages(spark: SparkSession, input_path: str, start: Mapping[PartitionId, int]) -> DataFrame:
    """Read captured records at or after each partition's start offset, as Kafka-shaped rows.

    A record that appears in several files (overlapping captures) is read once. Lines that are not a
    record at all (no topic/partition/offset) come back with ``partition`` null and are quarantined.
    """
    raw = spark.read.schema(RECORD_SCHEMA).option("mode", "PERMISSIVE").json(input_path)
    messages = raw.select(
        "topic",
        "partition",
        "offset",
        F.when(F.col("timestamp").isNotNull(), F.timestamp_millis("timestamp")).alias("timestamp"),
        F.unbase64("key").alias("key"),
        F.unbase64("value").alias("value"),
    )
    if start:
        messages = messages.where(at_or_after(start))
    return messages.dropDuplicates(["topic", "partition", "offset"])
