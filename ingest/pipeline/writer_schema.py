"""A table follows the writer schema its rows use (TiCDC Avro, Debezium): created from it, or brought to it by
the schema changes ``plan.avro_schema`` plans, each recorded in the DDL history. Wiring (I/O)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from pyspark.sql import SparkSession

from ingest.apply import schema as apply_schema
from ingest.apply.convert import column_type_of
from ingest.apply.table import table_info
from ingest.config import IngestConfig
from ingest.decode import ticdc_avro as ta
from ingest.errors import SchemaChangeRejected
from ingest.model import DdlEvent, Position, TableId, TableState
from ingest.pipeline.context import BatchTable
from ingest.pipeline.schema_change import apply_change
from ingest.plan import avro_schema as plan_avro
from ingest.plan import schema as plan_schema
from ingest.settings import Protocol
from ingest.state import ddl_history
from ingest.state.table_state import state_to_metadata

logger = logging.getLogger(__name__)

SCHEMA_CHANGE = "AVRO WRITER SCHEMA"
# The value writer schema a table's columns follow.
PROPERTY_WRITER_SCHEMA = "ticdc.avroWriterSchema"


@dataclass
class TableRead:
    """What a batch holds of one table: the writer schemas its rows use, and where they were read."""

    uses: list[plan_avro.SchemaUse]
    rows: int
    max_commit_ts: int
    first: Position


def follow(
    spark: SparkSession,
    config: IngestConfig,
    table: BatchTable,
    read: TableRead,
    book: ta.SchemaBook,
    latest: plan_avro.SchemaUse,
    exists: bool,
    run_id: int,
    listed: ddl_history.Listed,
) -> str:
    """Create the table from, or bring it to, the newest writer schema its rows use; what changed."""
    writer = _bounded(book.schemas[latest.value_schema][0], config)
    key = book.schemas[latest.key_schema][0].names
    follow = _Follow(table.id, table.address, writer, key, latest, read, table.state, run_id, listed)
    if not exists:
        older = {
            name
            for use in read.uses
            for name in writer.names
            if name not in book.schemas[use.value_schema][0].names
        }
        _create(spark, config, follow, older)
        return f"create from writer schema {writer.id}"
    if latest.max_commit_ts >= table.state.applied_ts:
        return _evolve(spark, config, follow)
    return ""


def _bounded(writer: ta.WriterSchema, config: IngestConfig) -> ta.WriterSchema:
    """The writer schema with ``column-types`` applied to DECIMALs whose precision it does not say."""
    columns = tuple(
        replace(
            c, column=replace(c.column, type=config.column_type(writer.table, c.column.name, c.column.type))
        )
        for c in writer.columns
    )
    return replace(writer, columns=columns)


def _event(table: TableId, use: plan_avro.SchemaUse, read: TableRead, text: str) -> DdlEvent:
    """A DDL history entry for a writer-schema change, placed at the newest row that shows it."""
    position = Position(read.first.topic, use.partition, use.max_offset)
    return DdlEvent(table, use.max_commit_ts, text, SCHEMA_CHANGE, position)


@dataclass(frozen=True)
class _Follow:
    """A table about to follow a writer schema: which, why (the newest row that uses it), and its state."""

    table: TableId
    path: str
    writer: ta.WriterSchema
    key: tuple[str, ...]
    use: plan_avro.SchemaUse
    read: TableRead
    state: TableState
    run_id: int
    listed: ddl_history.Listed


def _create(spark: SparkSession, config: IngestConfig, follow: _Follow, absent_before: set[str]) -> None:
    """Create the table from the newest writer schema; ``absent_before``: its columns that rows of an older
    writer schema in the same batch lack (they read the column's default)."""
    table, path, writer, key = follow.table, follow.path, follow.writer, follow.key
    missing = [k for k in key if k not in writer.names]
    if not key or missing:
        raise SchemaChangeRejected(
            f"{table}: key schema {follow.use.key_schema} names {list(key)}, which writer schema {writer.id} "
            "does not hold all of; the mirror cannot merge on it"
        )
    apply_schema.create_table(
        spark,
        path,
        table,
        writer.table_schema(key),
        state_to_metadata(follow.state, run_id=follow.run_id, step="create", consistent=False),
        compaction=config.auto_compaction,
        change_feed=config.records_changes,
    )
    metadata = state_to_metadata(
        follow.state, run_id=follow.run_id, step=f"writer schema {writer.id}", consistent=False
    )
    apply_schema.set_property(spark, path, PROPERTY_WRITER_SCHEMA, str(writer.id), metadata)
    # Rows of older writer schemas may lack columns this one has: they read the field defaults.
    defaults = {c.column.name: c.backfill for c in writer.columns if c.backfill is not None}
    resolved, notes = _unknown_defaults(config, table, writer, sorted(absent_before))
    apply_schema.record_column_defaults(spark, path, {**defaults, **resolved}, metadata)
    sql = f"-- created from writer schema {writer.id} (key schema {follow.use.key_schema})"
    after = table_info(spark, path).schema.simpleString()
    ddl_history.record(
        spark, config.state_path, table=table, ddl=_event(table, follow.use, follow.read, sql),
        action=ddl_history.APPLIED,
        detail="; ".join(["CreateTable", *notes]), schema_before=None, schema_after=after,
        run_id=follow.run_id, listed=follow.listed,
    )  # fmt: skip


def _unknown_defaults(
    config: IngestConfig, table: TableId, writer: ta.WriterSchema, added: list[str]
) -> tuple[dict[str, str], list[str]]:
    """For added columns whose DEFAULT the Avro schema cannot carry: the value ``column-defaults`` gives,
    and a note for the DDL history per column (a warning where the user gave none)."""
    given = config.column_defaults.get(table, {})
    resolved: dict[str, str] = {}
    notes: list[str] = []
    for name in added:
        column = writer.column(name)
        if column is None or not column.default_unknown:
            continue
        if name in given:
            resolved[name] = given[name]
            notes.append(
                f"{name}: DEFAULT {given[name]} from column-defaults (the Avro schema cannot carry it)"
            )
            continue
        why = (
            "Debezium records carry no DEFAULT"
            if config.protocol is Protocol.DEBEZIUM
            else "TiCDC writes a null default for every logical-type field whatever upstream's DEFAULT is, "
            "and CURRENT_TIMESTAMP as that text"
        )
        note = (
            f"{name}: the writer schema cannot carry what rows written before the column was added read for "
            f"this {column.column.type} field ({why}), so they read NULL; if upstream shows a value for "
            f"them, set --column-defaults {table}.{name}=<value>"
        )
        logger.warning("%s: %s", table, note)
        notes.append(note)
    return resolved, notes


def _evolve(spark: SparkSession, config: IngestConfig, follow: _Follow) -> str:
    """Bring the table to the newest writer schema; returns what changed ("" for nothing)."""
    table, path, writer, key = follow.table, follow.path, follow.writer, follow.key
    if apply_schema.get_property(spark, path, PROPERTY_WRITER_SCHEMA) == str(writer.id):
        return ""
    info = table_info(spark, path)
    current = [(f.name, column_type_of(f)) for f in info.schema.fields]
    changes = plan_avro.plan_evolution(table, current, info.key, writer, key)
    metadata = state_to_metadata(
        follow.state, run_id=follow.run_id, step=f"writer schema {writer.id}", consistent=False
    )
    if not changes:  # e.g. only a column comment changed upstream: nothing to do but follow the new id
        apply_schema.set_property(spark, path, PROPERTY_WRITER_SCHEMA, str(writer.id), metadata)
        return ""
    added = [c.column.name for c in changes if isinstance(c, plan_schema.AddColumn)]
    resolved, notes = _unknown_defaults(config, table, writer, added)
    changes = [
        replace(c, backfill=resolved[c.column.name])
        if isinstance(c, plan_schema.AddColumn) and c.column.name in resolved
        else c
        for c in changes
    ]
    text = f"-- writer schema {writer.id}: {plan_avro.describe(changes)}"
    event = _event(table, follow.use, follow.read, text)
    before = info.schema.simpleString()
    for change in changes:
        refused = apply_change(spark, config, path, change, metadata)
        if refused is not None:
            ddl_history.record(
                spark, config.state_path, table=table, ddl=event, action=ddl_history.REJECTED,
                detail=refused, schema_before=before, schema_after=None, run_id=follow.run_id,
                listed=follow.listed,
            )  # fmt: skip
            raise SchemaChangeRejected(
                f"{table}: writer schema {writer.id} (first seen at {follow.read.first}): {refused}; "
                "stopped before applying the batch, progress not moved"
            )
    apply_schema.set_property(spark, path, PROPERTY_WRITER_SCHEMA, str(writer.id), metadata)
    after = table_info(spark, path).schema.simpleString()
    ddl_history.record(
        spark, config.state_path, table=table, ddl=event, action=ddl_history.APPLIED,
        detail="; ".join([plan_avro.describe(changes), *notes]), schema_before=before, schema_after=after,
        run_id=follow.run_id, listed=follow.listed,
    )  # fmt: skip
    logger.info("%s: followed writer schema %d: %s", table, writer.id, plan_avro.describe(changes))
    return text
