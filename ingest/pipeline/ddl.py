"""DDL events -> schema changes on one table's Delta table, recorded in the DDL history. Wiring (I/O)."""

from __future__ import annotations

import logging

from pyspark.sql import SparkSession

from ingest.apply import schema as apply_schema
from ingest.config import DropTablePolicy, IngestConfig, UnknownDdlPolicy
from ingest.errors import SchemaChangeRejected
from ingest.model import DdlEvent, TableId, TableState, tso_to_datetime
from ingest.pipeline.schema_change import apply_change
from ingest.plan import schema as plan_schema
from ingest.state import ddl_history
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


def apply_ddl(
    spark: SparkSession,
    config: IngestConfig,
    table: TableId,
    path: str,
    ddl: DdlEvent,
    state: TableState,
    run_id: int,
) -> TableState:
    """Apply one admitted DDL to one table, record its outcome in the DDL history, and commit the table's
    new state (A_T and D_T at the DDL); raises before anything when the DDL is refused."""
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
        refused = apply_change(spark, config, path, change, before)
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
