"""Canal-JSON and Simple: one batch ordered by TiCDC's watermarks (or, for Canal-JSON without the TiDB
extension, by offsets). Rows up to G (the smallest watermark over every partition) are applied, table by
table, cut into segments at each table's DDLs; the rest waits in the buffer. Wiring (I/O).

The batch is an object whose methods are its stages, in order: :meth:`Batch.admit` (what was read, G, the
control events), :meth:`Batch.group` (the tables, their DDLs, the tables a DDL ties together),
:meth:`Batch.apply_tables` (a first pass, then a second past rows that do not convert), and
:meth:`Batch.commit` (the buffer, progress, the report).
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import ingest.pipeline.admission as admission
from ingest import order
from ingest.config import IngestConfig
from ingest.decode.codec import TypesFrom
from ingest.errors import SchemaChangeRejected, TableFailed, TablesStopped
from ingest.model import DdlEvent, PartitionId, TableId, TableSignature, TableState, VersionedSchema
from ingest.pipeline.batch import (
    NO_PARTITION,
    PartitionRead,
    cache_once_per_position,
    check_bad_ratio,
    check_partitions,
    held_states,
    over_bad_ratio,
    quarantine_undecodable,
    stop_on_fatal,
)
from ingest.pipeline.context import BatchContext, BatchTable, Pass
from ingest.pipeline.ddl import apply_database_ddl
from ingest.pipeline.ordering import ordering_of
from ingest.pipeline.parallel import apply_tables
from ingest.pipeline.report import BatchResult, TableReport, lag_seconds
from ingest.pipeline.sessions import TableSessions
from ingest.pipeline.tables import apply_table, held_after_failure
from ingest.pipeline.tied import RenameGroups, TiedGroup, rename_groups, tied_groups, tied_stop
from ingest.plan import schema as plan_schema
from ingest.source.decoding import (
    CLAIM_CHECK,
    KIND_DDL,
    KIND_DML,
    KIND_FATAL,
    decode_json,
    fetch_claim_checks,
    prepare_payload,
)
from ingest.state import buffer, ddl_history, progress, schema_cache

logger = logging.getLogger(__name__)


def process_batch(
    spark: SparkSession, messages: DataFrame, config: IngestConfig, committed: progress.Progress
) -> BatchResult:
    """Decode, order, plan and apply one batch of Canal-JSON or Simple records, then commit progress.

    Raises before progress moves."""
    started = time.monotonic()
    # A buffer the last run left empty is not read: a crash after a later buffer write but before its
    # progress re-reads that run's input anyway, from the resume offsets the empty buffer goes with.
    buffered = (
        None if committed.buffered == 0 else buffer.read_buffer(spark, config.state_path, config.stream_id)
    )
    if buffered is not None:
        messages = messages.unionByName(buffered)
    decoded, ranges = cache_once_per_position(_decode(spark, messages, config))
    try:
        batch = Batch(spark, config, committed, decoded, ranges, started)
        batch.admit()
        batch.group()
        batch.apply_tables()
        return batch.commit()
    finally:
        decoded.unpersist()


def _decode(spark: SparkSession, messages: DataFrame, config: IngestConfig) -> DataFrame:
    codec = config.codec
    prepared = prepare_payload(messages, config.compression, codec)
    decoded = decode_json(prepared, codec)
    if config.claim_check_path is None:
        return decoded
    claims = decoded.where((F.col("kind") == KIND_FATAL) & F.col(CLAIM_CHECK).isNotNull()).select(
        "topic", "partition", "offset", CLAIM_CHECK
    )
    if claims.isEmpty():
        return decoded
    resolved = fetch_claim_checks(
        spark, prepared, claims, config.claim_check_path, config.claim_check_raw_value, config.compression,
        codec,
    )  # fmt: skip
    logger.info("fetched %d claim-check message(s) from %s", claims.count(), config.claim_check_path)
    return decode_json(resolved, codec)


class Batch:
    """One batch of decoded records, from what was read to the committed progress; see the module."""

    def __init__(
        self,
        spark: SparkSession,
        config: IngestConfig,
        committed: progress.Progress,
        decoded: DataFrame,
        ranges: dict[PartitionId, PartitionRead],
        started: float,
    ) -> None:
        self.spark, self.config, self.committed = spark, config, committed
        self.decoded, self.ranges, self.started = decoded, ranges, started
        self.run_id = committed.run_id + 1
        self.ordering = ordering_of(config.codec)
        self.announced = config.codec.types_from is TypesFrom.ANNOUNCED
        self.dml = decoded.where(F.col("kind") == KIND_DML)
        self.records = sum(r.records for r in ranges.values())
        self.bad = sum(r.bad for r in ranges.values())
        # Filled by the stages, in order.
        self.g = 0
        self.watermarks: dict[PartitionId, int] = {}
        self.ddls: list[DdlEvent] = []
        self.schemas: dict[schema_cache.SchemaKey, VersionedSchema] = {}
        self.fresh: list[VersionedSchema] = []
        self.signatures: list[TableSignature] = []
        self.bounds: dict[TableId, int] = {}
        self.tables: dict[TableId, BatchTable] = {}
        self.unmoved: dict[TableId, TableState] = {}  # what tables the batch does not touch hold
        self.groups: list[TiedGroup] = []
        self.reports: dict[TableId, TableReport] = {}
        self.stopped: dict[TableId, SchemaChangeRejected | TableFailed] = {}
        self.deferred: list[TableId] = []
        self.over = False

    # -- stage 1: admit ---------------------------------------------------------------------------------

    def admit(self) -> None:
        """Stop on what stops the batch, quarantine what does not decode, and learn G and the DDLs."""
        config, codec = self.config, self.config.codec
        stop_on_fatal(self.ranges, codec)
        check_partitions(config, self.ranges, self.committed, check_late=self.ordering.checks_late_partitions)
        quarantine_undecodable(self.spark, config, self.decoded, self.bad, self.run_id)
        check_bad_ratio(config, self.bad, self.records)
        self.ddls, watermarks, announced = admission.control_events(self.decoded, codec)
        if self.announced:
            self.schemas = schema_cache.load(self.spark, config.state_path, config.stream_id)
            self.fresh = [s for s in announced if (s.table, s.version) not in self.schemas]
            self.schemas.update({(s.table, s.version): s for s in self.fresh})
        self.watermarks = order.advance_watermarks(self.committed.watermarks, watermarks)
        self.signatures = (
            admission.simple_signatures(self.dml) if self.announced else admission.type_signatures(self.dml)
        )
        self.g = self._point()
        # Simple rows whose schema version no BOOTSTRAP or DDL has announced yet wait, and hold their table's
        # apply bound just below the first of them: nothing after them may be applied before them.
        parked = admission.parked(self.signatures, self.schemas)
        self.bounds = {t: min(self.g, ts - 1) for t, ts in parked.items()}

    def _point(self) -> int:
        partitions = self.config.partitions or (
            (set(self.ranges) - {NO_PARTITION}) | set(self.committed.watermarks) | set(self.committed.resume)
        )
        missing = sorted(str(p) for p in partitions if p not in self.watermarks)
        if missing and self.config.codec.has_watermarks:
            logger.warning(
                "no watermark yet on partition(s) %s: nothing is applied until each has one",
                ", ".join(missing),
            )
        times = [*(s.max_commit_ts for s in self.signatures), *(d.commit_ts for d in self.ddls)]
        return self.ordering.point(self.committed.global_watermark, self.watermarks, partitions, times)

    # -- stage 2: group ---------------------------------------------------------------------------------

    def group(self) -> None:
        """The tables the batch touches, each with its DDLs, and the tables a DDL ties together."""
        # A DDL belongs to every table it changes: a rename to its source and its target, DROP DATABASE to
        # each known table of that database. Each table admits and records it on its own.
        known = (
            set(self.committed.tables)
            | {s.table for s in self.signatures}
            | {d.table for d in self.ddls if d.table.table}
        )
        by_table: dict[TableId, list[DdlEvent]] = defaultdict(list)
        for ddl in self.ddls:
            affected = plan_schema.affected_tables(ddl, known)
            if not affected:
                apply_database_ddl(ddl, self.g)
            for table in affected:
                by_table[table].append(ddl)
        names = sorted({s.table for s in self.signatures} | set(by_table))
        stamps = admission.row_stamps(
            self.dml, [t for t in by_table if any(s.table == t for s in self.signatures)]
        )
        states = held_states(self.spark, self.config, self.committed, names)
        self.tables = {
            t: BatchTable(
                t, self.config.mirror.address(t), states.get(t, TableState()), by_table.get(t, []),
                [s for s in self.signatures if s.table == t], stamps.get(t),
            )
            for t in names
        }  # fmt: skip
        self.unmoved = {t: s for t, s in states.items() if t not in self.tables}
        # Tables a DDL reads across (RENAME, CREATE TABLE … LIKE, EXCHANGE PARTITION) are applied together,
        # in rounds: every one of them up to just before such a DDL, then that DDL on each (reading the
        # others as they were just before it), and so on; the other tables go on their own, several at once.
        self.groups = tied_groups(self.ddls, known, self.g)

    # -- stage 3: apply the tables ----------------------------------------------------------------------

    def apply_tables(self) -> None:
        """Apply every table: a first pass, then, once the batch is known to stay within max-bad-ratio, a
        second pass past rows that do not convert. Tables tied by a DDL go group by group."""
        config = self.config
        progress.begin_run(self.spark, config.state_path, config.stream_id, self.run_id, list(self.tables))
        self.context = BatchContext(
            config, self.ordering, self.run_id, self.schemas,
            ddl_history.Listed(config.state_path, [t for t in self.tables if self.tables[t].ddls],
                               min((d.commit_ts for d in self.ddls), default=0)),
        )  # fmt: skip
        self.sessions = TableSessions(self.spark, self.dml, config.table_parallelism)
        tied = {t for group in self.groups for t in group.tables}
        self.position = {table: number for number, table in enumerate(self.tables, start=1)}
        try:
            apply_tables(self.spark, self.groups, self._first_pass, 1, stop=lambda: self.over,
                         sessions=self.sessions)  # fmt: skip
            loose = [t for t in self.tables if t not in tied]
            apply_tables(self.spark, loose, self._first_pass, config.table_parallelism,
                         stop=lambda: self.over, sessions=self.sessions)  # fmt: skip
            self._check_bad_ratio()
            self._second_pass(tied)
        finally:
            self.sessions.close()

    def _first_pass(self, unit: TableId | TiedGroup) -> None:
        """A table (or a tied group) up to G, stopping just below rows that do not convert: the batch may
        yet fail on max-bad-ratio, and a re-run after the fix must find those rows unapplied."""
        members = unit.tables if isinstance(unit, TiedGroup) else (unit,)
        for table in members:
            logger.info("run %d: table %d/%d: %s", self.run_id, self.position[table], len(self.tables), table)
        if isinstance(unit, TiedGroup):
            complete = self._apply_group(unit, first=True)
        else:
            complete = not self._held_below(self._apply(unit, self._held(unit, True)), True)
        if not complete:
            self.deferred.extend(members)
            if over_bad_ratio(self.config, self._quarantined(), self.records):
                self.over = True  # the batch fails whatever comes next: leave the remaining tables untouched

    def _second_pass(self, tied: set[TableId]) -> None:
        """Past quarantined rows, each checked as it ends: once the batch is known to fail, what is left
        stays untouched."""
        for group in self.groups:
            if any(t in self.deferred for t in group.tables):
                self._apply_group(group, first=False)
                self._check_bad_ratio()
        for table in sorted((t for t in self.deferred if t not in tied), key=self.position.__getitem__):
            self._apply(table, self._held(table, False))
            self._check_bad_ratio()

    def _apply_group(self, group: TiedGroup, first: bool) -> bool:
        """The group's rounds; False when a table stopped below rows that do not convert (first pass)."""
        for stamp in group.stamps:
            for table in group.tables:
                if self._held_below(self._apply(table, self._held(table, first), stamp - 1), first):
                    return False
            blocked = [t for t in group.tables if t in self.stopped]
            if blocked:
                # A DDL of this round reads tables across the group; with one of them stopped below an
                # earlier DDL, what it would read is not upstream's. The whole group stops here.
                for table in group.tables:
                    if table not in self.stopped:
                        self._stop(table, tied_stop(table, blocked, self.stopped, stamp), stamp)
                return True
            renames = rename_groups(self.spark, self.config, group.ddls, stamp)
            for table in group.tables:
                self._apply(table, self._held(table, first), stamp, renames)
        return all(not self._held_below(self._apply(t, self._held(t, first)), first) for t in group.tables)

    def _apply(
        self, name: TableId, held_through: int | None, bound: int | None = None, renames: RenameGroups = None
    ) -> TableReport | None:
        """One pass over one table; whatever it meets stops that table only."""
        if name in self.stopped:
            return None
        table = self.tables[name]
        limit = min(self.g if bound is None else bound, self.bounds.get(name, self.g))
        try:
            with self.sessions.lease() as lease:
                run = Pass(lease.session, lease.dml, limit, held_through, renames or {})
                report, table.state, refused = apply_table(self.context, table, run)
        except Exception as exc:
            logger.exception("run %d: %s failed; it stops, the other tables go on", self.run_id, name)
            table.state = held_after_failure(self.spark, table)
            self._stop(name, TableFailed(name, table.state.applied_ts, exc), table.state.applied_ts + 1)
            return None
        if name in self.reports:
            self.reports[name].absorb(report)
        else:
            self.reports[name] = report
        if refused is not None:
            self._stop(name, refused, refused.commit_ts or self.g)
            return None
        return report

    def _stop(self, name: TableId, exc: SchemaChangeRejected | TableFailed, commit_ts: int) -> None:
        """A table stops just below ``commit_ts``: the rest of the batch goes on, and its later changes wait
        in the buffer."""
        self.stopped[name] = exc
        self.bounds[name] = min(self.bounds.get(name, self.g), commit_ts - 1)
        report = self.reports.setdefault(
            name, TableReport(name, applied_ts=self.tables[name].state.applied_ts)
        )
        report.stopped = str(exc)
        logger.error("run %d: %s", self.run_id, exc)

    def _held(self, name: TableId, first: bool) -> int | None:
        return None if first else (self.reports[name].held_through if name in self.reports else 0) or 0

    @staticmethod
    def _held_below(report: TableReport | None, first: bool) -> bool:
        return first and report is not None and report.held_through is not None

    def _quarantined(self) -> int:
        return self.bad + sum(r.quarantined for r in list(self.reports.values()))

    def _check_bad_ratio(self) -> None:
        check_bad_ratio(self.config, self._quarantined(), self.records)

    # -- stage 4: commit --------------------------------------------------------------------------------

    def commit(self) -> BatchResult:
        """Buffer what waits, commit the batch's progress, and report; raises when tables stopped (after
        committing the others)."""
        config = self.config
        pending = self.decoded.where(
            F.col("kind").isin(KIND_DML, KIND_DDL) & admission.above_bound(self.g, self.bounds)
        )
        pending_rows, pending_records = admission.pending_counts(pending)
        for name, count in pending_rows.items():
            self._report(name).pending = count
        # Everything read is now applied, quarantined or buffered: the read position moves past all of it.
        # An empty buffer that stays empty needs no commit.
        if pending_records or self.committed.buffered != 0:
            buffer.replace_buffer(self.spark, config.state_path, config.stream_id, pending, pending_records)
        if self.announced:
            # Durable before progress moves past the BOOTSTRAP/DDL messages that announced them.
            schema_cache.add(self.spark, config.state_path, config.stream_id, self.fresh)
        progress.commit_progress(
            self.spark, config.state_path, config.stream_id, self._progress(pending_rows, pending_records)
        )
        result = self._result()
        if self.stopped:
            raise TablesStopped(self.stopped, result)
        return result

    def _report(self, name: TableId) -> TableReport:
        state = self.tables[name].state if name in self.tables else self.unmoved.get(name, TableState())
        return self.reports.setdefault(name, TableReport(name, applied_ts=state.applied_ts))

    def _progress(self, pending_rows: dict[TableId, int], pending_records: int) -> progress.Progress:
        resume = {p: r.last_offset + 1 for p, r in self.ranges.items() if p != NO_PARTITION}
        return progress.Progress(
            run_id=self.run_id,
            global_watermark=self.g,
            resume={**self.committed.resume, **resume},
            watermarks=self.watermarks,
            tables={**self.unmoved, **{t: table.state for t, table in self.tables.items()}},
            pending_rows=pending_rows,
            buffered=pending_records,
            failed={t: str(e) for t, e in self.stopped.items() if isinstance(e, TableFailed)},
        )

    def _result(self) -> BatchResult:
        decoded: dict[TableId, int] = defaultdict(int)
        for signature in self.signatures:
            decoded[signature.table] += signature.rows
        for name, table in self.tables.items():
            decoded[name] += len(table.ddls)
        result = BatchResult(
            self.run_id, self.records, self.g, self._quarantined(), self.reports,
            time.monotonic() - self.started, bytes=sum(r.bytes for r in self.ranges.values()),
            decoded=dict(decoded), lag_seconds=lag_seconds(self.g),
        )  # fmt: skip
        for report in self.reports.values():
            logger.info("run %d: %s", self.run_id, report.describe())
        logger.info("%s", result.describe())
        return result
