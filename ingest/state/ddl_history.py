"""The DDL history Delta table: every DDL the mirror met, what it did, and the schema before and after. I/O.

Each outcome of a DDL on a table is listed once: a DDL applied again after a crash is not listed twice,
and a refused DDL that a later run applies (after a configuration change) is listed once for each outcome.
A batch reads, once, the entries its DDLs may already have (those of its tables at or above its first DDL's
commitTs, which only an earlier attempt can have written), and then appends each new entry as it is.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from datetime import datetime, timezone

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ingest.lake import delta_io
from ingest.lake import names as catalog_names
from ingest.model import DdlEvent, TableId, statement_identity, tso_to_datetime
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


# How an outcome ranks against another of the same DDL on the same table: one is listed unless an entry of
# the same or a higher rank is. A refusal, then an application after a configuration change, are both
# listed; an application, then a refusal (a run with a stricter configuration after a crash), only the first.
_RANK = {REJECTED: 1, APPLIED: 2, RECORDED: 2, SKIPPED: 2}
_Key = tuple[str, int, str]  # table, commitTs, statement identity


def listed_ranks(entries: Iterable[tuple[str, int, str, str]]) -> dict[_Key, int]:
    """The highest outcome rank listed per table, commitTs and statement, from (table, commitTs, sql,
    action) entries."""
    ranks: dict[_Key, int] = {}
    for table, commit_ts, sql, action in entries:
        key = (table, commit_ts, statement_identity(sql))
        ranks[key] = max(ranks.get(key, 0), _RANK.get(action, 2))
    return ranks


class Listed:
    """What the history already lists of one batch's DDLs, read on first use (one Spark job per batch that
    records anything), and kept up to date as the batch's tables record theirs, in parallel.

    ``tables``: the tables the batch may record a DDL of; ``floor``: the lowest commitTs among those DDLs.
    Within one batch each table applies a DDL once, so only an earlier attempt (a crash between the entry
    and the table's state commit, a refusal met again) can have listed one.
    """

    def __init__(self, state_path: str, tables: Iterable[TableId], floor: int) -> None:
        self.state_path = state_path
        self.tables = sorted({str(t) for t in tables})
        self.floor = floor
        self._ranks: dict[_Key, int] | None = None
        self._lock = threading.Lock()
        self.table_made = False  # the history table is known to exist: no entry asks again

    def _load(self, spark: SparkSession) -> dict[_Key, int]:
        if self._ranks is None:
            history = read(spark, self.state_path)
            rows = []
            self.table_made = history is not None
            if history is not None:
                condition = (F.col("commit_ts") >= self.floor) & F.col("table").isin(self.tables)
                rows = history.where(condition).select("table", "commit_ts", "sql", "action").collect()
            self._ranks = listed_ranks((r["table"], r["commit_ts"], r["sql"], r["action"]) for r in rows)
        return self._ranks

    def claim(self, spark: SparkSession, table: TableId, ddl: DdlEvent, action: str) -> bool:
        """True when this outcome is not listed yet: the caller appends it, and it counts as listed."""
        key, rank = (str(table), ddl.commit_ts, ddl.identity), _RANK[action]
        with self._lock:
            ranks = self._load(spark)
            if ranks.get(key, 0) >= rank:
                return False
            ranks[key] = rank
            return True


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
    listed: Listed,
) -> None:
    """Add one entry, unless ``listed`` (this batch's view of the history) already has it."""
    if not listed.claim(spark, table, ddl, action):
        return
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
    if not listed.table_made:
        with exclusive_write(spark):  # tables applied in parallel take turns at creating it
            if not delta_io.prepare_to_create(spark, path):
                delta_io.create_table(spark, path, SCHEMA, properties=PROPERTIES)
        listed.table_made = True
    # Appends to one Delta table never conflict, so tables applied in parallel record at the same time. A
    # plain append: a Delta transaction id would make each one rebuild the table's list of ids (a Spark job).
    with committing(spark, f"ddl history: {table} at {ddl.commit_ts}"):
        delta_io.write(new, path)


def read(spark: SparkSession, state_path: str) -> DataFrame | None:
    """The DDL history table, or None when no DDL was ever recorded."""
    path = history_path(state_path)
    if not delta_io.is_delta_table(spark, path):
        return None
    return delta_io.read(spark, path)
