"""One table of a batch applied: its DDLs and row segments, in commit order, up to its bound. Wiring (I/O).

Every Delta operation on the table goes to the address its :class:`~ingest.pipeline.context.BatchTable`
carries.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from pyspark.sql import SparkSession

from ingest import order
from ingest.apply import schema as apply_schema
from ingest.apply.table import table_exists
from ingest.config import IngestConfig
from ingest.errors import SchemaChangeRejected
from ingest.model import DdlEvent, TableState
from ingest.pipeline.context import BatchContext, BatchTable, Pass
from ingest.pipeline.ddl import apply_ddl
from ingest.pipeline.report import TableReport
from ingest.pipeline.segments import apply_segment
from ingest.plan import ddl_scope
from ingest.state import ddl_history, table_state

logger = logging.getLogger(__name__)


def apply_table(
    context: BatchContext, table: BatchTable, run: Pass
) -> tuple[TableReport, TableState, SchemaChangeRejected | None]:
    """Apply the table's DDLs and row segments up to ``run.bound``, from ``table.state``.

    A DDL refused on the table ends its work there: what was applied below it is returned with the refusal.
    A first pass that stops below rows that do not convert says so in the report (``held_through``).
    """
    start = context.ordering.start(table.state)
    report = TableReport(table.id, applied_ts=start.applied_ts)
    state, refused = start, None
    grouped: set[int] = set()
    steps = _steps(table, start, run.bound)
    index = 0
    while index < len(steps):
        step = steps[index]
        index += 1
        if isinstance(step, order.DdlStep):
            state, refused = _ddl_step(context, table, run, step.ddl, state, grouped)
            if refused is not None:
                drop = _dropped_after(table, steps, index)
                if drop is None:
                    break
                _moot(run.session, context, table, step.ddl, steps[drop], refused)
                index, refused = drop, None
                continue
            report.ddls.append(step.ddl.sql)
        else:
            state = apply_segment(run.session, context, table, step, run.dml, state, report, run.held_through)
            if report.held_through is not None and run.held_through is None:
                report.applied_ts = state.applied_ts
                return report, state, None
        report.applied_ts = state.applied_ts
    state = replace(state, applied_ts=max(state.applied_ts, table.state.applied_ts))
    report.applied_ts = state.applied_ts
    _register_alias(run.session, context.config, table)
    return report, state, refused


def _dropped_after(table: BatchTable, steps: list[order.Step], index: int) -> int | None:
    """Where, after a refused DDL, upstream drops the table (DROP TABLE, DROP DATABASE), if it does."""
    for at in range(index, len(steps)):
        step = steps[at]
        if isinstance(step, order.DdlStep) and ddl_scope.drops(step.ddl, table.id):
            return at
    return None


def _moot(
    spark: SparkSession,
    context: BatchContext,
    table: BatchTable,
    ddl: DdlEvent,
    drop: order.Step,
    refused: SchemaChangeRejected,
) -> None:
    """A DDL the mirror refused no longer stops the table: upstream dropped the table after it. The table
    goes straight to the DROP, which retires it as it stood below the refused DDL; the changes between went
    with the table upstream. The DDL history says so."""
    assert isinstance(drop, order.DdlStep)
    why = (
        f"upstream dropped the table at commitTs {drop.ddl.commit_ts} ({drop.ddl.sql}): it is retired as it "
        f"stood before this DDL, which the mirror refused ({refused}), and no longer stops"
    )
    logger.warning("%s: DDL at %s (commitTs %d): %s", table.id, ddl.position, ddl.commit_ts, why)
    ddl_history.record(
        spark, context.config.state_path, table=table.id, ddl=ddl, action=ddl_history.SKIPPED, detail=why,
        schema_before=None, schema_after=None, run_id=context.run_id, listed=context.listed,
    )  # fmt: skip


def _steps(table: BatchTable, state: TableState, bound: int) -> list[order.Step]:
    """The table's new DDLs (each once) and the row segments between them, up to ``bound``."""
    seen: set[tuple[int, str]] = set()
    admitted: list[DdlEvent] = []
    for ddl in sorted(table.ddls, key=lambda d: (d.commit_ts, d.position.offset)):
        if order.ddl_is_new(state, ddl) and (ddl.commit_ts, ddl.identity) not in seen:
            seen.add((ddl.commit_ts, ddl.identity))
            admitted.append(ddl)
    has_rows = any(s.max_commit_ts >= state.applied_ts and s.min_commit_ts <= bound for s in table.signatures)
    steps = order.plan_table_steps(table.id, state, admitted, bound, has_rows)
    return steps if table.stamps is None else order.drop_empty_segments(steps, table.stamps)


def _ddl_step(
    context: BatchContext,
    table: BatchTable,
    run: Pass,
    ddl: DdlEvent,
    state: TableState,
    grouped: set[int],
) -> tuple[TableState, SchemaChangeRejected | None]:
    """One DDL on the table; a refusal of it (on this table) comes back instead of being raised."""
    group = run.renames.get(ddl.commit_ts)
    first = group is None or ddl.commit_ts not in grouped
    if group is not None:
        grouped.add(ddl.commit_ts)
    # Every write of a DDL takes the session's write turn itself (committing, exclusive_write), so DDLs of
    # tables applied side by side overlap in their reads and plans.
    try:
        applied = apply_ddl(run.session, context, table, ddl, state, rename_group=group, first_of_group=first)
    except SchemaChangeRejected as exc:
        if exc.commit_ts is None:
            raise
        return state, exc
    return applied, None


def _register_alias(spark: SparkSession, config: IngestConfig, table: BatchTable) -> None:
    """Also name the table in the catalog (``table-name-template``), once it exists."""
    alias = config.mirror.alias(table.id)
    if alias and table_exists(spark, table.address):
        with table_state.exclusive_write(spark):
            apply_schema.register_catalog_table(spark, alias, table.address)


def held_after_failure(spark: SparkSession, table: BatchTable) -> TableState:
    """What a table that failed part-way holds: its newest commit's state (each of its commits records one,
    so a failure anywhere leaves a state the next batch resumes from, as after a kill)."""
    try:
        held = table_state.read_table_state(spark, table.address)
    except Exception:  # the table cannot even be read: it holds what the batch last knew
        logger.exception("%s: its state cannot be read; keeping the last known one", table.id)
        held = None
    return held or table.state
