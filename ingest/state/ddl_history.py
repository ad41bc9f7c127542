"""The DDL history Delta table: every DDL the mirror met, what it did, and the schema before and after. I/O.

Insert-only on (table, commit_ts, statement), so a re-applied DDL after a crash is not listed twice.
"""

from __future__ import annotations

from datetime import datetime, timezone

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from ingest.apply import delta_io
from ingest.apply.delta_io import quote
from ingest.model import DdlEvent, TableId, tso_to_datetime
from ingest.state.table_state import exclusive_write

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
    same = " AND ".join(f"h.{quote(c)} = n.{quote(c)}" for c in ("table", "commit_ts", "sql", "action"))
    new = spark.createDataFrame([row], SCHEMA)
    # Tables applied in parallel record into the one history table: they take turns.
    with exclusive_write():
        if not delta_io.prepare_to_create(spark, path):
            delta_io.create_table(spark, path, SCHEMA)
        delta_io.merge(spark, path, new, same, "WHEN NOT MATCHED THEN INSERT *", target="h", alias="n")


def read(spark: SparkSession, state_path: str) -> DataFrame | None:
    """The DDL history table, or None when no DDL was ever recorded."""
    path = history_path(state_path)
    if not delta_io.is_delta_table(spark, path):
        return None
    return delta_io.read(spark, path)
