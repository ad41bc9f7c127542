"""Committed progress: per-partition resume offsets and watermarks, per-table applied state. I/O.

Two places, by design:
- each mirrored table's own Delta commits carry its A_T/D_T (see ``state.table_state``), atomically with
  its data; that is the source of truth for what a table holds;
- ``<state>/progress`` is an append-only Delta table with one row per committed run: where to resume each
  partition, the watermarks seen, G, and a copy of every table's state for status reporting. It is written
  only after every table of the run has committed, so a crash in between re-reads input that the tables'
  own A_T then filters.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timezone

import orjson
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ingest.lake import delta_io, sql_text
from ingest.lake import names as catalog_names
from ingest.model import PartitionId, TableId, TableState
from ingest.state.table_state import planned_whole

PROGRESS_DIR = "progress"
# A long-running mirror commits a progress row per batch (8,640 a day at a 10 s trigger). Left alone, every
# load would scan one small file per run ever committed, and slow down without bound. Every COMPACT_EVERY
# runs the table keeps each stream's newest KEEP_RUNS rows (the lag history) and is compacted.
COMPACT_EVERY = 100
KEEP_RUNS = 10_000

SCHEMA = T.StructType(
    [
        T.StructField("run_id", T.LongType()),
        T.StructField("stream_id", T.StringType()),
        T.StructField("committed_at", T.TimestampType()),
        T.StructField("global_watermark", T.LongType()),
        T.StructField("state", T.StringType()),
    ]
)


@dataclass(frozen=True)
class Progress:
    """The last committed run: where to resume, what the watermarks were, what each table held."""

    run_id: int = 0
    global_watermark: int = 0
    resume: dict[PartitionId, int] = field(default_factory=dict)
    watermarks: dict[PartitionId, int] = field(default_factory=dict)
    tables: dict[TableId, TableState] = field(default_factory=dict)
    pending_rows: dict[TableId, int] = field(default_factory=dict)
    # Records (rows and DDLs) this run left in the buffer; None when unknown (progress written before
    # this was recorded), which makes the next run read and rewrite the buffer as if it held some.
    buffered: int | None = None
    # Tables this run stopped on an error of their own (not a refused DDL: the DDL history lists those),
    # with the error; each is tried again by the next run.
    failed: dict[TableId, str] = field(default_factory=dict)
    # Tables a run begun after this one may have written before it stopped short of its progress row (a
    # crash, a kill) or that a command changed outside a run (a re-sync): their state here may be behind
    # their own, which their newest commits hold. Every other table's state here is its own.
    unfinished: frozenset[TableId] = frozenset()


def progress_path(state_path: str) -> str:
    return catalog_names.child(state_path, PROGRESS_DIR)


def load_progress(spark: SparkSession, state_path: str, stream_id: str) -> Progress:
    """The latest committed progress of a stream, or an empty one, with the tables that runs begun after it
    may have written (``Progress.unfinished``)."""
    path = progress_path(state_path)
    if not delta_io.is_delta_table(spark, path):
        return Progress()
    attempt = F.col("stream_id") == _attempts(stream_id)
    # One aggregate, not a sort, planned whole: a single job whatever the number of rows (adaptive
    # execution would make a job of each of its three stages).
    newest = F.max_by(F.struct("run_id", "global_watermark", "state"), F.when(~attempt, F.col("run_id")))
    begun = F.collect_list(F.when(attempt, F.struct("run_id", "state")))
    with planned_whole(spark):
        row = (
            delta_io.read(spark, path)
            .where(F.col("stream_id").isin(stream_id, _attempts(stream_id)))
            .agg(newest.alias("newest"), begun.alias("begun"))
            .first()
        )
    if row is None:
        return Progress()
    committed = Progress()
    if row["newest"] is not None and row["newest"]["run_id"] is not None:
        last = row["newest"]
        committed = parse_run(int(last["run_id"]), int(last["global_watermark"]), last["state"])
    unfinished = {
        _tid(name)
        for entry in row["begun"] or []
        if int(entry["run_id"]) > committed.run_id
        for name in orjson.loads(entry["state"])["tables"]
    }
    return replace(committed, unfinished=frozenset(unfinished))


def _attempts(stream_id: str) -> str:
    """Where a stream's begun runs are noted: a stream id of its own, which every reader of runs passes by
    (``stream-id`` holds no control character)."""
    return stream_id + "\x00begun"  # as prune_runs spells it in SQL


def begin_run(
    spark: SparkSession, state_path: str, stream_id: str, run_id: int, tables: list[TableId]
) -> None:
    """Note, before a run (or a command outside runs) writes to ``tables``, that it is about to: until its
    progress row commits, the next run reads those tables' state from their own newest commits instead of
    from progress. One small append; the only way a table's own state can be ahead of progress."""
    if not tables:
        return
    state = {"tables": sorted(str(t) for t in set(tables))}
    row = (run_id, _attempts(stream_id), datetime.now(timezone.utc), -1, orjson.dumps(state).decode())
    delta_io.write(spark.createDataFrame([row], SCHEMA), progress_path(state_path), "append")


def parse_run(run_id: int, global_watermark: int, state_text: str) -> Progress:
    """A progress row as ``Progress`` (its ``state`` column is JSON)."""
    state = orjson.loads(state_text)
    return Progress(
        run_id=run_id,
        global_watermark=global_watermark,
        resume={_pid(k): int(v) for k, v in state["resume"].items()},
        watermarks={_pid(k): int(v) for k, v in state["watermarks"].items()},
        tables={_tid(k): _table_state(v) for k, v in state["tables"].items()},
        pending_rows={_tid(k): int(v) for k, v in state.get("pending_rows", {}).items()},
        buffered=None if state.get("buffered") is None else int(state["buffered"]),
        failed={_tid(k): str(v) for k, v in state.get("failed", {}).items()},
    )


def commit_progress(spark: SparkSession, state_path: str, stream_id: str, progress: Progress) -> None:
    """Append the run's progress row: one atomic Delta commit."""
    state = {
        "resume": {str(k): v for k, v in sorted(progress.resume.items())},
        "watermarks": {str(k): v for k, v in sorted(progress.watermarks.items())},
        "tables": {
            str(k): {
                "applied_ts": v.applied_ts,
                "ddl_ts": v.ddl_ts,
                "ddl_ids": sorted(v.ddl_ids),
                **v.checksum_fields(),
            }
            for k, v in sorted(progress.tables.items())
        },
        "pending_rows": {str(k): v for k, v in sorted(progress.pending_rows.items())},
        "buffered": progress.buffered,
        "failed": {str(k): v for k, v in sorted(progress.failed.items())},
    }
    row = (
        progress.run_id,
        stream_id,
        datetime.now(timezone.utc),
        progress.global_watermark,
        orjson.dumps(state).decode(),
    )
    path = progress_path(state_path)
    delta_io.write(spark.createDataFrame([row], SCHEMA), path, "append")
    prune_runs(spark, path, stream_id, progress.run_id)


def prune_runs(spark: SparkSession, path: str, stream_id: str, run_id: int) -> None:
    """On every COMPACT_EVERY-th run, drop a per-run state table's rows of the stream older than its newest
    KEEP_RUNS runs and compact the table's small files (the progress and the metrics table).

    Called after the run's row is committed, so a crash here loses nothing: the next multiple of
    COMPACT_EVERY tries again. Other streams' rows are left as they are (each prunes its own when it gets
    there).
    """
    if run_id % COMPACT_EVERY:
        return
    older = f"stream_id = {sql_text.sql_string(stream_id)} AND run_id <= {run_id - KEEP_RUNS}"
    delta_io.delete(spark, path, older)
    attempts = f"concat({sql_text.sql_string(stream_id)}, chr(0), 'begun')"
    delta_io.delete(spark, path, f"stream_id = {attempts} AND run_id <= {run_id}")
    delta_io.optimize(spark, path)


def _pid(text: str) -> PartitionId:
    topic, _, partition = text.rpartition("/")
    return PartitionId(topic, int(partition))


def _tid(text: str) -> TableId:
    schema, _, table = text.partition(".")
    return TableId(schema, table)


def _table_state(payload: dict[str, object]) -> TableState:
    ids = payload.get("ddl_ids", [])
    return TableState(
        applied_ts=int(str(payload["applied_ts"])),
        ddl_ts=int(str(payload["ddl_ts"])),
        ddl_ids=frozenset(str(i) for i in ids) if isinstance(ids, list) else frozenset(),
        rows_verified=int(str(payload.get("rows_verified", 0))),
        rows_unverified=int(str(payload.get("rows_unverified", 0))),
    )
