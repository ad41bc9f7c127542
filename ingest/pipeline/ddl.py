"""DDL events -> schema changes on one table's Delta table, recorded in the DDL history. Wiring (I/O)."""

from __future__ import annotations

import logging

from pyspark.sql import SparkSession

from ingest import delta_io
from ingest.apply import schema as apply_schema
from ingest.config import DropTablePolicy, IngestConfig, UnknownDdlPolicy
from ingest.errors import SchemaChangeRejected
from ingest.model import DdlEvent, TableId, TableState, tso_to_datetime
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
) -> apply_schema.TableInfo | None:
    """A mirrored table as it was just before ``commit_ts`` (None: not in the mirror then, or retired)."""
    path = config.mirror.address(table)
    version = table_state.version_before(spark, path, commit_ts)
    if version is None:
        return None
    info = apply_schema.table_info(spark, path, version)
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
    config: IngestConfig,
    table: TableId,
    path: str,
    ddl: DdlEvent,
    state: TableState,
    run_id: int,
    *,
    rename_group: RenameGroup | None = None,
    first_of_group: bool = True,
    listed: ddl_history.Listed,
) -> TableState:
    """Apply one admitted DDL to one table, record its outcome in the DDL history, and commit the table's
    new state (A_T and D_T at the DDL); raises before anything when the DDL is refused.

    ``rename_group``: every pair of the RENAME statement ``ddl`` is one event of (see ``plan.renames``);
    ``listed``: the batch's view of the DDL history."""
    info = apply_schema.table_info(spark, path) if apply_schema.table_exists(spark, path) else None
    changes = plan_schema.plan_schema_changes(
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
            listed=listed,
        )
        return SchemaChangeRejected(
            f"{table}: {reason}; the table stopped before {ddl.position} (commitTs {ddl.commit_ts})",
            table=table,
            commit_ts=ddl.commit_ts,
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
        if isinstance(change, plan_schema.RecordOnly) and change.warning:
            logger.warning(
                "%s: DDL at %s (commitTs %d): %s", table, ddl.position, ddl.commit_ts, change.reason
            )
        try:
            refused = apply_change(spark, config, path, change, before)
        except delta_io.CatalogNameRefused as exc:  # checked before anything is written
            raise reject(str(exc)) from exc
        if refused is not None:
            raise reject(refused)
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
        run_id=run_id, listed=listed,
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
