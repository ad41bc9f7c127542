"""``ticdc-ingest status``: what the mirror holds, read from progress, the tables and the quarantine. I/O."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ingest.commands.flags import catalog_warehouse
from ingest.config import IngestConfig
from ingest.lake import delta_io, delta_log
from ingest.model import TableId, TableState, tso_to_datetime
from ingest.spark import get_session
from ingest.state import ddl_history, progress, quarantine, table_state

logger = logging.getLogger(__name__)

LAST_DDL_WIDTH = 60


@dataclass(frozen=True)
class TableStatus:
    table: TableId
    applied_ts: int
    ddl_ts: int
    rows: int
    pending: int
    quarantined: int
    last_ddl: str = ""
    stopped: str = ""  # the DDL it stopped before (refused, not applied since), if any
    failed: str = ""  # the error it stopped on in the last run (not a refused DDL), if any
    # Rows applied while row checksums were checked, since the mirror began: verified, and carrying none.
    rows_verified: int = 0
    rows_unverified: int = 0


def command(
    config: IngestConfig,
    lag_chart: str | None = None,
    remote: str | None = None,
    warehouse: str | None = None,
) -> int:
    """``status``: the table of every mirrored table's progress, and with ``lag_chart`` a PNG of lag."""
    warehouse = catalog_warehouse(warehouse, config.by_name)
    try:
        # No JVM for a mirror on this machine: the answer is in its Delta logs.
        committed, tables = collect_local(config)
    except delta_log.Unreadable as why:
        logger.info("status: reading the mirror through Spark (%s)", why)
        committed, tables = collect(get_session(remote=remote, catalog_warehouse=warehouse), config)
    print(render(committed, tables))
    if lag_chart:
        spark = get_session(remote=remote, catalog_warehouse=warehouse)
        lines = plot_lag_chart(lag_history(spark, config), lag_chart)
        print(f"lag chart: {lines} lines (G and tables) drawn into {lag_chart}")
    return 0


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
    last_ddl, stopped = _last_ddls(spark, config.state_path)
    tables = []
    for table in sorted(set(committed.tables) | set(committed.pending_rows)):
        path = config.mirror.address(table)
        try:
            state = table_state.read_table_state(spark, path)
            rows = delta_io.read(spark, path).count() if state is not None else 0
        except Exception:  # one unreadable table still gets its line, from progress
            logger.exception("%s: cannot be read; its line shows what progress last recorded", table)
            state, rows = None, 0
        tables.append(_line(table, committed, state, rows, bad, last_ddl, stopped))
    return committed, tables


def _line(
    table: TableId,
    committed: progress.Progress,
    state: TableState | None,
    rows: int,
    bad: Mapping[str, int],
    last_ddl: Mapping[str, str],
    stopped: Mapping[str, str],
) -> TableStatus:
    """One table's status: its own state where the table has one, else what progress last recorded."""
    state = state or committed.tables.get(table)
    return TableStatus(
        table=table,
        applied_ts=state.applied_ts if state else 0,
        ddl_ts=state.ddl_ts if state else 0,
        rows=rows,
        pending=committed.pending_rows.get(table, 0),
        quarantined=bad.get(str(table), 0),
        last_ddl=last_ddl.get(str(table), ""),
        stopped=stopped.get(str(table), ""),
        failed=committed.failed.get(table, ""),
        rows_verified=state.rows_verified if state else 0,
        rows_unverified=state.rows_unverified if state else 0,
    )


def collect_local(config: IngestConfig) -> tuple[progress.Progress, list[TableStatus]]:
    """``collect``, answered from the mirror's files alone, without Spark: the newest progress row, the
    quarantine's rows per table, the DDL history, and per table the state of its newest commit of ours
    and its row count from its files' statistics.

    Raises:
        delta_log.Unreadable: the mirror is not on a local file system, or uses what the direct reader
            does not follow; ``collect`` answers then.
    """
    _, state = delta_log.local_mirror(config.target_path, config.state_path)
    rows_of = delta_log.rows_if_any
    runs = [
        r
        for r in rows_of(state / progress.PROGRESS_DIR, ["run_id", "stream_id", "global_watermark", "state"])
        if r["stream_id"] == config.stream_id
    ]
    committed = progress.Progress()
    if runs:
        newest = max(runs, key=lambda r: int(r["run_id"]))
        committed = progress.parse_run(
            int(newest["run_id"]), int(newest["global_watermark"]), newest["state"]
        )
    quarantined = Counter(r["table"] or "" for r in rows_of(state / quarantine.QUARANTINE_DIR, ["table"]))
    history = ["table", "action", "sql", "commit_ts", "recorded_at"]
    last_ddl, stopped = last_ddls(rows_of(state / ddl_history.HISTORY_DIR, history))
    tables = []
    for table in sorted(set(committed.tables) | set(committed.pending_rows)):
        directory = delta_log.local_dir(config.mirror.address(table))
        assert directory is not None  # under the root, which is local
        exists = (directory / delta_log.LOG_DIR).is_dir()
        own = _newest_state(directory) if exists else None
        rows = delta_log.row_count(directory) if own is not None else 0
        tables.append(_line(table, committed, own, rows, quarantined, last_ddl, stopped))
    return committed, tables


def _newest_state(directory: Path) -> TableState:
    """The state of the newest of our commits among the table's newest ``HISTORY_DEPTH`` (as
    ``table_state.read_table_state`` reads it through Spark)."""
    for version in sorted(delta_log.commit_versions(directory), reverse=True)[: table_state.HISTORY_DEPTH]:
        found = table_state.state_from_metadata(
            delta_log.read_commit(directory, version).info.get("userMetadata")
        )
        if found is not None:
            return found
    return TableState()


def last_ddls(rows: Iterable[Mapping[str, Any]]) -> tuple[dict[str, str], dict[str, str]]:
    """The rule of ``_last_ddls`` over the DDL history's rows: per table, the statement of the newest DDL
    applied or recorded; and for a table whose newest refused DDL is newer than any of those, that DDL."""

    def order(row: Mapping[str, Any]) -> tuple[bool, int, bool, Any]:
        # As Spark orders the struct (commit_ts, recorded_at): a null field before any value.
        return (row["commit_ts"] is not None, row["commit_ts"] or 0, row["recorded_at"] is not None,
                row["recorded_at"] or 0)  # fmt: skip

    done: dict[str, Mapping[str, Any]] = {}
    refused: dict[str, Mapping[str, Any]] = {}
    for row in rows:
        if row["action"] is None:
            continue
        mine = refused if row["action"] == ddl_history.REJECTED else done
        held = mine.get(row["table"])
        if held is None or order(row) > order(held):
            mine[row["table"]] = row
    last = {t: r["sql"] for t, r in done.items() if r["sql"] is not None}
    stopped = {}
    for t, r in refused.items():
        applied = done.get(t)
        done_ts = None if applied is None else applied["commit_ts"]
        if r["commit_ts"] is not None and (done_ts is None or done_ts < r["commit_ts"]):
            stopped[t] = f"commitTs {r['commit_ts']}: {r['sql']}"
    return last, stopped


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
        f"{'bad':>5}  last DDL at                       last DDL",
    ]
    for t in tables:
        ddl = " ".join(t.last_ddl.split())
        ddl = ddl if len(ddl) <= LAST_DDL_WIDTH else ddl[: LAST_DDL_WIDTH - 3] + "..."
        lines.append(
            f"{t.table!s:<28} {t.applied_ts:>20}  {_when(t.applied_ts):<32} {_lag(t.applied_ts, now):>8} "
            f"{t.rows:>9} {t.pending:>8} {t.quarantined:>5}  {_when(t.ddl_ts):<32}  {ddl or '-'}"
        )
    lines.extend(_checksum_lines(tables))
    for t in tables:
        if t.stopped:
            lines.append(
                f"STOPPED {t.table}: before {t.stopped} (the DDL history says why; its later changes wait)"
            )
        elif t.failed:
            lines.append(f"STOPPED {t.table}: {t.failed}")
    return "\n".join(lines)


def _checksum_lines(tables: list[TableStatus]) -> list[str]:
    """Per table whose rows were checked, the share of its applied rows whose TiDB checksum matched."""
    lines = []
    for t in tables:
        checked = t.rows_verified + t.rows_unverified
        if checked:
            lines.append(
                f"row checksums {t.table}: {100 * t.rows_verified / checked:.1f}% of {checked} rows verified "
                f"({t.rows_unverified} carried none to check)"
            )
    return lines


def _last_ddls(spark: SparkSession, state_path: str) -> tuple[dict[str, str], dict[str, str]]:
    """Per table, the statement of the newest DDL the mirror applied or recorded; and for each table
    stopped before a DDL it refused (and has not applied since), that DDL's commitTs and statement."""
    path = ddl_history.history_path(state_path)
    if not delta_io.is_delta_table(spark, path):
        return {}, {}
    refused = F.col("action") == ddl_history.REJECTED
    order = F.struct("commit_ts", "recorded_at")
    rows = (
        delta_io.read(spark, path)
        .groupBy("table")
        .agg(
            F.max_by(F.when(~refused, F.col("sql")), F.when(~refused, order)).alias("sql"),
            F.max(F.when(~refused, F.col("commit_ts"))).alias("done"),
            F.max_by(F.when(refused, F.col("sql")), F.when(refused, order)).alias("refused_sql"),
            F.max(F.when(refused, F.col("commit_ts"))).alias("refused"),
        )
        .collect()
    )
    last = {r["table"]: r["sql"] or "" for r in rows if r["sql"] is not None}
    stopped = {
        r["table"]: f"commitTs {r['refused']}: {r['refused_sql']}"
        for r in rows
        if r["refused"] is not None and (r["done"] is None or r["done"] < r["refused"])
    }
    return last, stopped


@dataclass(frozen=True)
class LagPoint:
    """One committed run, seen from one table: how far behind its applied TSO was at commit time."""

    committed_at: datetime
    run_id: int
    table: str  # "G" for the global watermark
    applied_ts: int
    lag_seconds: float


def lag_history(spark: SparkSession, config: IngestConfig) -> list[LagPoint]:
    """Lag over time, from the progress table (one row per committed run), oldest first."""
    path = progress.progress_path(config.state_path)
    if not delta_io.is_delta_table(spark, path):
        return []
    rows = (
        delta_io.read(spark, path)
        .where(F.col("stream_id") == config.stream_id)
        .orderBy("run_id")
        .select("run_id", "committed_at", "global_watermark", "state")
        .collect()
    )
    points = []
    for row in rows:
        at = (
            row["committed_at"].replace(tzinfo=timezone.utc)
            if row["committed_at"].tzinfo is None
            else (row["committed_at"])
        )
        applied = {"G": int(row["global_watermark"])}
        applied.update({k: int(v["applied_ts"]) for k, v in orjson.loads(row["state"])["tables"].items()})
        for table, ts in sorted(applied.items()):
            if ts:
                lag = (at - tso_to_datetime(ts)).total_seconds()
                points.append(LagPoint(at, int(row["run_id"]), table, ts, lag))
    return points


def render_lag_chart(points: list[LagPoint], table: str = "G", width: int = 50) -> str:
    """A text bar chart of one table's lag per run: it prints the same in a terminal, a notebook or a log."""
    mine = [p for p in points if p.table == table]
    if not mine:
        return f"{table}: no committed run has applied anything yet"
    top = max(max(p.lag_seconds for p in mine), 1e-9)
    lines = [f"lag of {table} at each committed run (seconds; # = {top / width:.3g}s)"]
    for p in mine:
        bar = "#" * max(0, round(p.lag_seconds / top * width))
        lines.append(f"run {p.run_id:>5} {p.committed_at:%Y-%m-%d %H:%M:%S} {p.lag_seconds:>12.1f} |{bar}")
    return "\n".join(lines)


def lag_frame(spark: SparkSession, points: list[LagPoint]) -> DataFrame:
    """Lag over time as a DataFrame (committed_at, run_id, table, applied_ts, lag_seconds): what a Databricks
    notebook hands to ``display(...)`` to chart it."""
    schema = "committed_at timestamp, run_id long, table string, applied_ts long, lag_seconds double"
    rows = [(p.committed_at, p.run_id, p.table, p.applied_ts, p.lag_seconds) for p in points]
    return spark.createDataFrame(rows, schema)


def plot_lag_chart(points: list[LagPoint], path: str, tables: list[str] | None = None) -> int:
    """Draw lag (seconds) against commit time, one line per table and a bold one for G, into a PNG at
    ``path``; returns the number of lines drawn. ``tables`` limits the tables (G is always drawn)."""
    import matplotlib

    matplotlib.use("Agg")  # no display needed: jobs and CI run headless
    import matplotlib.pyplot as plt

    series: dict[str, list[LagPoint]] = {}
    for p in points:
        if p.table == "G" or tables is None or p.table in tables:
            series.setdefault(p.table, []).append(p)
    figure, axes = plt.subplots(figsize=(10, 4.5))
    for name, mine in sorted(series.items(), key=lambda kv: (kv[0] != "G", kv[0])):
        axes.plot(
            [p.committed_at for p in mine],  # type: ignore[arg-type]  # matplotlib plots datetimes as dates
            [p.lag_seconds for p in mine],
            marker="o",
            linewidth=2.5 if name == "G" else 1.2,
            color="black" if name == "G" else None,
            zorder=3 if name == "G" else 2,  # G on top: tables at G would otherwise hide it
            label="G (global watermark)" if name == "G" else name,
        )
    axes.set_title("Mirror lag at each committed run")
    axes.set_xlabel("run committed at (UTC)")
    axes.set_ylabel("lag behind upstream (seconds)")
    axes.grid(True, alpha=0.3)
    if series:
        axes.legend(loc="upper left", fontsize="small")
    else:
        axes.text(
            0.5, 0.5, "no committed run has applied anything yet", ha="center", transform=axes.transAxes
        )
    figure.autofmt_xdate()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return len(series)
