"""DDL events -> schema changes on one table's Delta table, recorded in the DDL history. Wiring (I/O)."""

from __future__ import annotations

import logging
from dataclasses import replace

from pyspark.sql import SparkSession

from ingest.apply import schema as apply_schema
from ingest.apply.table import TableInfo, table_exists, table_info
from ingest.config import DropTablePolicy, IngestConfig, UnknownDdlPolicy
from ingest.errors import SchemaChangeRejected
from ingest.lake import delta_io
from ingest.model import DdlEvent, TableId, TableState, tso_to_datetime
from ingest.pipeline.context import BatchContext, BatchTable
from ingest.pipeline.schema_change import apply_change
from ingest.plan import schema as plan_schema
from ingest.plan.renames import RenameGroup
from ingest.state import ddl_history, table_state
from ingest.state.table_state import state_to_metadata

logger = logging.getLogger(__name__)


def apply_database_ddl(ddl: DdlEvent, g: int) -> None:
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


def table_before(
    spark: SparkSession, config: IngestConfig, table: TableId, commit_ts: int
) -> TableInfo | None:
    """A mirrored table as it was just before ``commit_ts`` (None: not in the mirror then, or retired)."""
    path = config.mirror.address(table)
    version = table_state.version_before(spark, path, commit_ts)
    if version is None:
        return None
    info = table_info(spark, path, version)
    return None if info.retired else info


def _exchange_sides(
    spark: SparkSession, config: IngestConfig, ddl: DdlEvent
) -> plan_schema.ExchangeSides | None:
    tables = plan_schema.exchange_tables(ddl)
    if tables is None:
        return None
    partitioned, other = tables
    before = table_before(spark, config, partitioned, ddl.commit_ts)
    return plan_schema.ExchangeSides(
        partitioned,
        other,
        before.partitioning if before is not None else None,
        before is not None,
        table_before(spark, config, other, ddl.commit_ts) is not None,
    )


def apply_ddl(
    spark: SparkSession,
    context: BatchContext,
    table: BatchTable,
    ddl: DdlEvent,
    state: TableState,
    *,
    rename_group: RenameGroup | None = None,
    first_of_group: bool = True,
) -> TableState:
    """Apply one admitted DDL to one table, record its outcome in the DDL history, and commit the table's
    new state (A_T and D_T at the DDL); raises before anything when the DDL is refused.

    ``rename_group``: every pair of the RENAME statement ``ddl`` is one event of (see ``plan.renames``)."""
    config, path = context.config, table.address
    info = table_info(spark, path) if table_exists(spark, path) else None
    changes = _plan(spark, config, table.id, ddl, info, rename_group, first_of_group)
    outcome = _Outcome(spark, context, table, ddl, info)
    changes, skipped = _refused_or_skipped(config, ddl, changes, outcome)
    ids = (state.ddl_ids if ddl.commit_ts == state.ddl_ts else frozenset()) | {ddl.identity}
    applied = replace(
        state, applied_ts=max(state.applied_ts, ddl.commit_ts), ddl_ts=ddl.commit_ts, ddl_ids=ids
    )
    # Intermediate commits carry the old state: a crash mid-DDL makes the restart apply the DDL again,
    # and every change here is idempotent (create-if-absent, add-if-absent, drop-if-present, delete-all,
    # copy-replacing).
    before = state_to_metadata(
        state, run_id=context.run_id, step=f"ddl {ddl.commit_ts} in progress", consistent=False
    )
    for change in changes:
        if isinstance(change, plan_schema.RecordOnly) and change.warning:
            logger.warning(
                "%s: DDL at %s (commitTs %d): %s", table.id, ddl.position, ddl.commit_ts, change.reason
            )
        try:
            refused = apply_change(spark, config, path, change, before)
        except delta_io.CatalogNameRefused as exc:  # checked before anything is written
            raise outcome.reject(str(exc)) from exc
        if refused is not None:
            raise outcome.reject(refused)
    exists = table_exists(spark, path)
    outcome.record(changes, skipped, exists)
    if exists:
        step = f"ddl {ddl.commit_ts}: {ddl.identity[:200]}"
        metadata = state_to_metadata(applied, run_id=context.run_id, step=step)
        apply_schema.mark_applied(spark, path, applied.applied_ts, metadata)
    logger.info(
        "%s: applied DDL at %s (commitTs %d, %s): %s",
        table.id, ddl.position, ddl.commit_ts, tso_to_datetime(ddl.commit_ts).isoformat(), ddl.sql,
    )  # fmt: skip
    return applied


def _plan(
    spark: SparkSession,
    config: IngestConfig,
    table: TableId,
    ddl: DdlEvent,
    info: TableInfo | None,
    rename_group: RenameGroup | None,
    first_of_group: bool,
) -> list[plan_schema.SchemaChange]:
    """What the DDL means for the table as it is now."""
    return plan_schema.plan_schema_changes(
        ddl,
        info.columns if info else None,
        table=table,
        key=info.key if info else (),
        retired=info.retired if info else False,
        drop_keeps_rows=config.drop_table == DropTablePolicy.ARCHIVE,
        partitioning=info.partitioning if info else None,
        unique_keys=info.unique_keys if info else None,
        column_types=info.column_types if info else None,
        exchange=_exchange_sides(spark, config, ddl),
        rename_group=rename_group,
        first_of_group=first_of_group,
        given_defaults=config.column_defaults.get(table),
        case_insensitive=info.case_insensitive if info else (),
    )


def _refused_or_skipped(
    config: IngestConfig, ddl: DdlEvent, changes: list[plan_schema.SchemaChange], outcome: _Outcome
) -> tuple[list[plan_schema.SchemaChange], str]:
    """The changes to apply, and why the DDL is skipped ("" if it is not); raises a refusal."""
    for change in changes:
        if not isinstance(change, plan_schema.Reject):
            continue
        if not (change.unknown and config.unknown_ddl == UnknownDdlPolicy.SKIP):
            raise outcome.reject(change.reason)
        logger.warning(
            "%s: skipped unknown DDL at %s (commitTs %d): %s",
            outcome.table.id, ddl.position, ddl.commit_ts, change.reason,
        )  # fmt: skip
        return [], change.reason
    return changes, ""


class _Outcome:
    """How a DDL's outcome on one table goes into the DDL history."""

    def __init__(
        self,
        spark: SparkSession,
        context: BatchContext,
        table: BatchTable,
        ddl: DdlEvent,
        info: TableInfo | None,
    ) -> None:
        self.spark, self.context, self.table, self.ddl = spark, context, table, ddl
        self.schema_before = info.schema.simpleString() if info else None

    def reject(self, reason: str) -> SchemaChangeRejected:
        """Record the refusal; the error that stops the table just below the DDL."""
        self._record(ddl_history.REJECTED, reason, None)
        return SchemaChangeRejected(
            f"{self.table.id}: {reason}; the table stopped before {self.ddl.position} "
            f"(commitTs {self.ddl.commit_ts})",
            table=self.table.id,
            commit_ts=self.ddl.commit_ts,
        )

    def record(self, changes: list[plan_schema.SchemaChange], skipped: str, exists: bool) -> None:
        """``exists``: whether the table is there after the DDL."""
        only_recorded = all(isinstance(c, plan_schema.RecordOnly) for c in changes)
        action = (
            ddl_history.SKIPPED if skipped else ddl_history.RECORDED if only_recorded else ddl_history.APPLIED
        )
        detail = skipped or "; ".join(
            type(c).__name__ + (f": {c.reason}" if isinstance(c, plan_schema.RecordOnly) else "")
            for c in changes
        )
        after = table_info(self.spark, self.table.address).schema.simpleString() if exists else None
        self._record(action, detail, after)

    def _record(self, action: str, detail: str, schema_after: str | None) -> None:
        ddl_history.record(
            self.spark, self.context.config.state_path, table=self.table.id, ddl=self.ddl, action=action,
            detail=detail, schema_before=self.schema_before, schema_after=schema_after,
            run_id=self.context.run_id, listed=self.context.listed,
        )  # fmt: skip
