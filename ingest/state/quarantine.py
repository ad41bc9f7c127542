"""Dead-letter rows for input we could not use: raw bytes, position, error and our version. I/O.

Written with an insert-only MERGE on the position, so re-reading the same input never duplicates an entry.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ingest.lake import delta_io
from ingest.lake import names as catalog_names
from ingest.lake.delta_io import quote
from ingest.model import BAD_COLUMN, TableId
from ingest.state.table_state import exclusive_write

QUARANTINE_DIR = "quarantine"

SCHEMA = T.StructType(
    [
        T.StructField("topic", T.StringType()),
        T.StructField("partition", T.IntegerType()),
        T.StructField("offset", T.LongType()),
        T.StructField("kafka_timestamp", T.TimestampType()),
        T.StructField("key", T.BinaryType()),
        T.StructField("value", T.BinaryType()),
        T.StructField("table", T.StringType()),
        T.StructField("commit_ts", T.LongType()),
        T.StructField("error_class", T.StringType()),
        T.StructField("error", T.StringType()),
        T.StructField("run_id", T.LongType()),
        T.StructField("ingest_version", T.StringType()),
        T.StructField("quarantined_at", T.TimestampType()),
    ]
)


def ingest_version() -> str:
    try:
        return version("ticdc-delta-ingest")
    except PackageNotFoundError:
        return "unknown"


def quarantine_path(state_path: str) -> str:
    return catalog_names.child(state_path, QUARANTINE_DIR)


def write(
    spark: SparkSession, state_path: str, rejected: DataFrame, *, error_class: str, run_id: int
) -> None:
    """Append rejected records; ``rejected`` has the message columns plus ``error`` (and optionally table).

    Rows without a position (a line that was not a Kafka record at all) are kept too, keyed by their bytes.
    """
    table_col = (
        F.concat_ws(".", F.col("database"), F.col("table"))
        if "database" in rejected.columns
        else F.lit(None).cast("string")
    )
    commit_ts = F.col("commit_ts") if "commit_ts" in rejected.columns else F.lit(None).cast("long")
    rows = rejected.select(
        F.col("topic"),
        F.col("partition"),
        F.col("offset"),
        F.col("timestamp").alias("kafka_timestamp"),
        F.col("key"),
        F.col("value"),
        F.when(table_col != "", table_col).alias("table"),
        commit_ts.alias("commit_ts"),
        F.lit(error_class).alias("error_class"),
        F.col("error"),
        F.lit(run_id).cast("long").alias("run_id"),
        F.lit(ingest_version()).alias("ingest_version"),
        F.current_timestamp().alias("quarantined_at"),
    )
    path = quarantine_path(state_path)
    same = (
        " AND ".join(f"q.{quote(c)} = r.{quote(c)}" for c in ("topic", "partition", "offset"))
        + " AND q.error <=> r.error"
    )
    # Tables applied in parallel quarantine into the one table: they take turns.
    with exclusive_write(spark):
        if not delta_io.prepare_to_create(spark, path):
            delta_io.create_table(spark, path, SCHEMA)
        delta_io.merge(spark, path, rows, same, "WHEN NOT MATCHED THEN INSERT *", target="q", alias="r")


def write_unconvertible(
    spark: SparkSession, state_path: str, changes: DataFrame, table: TableId, run_id: int
) -> None:
    """Append the normalized changes of ``table`` whose values do not convert, each with its reason."""
    write(
        spark,
        state_path,
        changes.where(F.col(BAD_COLUMN) != "").select(
            "*",
            F.lit(table.schema).alias("database"),
            F.lit(table.table).alias("table"),
            F.col(BAD_COLUMN).alias("error"),
        ),
        error_class="ConversionError",
        run_id=run_id,
    )


def read(spark: SparkSession, state_path: str) -> DataFrame | None:
    """The quarantine table, or None when nothing was ever quarantined."""
    path = quarantine_path(state_path)
    if not delta_io.is_delta_table(spark, path):
        return None
    return delta_io.read(spark, path)
