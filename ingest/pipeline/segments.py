"""One table's rows of one segment (between its DDLs, up to G) -> a guarded MERGE; tables that no DDL
announced are created from what their rows say. Wiring (I/O)."""

from __future__ import annotations

import logging
from dataclasses import replace

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ingest import order
from ingest.apply import schema as apply_schema
from ingest.apply.merge import (
    apply_merge,
    converge_effect,
    first_bad_commit_ts,
    net_effect,
    normalize,
    segment_rows,
    summarize,
    with_defaults,
)
from ingest.config import IngestConfig
from ingest.decode.codec import TypesFrom
from ingest.decode.mysql_types import UnknownTypeError, parse_mysql_type
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
from ingest.pipeline.report import TableReport
from ingest.plan import schema as plan_schema
from ingest.spark import cached as spark_cached
from ingest.state import quarantine, schema_cache
from ingest.state.table_state import state_to_metadata

logger = logging.getLogger(__name__)


def apply_segment(
    spark: SparkSession,
    config: IngestConfig,
    path: str,
    segment: order.Segment,
    dml: DataFrame,
    signatures: list[TableSignature],
    state: TableState,
    run_id: int,
    report: TableReport,
    schemas: dict[schema_cache.SchemaKey, VersionedSchema],
    held_through: int | None,
) -> TableState:
    table = segment.table
    in_range = [s for s in signatures if s.max_commit_ts >= segment.low and s.min_commit_ts <= segment.high]
    if not in_range:
        return state  # no row of this table falls into the segment; the next step moves A_T
    codec = config.codec
    announced_types = codec.types_from is TypesFrom.ANNOUNCED
    if not apply_schema.table_exists(spark, path):
        if announced_types:
            _create_from_schema_cache(spark, config, path, table, in_range, schemas, state, run_id)
        else:
            _create_from_dml(spark, config, path, table, in_range, state, run_id)
    rows = segment_rows(dml, segment)
    if codec.offset_order:
        rows = with_defaults(rows, apply_schema.column_defaults(spark, path))
    info = apply_schema.table_info(spark, path)
    # Simple rows follow the announced schemas; only Canal-JSON's row types can reveal unseen columns.
    if not announced_types and _add_columns_seen_in_dml(
        spark, config, path, info, table, in_range, rows, state, run_id
    ):
        info = apply_schema.table_info(spark, path)
    schema, key = info.schema, info.key
    columns = [f.name for f in schema.fields]
    if not key:
        raise SchemaChangeRejected(f"{table}: the Delta table at {path} has no key columns recorded")
    cached = spark_cached(normalize(rows, schema, key, config.timezone, codec.binary_text, info.generated))
    try:
        changes = cached
        summary = summarize(spark, changes, key, columns)
        bad_count = summary.bad
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
            # within max-bad-ratio. The commit's A_T names that lower bound, so the second pass, or a re-run
            # after a fix, applies the rest of the segment from there.
            # Offset order admits rows below A_T again anyway, so there the table simply waits.
            report.held_through = segment.high
            first_bad = first_bad_commit_ts(changes)
            assert first_bad is not None
            below = replace(segment, high=first_bad - 1, before_ddl=False)
            if codec.offset_order or below.high < below.first_ts or below.high <= state.applied_ts:
                return state
            segment, changes = below, changes.where(F.col("commit_ts") <= below.high)
        # Offset order: commit times are milliseconds, not TSOs, so a key's last change by offset wins.
        source = (
            converge_effect(changes, key, columns)
            if codec.offset_order
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
            summary.bounds,
            commit_ts_column=info.commit_ts_column,
            by_offset=codec.offset_order,
            insert_only=summary.only_inserts and not codec.offset_order,
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
        spark,
        path,
        table,
        schema,
        state_to_metadata(state, run_id=run_id, step="create", consistent=False),
        compaction=config.auto_compaction,
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
    schemas: dict[schema_cache.SchemaKey, VersionedSchema],
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
