"""One table's rows of one segment (between its DDLs, up to G) -> a guarded MERGE; tables that no DDL
announced are created from what their rows say. Wiring (I/O)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import ingest.pipeline.integrity as integrity
from ingest import order
from ingest.apply import checksum
from ingest.apply import schema as apply_schema
from ingest.apply.merge import (
    ChangeSummary,
    MergeResult,
    apply_merge,
    first_bad_commit_ts,
    normalize,
    segment_rows,
    summarize,
)
from ingest.apply.table import TableInfo, record_changes, table_exists, table_info
from ingest.config import IngestConfig
from ingest.decode.codec import TypesFrom
from ingest.errors import SchemaChangeRejected
from ingest.model import (
    BAD_COLUMN,
    Column,
    TableId,
    TableSchema,
    TableSignature,
    TableState,
    VersionedSchema,
    tso_to_datetime,
)
from ingest.mysql.types import UnknownTypeError, parse_mysql_type
from ingest.pipeline.context import BatchContext, BatchTable
from ingest.pipeline.report import TableReport
from ingest.plan import schema as plan_schema
from ingest.spark import cached as spark_cached
from ingest.state import quarantine, schema_cache
from ingest.state.table_state import state_to_metadata

logger = logging.getLogger(__name__)


def apply_segment(
    spark: SparkSession,
    context: BatchContext,
    table: BatchTable,
    segment: order.Segment,
    dml: DataFrame,
    state: TableState,
    report: TableReport,
    held_through: int | None,
) -> TableState:
    """MERGE the table's rows of ``segment`` into it; returns the table's state after it.

    ``held_through`` None: the first pass, which stops just below the first row that does not convert (the
    batch may yet fail on max-bad-ratio). Otherwise the second pass, past rows quarantined up to it.
    """
    config = context.config
    in_range = [
        s for s in table.signatures if s.max_commit_ts >= segment.low and s.min_commit_ts <= segment.high
    ]
    if not in_range:
        return state  # no row of this table falls into the segment; the next step moves A_T
    path = table.address
    _ensure_table(spark, context, table, in_range, state)
    rows = segment_rows(dml, segment)
    checked = integrity.checks(config, any(s.checksummed for s in in_range))
    if checked:
        layouts = integrity.announced_layouts(context.schemas, table.id, (s.schema_version for s in in_range))
        rows = integrity.checked_rows(config, rows, layouts)
    if context.ordering.by_offset:
        rows = context.ordering.fill(rows, apply_schema.column_defaults(spark, path))
    info = table_info(spark, path)
    # Simple rows follow the announced schemas; only Canal-JSON's row types can reveal unseen columns.
    if config.codec.types_from is not TypesFrom.ANNOUNCED and _add_columns_seen_in_dml(
        spark, config, path, info, table.id, in_range, rows, state, context.run_id
    ):
        info = table_info(spark, path)
    info = record_changes(spark, path, info, state, context.run_id) if config.records_changes else info
    if not info.key:
        raise SchemaChangeRejected(f"{table.id}: the Delta table at {path} has no key columns recorded")
    cached = spark_cached(
        normalize(
            rows, info.schema, info.key, config.timezone, config.codec.binary_text, info.generated,
            checked=checked,
        )
    )  # fmt: skip
    try:
        kept = _hold_below_bad_rows(
            spark, context, table, segment, cached, info, state, report, held_through, checked
        )
        if kept is None:
            return state
        segment, changes, summary = kept
        applied = replace(state, applied_ts=max(state.applied_ts, segment.applied_ts))
        applied = integrity.record(report, applied, summary.checksums)
        result = _merge(spark, context, path, changes, info, applied, segment, summary)
    finally:
        cached.unpersist()
    report.upserted += result.upserted
    report.deleted += result.deleted
    logger.info(
        "%s: merged segment (%d, %d]: %d upserted, %d deleted; applied up to %d (%s)",
        table.id, segment.low, segment.high, result.upserted, result.deleted, applied.applied_ts,
        tso_to_datetime(applied.applied_ts).isoformat(),
    )  # fmt: skip
    return applied


def _ensure_table(
    spark: SparkSession,
    context: BatchContext,
    table: BatchTable,
    in_range: list[TableSignature],
    state: TableState,
) -> None:
    """A table that no DDL announced: created from what its rows say (Simple's announced schema, or
    Canal-JSON's row types)."""
    if table_exists(spark, table.address):
        return
    config = context.config
    if config.codec.types_from is TypesFrom.ANNOUNCED:
        _create_from_schema_cache(
            spark, config, table.address, table.id, in_range, context.schemas, state, context.run_id
        )
    else:
        _create_from_dml(spark, config, table.address, table.id, in_range, state, context.run_id)


def _hold_below_bad_rows(
    spark: SparkSession,
    context: BatchContext,
    table: BatchTable,
    segment: order.Segment,
    changes: DataFrame,
    info: TableInfo,
    state: TableState,
    report: TableReport,
    held_through: int | None,
    checked: bool,
) -> tuple[order.Segment, DataFrame, ChangeSummary] | None:
    """Quarantine the segment's rows that do not convert. On the first pass the table stops just below the
    first of them, for the batch may yet fail on max-bad-ratio and a re-run after the fix must find those
    rows unapplied; the commit's A_T names that lower bound, so the second pass, or a re-run, applies the
    rest from there. Returns the (possibly shortened) segment, its changes and key bounds, or None when
    nothing of it is to be merged now. The summary's checksum counts are of the changes returned."""
    summary = summarize(spark, changes, info.key, info.columns, checked=checked)
    bad_count, fresh = summary.bad, changes
    if bad_count and held_through is not None:
        # The first pass quarantined this table's bad rows up to ``held_through``; only later ones count.
        fresh = changes.where(F.col("commit_ts") > held_through)
        bad_count = fresh.where(F.col(BAD_COLUMN) != "").count() if segment.high > held_through else 0
    if bad_count:
        quarantine.write_unconvertible(spark, context.config.state_path, fresh, table.id, context.run_id)
        logger.warning("%s: quarantined %d rows whose values do not convert", table.id, bad_count)
        report.quarantined += bad_count
    if held_through is not None and summary.checksums.mismatched:
        # Mismatches up to held_through were counted by the first pass, which quarantined them.
        fresh_mismatches = fresh.where(F.col(checksum.STATE_COLUMN) == checksum.STATE_MISMATCH).count()
        summary = replace(summary, checksums=replace(summary.checksums, mismatched=fresh_mismatches))
    if not bad_count or held_through is not None:
        return segment, changes, summary
    report.held_through = segment.high
    first_bad = first_bad_commit_ts(changes)
    assert first_bad is not None
    below = replace(segment, high=first_bad - 1, before_ddl=False)
    # Offset order admits rows below A_T again anyway, so there the table simply waits.
    report.mismatched += summary.checksums.mismatched
    if context.ordering.by_offset or below.high < below.first_ts or below.high <= state.applied_ts:
        return None
    kept = changes.where(F.col("commit_ts") <= below.high)
    kept_summary = summarize(spark, kept, info.key, info.columns, checked=checked) if checked else summary
    return below, kept, replace(kept_summary, checksums=replace(kept_summary.checksums, mismatched=0))


def _merge(
    spark: SparkSession,
    context: BatchContext,
    path: str,
    changes: DataFrame,
    info: TableInfo,
    applied: TableState,
    segment: order.Segment,
    summary: ChangeSummary,
) -> MergeResult:
    """One guarded MERGE of the segment's net changes, committing the table's state after it."""
    columns = info.columns
    metadata = state_to_metadata(
        applied, run_id=context.run_id, step=f"merge ({segment.low}, {segment.high}]"
    )
    by_offset = context.ordering.by_offset
    return apply_merge(
        spark,
        path,
        context.ordering.effect(changes, info.key, columns),
        info.key,
        columns,
        metadata,
        summary.bounds,
        commit_ts_column=info.commit_ts_column,
        by_offset=by_offset,
        insert_only=summary.only_inserts and not by_offset,
    )


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
        spark,
        path,
        table,
        schema,
        state_to_metadata(state, run_id=run_id, step="create", consistent=False),
        compaction=config.auto_compaction,
        change_feed=config.records_changes,
    )
    logger.warning(
        "%s: created from DML column types (no CREATE TABLE seen); a DECIMAL whose precision the DML does "
        "not say is kept exactly as text unless --column-types names its type",
        table,
    )


def _create_from_schema_cache(
    spark: SparkSession,
    config: IngestConfig,
    path: str,
    table: TableId,
    signatures: list[TableSignature],
    schemas: Mapping[schema_cache.SchemaKey, VersionedSchema],
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
        compaction=config.auto_compaction,
        change_feed=config.records_changes,
    )
    logger.info("%s: created from the announced schema version %d", table, entry.version)


def _add_columns_seen_in_dml(
    spark: SparkSession,
    config: IngestConfig,
    path: str,
    info: TableInfo,
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
