"""The DDL history Delta table: every DDL the mirror met, what it did, and the schema before and after. I/O.

Each entry is an append made idempotent by a Delta transaction id of the table, the DDL's commitTs and
statement: a DDL applied again after a crash is not listed twice, and a refused DDL that a later run
applies (after a configuration change) is listed once for each outcome.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from ingest import catalog_names, delta_io
from ingest.model import DdlEvent, TableId, tso_to_datetime
from ingest.state.table_state import committing, exclusive_write

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
# A DDL storm (a migration altering many tables) appends an entry per DDL, and Delta checkpoints a table
# every 10 commits by default, each costing a few Spark jobs (1.5 s here) against 0.1-0.4 s for an append.
# The history is read rarely and whole, so a checkpoint every 100 entries is plenty.
PROPERTIES = {"delta.checkpointInterval": "100"}


def history_path(state_path: str) -> str:
    return catalog_names.child(state_path, HISTORY_DIR)


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
    new = spark.createDataFrame([row], SCHEMA)
    with exclusive_write(spark):  # tables applied in parallel take turns at creating it
        if not delta_io.prepare_to_create(spark, path):
            delta_io.create_table(spark, path, SCHEMA, properties=PROPERTIES)
    # Appends to one Delta table never conflict, so tables applied in parallel record at the same time.
    with committing(spark, f"ddl history: {table} at {ddl.commit_ts}", _txn(table, ddl, action)):
        delta_io.write(new, path)


def _txn(table: TableId, ddl: DdlEvent, action: str) -> tuple[str, int]:
    """Delta skips an append whose transaction id already carries this version or a higher one.

    One id per table and DDL; a refusal is version 1 and any other outcome version 2, so a DDL refused by
    one run and applied by the next is listed twice, and one applied again after a crash once. An append
    costs less than a MERGE, and the history's readers still find each entry once without deduplicating.
    """
    statement = hashlib.sha256(ddl.identity.encode()).hexdigest()[:16]
    return f"ticdc-ingest ddl history {table} {ddl.commit_ts} {statement}", 1 if action == REJECTED else 2


def read(spark: SparkSession, state_path: str) -> DataFrame | None:
    """The DDL history table, or None when no DDL was ever recorded."""
    path = history_path(state_path)
    if not delta_io.is_delta_table(spark, path):
        return None
    return delta_io.read(spark, path)
