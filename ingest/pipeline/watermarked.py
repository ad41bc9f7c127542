"""Canal-JSON and Simple: one batch ordered by TiCDC's watermarks. Rows up to G (the smallest watermark
over every partition) are applied, table by table, cut into segments at each table's DDLs; the rest waits
in the buffer. Wiring (I/O)."""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import replace

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ingest import order
from ingest.apply import schema as apply_schema
from ingest.config import IngestConfig
from ingest.decode.codec import Codec, Decoded, TypesFrom
from ingest.errors import SchemaChangeRejected, TableFailed, TablesStopped
from ingest.model import (
    DdlEvent,
    PartitionId,
    Position,
    TableId,
    TableSignature,
    TableState,
    VersionedSchema,
    Watermark,
)
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
from ingest.pipeline.ddl import apply_database_ddl, apply_ddl
from ingest.pipeline.parallel import apply_tables
from ingest.pipeline.report import BatchResult, TableReport, lag_seconds
from ingest.pipeline.segments import apply_segment
from ingest.pipeline.sessions import TableSessions
from ingest.pipeline.tied import RenameGroups, TiedGroup, rename_groups, tied_groups, tied_stop
from ingest.plan import schema as plan_schema
from ingest.plan.renames import RenameGroup
from ingest.spark_decode import (
    CLAIM_CHECK,
    CONTROL_KINDS,
    KIND_DDL,
    KIND_DML,
    KIND_FATAL,
    decode_json,
    fetch_claim_checks,
    prepare_payload,
)
from ingest.state import buffer, ddl_history, progress, schema_cache, table_state

logger = logging.getLogger(__name__)


def process_batch(
    spark: SparkSession, messages: DataFrame, config: IngestConfig, committed: progress.Progress
) -> BatchResult:
    """Decode, order, plan and apply one batch of Canal-JSON or Simple records, then commit progress.

    Raises before progress moves."""
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
        spark,
        prepared,
        claims,
        config.claim_check_path,
        config.claim_check_raw_value,
        config.compression,
        codec,
    )
    logger.info("fetched %d claim-check message(s) from %s", claims.count(), config.claim_check_path)
    return decode_json(resolved, codec)


def _process(
    spark: SparkSession,
    decoded: DataFrame,
    ranges: dict[PartitionId, PartitionRead],
    config: IngestConfig,
    committed: progress.Progress,
    run_id: int,
    started: float,
) -> BatchResult:
    codec = config.codec
    announced_types = codec.types_from is TypesFrom.ANNOUNCED
    stop_on_fatal(ranges, codec)
    records = sum(r.records for r in ranges.values())
    check_partitions(config, ranges, committed, check_late=codec.has_watermarks)
    bad = sum(r.bad for r in ranges.values())
    quarantine_undecodable(spark, config, decoded, bad, run_id)
    check_bad_ratio(config, bad, records)

    ddls, watermarks, announced = _control_events(decoded, codec)
    schemas: dict[schema_cache.SchemaKey, VersionedSchema] = {}
    if announced_types:
        schemas = schema_cache.load(spark, config.state_path, config.stream_id)
        fresh = [s for s in announced if (s.table, s.version) not in schemas]
        schemas.update({(s.table, s.version): s for s in fresh})
    watermark_by_partition = order.advance_watermarks(committed.watermarks, watermarks)
    partition_set = config.partitions or (
        (set(ranges) - {NO_PARTITION}) | set(committed.watermarks) | set(committed.resume)
    )
    g = order.global_watermark(watermark_by_partition, partition_set)
    missing = sorted(str(p) for p in partition_set if p not in watermark_by_partition)
    if missing and codec.has_watermarks:
        logger.warning(
            "no watermark yet on partition(s) %s: nothing is applied until each has one", ", ".join(missing)
        )

    dml = decoded.where(F.col("kind") == KIND_DML)
    signatures = _simplesignatures(dml) if announced_types else type_signatures(dml)
    if codec.offset_order:
        # No watermarks: everything read is applied now, up to the newest commit time seen (never back).
        g = max(
            [committed.global_watermark, *(s.max_commit_ts for s in signatures), *(d.commit_ts for d in ddls)]
        )
    # Simple rows whose schema version no BOOTSTRAP or DDL has announced yet wait, and hold their table's
    # apply bound just below the first of them: nothing after them may be applied before them.
    parked = _parked(signatures, schemas)
    bounds = {t: min(g, ts - 1) for t, ts in parked.items()}
    # A DDL belongs to every table it changes: a rename to its source and its target, DROP DATABASE to
    # each known table of that database. Each table admits and records it on its own.
    known = set(committed.tables) | {s.table for s in signatures} | {d.table for d in ddls if d.table.table}
    by_table: dict[TableId, list[DdlEvent]] = defaultdict(list)
    for ddl in ddls:
        affected = plan_schema.affected_tables(ddl, known)
        if not affected:
            apply_database_ddl(ddl, g)
        for table in affected:
            by_table[table].append(ddl)
    tables = sorted({s.table for s in signatures} | set(by_table))
    # Tables a DDL reads across (RENAME, CREATE TABLE … LIKE, EXCHANGE PARTITION) are applied together, in
    # rounds: every one of them up to just before such a DDL, then that DDL on each (reading the others as
    # they were just before it), and so on; the other tables go on their own, several at once.
    groups = tied_groups(ddls, known, g)
    tied = {t for group in groups for t in group.tables}
    stamps = _row_stamps(dml, [t for t in by_table if any(s.table == t for s in signatures)])

    reports: dict[TableId, TableReport] = {}
    states = held_states(spark, config, committed)
    progress.begin_run(spark, config.state_path, config.stream_id, run_id, tables)
    sessions = TableSessions(spark, dml, config.table_parallelism)
    listed = ddl_history.Listed(config.state_path, by_table, min((d.commit_ts for d in ddls), default=0))

    # A DDL refused on a table stops that table (and the tables it ties it to) just below the DDL; the rest
    # of the batch goes on, and the stopped tables' later changes wait in the buffer.
    stopped: dict[TableId, SchemaChangeRejected | TableFailed] = {}

    def apply(
        table: TableId, held_through: int | None, bound: int = g, renames: RenameGroups = None
    ) -> TableReport | None:
        if table in stopped:
            return None
        try:
            with sessions.lease() as lease:
                report, states[table], refused = _apply_table(
                    lease.session,
                    config,
                    table,
                    lease.dml,
                    signatures,
                    by_table.get(table, []),
                    min(bound, bounds.get(table, g)),
                    states.get(table, TableState()),
                    run_id,
                    schemas,
                    held_through,
                    renames or {},
                    stamps.get(table),
                    listed=listed,
                )
        except Exception as exc:  # whatever one table meets stops that table only
            logger.exception("run %d: %s failed; it stops, the other tables go on", run_id, table)
            states[table] = _held_state(spark, config, table, committed)
            stop(table, TableFailed(table, states[table].applied_ts, exc), states[table].applied_ts + 1)
            return None
        if table in reports:
            reports[table].absorb(report)
        else:
            reports[table] = report
        if refused is not None:
            stop(table, refused, refused.commit_ts or g)
            return None
        return report

    def stop(table: TableId, exc: SchemaChangeRejected | TableFailed, commit_ts: int) -> None:
        stopped[table] = exc
        bounds[table] = min(bounds.get(table, g), commit_ts - 1)
        report = reports.setdefault(
            table, TableReport(table, applied_ts=states.get(table, TableState()).applied_ts)
        )
        report.stopped = str(exc)
        logger.error("run %d: %s", run_id, exc)

    # First pass: a table whose rows do not all convert stops just below the first that does not, for the
    # batch may yet fail on max-bad-ratio, and a re-run after the fix must find those rows unapplied. Only
    # when the whole batch's count is known to pass do such tables go on past their quarantined rows.
    deferred: list[TableId] = []
    over: list[bool] = []
    position = {table: number for number, table in enumerate(tables, start=1)}

    def held(table: TableId, first: bool) -> int | None:
        return None if first else (reports[table].held_through if table in reports else 0) or 0

    def held_below(report: TableReport | None, first: bool) -> bool:
        return first and report is not None and report.held_through is not None

    def apply_group(group: TiedGroup, first: bool) -> bool:
        """The group's rounds; False when a table stopped below rows that do not convert (first pass)."""
        for stamp in group.stamps:
            for table in group.tables:
                if held_below(apply(table, held(table, first), stamp - 1), first):
                    return False
            blocked = [t for t in group.tables if t in stopped]
            if blocked:
                # A DDL of this round reads tables across the group; with one of them stopped below an
                # earlier DDL, what it would read is not upstream's. The whole group stops here.
                for table in group.tables:
                    if table not in stopped:
                        stop(table, tied_stop(table, blocked, stopped, stamp), stamp)
                return True
            renames = rename_groups(spark, config, group.ddls, stamp)
            for table in group.tables:
                apply(table, held(table, first), stamp, renames)
        return all(not held_below(apply(table, held(table, first)), first) for table in group.tables)

    def first_pass(unit: TableId | TiedGroup) -> None:
        members = unit.tables if isinstance(unit, TiedGroup) else (unit,)
        for table in members:
            logger.info("run %d: table %d/%d: %s", run_id, position[table], len(tables), table)
        complete = (
            apply_group(unit, True)
            if isinstance(unit, TiedGroup)
            else not held_below(apply(unit, None), True)
        )
        if not complete:
            deferred.extend(members)
            if over_bad_ratio(config, bad + sum(r.quarantined for r in list(reports.values())), records):
                over.append(True)  # the batch fails whatever comes next: leave the remaining tables untouched

    try:
        apply_tables(spark, groups, first_pass, 1, stop=lambda: bool(over), sessions=sessions)
        apply_tables(
            spark,
            [t for t in tables if t not in tied],
            first_pass,
            config.table_parallelism,
            stop=lambda: bool(over),
            sessions=sessions,
        )
        conversion_bad = sum(r.quarantined for r in reports.values())
        check_bad_ratio(config, bad + conversion_bad, records)
        # Second pass, each checked as it ends: once the batch is known to fail, what is left stays
        # untouched.
        for group in groups:
            if any(t in deferred for t in group.tables):
                apply_group(group, False)
                check_bad_ratio(config, bad + sum(r.quarantined for r in reports.values()), records)
        for table in sorted((t for t in deferred if t not in tied), key=position.__getitem__):
            apply(table, held(table, False))
            check_bad_ratio(config, bad + sum(r.quarantined for r in reports.values()), records)
    finally:
        sessions.close()
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
        failed={t: str(e) for t, e in stopped.items() if isinstance(e, TableFailed)},
    )
    if announced_types:
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
    if stopped:
        raise TablesStopped(stopped, result)
    return result


def _control_events(
    decoded: DataFrame, codec: Codec
) -> tuple[list[DdlEvent], list[Watermark], list[VersionedSchema]]:
    """DDLs, watermarks and announced table schemas: the only records that reach the driver, built by the
    codec from their decoded columns."""
    names = ("kind", "type", "database", "table", "commit_ts", "sql", "table_schema", "pre_table_schema")
    rows = decoded.where(F.col("kind").isin(*CONTROL_KINDS)).select("topic", "partition", "offset", *names)
    ddls: list[DdlEvent] = []
    watermarks: list[Watermark] = []
    schemas: list[VersionedSchema] = []
    for row in rows.collect():
        position = Position(row["topic"], row["partition"], row["offset"])
        control = codec.control(Decoded(position, **{name: row[name] for name in names}))
        schemas.extend(control.schemas)
        if isinstance(control.event, DdlEvent):
            ddls.append(control.event)
        elif control.event is not None:
            watermarks.append(control.event)
    return ddls, watermarks, schemas


def type_signatures(dml: DataFrame) -> list[TableSignature]:
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


def _simplesignatures(dml: DataFrame) -> list[TableSignature]:
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
    signatures: list[TableSignature], schemas: dict[schema_cache.SchemaKey, VersionedSchema]
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
    state: TableState,
    run_id: int,
    schemas: dict[schema_cache.SchemaKey, VersionedSchema],
    held_through: int | None = None,
    renames: Mapping[int, RenameGroup] | None = None,
    row_stamps: list[int] | None = None,
    *,
    listed: ddl_history.Listed,
) -> tuple[TableReport, TableState, SchemaChangeRejected | None]:
    """Apply one table's DDLs and row segments up to ``g`` (G, or the table's own lower bound), from
    ``state``, what the table holds.

    A DDL refused on the table ends its work there: what was applied below it is returned with the refusal.

    ``held_through`` None: the first pass, which stops the table just below rows that do not convert
    (the report says so). Otherwise the second pass, past such rows, whose bad rows up to that commit_ts
    are already quarantined. ``row_stamps``: the sorted commit_ts of the table's rows in the batch, where
    known; segments between DDLs that hold none are skipped.
    """
    path = config.mirror.address(table)
    applied_before = state.applied_ts
    if config.codec.offset_order:
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
    refused: SchemaChangeRejected | None = None
    grouped: set[int] = set()
    steps = order.plan_table_steps(table, state, admitted, g, has_rows)
    if row_stamps is not None:
        steps = order.drop_empty_segments(steps, row_stamps)
    for step in steps:
        if isinstance(step, order.DdlStep):
            group = (renames or {}).get(step.ddl.commit_ts)
            first = group is None or step.ddl.commit_ts not in grouped
            if group is not None:
                grouped.add(step.ddl.commit_ts)
            # Every write of a DDL takes the session's write turn itself (committing, exclusive_write), so
            # DDLs of tables applied side by side overlap in their reads and plans.
            try:
                state = apply_ddl(
                    spark,
                    config,
                    table,
                    path,
                    step.ddl,
                    state,
                    run_id,
                    rename_group=group,
                    first_of_group=first,
                    listed=listed,
                )
            except SchemaChangeRejected as exc:
                if exc.commit_ts is None:
                    raise
                refused = exc
                break
            report.ddls.append(step.ddl.sql)
        else:
            state = apply_segment(
                spark, config, path, step, dml, mine, state, run_id, report, schemas, held_through
            )
            if report.held_through is not None and held_through is None:
                report.applied_ts = state.applied_ts
                return report, state, None
        report.applied_ts = state.applied_ts
    state = replace(state, applied_ts=max(state.applied_ts, applied_before))
    report.applied_ts = state.applied_ts
    alias = config.mirror.alias(table)
    if alias and apply_schema.table_exists(spark, path):
        with table_state.exclusive_write(spark):
            apply_schema.register_catalog_table(spark, alias, path)
    return report, state, refused


def _held_state(
    spark: SparkSession, config: IngestConfig, table: TableId, committed: progress.Progress
) -> TableState:
    """What a table that failed part-way holds: its newest commit's state (each of its commits records one,
    so a failure anywhere leaves a state the next batch resumes from, as after a kill)."""
    path = config.mirror.address(table)
    try:
        held = table_state.read_table_state(spark, path)
    except Exception:  # the table cannot even be read: it holds what progress last said
        logger.exception("%s: its state cannot be read; keeping the last committed one", table)
        held = None
    return held or committed.tables.get(table, TableState())


def _pending_counts(pending: DataFrame) -> tuple[dict[TableId, int], int]:
    """How many rows per table stay pending above G (DDLs are not counted as rows), and how many records
    in all (rows and DDLs): what the buffer will hold."""
    rows = pending.groupBy("kind", "database", "table").count().collect()
    per_table: dict[TableId, int] = defaultdict(int)
    for r in rows:
        if r["kind"] == KIND_DML and r["table"]:
            per_table[TableId(r["database"], r["table"])] += int(r["count"])
    return dict(per_table), sum(int(r["count"]) for r in rows)


def _row_stamps(dml: DataFrame, tables: list[TableId]) -> dict[TableId, list[int]]:
    """The sorted commit_ts of each table's rows, for tables with DDLs in the batch (one Spark job)."""
    if not tables:
        return {}
    wanted = F.lit(False)
    for table in tables:
        wanted = wanted | ((F.col("database") == table.schema) & (F.col("table") == table.table))
    rows = (
        dml.where(wanted)
        .groupBy("database", "table")
        .agg(F.array_sort(F.collect_set("commit_ts")).alias("stamps"))
        .collect()
    )
    return {TableId(r["database"], r["table"]): [int(t) for t in r["stamps"]] for r in rows}
