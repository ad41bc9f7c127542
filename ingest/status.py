"""``ticdc-ingest status``: what the mirror holds, read from progress, the tables and the quarantine. I/O."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from ingest import progress, quarantine
from ingest.config import IngestConfig
from ingest.model import TableId, tso_to_datetime


@dataclass(frozen=True)
class TableStatus:
    table: TableId
    applied_ts: int
    ddl_ts: int
    rows: int
    pending: int
    quarantined: int


def _when(tso: int) -> str:
    return tso_to_datetime(tso).isoformat() if tso else "-"


def _lag(tso: int, now: datetime) -> str:
    return f"{(now - tso_to_datetime(tso)).total_seconds():.0f}s" if tso else "-"


def collect(spark: SparkSession, config: IngestConfig) -> tuple[progress.Progress, list[TableStatus]]:
    """The last committed progress and one status line per mirrored table."""
    committed = progress.load_progress(spark, config.state_path, config.stream_id)
    bad: dict[str, int] = {}
    rejected = quarantine.read(spark, config.state_path)
    if rejected is not None:
        bad = {
            r["table"] or "": int(r["n"])
            for r in rejected.groupBy("table").agg(F.count("*").alias("n")).collect()
        }
    tables = []
    for table in sorted(set(committed.tables) | set(committed.pending_rows)):
        path = config.table_path(table.schema, table.table)
        state = progress.read_table_state(spark, path)
        rows = spark.read.format("delta").load(path).count() if state is not None else 0
        state = state or committed.tables.get(table)
        tables.append(
            TableStatus(
                table=table,
                applied_ts=state.applied_ts if state else 0,
                ddl_ts=state.ddl_ts if state else 0,
                rows=rows,
                pending=committed.pending_rows.get(table, 0),
                quarantined=bad.get(str(table), 0),
            )
        )
    return committed, tables


def render(committed: progress.Progress, tables: list[TableStatus], now: datetime | None = None) -> str:
    """The status report as text."""
    now = now or datetime.now(timezone.utc)
    g = committed.global_watermark
    lines = [
        f"run {committed.run_id}: G = {g} ({_when(g)}), lag {_lag(g, now)}",
        "partitions: "
        + (
            ", ".join(
                f"{p} watermark {w} resume@{committed.resume.get(p, 0)}"
                for p, w in sorted(committed.watermarks.items())
            )
            or "none"
        ),
        f"{'table':<28} {'applied TSO':>20}  {'applied at (UTC)':<32} {'lag':>8} {'rows':>9} {'pending':>8} "
        f"{'bad':>5}  last DDL at",
    ]
    for t in tables:
        lines.append(
            f"{t.table!s:<28} {t.applied_ts:>20}  {_when(t.applied_ts):<32} {_lag(t.applied_ts, now):>8} "
            f"{t.rows:>9} {t.pending:>8} {t.quarantined:>5}  {_when(t.ddl_ts)}"
        )
    return "\n".join(lines)
