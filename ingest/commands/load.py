"""Wiring: an initial load from a TiDB Dumpling export, handed off to the change stream at the snapshot TSO.

Each table of the export is created exactly as the stream creates it from its CREATE TABLE (same Delta
properties, key and ``_tidb_`` columns), its rows are decoded on executors into the Canal-JSON text the
stream carries and typed by the stream's own conversion (``apply.merge.normalize``), and appended with
``_tidb_commit_ts = S``, the snapshot TSO. The table's last commit records A_T = S in its ``userMetadata``
and in the ``ticdc.appliedTs`` property, as the stream does after a DDL: a stream
started at or before S then drops every change below S, neutralises changes at S with the row guard
(a row is overwritten only by a change not older than it), and applies everything above S, so the mirror
has no gap and no duplicate.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ingest.apply import schema as apply_schema
from ingest.apply.merge import normalize, slot
from ingest.apply.table import table_exists, table_info
from ingest.commands.flags import catalog_warehouse
from ingest.errors import ConfigError, DecodeError, TooManyBadRecords
from ingest.lake import delta_io
from ingest.load_config import LoadConfig
from ingest.model import BAD_COLUMN, Op, TableId, TableState, tso_to_datetime
from ingest.mysql import dumpling as dd
from ingest.plan import partitions
from ingest.source import dumpling as source
from ingest.spark import cached, get_session
from ingest.state import progress, quarantine, table_state
from ingest.state.table_state import committing, state_to_metadata

logger = logging.getLogger(__name__)


@dataclass
class LoadedTable:
    """What the load did to one table."""

    table: TableId
    files: int
    data_bytes: int
    rows: int = 0
    quarantined: int = 0
    seconds: float = 0.0

    def describe(self) -> str:
        return (
            f"{self.table}: {self.rows} rows from {self.files} files ({_size(self.data_bytes)}), "
            f"{self.quarantined} quarantined, {self.seconds:.1f}s"
        )


@dataclass
class LoadResult:
    """What the load did: the snapshot TSO every loaded table now starts from, and each table."""

    run_id: int
    snapshot_ts: int
    tables: list[LoadedTable] = field(default_factory=list)
    seconds: float = 0.0

    def describe(self) -> str:
        rows = sum(t.rows for t in self.tables)
        bad = sum(t.quarantined for t in self.tables)
        return (
            f"loaded {len(self.tables)} tables, {rows} rows ({bad} quarantined) at snapshot TSO "
            f"{self.snapshot_ts} ({tso_to_datetime(self.snapshot_ts).isoformat()}), {self.seconds:.1f}s; "
            "the stream continues from there"
        )


def command(config: LoadConfig, remote: str | None = None, warehouse: str | None = None) -> int:
    """``load``: the initial load, then what it did per table."""
    warehouse = catalog_warehouse(warehouse, config.target_catalog is not None)
    result = load_dumpling(get_session(remote=remote, catalog_warehouse=warehouse), config)
    print(result.describe())
    for table in result.tables:
        print("  " + table.describe())
    return 0


def load_dumpling(spark: SparkSession, config: LoadConfig) -> LoadResult:
    """Load a Dumpling export into the mirror and set every loaded table's applied TSO to its snapshot TSO.

    Raises:
        ConfigError: the input is not a usable export, or the target already holds the mirror's tables or
            progress (pass ``force`` to replace the tables, allowed only when the snapshot is not older
            than anything the mirror applied).
        TooManyBadRecords: more rows than ``max-bad-ratio`` allows could not be read or converted; the
            table is not written.
    """
    started = time.monotonic()
    stream = config.stream
    export = source.read_export(spark, config.input_path)
    s = export.snapshot_ts
    committed = progress.load_progress(spark, config.state_path, config.stream_id)
    _check_target(spark, config, export, committed)
    run_id = committed.run_id + 1
    files = sum(len(t.data_files) for t in export.tables)
    logger.info(
        "Dumpling export %s: snapshot TSO %d (%s), %d tables, %d data files (%s)",
        export.path,
        s,
        tso_to_datetime(s).isoformat(),
        len(export.tables),
        files,
        _size(sum(t.data_bytes for t in export.tables)),
    )
    dialect = dd.CsvDialect(
        separator=config.csv_separator.encode(),
        delimiter=config.csv_delimiter.encode(),
        null_value=config.csv_null_value.encode(),
        header=config.csv_header,
    )
    result = LoadResult(run_id, s)
    states = dict(committed.tables)
    progress.begin_run(spark, config.state_path, config.stream_id, run_id, [t.table for t in export.tables])
    for number, table in enumerate(export.tables, start=1):
        logger.info(
            "table %d/%d %s: %d files (%s)",
            number,
            len(export.tables),
            table.table,
            len(table.data_files),
            _size(table.data_bytes),
        )
        loaded, state = _load_table(spark, config, table, s, dialect, run_id)
        result.tables.append(loaded)
        states[table.table] = state
        alias = stream.mirror.alias(table.table)
        if alias:
            apply_schema.register_catalog_table(spark, alias, stream.mirror.address(table.table))
        logger.info("table %d/%d %s", number, len(export.tables), loaded.describe())
    # The stream's progress learns the loaded tables (DROP DATABASE, status) and keeps its positions: a
    # stream that has not run yet starts wherever it is pointed, at or before the snapshot.
    progress.commit_progress(
        spark,
        config.state_path,
        config.stream_id,
        progress.Progress(
            run_id=run_id,
            global_watermark=committed.global_watermark,
            resume=committed.resume,
            watermarks=committed.watermarks,
            tables=states,
            pending_rows=committed.pending_rows,
            buffered=committed.buffered,
        ),
    )
    result.seconds = time.monotonic() - started
    logger.info("%s", result.describe())
    return result


def _check_target(
    spark: SparkSession, config: LoadConfig, export: source.DumplingExport, committed: progress.Progress
) -> None:
    """A load replaces tables wholesale; never over a mirror by accident, never behind what it applied.

    A load that was interrupted (killed, say) is continued without ``force``: no progress was committed yet,
    and every table of the export that exists holds nothing applied (created by the load, no rows in yet) or
    exactly this snapshot.
    """
    stream = config.stream
    existing = {
        t.table: table_state.read_table_state(spark, stream.mirror.address(t.table)) for t in export.tables
    }
    present = sorted(str(t) for t, state in existing.items() if state is not None)
    interrupted = not committed.run_id and all(
        state.applied_ts in (0, export.snapshot_ts) for state in existing.values() if state is not None
    )
    if present and interrupted:
        logger.info("continuing an interrupted load of this snapshot: %s", ", ".join(present))
    if not config.force and not interrupted and (committed.run_id or present):
        what = (
            f"tables {', '.join(present[:5])}{' …' if len(present) > 5 else ''}" if present else "no tables"
        )
        raise ConfigError(
            f"{config.stream.target} already holds a mirror ({what}; stream '{config.stream_id}' at run "
            f"{committed.run_id}); an initial load starts a new mirror. Use a new --target-path (or "
            "--target-schema and --state-schema), or --force to replace the tables in the export"
        )
    # A table the mirror holds is exact through its own applied TSO: a table stopped before a DDL sits below
    # G, and its later changes wait in the buffer, so an export from after the DDL but before G still joins
    # up. A table the mirror does not hold had its changes up to G delivered and not kept.
    applied = max(
        [s.applied_ts if s is not None else committed.global_watermark for s in existing.values()], default=0
    )
    if export.snapshot_ts < applied:
        raise ConfigError(
            f"input: the export's snapshot TSO {export.snapshot_ts} is older than what the mirror already "
            f"applied ({applied}); the stream would not deliver the changes in between again. Export a newer "
            "snapshot"
        )


def _load_table(
    spark: SparkSession,
    config: LoadConfig,
    table: source.ExportTable,
    snapshot_ts: int,
    dialect: dd.CsvDialect,
    run_id: int,
) -> tuple[LoadedTable, TableState]:
    started = time.monotonic()
    stream = config.stream
    tid = table.table
    path = stream.mirror.address(tid)
    loaded = LoadedTable(tid, len(table.data_files), table.data_bytes)
    if not table.create.schema.key:
        logger.warning(
            "%s: no primary key and no NOT NULL unique key; it is loaded, but the stream cannot merge its "
            "changes",
            tid,
        )
    exists = table_exists(spark, path)
    apply_schema.create_table(
        spark,
        path,
        tid,
        table.create.schema,
        state_to_metadata(TableState(), run_id=run_id, step="initial load: create", consistent=False),
        replace=exists,
        partitioning=partitions.from_clause(table.create.partition_by, table.create.schema),
        compaction=stream.auto_compaction,
        change_feed=stream.records_changes,
    )
    state = TableState(applied_ts=snapshot_ts)
    if table.data_format is not None:
        _load_rows(spark, config, table, path, snapshot_ts, dialect, run_id, state, loaded)
    apply_schema.mark_applied(
        spark,
        path,
        snapshot_ts,
        state_to_metadata(state, run_id=run_id, step=f"initial load at snapshot {snapshot_ts}"),
    )
    loaded.seconds = time.monotonic() - started
    return loaded, state


def _load_rows(
    spark: SparkSession,
    config: LoadConfig,
    table: source.ExportTable,
    path: str,
    snapshot_ts: int,
    dialect: dd.CsvDialect,
    run_id: int,
    state: TableState,
    loaded: LoadedTable,
) -> None:
    tid = table.table
    decoded = cached(source.read_rows(spark, table, dialect, config.csv_line_terminator))
    changes: DataFrame | None = None
    try:
        # The table's own schema, as the stream reads it: column comments carry the TiDB types (ENUM members).
        info = table_info(spark, path)
        columns = info.schema.fieldNames()
        held = [c.name for c in source.data_columns(table)]  # the values the export's lines hold
        changes = cached(
            normalize(
                as_changes(decoded.where(F.col("error").isNull()), held, snapshot_ts),
                info.schema,
                info.key,
                config.timezone,
                generated=info.generated,
            )
        )
        counts = {
            bool(r["bad"]): int(r["n"])
            for r in changes.groupBy((F.col(BAD_COLUMN) != "").alias("bad"))
            .agg(F.count("*").alias("n"))
            .collect()
        }
        unreadable = decoded.where(F.col("error").isNotNull())
        unreadable_count = unreadable.count()
        bad_count = counts.get(True, 0)
        loaded.rows, loaded.quarantined = counts.get(False, 0), bad_count + unreadable_count
        if unreadable_count:
            quarantine.write(
                spark,
                config.state_path,
                _positioned(unreadable, tid, snapshot_ts),
                error_class=DecodeError.__name__,
                run_id=run_id,
            )
        if bad_count:
            quarantine.write_unconvertible(spark, config.state_path, changes, tid, run_id)
        total = loaded.rows + loaded.quarantined
        if loaded.quarantined:
            logger.warning("%s: quarantined %d of %d rows of the export", tid, loaded.quarantined, total)
        if total and loaded.quarantined / total > config.max_bad_ratio:
            raise TooManyBadRecords(
                f"{tid}: {loaded.quarantined} of {total} rows of the export could not be read or converted, "
                f"above max-bad-ratio {config.max_bad_ratio}; none of its rows were written and it has no "
                f"applied TSO. Inspect the quarantine table under "
                f"{quarantine.quarantine_path(config.state_path)}, fix the export and load again with --force"
            )
        rows = changes.where(F.col(BAD_COLUMN) == "").select(
            *[F.col(slot(i)).alias(c) for i, c in enumerate(columns)],
            F.lit(snapshot_ts).cast(T.LongType()).alias(info.commit_ts_column),
        )
        metadata = state_to_metadata(
            state, run_id=run_id, step=f"initial load rows at snapshot {snapshot_ts}"
        )
        with committing(spark, metadata):
            delta_io.write(rows, path, "append")
    finally:
        if changes is not None:
            changes.unpersist()
        decoded.unpersist()


def _message_columns() -> list[Column]:
    """A data line as a Kafka-shaped record: its file is the topic, its place in the file the offset."""
    return [
        F.col("file").alias("topic"),
        F.lit(0).alias("partition"),
        F.col("offset"),
        F.lit(None).cast(T.TimestampType()).alias("timestamp"),
        F.lit(None).cast(T.BinaryType()).alias("key"),
        F.col("line").alias("value"),
    ]


def as_changes(decoded: DataFrame, columns: list[str], snapshot_ts: int) -> DataFrame:
    """Decoded rows in the shape of the stream's decoded DML: INSERTs at the snapshot TSO."""
    data = F.map_from_arrays(F.array(*[F.lit(c) for c in columns]), F.col("values"))
    return decoded.select(
        *_message_columns(),
        F.lit(snapshot_ts).cast(T.LongType()).alias("commit_ts"),
        F.lit(Op.INSERT.value).alias("type"),
        data.alias("data"),
        F.lit(None).cast(T.MapType(T.StringType(), T.StringType())).alias("old"),
    )


def _positioned(unreadable: DataFrame, table: TableId, snapshot_ts: int) -> DataFrame:
    return unreadable.select(
        *_message_columns(),
        F.lit(table.schema).alias("database"),
        F.lit(table.table).alias("table"),
        F.lit(snapshot_ts).cast(T.LongType()).alias("commit_ts"),
        F.col("error"),
    )


def _size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"
