"""The DDL history Delta table: every DDL the mirror met, what it did, and the schema before and after. I/O.

Insert-only on (table, commit_ts, statement), so a re-applied DDL after a crash is not listed twice.
"""

from __future__ import annotations

from datetime import datetime, timezone

from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ingest.apply.delta_io import prepare_to_create
from ingest.model import DdlEvent, TableId, tso_to_datetime

HISTORY_DIR = "ddl_history"
SCHEMA = T.StructType(
    [
        T.StructField("commit_ts", T.LongType()),
        T.StructField("commit_time", T.TimestampType()),
        T.StructField("table", T.StringType()),
        T.StructField("sql", T.StringType()),
        T.StructField("action", T.StringType()),
        T.StructField("detail", T.StringType()),
        T.StructField("schema_before", T.StringType()),
        T.StructField("schema_after", T.StringType()),
        T.StructField("position", T.StringType()),
        T.StructField("run_id", T.LongType()),
        T.StructField("recorded_at", T.TimestampType()),
    ]
)

APPLIED, RECORDED, REJECTED, SKIPPED = "applied", "recorded", "rejected", "skipped"


def history_path(state_path: str) -> str:
    return f"{state_path.rstrip('/')}/{HISTORY_DIR}"


def record(
    spark: SparkSession,
    state_path: str,
    *,
    table: TableId,
    ddl: DdlEvent,
    action: str,
    detail: str,
    schema_before: str | None,
    schema_after: str | None,
    run_id: int,
) -> None:
    """Add one entry, unless this table already has one for the same DDL."""
    row = (
        ddl.commit_ts,
        tso_to_datetime(ddl.commit_ts),
        str(table),
        ddl.sql,
        action,
        detail,
        schema_before,
        schema_after,
        str(ddl.position),
        run_id,
        datetime.now(timezone.utc),
    )
    path = history_path(state_path)
    if not prepare_to_create(spark, path):
        DeltaTable.createIfNotExists(spark).location(path).addColumns(SCHEMA).execute()
    same = (
        (F.col("h.table") == F.col("n.table"))
        & (F.col("h.commit_ts") == F.col("n.commit_ts"))
        & (F.col("h.sql") == F.col("n.sql"))
        & (F.col("h.action") == F.col("n.action"))
    )
    new = spark.createDataFrame([row], SCHEMA).alias("n")
    DeltaTable.forPath(spark, path).alias("h").merge(new, same).whenNotMatchedInsertAll().execute()
