"""One schema change (planned by ``plan.schema`` or ``plan.avro_schema``) applied to a table's Delta table.
Both ordering modes change schemas through here, so every change kind, and the type-change policy, has
one meaning."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from pyspark.sql import SparkSession

from ingest.apply import rewrite as apply_rewrite
from ingest.apply import schema as apply_schema
from ingest.config import DropTablePolicy, IngestConfig, TypeChangePolicy
from ingest.lake import delta_io
from ingest.plan import schema as plan
from ingest.state import table_state
from ingest.state.table_state import PROPERTY_UNIQUE_KEYS

logger = logging.getLogger(__name__)


def apply_change(
    spark: SparkSession, config: IngestConfig, path: str, change: object, metadata: str
) -> str | None:
    """Apply one change within a commit carrying ``metadata``; returns why it was refused, or None.

    Every change is idempotent (create-if-absent, add-if-absent, drop-if-present, delete-all,
    copy-replacing), so a restart after a crash in the middle of a DDL applies it again safely.
    """
    handler = _HANDLERS.get(type(change))
    if handler is None:
        return None  # a change that only records (RecordOnly) or that the caller handles (Reject)
    return handler(spark, config, path, change, metadata)


def _create(spark: SparkSession, config: IngestConfig, path: str, change: Any, metadata: str) -> None:
    apply_schema.create_table(
        spark, path, change.table, change.schema, metadata,
        replace=isinstance(change, plan.CreateTableReplacing), partitioning=change.partitioning,
        compaction=config.auto_compaction, unique_keys=change.unique_keys, change_feed=config.records_changes,
    )  # fmt: skip


def _change_type(
    spark: SparkSession, config: IngestConfig, path: str, change: Any, metadata: str
) -> str | None:
    rewrite = config.type_change is TypeChangePolicy.REWRITE
    refused = apply_schema.change_type(
        spark, path, change, metadata, timezone=config.timezone, rewrite=rewrite
    )
    if refused is None:
        return None
    return f'column {change.name}: {refused} under type-change policy "{config.type_change.value}"'


def _before(spark: SparkSession, path: str, before_ts: int | None) -> int | None:
    return None if before_ts is None else table_state.version_before(spark, path, before_ts)


def _create_like(
    spark: SparkSession, config: IngestConfig, path: str, change: Any, metadata: str
) -> str | None:
    source = config.mirror.address(change.source)
    version = _before(spark, source, change.before_ts)
    if not apply_schema.copy_table(
        spark, source, path, change.table, metadata, with_rows=False, version=version
    ):
        return f"CREATE TABLE ... LIKE {change.source}, which the mirror does not hold"
    return None


def _copy_from(spark: SparkSession, config: IngestConfig, path: str, change: Any, metadata: str) -> None:
    source = config.mirror.address(change.source)
    version = _before(spark, source, change.before_ts)
    if not apply_schema.copy_table(spark, source, path, change.table, metadata, version=version):
        logger.warning(
            "%s: renamed from %s, which the mirror does not hold; it starts empty", path, change.source
        )


def _revive(spark: SparkSession, config: IngestConfig, path: str, change: Any, metadata: str) -> str | None:
    """RECOVER / FLASHBACK TABLE: the mirror's copy of the rows upstream restores, under the name the DDL
    gives. Once the copy is there (a kill after it, then the DDL again) it stands."""
    source = config.mirror.address(change.source)
    if _revived(spark, path, metadata):
        return None
    if _retired_mark(spark, path) == table_state.NOT_RETIRED:
        return f"{change.table} is a live table in the mirror, which TiDB would refuse"
    version, why = _restorable(spark, config, source, change.before_ts)
    if why:
        return (
            f"{change.source} cannot come back with the rows upstream restores: {why}. Load {change.table} "
            "again from a Dumpling export taken after this DDL (ticdc-ingest load --force)"
        )
    apply_schema.copy_table(spark, source, path, change.table, metadata, version=version)
    logger.info("%s: revived from the mirror's copy of %s (version %s)", path, change.source, version)
    return None


def _revived(spark: SparkSession, path: str, metadata: str) -> bool:
    """Whether this DDL's copy already stands at ``path``: one of its newest commits is this DDL's own."""
    if not delta_io.is_delta_table(spark, path):
        return False
    step = (table_state.metadata_payload(metadata) or {}).get("step")
    rows = delta_io.history(spark, path, 3).collect()
    return any((table_state.metadata_payload(r["userMetadata"]) or {}).get("step") == step for r in rows)


def _restorable(
    spark: SparkSession, config: IngestConfig, source: str, before_ts: int | None
) -> tuple[int | None, str]:
    """The version of the mirror's table at ``source`` that holds what upstream restores, and why there is
    none ("" when there is): a dropped table (kept by its DROP) just before this DDL; a live one that a
    TRUNCATE emptied (TiDB flashes it back under a new name), just before its newest TRUNCATE."""
    retired = _retired_mark(spark, source)
    if retired is None:
        return None, "the mirror never held it"
    if retired.startswith("dropped by"):
        if config.drop_table is not DropTablePolicy.ARCHIVE:
            return None, 'drop-table is "delete", so the mirror kept no rows of it'
        return _before(spark, source, before_ts), ""
    if retired == table_state.NOT_RETIRED and before_ts is not None:
        truncated = table_state.truncated_before(spark, source, before_ts)  # reads the whole history
        if truncated is not None:
            return _before(spark, source, truncated), ""
    held = retired if retired != table_state.NOT_RETIRED else "live, never truncated"
    return None, f"the mirror's table of that name is not the dropped or truncated one ({held})"


def _retired_mark(spark: SparkSession, path: str) -> str | None:
    """A mirrored table's retired mark (``table_state.NOT_RETIRED`` while live); None: no table there."""
    if not delta_io.is_delta_table(spark, path):
        return None
    return delta_io.properties(spark, path).get(table_state.PROPERTY_RETIRED, table_state.NOT_RETIRED)


def _exchange(spark: SparkSession, config: IngestConfig, path: str, change: Any, metadata: str) -> None:
    partner = config.mirror.address(change.partner)
    version = _before(spark, partner, change.before_ts)
    apply_schema.exchange_rows(spark, path, partner, change, version, metadata)


_Handler = Callable[[SparkSession, IngestConfig, str, Any, str], "str | None"]
_HANDLERS: dict[type, _Handler] = {
    plan.CreateTable: _create,
    plan.CreateTableReplacing: _create,
    plan.AddColumn: lambda s, c, p, ch, m: apply_schema.add_column(
        s, p, ch, c.timezone, m, keep_default=c.codec.offset_order
    ),
    plan.DropColumn: lambda s, c, p, ch, m: apply_schema.drop_column(s, p, ch.name, m),
    plan.RenameColumn: lambda s, c, p, ch, m: apply_schema.rename_column(s, p, ch.old, ch.new, m),
    plan.ChangeType: _change_type,
    plan.ChangeGenerated: lambda s, c, p, ch, m: apply_rewrite.add_generated(s, p, ch, c.timezone, m),
    plan.ChangeKey: lambda s, c, p, ch, m: apply_schema.change_key(s, p, ch.key, m),
    plan.SetUniqueKeys: lambda s, c, p, ch, m: apply_schema.set_property(
        s, p, PROPERTY_UNIQUE_KEYS, ch.keys.to_json(), m
    ),
    plan.Truncate: lambda s, c, p, ch, m: apply_schema.truncate(s, p, m),
    plan.DeletePartitionRows: lambda s, c, p, ch, m: apply_schema.delete_partition_rows(s, p, ch, m),
    plan.SetPartitioning: lambda s, c, p, ch, m: apply_schema.set_partitioning(s, p, ch.partitioning, m),
    plan.Retire: lambda s, c, p, ch, m: apply_schema.retire(s, p, ch.reason, ch.keep_rows, m),
    plan.CreateLike: _create_like,
    plan.CopyFrom: _copy_from,
    plan.Revive: _revive,
    plan.ExchangeRows: _exchange,
}
