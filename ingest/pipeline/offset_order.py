"""TiCDC Avro: one batch applied in offset order, for per-key convergence. Wiring (I/O).

Avro has no watermarks, no DDL and no commitTs on deletes, so nothing here
waits for completeness: every record read is applied in the same batch. Per key, the change read last
from its partition wins; an upsert never overwrites a row that holds a newer commitTs; a tombstone
always deletes. A key converges to upstream once TiCDC's last change of it is applied, and a batch that
ends inside a TiCDC replay can show a key's older state until the replay's tail arrives. Tables change
shape when the rows' writer schema changes (``plan.avro_schema``).
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import ingest.pipeline.integrity as integrity
from ingest.apply import schema as apply_schema
from ingest.apply.merge import (
    apply_merge,
    normalize,
    summarize,
)
from ingest.apply.table import record_changes, table_exists, table_info
from ingest.config import IngestConfig
from ingest.decode import debezium
from ingest.decode import ticdc_avro as ta
from ingest.errors import ConfigError
from ingest.model import PartitionId, Position, TableId, TableState, tso_to_datetime
from ingest.pipeline.batch import (
    NO_PARTITION,
    PartitionRead,
    cache_once_per_position,
    check_bad_ratio,
    check_partitions,
    held_states,
    quarantine_undecodable,
)
from ingest.pipeline.context import BatchTable
from ingest.pipeline.ordering import Ordering, within_commit_ts
from ingest.pipeline.parallel import apply_tables
from ingest.pipeline.report import BatchResult, TableReport, lag_seconds
from ingest.pipeline.sessions import TableSessions
from ingest.pipeline.writer_schema import TableRead, follow
from ingest.plan import avro_schema as plan_avro
from ingest.settings import Protocol
from ingest.source.decoding import (
    KEY_SCHEMA,
    KIND_DML,
    avro_schema_ids,
    debezium_schemas,
    decode_debezium,
    decode_ticdc_avro,
    prepare_payload,
)
from ingest.source.registry import registry_for
from ingest.spark import cached
from ingest.state import ddl_history, progress, quarantine
from ingest.state.table_state import state_to_metadata

logger = logging.getLogger(__name__)


def process_batch(
    spark: SparkSession, messages: DataFrame, config: IngestConfig, committed: progress.Progress
) -> BatchResult:
    """Decode and apply one batch of TiCDC Avro (or Debezium) records, then commit progress."""
    started = time.monotonic()
    if config.protocol is Protocol.DEBEZIUM:
        book, decoding = _debezium(messages, config)
    else:
        texts = registry_for(config).schemas(avro_schema_ids(messages))
        book, decoding = ta.schema_book(texts), decode_ticdc_avro(messages, texts)
    for schema_id, problem in sorted(book.problems.items()):
        logger.warning(
            "writer schema %d cannot be used: %s; its records go to quarantine", schema_id, problem
        )
    decoded, ranges = cache_once_per_position(decoding)
    try:
        batch = AvroBatch(spark, config, committed, decoded, ranges, book)
        batch.admit()
        batch.apply_tables()
        return batch.commit(started)
    finally:
        decoded.unpersist()


def _debezium(messages: DataFrame, config: IngestConfig) -> tuple[ta.SchemaBook, DataFrame]:
    """The writer schemas of a batch of Debezium records, from the row schemas they carry, and the
    records decoded; settings the row schemas cannot work with stop the run before anything is applied."""
    logger.info(
        "debezium: no watermarks and no DDL; changes apply per key in offset order, with no consistent cut "
        "across keys or tables"
    )
    prepared = prepare_payload(messages, config.compression, config.codec)
    try:
        book, reader = debezium.schema_book(
            debezium_schemas(prepared), config.table_keys, config.column_types
        )
    except debezium.SettingsProblem as exc:
        raise ConfigError(str(exc)) from exc
    return book, decode_debezium(prepared, reader)


class AvroBatch:
    """One batch of TiCDC Avro records, in the stages every batch has: admit what was read, apply the
    tables (a first pass, then a second past rows that do not convert), commit progress."""

    def __init__(
        self,
        spark: SparkSession,
        config: IngestConfig,
        committed: progress.Progress,
        decoded: DataFrame,
        ranges: dict[PartitionId, PartitionRead],
        book: ta.SchemaBook,
    ) -> None:
        self.spark, self.config, self.committed, self.book = spark, config, committed, book
        self.decoded, self.ranges = decoded, ranges
        self.run_id = committed.run_id + 1
        self.records = sum(r.records for r in ranges.values())
        self.bad = sum(r.bad for r in ranges.values())
        self.dml = decoded.where(F.col("kind") == KIND_DML)
        self.reads: dict[TableId, TableRead] = {}
        self.states: dict[TableId, TableState] = {}
        self.reports: dict[TableId, TableReport] = {}

    def admit(self) -> None:
        """Check the partitions read, quarantine what does not decode, and read what each table got."""
        check_partitions(self.config, self.ranges, self.committed)
        quarantine_undecodable(self.spark, self.config, self.decoded, self.bad, self.run_id)
        check_bad_ratio(self.config, self.bad, self.records)
        self.reads = _table_reads(self.dml)
        self.states = held_states(self.spark, self.config, self.committed, self.reads)

    def apply_tables(self) -> None:
        """Every table, first up to rows that do not convert; past them once the batch is known to stay
        within max-bad-ratio."""
        config, ordered = self.config, sorted(self.reads)
        progress.begin_run(self.spark, config.state_path, config.stream_id, self.run_id, ordered)
        # A writer schema's entry is placed at the newest row that uses it, wherever the table's state is.
        self.listed = ddl_history.Listed(config.state_path, ordered, 0)
        self.leases = TableSessions(self.spark, self.dml, config.table_parallelism)
        self.position = {table: number for number, table in enumerate(ordered, start=1)}
        try:
            applied = apply_tables(
                self.spark, ordered, self._first_pass, config.table_parallelism, sessions=self.leases
            )
            self.reports = {table: applied[table][0] for table in ordered}
            self.states.update({t: state for t, (_, state) in applied.items()})
            check_bad_ratio(config, self._quarantined(), self.records)
            for table, report in self.reports.items():
                if report.held_through is not None:
                    later, self.states[table] = self._apply(table, second_pass=True)
                    report.absorb(later)
        finally:
            self.leases.close()

    def _first_pass(self, table: TableId) -> tuple[TableReport, TableState]:
        logger.info("run %d: table %d/%d: %s", self.run_id, self.position[table], len(self.reads), table)
        return self._apply(table)

    def _apply(self, table: TableId, second_pass: bool = False) -> tuple[TableReport, TableState]:
        with self.leases.lease() as lease:
            target = BatchTable(
                table, self.config.mirror.address(table), self.states.get(table, TableState())
            )
            return _apply_table(
                lease.session, self.config, target, self.reads[table], lease.dml, self.book, self.run_id,
                self.listed, second_pass=second_pass,
            )  # fmt: skip

    def _quarantined(self) -> int:
        return self.bad + sum(r.quarantined for r in self.reports.values())

    def commit(self, started: float) -> BatchResult:
        """Commit the batch's progress and report it."""
        resume = {p: r.last_offset + 1 for p, r in self.ranges.items() if p != NO_PARTITION}
        progress.commit_progress(
            self.spark,
            self.config.state_path,
            self.config.stream_id,
            progress.Progress(
                run_id=self.run_id, resume={**self.committed.resume, **resume}, tables=self.states
            ),
        )
        newest = max((s.applied_ts for s in self.states.values()), default=0)
        result = BatchResult(
            self.run_id, self.records, 0, self._quarantined(), self.reports, time.monotonic() - started,
            bytes=sum(r.bytes for r in self.ranges.values()),
            decoded={t: r.rows for t, r in self.reads.items()},
            lag_seconds=lag_seconds(newest), offset_order=True,
        )  # fmt: skip
        for report in self.reports.values():
            logger.info("run %d: %s", self.run_id, report.describe())
        logger.info("%s", result.describe())
        return result


def _table_reads(dml: DataFrame) -> dict[TableId, TableRead]:
    """Per table and writer schema: the newest commitTs and offset, and the first position read."""
    rows = (
        dml.groupBy("database", "table", "schema_version", KEY_SCHEMA, "topic", "partition")
        .agg(
            F.max("commit_ts").alias("hi"),
            F.max("offset").alias("last"),
            F.min("offset").alias("first"),
            F.count("*").alias("n"),
        )
        .collect()
    )
    reads: dict[TableId, TableRead] = {}
    for row in rows:
        table = TableId(row["database"], row["table"])
        hi = int(row["hi"] or 0)
        first = Position(row["topic"], int(row["partition"]), int(row["first"]))
        read = reads.setdefault(table, TableRead([], 0, 0, first))
        read.rows += int(row["n"])
        read.max_commit_ts = max(read.max_commit_ts, hi)
        if (first.partition, first.offset) < (read.first.partition, read.first.offset):
            read.first = first
        if row["schema_version"] is not None:  # tombstones name only a key schema
            read.uses.append(
                plan_avro.SchemaUse(
                    int(row["schema_version"]),
                    int(row[KEY_SCHEMA]),
                    hi,
                    int(row["last"]),
                    int(row["partition"]),
                )
            )
    return reads


def _apply_table(
    spark: SparkSession,
    config: IngestConfig,
    table: BatchTable,
    read: TableRead,
    dml: DataFrame,
    book: ta.SchemaBook,
    run_id: int,
    listed: ddl_history.Listed,
    *,
    second_pass: bool = False,
) -> tuple[TableReport, TableState]:
    """Follow the writer schemas the table's rows use, merging its changes in offset order under each
    (``plan_avro.segments``: one segment, the newest schema, unless a later schema changes a column's type).

    A table with rows that do not convert is not merged on the first pass (its report says so): the batch
    may yet fail on max-bad-ratio, and then no table may have gone past them. The second pass merges it
    past them, without quarantining them again.
    """
    report = TableReport(table.id, applied_ts=table.state.applied_ts)
    exists = table_exists(spark, table.address)
    latest = plan_avro.newest(read.uses) if read.uses else None
    if latest is None and not exists:
        logger.warning(
            "%s: %d delete(s) for a table the mirror does not hold yet: nothing to delete",
            table.id,
            read.rows,
        )
        return report, table.state
    if latest is None:
        return _merge_read(spark, config, table, read, dml, book, run_id, report, second_pass, None)
    state = table.state
    for segment in plan_avro.segments(
        read.uses, lambda a, b: plan_avro.retyped(book.schemas[a][0], book.schemas[b][0])
    ):
        if segment.through_ts is not None and segment.through_ts <= state.applied_ts:
            continue  # merged before: by a first pass, or by a run that stopped after it
        step = replace(table, state=state)
        described = follow(spark, config, step, read, book, segment.use, exists, run_id, listed)
        exists = True
        if described:
            report.ddls.append(described)
        report, state = _merge_read(
            spark, config, step, read, dml, book, run_id, report, second_pass, segment
        )
        if report.held_through is not None:
            break
    return report, state


def _merge_read(
    spark: SparkSession,
    config: IngestConfig,
    table: BatchTable,
    read: TableRead,
    dml: DataFrame,
    book: ta.SchemaBook,
    run_id: int,
    report: TableReport,
    second_pass: bool,
    segment: plan_avro.Segment | None,
) -> tuple[TableReport, TableState]:
    """The table's changes of the batch (of one ``segment`` of it), merged in offset order (held on the
    first pass when some do not convert)."""
    path, state = table.address, table.state
    info = table_info(spark, path)
    info = record_changes(spark, path, info, state, run_id) if config.records_changes else info
    rows = dml.where((F.col("database") == table.id.schema) & (F.col("table") == table.id.table))
    newest = read.max_commit_ts
    if segment is not None and (segment.after_ts or segment.through_ts is not None):
        rows = within_commit_ts(rows, segment.after_ts, segment.through_ts)
        newest = newest if segment.through_ts is None else segment.through_ts
    layouts = integrity.writer_layouts(book)
    checked = integrity.checks(config, bool(layouts))
    if checked:
        rows = integrity.checked_rows(config, rows, layouts)
    rows = _ORDERING.fill(rows, apply_schema.column_defaults(spark, path))
    changes = cached(
        normalize(
            rows, info.schema, info.key, config.timezone, ta.CODEC.binary_text, info.generated,
            checked=checked,
        )
    )  # fmt: skip
    try:
        summary = summarize(spark, changes, info.key, info.columns, checked=checked)
        if summary.bad and not second_pass:
            quarantine.write_unconvertible(spark, config.state_path, changes, table.id, run_id)
            logger.warning("%s: quarantined %d rows whose values do not convert", table.id, summary.bad)
            report.quarantined += summary.bad
            report.mismatched += summary.checksums.mismatched
            report.held_through = newest
            return report, state
        # The second pass merges past the rows the first one quarantined (and counted).
        counts = replace(summary.checksums, mismatched=0) if second_pass else summary.checksums
        applied = integrity.record(report, replace(state, applied_ts=max(state.applied_ts, newest)), counts)
        result = apply_merge(
            spark, path, _ORDERING.effect(changes, info.key, info.columns), info.key, info.columns,
            state_to_metadata(applied, run_id=run_id, step=f"merge in offset order, run {run_id}"),
            summary.bounds, commit_ts_column=info.commit_ts_column, by_offset=True,
        )  # fmt: skip
    finally:
        changes.unpersist()
    report.upserted += result.upserted
    report.deleted += result.deleted
    report.applied_ts = applied.applied_ts
    logger.info(
        "%s: merged %d change(s) in offset order: %d upserted, %d deleted; newest commitTs %d (%s)",
        table.id, read.rows, result.upserted, result.deleted, applied.applied_ts,
        tso_to_datetime(applied.applied_ts).isoformat() if applied.applied_ts else "none",
    )  # fmt: skip
    return report, applied


# TiCDC Avro has no watermarks: per key, the change read last from its partition wins.
_ORDERING = Ordering(by_offset=True)
