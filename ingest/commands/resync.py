"""Re-sync one table: rebuild it from the retained input, then swap it in at a consistent state. I/O.

What re-sync means under our exactly-once design: a mirrored table is a function of the change stream
up to its applied TSO A_T. Re-syncing table T replays the input from its first record, for T only,
into a staging table under ``<state>/resync/`` with its own progress (stream id ``resync``), and then
replaces T's rows with the staged rows. The replacing commit carries the staged state (A_T', D_T', DDL
identities); the mirror's own progress and buffer are untouched, and anything they still hold for T at or
below A_T' is filtered by A_T' on the next run, so nothing is applied twice and nothing is skipped.

It needs the input to still hold T's whole history (a files source, or a Kafka topic whose retention
reaches back to T's CREATE TABLE), and it refuses when the replay ends below the table's current A_T:
swapping would move the table back in time, and the rows in between are no longer buffered anywhere.
Renames into or out of T are not followed; the replay sees T's own name only.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass, replace

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ingest.apply import schema as apply_schema
from ingest.config import IngestConfig
from ingest.errors import ConfigError
from ingest.lake import delta_io
from ingest.lake.names import SchemaName
from ingest.model import TableId, TableState, tso_to_datetime
from ingest.pipeline import process_batch
from ingest.source import files
from ingest.spark import get_session
from ingest.state import progress, table_state
from ingest.state.table_state import state_to_metadata

logger = logging.getLogger(__name__)

RESYNC_DIR = "resync"
RESYNC_STREAM = "resync"


@dataclass(frozen=True)
class ResyncResult:
    """What a re-sync did to one table."""

    table: TableId
    before: TableState
    after: TableState
    rows: int

    def describe(self) -> str:
        when = tso_to_datetime(self.after.applied_ts).isoformat() if self.after.applied_ts else "-"
        return (
            f"{self.table}: rebuilt from the input, {self.rows} rows, applied up to TSO "
            f"{self.after.applied_ts} ({when}); was {self.before.applied_ts}"
        )


def staging_root(config: IngestConfig, table: TableId) -> str:
    return config.mirror.staging(table, RESYNC_DIR)


def staged_config(spark: SparkSession, config: IngestConfig, table: TableId) -> IngestConfig:
    """A mirror of its own where the table is rebuilt, emptied first: a folder under the state path, or by
    name two schemas beside the state schema (the table's, and its state's, so no table name can clash)."""
    if not config.by_name:
        staging = staging_root(config, table)
        _remove_local(staging)
        return replace(config, target_path=staging, state_path=f"{staging}/_ingest", stream_id=RESYNC_STREAM)
    state = config.state_path
    assert isinstance(state, SchemaName)
    catalog, name = state.parts  # a by-name config's state schema names its catalog
    tables = SchemaName(catalog, f"{name}_{RESYNC_DIR}")
    staged_state = SchemaName(catalog, f"{name}_{RESYNC_DIR}_state")
    for schema in (tables, staged_state):
        spark.sql(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    return replace(
        config,
        target_catalog=catalog,
        target_schema=tables.parts[1],
        state_schema=str(staged_state),
        state_path="",
        stream_id=RESYNC_STREAM,
    )


def only_table(messages: DataFrame, table: TableId) -> DataFrame:
    """The table's own records, its database's schema-level DDLs, and every watermark (database "")."""
    database = F.get_json_object(F.col("value").cast("string"), "$.database")
    name = F.coalesce(F.get_json_object(F.col("value").cast("string"), "$.table"), F.lit(""))
    keep = (database == "") | ((database == table.schema) & ((name == table.table) | (name == "")))
    return messages.where(keep)


def command(
    config: IngestConfig, table_name: str, remote: str | None = None, warehouse: str | None = None
) -> int:
    """``resync --table database.table``: rebuild that table and print what was swapped in."""
    schema, dot, table = table_name.partition(".")
    if not dot or not schema or not table:
        raise ConfigError(f"table: expected database.table, got {table_name!r}")
    result = resync_table(
        get_session(remote=remote, catalog_warehouse=warehouse), config, TableId(schema, table)
    )
    print(result.describe())
    return 0


def resync_table(spark: SparkSession, config: IngestConfig, table: TableId) -> ResyncResult:
    """Rebuild ``table`` from the input and swap it into the mirror.

    Raises:
        ConfigError: the input does not reach the table's current applied TSO, or holds no row of it.
    """
    staged = staged_config(spark, config, table)
    messages = files.read_messages(spark, config.input_path, {}, config.input_format, config.csv)
    process_batch(spark, only_table(messages, table), staged, progress.Progress())
    staged_path = staged.mirror.address(table)
    after = table_state.read_table_state(spark, staged_path)
    path = config.mirror.address(table)
    current = table_state.read_table_state(spark, path) or TableState()
    if after is None:
        raise ConfigError(f"resync {table}: the input at {config.input_path} holds no change of this table")
    if after.applied_ts < current.applied_ts:
        raise ConfigError(
            f"resync {table}: the input only reaches TSO {after.applied_ts}, below the table's applied TSO "
            f"{current.applied_ts}; it no longer holds the table's whole history, so the table was left as is"
        )
    # The copy commits carry the old state, marked not consistent: a crash before mark_applied leaves a
    # table whose state is still the old A_T, and the next run re-applies from there (MERGE is idempotent).
    # The next run learns the table's new state from its own commits, not from progress.
    committed = progress.load_progress(spark, config.state_path, config.stream_id)
    progress.begin_run(spark, config.state_path, config.stream_id, committed.run_id + 1, [table])
    before = state_to_metadata(current, run_id=0, step=f"resync of {table} in progress", consistent=False)
    apply_schema.copy_table(spark, staged_path, path, table, before)
    apply_schema.mark_applied(
        spark,
        path,
        after.applied_ts,
        state_to_metadata(after, run_id=0, step=f"resync of {table} from {config.input_path}"),
    )
    rows = delta_io.read(spark, path).count()
    logger.info("resync %s: %d rows, A_T %d -> %d", table, rows, current.applied_ts, after.applied_ts)
    return ResyncResult(table, current, after, rows)


def _remove_local(path: str) -> None:
    """A previous re-sync's staging folder, when it is on the local file system (tests, local runs).

    Elsewhere (cloud storage) a stale staging folder is harmless: its progress is ignored, since this
    run starts from an empty one, and every table in it is replaced or merged idempotently.
    """
    local = path.removeprefix("file:")
    if "://" not in local:
        shutil.rmtree(local, ignore_errors=True)
