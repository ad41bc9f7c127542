"""Durable buffer of records read but not yet applied (rows above G, DDLs not yet eligible). I/O.

Buffered records are part of the committed state, so the read position moves on past them (a Kafka topic
may expire them later). Each run reads the buffer back with the new records, and replaces it with what is
still pending before committing progress. A crash between the two re-reads records that are then in both
places; duplicates are dropped by position, and anything already applied is filtered by A_T.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ingest.lake import delta_io, sql_text
from ingest.lake import names as catalog_names
from ingest.model import MESSAGE_COLUMNS
from ingest.source import MESSAGE_SCHEMA

BUFFER_DIR = "buffer"
SCHEMA = T.StructType([T.StructField("stream_id", T.StringType()), *MESSAGE_SCHEMA.fields])


def buffer_path(state_path: str) -> str:
    return catalog_names.child(state_path, BUFFER_DIR)


def read_buffer(spark: SparkSession, state_path: str, stream_id: str) -> DataFrame | None:
    """The stream's buffered records as Kafka-shaped rows, or None when nothing was ever buffered."""
    path = buffer_path(state_path)
    if not delta_io.is_delta_table(spark, path):
        return None
    return delta_io.read(spark, path).where(F.col("stream_id") == stream_id).select(*MESSAGE_COLUMNS)


def replace_buffer(
    spark: SparkSession, state_path: str, stream_id: str, pending: DataFrame, count: int | None = None
) -> None:
    """Make the stream's buffer hold exactly ``pending`` (Kafka-shaped rows): one atomic Delta commit.

    ``count``: how many rows ``pending`` holds, when known. Nothing to hold and no buffer table yet: no
    table is created (reading an absent buffer gives nothing, as an empty one would).
    """
    rows = pending.select(F.lit(stream_id).alias("stream_id"), *MESSAGE_COLUMNS)
    path = buffer_path(state_path)
    exists = delta_io.prepare_to_create(spark, path)
    if count == 0 and not exists:
        return
    if not exists:
        delta_io.create_table(spark, path, SCHEMA)
    delta_io.write(rows, path, "overwrite", replaceWhere=f"stream_id = {sql_text.sql_string(stream_id)}")
