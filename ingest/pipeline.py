"""Wiring: one batch of Kafka-shaped records through decode -> order -> plan -> apply -> progress.

Row data stays in Spark. The driver sees control events (DDL, watermarks), per-partition offset ranges and
per-table type signatures, decides with the pure ``order`` and ``plan`` modules, and drives one guarded
MERGE per table segment.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ingest import buffer, ddl_history, order, progress, quarantine, schema_cache
from ingest.apply import schema as apply_schema
from ingest.apply.convert import BinaryText
from ingest.apply.delta_commit import state_to_metadata, txn_version
from ingest.apply.merge import (
    BAD_COLUMN,
    apply_merge,
    converge_effect,
    first_bad_commit_ts,
    key_bounds,
    net_effect,
    normalize,
    segment_rows,
    with_defaults,
)
from ingest.config import (
    DropTablePolicy,
    IngestConfig,
    Protocol,
    SimpleEncoding,
    TypeChangePolicy,
    UnknownDdlPolicy,
)
from ingest.decode import canal_json as cj
from ingest.decode import simple as sp
from ingest.decode.mysql_types import UnknownTypeError, parse_mysql_type
from ingest.errors import ConfigError, DecodeError, SchemaChangeRejected, TooManyBadRecords
from ingest.model import (
    Column,
    DdlEvent,
    PartitionId,
    Position,
    TableId,
    TableSchema,
    TableSignature,
    TableState,
    Watermark,
    tso_to_datetime,
)
from ingest.plan import schema as plan_schema
from ingest.source import POSITION, files
from ingest.spark_decode import (
    CLAIM_CHECK,
    CONTROL_KINDS,
    KIND_BAD,
    KIND_DDL,
    KIND_DML,
    KIND_FATAL,
    KIND_WATERMARK,
    decode_canal_json,
    decode_simple_json,
    fetch_claim_checks,
    prepare_payload,
)

logger = logging.getLogger(__name__)

NO_PARTITION = PartitionId("", -1)


@dataclass
class TableReport:
    """What one run did to one table."""

    table: TableId
    upserted: int = 0
    deleted: int = 0
    ddls: list[str] = field(default_factory=list)
    quarantined: int = 0
    pending: int = 0
    applied_ts: int = 0
    # Set when the table stopped just below rows that do not convert, until the batch knows it will not
    # fail on max-bad-ratio: the commit_ts up to which its unconvertible rows are already quarantined.
    held_through: int | None = None

    def absorb(self, later: TableReport) -> None:
        """Add what a second pass over the same table did."""
        self.upserted += later.upserted
        self.deleted += later.deleted
        self.ddls.extend(later.ddls)
        self.quarantined += later.quarantined
        self.applied_ts = later.applied_ts
        self.held_through = later.held_through

    def describe(self) -> str:
        applied = (
            f"applied up to TSO {self.applied_ts} ({tso_to_datetime(self.applied_ts).isoformat()})"
            if self.applied_ts
            else "nothing applied yet"
        )
        return (
            f"{self.table}: {self.upserted} upserted, {self.deleted} deleted, {len(self.ddls)} DDL applied, "
            f"{self.quarantined} quarantined, {self.pending} pending above G; {applied}"
        )


@dataclass
class BatchResult:
    """What one run did, per table and overall; :meth:`metrics` is what every batch logs."""

    run_id: int
    records: int
    global_watermark: int
    quarantined: int
    tables: dict[TableId, TableReport]
    seconds: float
    bytes: int = 0
    decoded: dict[TableId, int] = field(default_factory=dict)  # DML rows and DDLs read, per table
    lag_seconds: float | None = None  # now minus G's physical time, when the batch finished
    batch_id: int | None = None  # Spark's micro-batch id, for a Kafka stream
    offset_order: bool = False  # TiCDC Avro: applied in offset order, there is no G

    def describe(self) -> str:
        g = (
            f"G = {self.global_watermark} ({tso_to_datetime(self.global_watermark).isoformat()})"
            if self.global_watermark
            else "G = 0 (some partition has no watermark yet)"
        )
        if self.offset_order:
            g = "applied in offset order (no watermarks)"
        lag = f", lag {self.lag_seconds:.1f}s" if self.lag_seconds is not None else ""
        return (
            f"run {self.run_id}: {self.records} records ({self.bytes} bytes), {g}{lag}, "
            f"{self.quarantined} quarantined, {len(self.tables)} tables, {self.seconds:.1f}s"
        )

    def metrics(self) -> dict[str, object]:
        """One JSON-able record per batch: events decoded and applied per table, bytes, duration, lag."""
        tables = sorted(set(self.decoded) | set(self.tables))
        return {
            "run_id": self.run_id,
            "batch_id": self.batch_id,
            "records": self.records,
            "bytes": self.bytes,
            "quarantined": self.quarantined,
            "duration_seconds": round(self.seconds, 3),
            "global_watermark": self.global_watermark,
            "lag_seconds": None if self.lag_seconds is None else round(self.lag_seconds, 3),
            "tables": {
                str(t): {
                    "decoded": self.decoded.get(t, 0),
                    "applied": _applied(self.tables.get(t)),
                    "pending": self.tables[t].pending if t in self.tables else 0,
                }
                for t in tables
            },
        }


def _applied(report: TableReport | None) -> int:
    return 0 if report is None else report.upserted + report.deleted + len(report.ddls)


def lag_seconds(global_watermark: int, now: datetime | None = None) -> float | None:
    """How far the mirror is behind: now against the physical time of G (None before the first G)."""
    if not global_watermark:
        return None
    moment = now or datetime.now(timezone.utc)
    return (moment - tso_to_datetime(global_watermark)).total_seconds()


def run_files(
    spark: SparkSession, config: IngestConfig, report: Callable[[str], None] | None = None
) -> BatchResult:
    """Mirror a directory of captured Kafka records, continuing from the last committed progress.

    ``report`` receives progress lines (records, bytes, share of offsets done per partition) for a
    terminal; counting them costs one extra pass over the input, so it is off unless asked for.
    """
    committed = progress.load_progress(spark, config.state_path, config.stream_id)
    messages = files.read_messages(spark, config.input_path, committed.resume, config.input_format)
    if report is None:
        return process_batch(spark, messages, config, committed)
    stats = files.input_stats(messages)
    for line in files.describe_stats(stats, committed.resume, before=True):
        report(line)
    result = process_batch(spark, messages, config, committed)
    after = progress.load_progress(spark, config.state_path, config.stream_id)
    for line in files.describe_stats(stats, after.resume, before=False):
        report(line)
    return result


def process_batch(
    spark: SparkSession, messages: DataFrame, config: IngestConfig, committed: progress.Progress
) -> BatchResult:
    """Decode, order, plan and apply one batch, then commit progress. Raises before progress moves."""
    if config.protocol is Protocol.AVRO:
        from ingest import converge  # imports this module: its batches share the checks and reports

        return converge.process_batch(spark, messages, config, committed)
    started = time.monotonic()
    run_id = committed.run_id + 1
    # A buffer the last run left empty is not read: a crash after a later buffer write but before its
    # progress re-reads that run's input anyway, from the resume offsets the empty buffer goes with.
    buffered = (
        None if committed.buffered == 0 else buffer.read_buffer(spark, config.state_path, config.stream_id)
    )
    if buffered is not None:
        messages = messages.unionByName(buffered)
    decoded, ranges = cache_once_per_position(_decode(spark, messages, config))
    try:
        return _process(spark, decoded, ranges, config, committed, run_id, started)
    finally:
        decoded.unpersist()


def cache_once_per_position(decoded: DataFrame) -> tuple[DataFrame, dict[PartitionId, _PartitionRead]]:
    """The decoded batch, cached, each Kafka position once, and what was read from each partition.

    De-duplicating shuffles every record's bytes (at 500,000 captured records, 2.3 s of a 3.1 s read), and
    duplicates are rare: overlapping captures, or a buffer left by a run that crashed after writing it and
    before committing its progress. So the pass that reads the partition ranges also counts distinct
    offsets, and only a batch that has duplicates is de-duplicated (and cached again). The caller
    unpersists the frame.
    """
    frames = [decoded.persist()]
    try:
        ranges = _partition_ranges(frames[0])
        if any(r.duplicates for r in ranges.values()):
            # Lines without a position are not copies of each other: each is counted and quarantined.
            positioned = (
                F.col("topic").isNotNull() & F.col("partition").isNotNull() & F.col("offset").isNotNull()
            )
            cached = frames[0]
            unique = (
                cached.where(positioned).dropDuplicates(list(POSITION)).unionByName(cached.where(~positioned))
            )
            frames.append(unique.persist())
            ranges = _partition_ranges(frames[-1])  # also fills its cache before its parent's goes
    except BaseException:
        for frame in frames:
            frame.unpersist()
        raise
    for frame in frames[:-1]:
        frame.unpersist()
    return frames[-1], ranges


def _decode(spark: SparkSession, messages: DataFrame, config: IngestConfig) -> DataFrame:
    simple = config.protocol is Protocol.SIMPLE
    simple_avro = simple and config.simple_encoding is SimpleEncoding.AVRO

    def decoder(frame: DataFrame) -> DataFrame:
        if simple:
            return decode_simple_json(frame)
        return decode_canal_json(frame, offset_order=config.offset_order)

    prepared = prepare_payload(messages, config.compression, simple_avro=simple_avro)
    decoded = decoder(prepared)
    if config.claim_check_path is None:
        return decoded
    claims = decoded.where((F.col("kind") == KIND_FATAL) & F.col(CLAIM_CHECK).isNotNull()).select(
        "topic", "partition", "offset", CLAIM_CHECK
    )
    if claims.isEmpty():
        return decoded
    resolved = fetch_claim_checks(
        spark,
        prepared,
        claims,
        config.claim_check_path,
        config.claim_check_raw_value,
        config.compression,
        simple_avro,
    )
    logger.info("fetched %d claim-check message(s) from %s", claims.count(), config.claim_check_path)
    return decoder(resolved)


def _process(
    spark: SparkSession,
    decoded: DataFrame,
    ranges: dict[PartitionId, _PartitionRead],
    config: IngestConfig,
    committed: progress.Progress,
    run_id: int,
    started: float,
) -> BatchResult:
    _stop_on_fatal(ranges, config.protocol)
    records = sum(r.records for r in ranges.values())
    _check_partitions(config, ranges, committed, check_late=not config.offset_order)
    bad = sum(r.bad for r in ranges.values())
    quarantine_undecodable(spark, config, decoded, bad, run_id)
    _check_bad_ratio(config, bad, records)

    ddls, watermarks, announced = _control_events(decoded, config.protocol)
    schemas: dict[schema_cache.SchemaKey, sp.VersionedSchema] = {}
    if config.protocol is Protocol.SIMPLE:
        schemas = schema_cache.load(spark, config.state_path, config.stream_id)
        fresh = [s for s in announced if (s.table, s.version) not in schemas]
        schemas.update({(s.table, s.version): s for s in fresh})
    watermark_by_partition = order.advance_watermarks(committed.watermarks, watermarks)
    partition_set = config.partitions or (
        (set(ranges) - {NO_PARTITION}) | set(committed.watermarks) | set(committed.resume)
    )
    g = order.global_watermark(watermark_by_partition, partition_set)
    missing = sorted(str(p) for p in partition_set if p not in watermark_by_partition)
    if missing and not config.offset_order:
        logger.warning(
            "no watermark yet on partition(s) %s: nothing is applied until each has one", ", ".join(missing)
        )

    dml = decoded.where(F.col("kind") == KIND_DML)
    signatures = _simple_signatures(dml) if config.protocol is Protocol.SIMPLE else _signatures(dml)
    if config.offset_order:
        # No watermarks: everything read is applied now, up to the newest commit time seen (never back).
        g = max(
            [committed.global_watermark, *(s.max_commit_ts for s in signatures), *(d.commit_ts for d in ddls)]
        )
    # Simple rows whose schema version no BOOTSTRAP or DDL has announced yet wait, and hold their table's
    # apply bound just below the first of them: nothing after them may be applied before them.
    parked = _parked(signatures, schemas)
    bounds = {t: min(g, ts - 1) for t, ts in parked.items()}
    # A DDL belongs to every table it changes: a rename to its source and its target, DROP DATABASE to
    # each known table of that database. Each table admits and records it on its own (R4, per object).
    known = set(committed.tables) | {s.table for s in signatures} | {d.table for d in ddls if d.table.table}
    by_table: dict[TableId, list[DdlEvent]] = defaultdict(list)
    sources: set[TableId] = set()
    for ddl in ddls:
        affected = plan_schema.affected_tables(ddl, known)
        if not affected:
            _apply_schema_level_ddl(ddl, g)
        for table in affected:
            by_table[table].append(ddl)
        if len(affected) > 1 and plan_schema.is_rename(ddl):
            sources.update(affected[0::2])
    # A rename's source runs first: its rows up to the rename are applied before the target copies them.
    tables = sorted({s.table for s in signatures} | set(by_table), key=lambda t: (t not in sources, t))

    reports: dict[TableId, TableReport] = {}
    states: dict[TableId, TableState] = dict(committed.tables)
    targets_of: dict[TableId, set[TableId]] = defaultdict(set)
    for ddl in ddls:
        affected = plan_schema.affected_tables(ddl, known)
        if len(affected) > 1 and plan_schema.is_rename(ddl):
            for source, target in zip(affected[0::2], affected[1::2], strict=False):
                targets_of[source].add(target)

    def apply(table: TableId, held_through: int | None) -> TableReport:
        report, states[table] = _apply_table(
            spark,
            config,
            table,
            dml,
            signatures,
            by_table.get(table, []),
            bounds.get(table, g),
            committed,
            run_id,
            schemas,
            held_through,
        )
        return report

    # First pass: a table whose rows do not all convert stops just below the first that does not, for the
    # batch may yet fail on max-bad-ratio, and a re-run after the fix must find those rows unapplied. Only
    # when the whole batch's count is known to pass do such tables go on past their quarantined rows.
    deferred: list[TableId] = []
    for number, table in enumerate(tables, start=1):
        logger.info("run %d: table %d/%d: %s", run_id, number, len(tables), table)
        if any(table in targets_of[t] for t in deferred):
            deferred.append(table)  # a rename target copies its source, which is not complete yet
            continue
        reports[table] = apply(table, None)
        if reports[table].held_through is not None:
            deferred.append(table)
            if _over_bad_ratio(config, bad + sum(r.quarantined for r in reports.values()), records):
                break  # the batch fails whatever comes next: leave the remaining tables untouched
    conversion_bad = sum(r.quarantined for r in reports.values())
    _check_bad_ratio(config, bad + conversion_bad, records)
    for table in deferred:
        report = apply(table, reports[table].held_through if table in reports else 0)
        if table in reports:
            reports[table].absorb(report)
        else:
            reports[table] = report
        conversion_bad += report.quarantined
        _check_bad_ratio(config, bad + conversion_bad, records)

    pending = decoded.where(F.col("kind").isin(KIND_DML, KIND_DDL) & _above_bound(g, bounds))
    pending_rows, pending_records = _pending_counts(pending)
    for table, count in pending_rows.items():
        reports.setdefault(table, TableReport(table, applied_ts=states.get(table, TableState()).applied_ts))
        reports[table].pending = count
    # Everything read is now applied, quarantined or buffered: the read position moves past all of it.
    # An empty buffer that stays empty needs no commit.
    if pending_records or committed.buffered != 0:
        buffer.replace_buffer(spark, config.state_path, config.stream_id, pending, pending_records)
    resume = {**committed.resume, **{p: r.last_offset + 1 for p, r in ranges.items() if p != NO_PARTITION}}
    new_progress = progress.Progress(
        run_id=run_id,
        global_watermark=g,
        resume=resume,
        watermarks=watermark_by_partition,
        tables=states,
        pending_rows=pending_rows,
        buffered=pending_records,
    )
    if config.protocol is Protocol.SIMPLE:
        # Durable before progress moves past the BOOTSTRAP/DDL messages that announced them.
        schema_cache.add(spark, config.state_path, config.stream_id, fresh)
    progress.commit_progress(spark, config.state_path, config.stream_id, new_progress)
    decoded_per_table: dict[TableId, int] = defaultdict(int)
    for signature in signatures:
        decoded_per_table[signature.table] += signature.rows
    for table, table_ddls in by_table.items():
        decoded_per_table[table] += len(table_ddls)
    result = BatchResult(
        run_id,
        records,
        g,
        bad + conversion_bad,
        reports,
        time.monotonic() - started,
        bytes=sum(r.bytes for r in ranges.values()),
        decoded=dict(decoded_per_table),
        lag_seconds=lag_seconds(g),
    )
    for report in reports.values():
        logger.info("run %d: %s", run_id, report.describe())
    logger.info("%s", result.describe())
    return result


def quarantine_undecodable(
    spark: SparkSession, config: IngestConfig, decoded: DataFrame, bad: int, run_id: int
) -> None:
    """Keep every record the decoder rejected, with its bytes and position, before anything is applied."""
    if not bad:
        return
    quarantine.write(
        spark,
        config.state_path,
        decoded.where(F.col("kind") == KIND_BAD),
        error_class=DecodeError.__name__,
        run_id=run_id,
    )
    logger.warning("run %d: quarantined %d undecodable records", run_id, bad)


def _stop_on_fatal(ranges: dict[PartitionId, _PartitionRead], protocol: Protocol) -> None:
    fatal = sorted(((p, r.fatal) for p, r in ranges.items() if r.fatal is not None), key=lambda x: x[0])
    if fatal:
        partition, (offset, error) = fatal[0]
        position = Position(partition.topic, partition.partition, offset)
        raise ConfigError(f"{protocol.value}: {error} (first seen at {position}); nothing was applied")


@dataclass(frozen=True)
class _PartitionRead:
    """What one batch read from one partition."""

    last_offset: int
    records: int
    bad: int
    min_dml_ts: int | None
    bytes: int = 0
    fatal: tuple[int, str] | None = None  # the first record that stops the stream: offset, why
    duplicates: int = 0  # records whose offset was read more than once in this batch


def _partition_ranges(decoded: DataFrame) -> dict[PartitionId, _PartitionRead]:
    """Per partition: last offset read, records read, bad (quarantined) records, smallest DML commit_ts,
    and the first fatal record; one pass over the decoded batch."""
    rows = (
        decoded.groupBy("topic", "partition")
        .agg(
            F.max("offset").alias("last"),
            F.count("*").alias("n"),
            (F.count("offset") - F.count_distinct("offset")).alias("duplicates"),
            F.sum(F.when(F.col("kind") == KIND_BAD, 1).otherwise(0)).alias("bad"),
            F.min(F.when(F.col("kind") == KIND_DML, F.col("commit_ts"))).alias("min_ts"),
            F.sum(F.length("value")).alias("bytes"),
            F.min(F.when(F.col("kind") == KIND_FATAL, F.struct("offset", "error"))).alias("fatal"),
        )
        .collect()
    )
    result: dict[PartitionId, _PartitionRead] = {}
    for row in rows:
        if row["topic"] is None or row["partition"] is None:
            # Lines that were not Kafka records at all: counted and quarantined, but they have no partition.
            result[NO_PARTITION] = _PartitionRead(
                -1, int(row["n"]), int(row["bad"]), None, int(row["bytes"] or 0)
            )
            continue
        min_ts = None if row["min_ts"] is None else int(row["min_ts"])
        pid = PartitionId(row["topic"], int(row["partition"]))
        fatal = None if row["fatal"] is None else (int(row["fatal"]["offset"]), str(row["fatal"]["error"]))
        result[pid] = _PartitionRead(
            int(row["last"]),
            int(row["n"]),
            int(row["bad"]),
            min_ts,
            int(row["bytes"] or 0),
            fatal,
            int(row["duplicates"]),
        )
    return result


def _check_partitions(
    config: IngestConfig,
    ranges: dict[PartitionId, _PartitionRead],
    committed: progress.Progress,
    check_late: bool = True,
) -> None:
    seen = {p for p in ranges if p != NO_PARTITION}
    if config.partitions is not None:
        unexpected = sorted(str(p) for p in seen if p not in config.partitions)
        if unexpected:
            raise ConfigError(
                f"partitions: records found in {', '.join(unexpected)}, which --partitions does not list; "
                "list every partition TiCDC writes to, or G cannot be computed"
            )
        return
    if not check_late:
        return  # offset order places late rows by the MERGE guard, not by G
    # Discovered partition set: a partition seen for the first time after rows were applied up to G
    # without it may hold changes at or below that G, which A_T would now drop. Never let that pass.
    known = set(committed.resume) | set(committed.watermarks)
    late = sorted(
        str(p)
        for p in seen - known
        if (first := ranges[p].min_dml_ts) is not None and first <= committed.global_watermark
    )
    if late:
        raise ConfigError(
            f"partitions: {', '.join(late)} appeared only now but holds changes at or below the G already "
            f"applied ({committed.global_watermark}) without it, so the mirror may be missing them. Mirror "
            "again into a new target with --partitions listing every partition TiCDC writes"
        )


def _over_bad_ratio(config: IngestConfig, bad: int, records: int) -> bool:
    return bool(records) and bad / records > config.max_bad_ratio


def _check_bad_ratio(config: IngestConfig, bad: int, records: int) -> None:
    if _over_bad_ratio(config, bad, records):
        raise TooManyBadRecords(
            f"{bad} of {records} records were quarantined ({bad / records:.2%}), above max-bad-ratio "
            f"{config.max_bad_ratio}; progress not moved. Inspect the quarantine table under "
            f"{quarantine.quarantine_path(config.state_path)} and fix the input, or raise --max-bad-ratio"
        )


def _control_events(
    decoded: DataFrame, protocol: Protocol
) -> tuple[list[DdlEvent], list[Watermark], list[sp.VersionedSchema]]:
    """DDLs, watermarks and (Simple) announced table schemas: the only records that reach the driver."""
    rows = (
        decoded.where(F.col("kind").isin(*CONTROL_KINDS))
        .select(
            "topic",
            "partition",
            "offset",
            "kind",
            "database",
            "table",
            "type",
            "commit_ts",
            "sql",
            "table_schema",
            "pre_table_schema",
        )
        .collect()
    )
    ddls: list[DdlEvent] = []
    watermarks: list[Watermark] = []
    schemas: list[sp.VersionedSchema] = []
    for row in rows:
        position = Position(row["topic"], row["partition"], row["offset"])
        if protocol is Protocol.SIMPLE:
            fields = {
                sp.FIELD_TYPE: row["type"],
                sp.FIELD_COMMIT_TS: row["commit_ts"],
                sp.FIELD_SQL: row["sql"],
                sp.FIELD_TABLE_SCHEMA: row["table_schema"],
                sp.FIELD_PRE_TABLE_SCHEMA: row["pre_table_schema"],
            }
            event = sp.control_event(fields, position)
            if row["kind"] != KIND_WATERMARK:
                schemas.extend(sp.schemas_of(fields))
            if isinstance(event, sp.Bootstrap):
                continue
        else:
            event = cj.control_event(
                {
                    cj.FIELD_DATABASE: row["database"],
                    cj.FIELD_TABLE: row["table"],
                    cj.FIELD_TYPE: row["type"],
                    cj.FIELD_SQL: row["sql"],
                    cj.FIELD_IS_DDL: row["kind"] == KIND_DDL,
                    cj.FIELD_TIDB: {
                        cj.TIDB_COMMIT_TS: row["commit_ts"],
                        cj.TIDB_WATERMARK_TS: row["commit_ts"],
                    },
                },
                position,
            )
        if isinstance(event, DdlEvent):
            ddls.append(event)
        else:
            watermarks.append(event)
    return ddls, watermarks, schemas


def _apply_schema_level_ddl(ddl: DdlEvent, g: int) -> None:
    """CREATE DATABASE needs nothing (databases are directories); other database DDLs stop the stream."""
    if ddl.commit_ts > g:
        return  # not eligible yet; it is re-read with the pending rows of its partition
    for change in plan_schema.plan_schema_changes(ddl, None):
        if isinstance(change, plan_schema.Reject):
            raise SchemaChangeRejected(
                f"{ddl.table.schema}: {change.reason}; stream stopped before {ddl.position} "
                f"(commitTs {ddl.commit_ts}), progress not moved"
            )
    logger.info(
        "%s: nothing to do for database DDL at %s (commitTs %d): %s",
        ddl.table.schema,
        ddl.position,
        ddl.commit_ts,
        ddl.sql,
    )


def _signatures(dml: DataFrame) -> list[TableSignature]:
    # Grouped on the map's key and value arrays as they come: sorting each row's pairs into one value
    # cost more than the aggregate itself. The same types in another key order meet again on the driver.
    rows = (
        dml.groupBy(
            "database",
            "table",
            F.map_keys("mysql_type").alias("names"),
            F.map_values("mysql_type").alias("types"),
            F.col("pk_names"),
        )
        .agg(F.min("commit_ts").alias("lo"), F.max("commit_ts").alias("hi"), F.count("*").alias("n"))
        .collect()
    )
    merged: dict[tuple[TableId, tuple[tuple[str, str], ...], tuple[str, ...]], list[int]] = {}
    for row in rows:
        pairs = tuple(sorted(zip(row["names"] or [], row["types"] or [], strict=True)))
        group = (TableId(row["database"], row["table"]), pairs, tuple(row["pk_names"] or ()))
        lo, hi, n = int(row["lo"]), int(row["hi"]), int(row["n"])
        if group in merged:
            seen = merged[group]
            lo, hi, n = min(lo, seen[0]), max(hi, seen[1]), n + seen[2]
        merged[group] = [lo, hi, n]
    return [
        TableSignature(
            table=table, mysql_types=pairs, pk_names=pk, min_commit_ts=lo, max_commit_ts=hi, rows=n
        )
        for (table, pairs, pk), (lo, hi, n) in merged.items()
    ]


def _simple_signatures(dml: DataFrame) -> list[TableSignature]:
    rows = (
        dml.groupBy("database", "table", "schema_version")
        .agg(F.min("commit_ts").alias("lo"), F.max("commit_ts").alias("hi"), F.count("*").alias("n"))
        .collect()
    )
    return [
        TableSignature(
            table=TableId(r["database"], r["table"]),
            mysql_types=(),
            pk_names=(),
            min_commit_ts=int(r["lo"]),
            max_commit_ts=int(r["hi"]),
            rows=int(r["n"]),
            schema_version=int(r["schema_version"]),
        )
        for r in rows
    ]


def _parked(
    signatures: list[TableSignature], schemas: dict[schema_cache.SchemaKey, sp.VersionedSchema]
) -> dict[TableId, int]:
    """Per table, the first commit_ts of rows whose schema version is unknown (Simple only)."""
    parked: dict[TableId, int] = {}
    for s in signatures:
        if s.schema_version is not None and (s.table, s.schema_version) not in schemas:
            parked[s.table] = min(parked.get(s.table, s.min_commit_ts), s.min_commit_ts)
            logger.warning(
                "%s: %d row(s) name schema version %d, which no BOOTSTRAP or DDL has announced yet; "
                "they wait, and the table is applied only up to commitTs %d",
                s.table,
                s.rows,
                s.schema_version,
                s.min_commit_ts - 1,
            )
    return parked


def _above_bound(g: int, bounds: dict[TableId, int]) -> SparkColumn:
    """Rows and DDLs not applied by this batch: above G, or above their own table's lower bound."""
    condition = F.col("commit_ts") > g
    for table, bound in bounds.items():
        mine = (F.col("database") == table.schema) & (F.col("table") == table.table)
        condition = condition | (mine & (F.col("commit_ts") > bound))
    return condition


def _apply_table(
    spark: SparkSession,
    config: IngestConfig,
    table: TableId,
    dml: DataFrame,
    signatures: list[TableSignature],
    ddls: list[DdlEvent],
    g: int,
    committed: progress.Progress,
    run_id: int,
    schemas: dict[schema_cache.SchemaKey, sp.VersionedSchema],
    held_through: int | None = None,
) -> tuple[TableReport, TableState]:
    """Apply one table's DDLs and row segments up to ``g`` (G, or the table's own lower bound).

    ``held_through`` None: the first pass, which stops the table just below rows that do not convert
    (the report says so). Otherwise the second pass, past such rows, whose bad rows up to that commit_ts
    are already quarantined.
    """
    path = config.table_path(table.schema, table.table)
    state = progress.read_table_state(spark, path) or committed.tables.get(table, TableState())
    applied_before = state.applied_ts
    if config.offset_order:
        # Best effort: a row older than what the table already holds may be new (its partition lagged);
        # it is admitted, and the MERGE guard keeps newer rows. Only DDLs are deduplicated, by D_T.
        state = replace(state, applied_ts=0)
    seen: set[tuple[int, str]] = set()
    admitted: list[DdlEvent] = []
    for ddl in sorted(ddls, key=lambda d: (d.commit_ts, d.position.offset)):
        if order.ddl_is_new(state, ddl) and (ddl.commit_ts, ddl.identity) not in seen:
            seen.add((ddl.commit_ts, ddl.identity))
            admitted.append(ddl)
    mine = [s for s in signatures if s.table == table]
    has_rows = any(s.max_commit_ts >= state.applied_ts and s.min_commit_ts <= g for s in mine)
    report = TableReport(table, applied_ts=state.applied_ts)
    for step in order.plan_table_steps(table, state, admitted, g, has_rows):
        if isinstance(step, order.DdlStep):
            state = _apply_ddl(spark, config, table, path, step.ddl, state, run_id)
            report.ddls.append(step.ddl.sql)
        else:
            state = _apply_segment(
                spark, config, path, step, dml, mine, state, run_id, report, schemas, held_through
            )
            if report.held_through is not None and held_through is None:
                report.applied_ts = state.applied_ts
                return report, state
        report.applied_ts = state.applied_ts
    state = replace(state, applied_ts=max(state.applied_ts, applied_before))
    report.applied_ts = state.applied_ts
    if config.table_name_template and apply_schema.table_exists(spark, path):
        name = config.catalog_name(table.schema, table.table)
        if name:
            apply_schema.register_catalog_table(spark, name, path)
    return report, state


def _apply_ddl(
    spark: SparkSession,
    config: IngestConfig,
    table: TableId,
    path: str,
    ddl: DdlEvent,
    state: TableState,
    run_id: int,
) -> TableState:
    info = apply_schema.table_info(spark, path) if apply_schema.table_exists(spark, path) else None
    changes = plan_schema.plan_schema_changes(
        ddl,
        info.columns if info else None,
        table=table,
        key=info.key if info else (),
        retired=info.retired if info else False,
        drop_keeps_rows=config.drop_table == DropTablePolicy.ARCHIVE,
        partitioning=info.partitioning if info else None,
    )
    schema_before = info.schema.simpleString() if info else None

    def reject(reason: str) -> SchemaChangeRejected:
        ddl_history.record(
            spark,
            config.state_path,
            table=table,
            ddl=ddl,
            action=ddl_history.REJECTED,
            detail=reason,
            schema_before=schema_before,
            schema_after=None,
            run_id=run_id,
        )
        return SchemaChangeRejected(
            f"{table}: {reason}; stream stopped before {ddl.position} (commitTs {ddl.commit_ts}), "
            "progress not moved"
        )

    skipped = ""
    for change in changes:
        if isinstance(change, plan_schema.Reject):
            if not (change.unknown and config.unknown_ddl == UnknownDdlPolicy.SKIP):
                raise reject(change.reason)
            logger.warning(
                "%s: skipped unknown DDL at %s (commitTs %d): %s",
                table,
                ddl.position,
                ddl.commit_ts,
                change.reason,
            )
            skipped, changes = change.reason, []
            break
    ids = (state.ddl_ids if ddl.commit_ts == state.ddl_ts else frozenset()) | {ddl.identity}
    applied = TableState(applied_ts=max(state.applied_ts, ddl.commit_ts), ddl_ts=ddl.commit_ts, ddl_ids=ids)
    # Intermediate commits carry the old state: a crash mid-DDL makes the restart apply the DDL again,
    # and every change here is idempotent (create-if-absent, add-if-absent, drop-if-present, delete-all,
    # copy-replacing).
    before = state_to_metadata(
        state, run_id=run_id, step=f"ddl {ddl.commit_ts} in progress", consistent=False
    )
    for change in changes:
        if isinstance(change, plan_schema.CreateTable):
            replace = isinstance(change, plan_schema.CreateTableReplacing)
            apply_schema.create_table(
                spark, path, change.table, change.schema, before, replace=replace,
                partitioning=change.partitioning,
            )  # fmt: skip
        elif isinstance(change, plan_schema.AddColumn):
            apply_schema.add_column(spark, path, change, config.timezone, before)
        elif isinstance(change, plan_schema.DropColumn):
            apply_schema.drop_column(spark, path, change.name, before)
        elif isinstance(change, plan_schema.RenameColumn):
            apply_schema.rename_column(spark, path, change.old, change.new, before)
        elif isinstance(change, plan_schema.ChangeType):
            refused = apply_schema.change_type(spark, path, change, before)
            if refused is not None and config.type_change is TypeChangePolicy.REWRITE:
                logger.warning(
                    "%s: column %s: %s; rewriting the table with a cast", table, change.name, refused
                )
                refused = apply_schema.rewrite_column(spark, path, change, before)
            if refused is not None:
                policy = config.type_change.value
                raise reject(f'column {change.name}: {refused} under type-change policy "{policy}"')
        elif isinstance(change, plan_schema.ChangeKey):
            apply_schema.change_key(spark, path, change.key, before)
        elif isinstance(change, plan_schema.Truncate):
            apply_schema.truncate(spark, path, before)
        elif isinstance(change, plan_schema.DeletePartitionRows):
            apply_schema.delete_partition_rows(spark, path, change, before)
        elif isinstance(change, plan_schema.SetPartitioning):
            apply_schema.set_partitioning(spark, path, change.partitioning, before)
        elif isinstance(change, plan_schema.Retire):
            apply_schema.retire(spark, path, change.reason, change.keep_rows, before)
        elif isinstance(change, plan_schema.CreateLike):
            source_path = config.table_path(change.source.schema, change.source.table)
            if not apply_schema.copy_table(spark, source_path, path, table, before, with_rows=False):
                raise reject(f"CREATE TABLE ... LIKE {change.source}, which the mirror does not hold")
        elif isinstance(change, plan_schema.CopyFrom):
            source_path = config.table_path(change.source.schema, change.source.table)
            if not apply_schema.copy_table(spark, source_path, path, table, before):
                logger.warning(
                    "%s: renamed from %s, which the mirror does not hold; it starts empty",
                    table,
                    change.source,
                )
    exists = apply_schema.table_exists(spark, path)
    only_recorded = all(isinstance(c, plan_schema.RecordOnly) for c in changes)
    action = (
        ddl_history.SKIPPED if skipped else ddl_history.RECORDED if only_recorded else ddl_history.APPLIED
    )
    detail = skipped or "; ".join(
        type(c).__name__ + (f": {c.reason}" if isinstance(c, plan_schema.RecordOnly) else "") for c in changes
    )
    ddl_history.record(
        spark, config.state_path, table=table, ddl=ddl, action=action, detail=detail,
        schema_before=schema_before,
        schema_after=apply_schema.table_info(spark, path).schema.simpleString() if exists else None,
        run_id=run_id,
    )  # fmt: skip
    if exists:
        apply_schema.mark_applied(
            spark,
            path,
            applied.applied_ts,
            state_to_metadata(applied, run_id=run_id, step=f"ddl {ddl.commit_ts}: {ddl.identity[:200]}"),
        )
    logger.info(
        "%s: applied DDL at %s (commitTs %d, %s): %s",
        table,
        ddl.position,
        ddl.commit_ts,
        tso_to_datetime(ddl.commit_ts).isoformat(),
        ddl.sql,
    )
    return applied


def _apply_segment(
    spark: SparkSession,
    config: IngestConfig,
    path: str,
    segment: order.Segment,
    dml: DataFrame,
    signatures: list[TableSignature],
    state: TableState,
    run_id: int,
    report: TableReport,
    schemas: dict[schema_cache.SchemaKey, sp.VersionedSchema],
    held_through: int | None,
) -> TableState:
    table = segment.table
    in_range = [s for s in signatures if s.max_commit_ts >= segment.low and s.min_commit_ts <= segment.high]
    if not in_range:
        return state  # no row of this table falls into the segment; the next step moves A_T
    simple = config.protocol is Protocol.SIMPLE
    if not apply_schema.table_exists(spark, path):
        if simple:
            _create_from_schema_cache(spark, path, table, in_range, schemas, state, run_id)
        else:
            _create_from_dml(spark, config, path, table, in_range, state, run_id)
    rows = segment_rows(dml, segment)
    if config.offset_order:
        rows = with_defaults(rows, apply_schema.column_defaults(spark, path))
    info = apply_schema.table_info(spark, path)
    # Simple rows follow the announced schemas; only Canal-JSON's row types can reveal unseen columns.
    if not simple and _add_columns_seen_in_dml(
        spark, config, path, info, table, in_range, rows, state, run_id
    ):
        info = apply_schema.table_info(spark, path)
    schema, key = info.schema, info.key
    if not key:
        raise SchemaChangeRejected(f"{table}: the Delta table at {path} has no key columns recorded")
    binary = BinaryText.BASE64 if simple else BinaryText.LATIN1
    cached = normalize(rows, schema, key, config.timezone, binary).persist()
    try:
        changes = cached
        bad_count, bounds = key_bounds(changes, key)
        if bad_count and held_through is not None:
            # The first pass quarantined this table's bad rows up to ``held_through``; only later ones count.
            fresh = changes.where(F.col("commit_ts") > held_through)
            bad_count = fresh.where(F.col(BAD_COLUMN) != "").count() if segment.high > held_through else 0
        else:
            fresh = changes
        if bad_count:
            quarantine.write_unconvertible(spark, config.state_path, fresh, table, run_id)
            logger.warning("%s: quarantined %d rows whose values do not convert", table, bad_count)
            report.quarantined += bad_count
        if bad_count and held_through is None:
            # Stop just below the first bad row; a second pass goes past it once the batch is known to stay
            # within max-bad-ratio. The MERGE's transaction id names that lower bound, so the rest of the
            # segment, applied by the second pass or by a re-run after a fix, is not taken for a replay.
            # Offset order admits rows below A_T again anyway, so there the table simply waits.
            report.held_through = segment.high
            first_bad = first_bad_commit_ts(changes)
            assert first_bad is not None
            below = replace(segment, high=first_bad - 1, before_ddl=False)
            if config.offset_order or below.high < below.first_ts or below.high <= state.applied_ts:
                return state
            segment, changes = below, changes.where(F.col("commit_ts") <= below.high)
        columns = [f.name for f in schema.fields]
        # Offset order: commit times are milliseconds, not TSOs, so a key's last change by offset wins.
        source = (
            converge_effect(changes, key, columns)
            if config.offset_order
            else net_effect(changes, key, columns)
        )
        applied = replace(state, applied_ts=max(state.applied_ts, segment.applied_ts))
        metadata = state_to_metadata(applied, run_id=run_id, step=f"merge ({segment.low}, {segment.high}]")
        result = apply_merge(
            spark,
            path,
            source,
            key,
            columns,
            metadata,
            # A transaction id would skip a later segment ending at the same commit time (offset order).
            None if config.offset_order else (f"ticdc-ingest/{config.stream_id}", txn_version(segment.high)),
            bounds,
            by_offset=config.offset_order,
        )
    finally:
        cached.unpersist()
    report.upserted += result.upserted
    report.deleted += result.deleted
    logger.info(
        "%s: merged segment (%d, %d]: %d upserted, %d deleted; applied up to %d (%s)",
        table,
        segment.low,
        segment.high,
        result.upserted,
        result.deleted,
        applied.applied_ts,
        tso_to_datetime(applied.applied_ts).isoformat(),
    )
    return applied


def _columns_from_signature(signature: TableSignature, config: IngestConfig) -> list[Column]:
    columns = []
    for name, mysql_type in signature.mysql_types:
        try:
            column_type = config.column_type(signature.table, name, parse_mysql_type(mysql_type))
            columns.append(Column(name, column_type))
        except UnknownTypeError as exc:
            raise SchemaChangeRejected(f"{signature.table}.{name}: {exc}") from exc
    return columns


def _create_from_dml(
    spark: SparkSession,
    config: IngestConfig,
    path: str,
    table: TableId,
    signatures: list[TableSignature],
    state: TableState,
    run_id: int,
) -> None:
    """A table never announced by CREATE TABLE: build it from its first DML's mysqlType and pkNames."""
    first = min(signatures, key=lambda s: s.min_commit_ts)
    if not first.pk_names:
        raise SchemaChangeRejected(
            f"{table}: DML has pkNames [] and no CREATE TABLE was seen, so its merge key is unknown; "
            "start the stream before the table's CREATE TABLE, or create the Delta table with its key"
        )
    schema = TableSchema(tuple(_columns_from_signature(first, config)), first.pk_names)
    apply_schema.create_table(
        spark, path, table, schema, state_to_metadata(state, run_id=run_id, step="create", consistent=False)
    )
    logger.warning(
        "%s: created from DML column types (no CREATE TABLE seen); a DECIMAL whose precision the DML does "
        "not say is kept exactly as text unless --column-types names its type",
        table,
    )


def _create_from_schema_cache(
    spark: SparkSession,
    path: str,
    table: TableId,
    signatures: list[TableSignature],
    schemas: dict[schema_cache.SchemaKey, sp.VersionedSchema],
    state: TableState,
    run_id: int,
) -> None:
    """A Simple table never created by a DDL in the stream: its schema as the earliest row names it."""
    first = min(signatures, key=lambda s: s.min_commit_ts)
    entry = schemas[(table, first.schema_version or 0)]
    if not entry.schema.key:
        raise SchemaChangeRejected(
            f"{table}: schema version {entry.version} has neither a primary key nor a NOT NULL unique "
            "index, so the mirror has no merge key"
        )
    apply_schema.create_table(
        spark,
        path,
        table,
        entry.schema,
        state_to_metadata(state, run_id=run_id, step="create", consistent=False),
    )
    logger.info("%s: created from the announced schema version %d", table, entry.version)


def _add_columns_seen_in_dml(
    spark: SparkSession,
    config: IngestConfig,
    path: str,
    info: apply_schema.TableInfo,
    table: TableId,
    signatures: list[TableSignature],
    rows: DataFrame,
    state: TableState,
    run_id: int,
) -> bool:
    """Fallback: a DML names a column no DDL added (e.g. the DDL predates the stream); add it as nullable.

    Signatures only bound their rows' commit_ts coarsely, so a column they mention is added only if a row
    of this very segment carries it: otherwise a column dropped and re-added later could come back early.
    True when a column was added (``info`` is then out of date).
    """
    existing = set(info.columns)
    candidates = {c.name for s in signatures for c in _columns_from_signature(s, config)} - existing
    if not candidates:
        return False
    added = False
    names = F.explode(F.map_keys("data")).alias("name")
    present = {
        r["name"] for r in rows.select(names).where(F.col("name").isin(*candidates)).distinct().collect()
    }
    for signature in sorted(signatures, key=lambda s: s.max_commit_ts, reverse=True):
        for column in _columns_from_signature(signature, config):
            if column.name in existing or column.name not in present:
                continue
            change = plan_schema.AddColumn(table, column, first=False, after=None, backfill=None)
            apply_schema.add_column(
                spark,
                path,
                change,
                config.timezone,
                state_to_metadata(state, run_id=run_id, step=f"add {column.name} from DML", consistent=False),
            )
            existing.add(column.name)
            added = True
            logger.warning(
                "%s: added column %s %s seen in DML but announced by no DDL", table, column.name, column.type
            )
    return added


def _pending_counts(pending: DataFrame) -> tuple[dict[TableId, int], int]:
    """How many rows per table stay pending above G (DDLs are not counted as rows), and how many records
    in all (rows and DDLs): what the buffer will hold."""
    rows = pending.groupBy("kind", "database", "table").count().collect()
    per_table: dict[TableId, int] = defaultdict(int)
    for r in rows:
        if r["kind"] == KIND_DML and r["table"]:
            per_table[TableId(r["database"], r["table"])] += int(r["count"])
    return dict(per_table), sum(int(r["count"]) for r in rows)
