"""What a mirrored Delta table is made of: the Delta features and properties every one carries, the features
turned on only when a DDL first needs one, and :class:`TableInfo`, the table as the planner reads it back.
I/O.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import orjson
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from ingest.apply import convert
from ingest.lake import delta_io
from ingest.model import ColumnType, TableState
from ingest.plan import partitions
from ingest.plan.keys import UniqueKeys
from ingest.plan.partitions import Partitioning
from ingest.state.table_state import (
    COMMIT_TS_COLUMN,
    NOT_RETIRED,
    PROPERTY_GENERATED,
    PROPERTY_KEY_COLUMNS,
    PROPERTY_PARTITIONING,
    PROPERTY_RETIRED,
    PROPERTY_UNIQUE_KEYS,
    commit_ts_column,
    committing,
    paused_metadata,
    state_to_metadata,
)

logger = logging.getLogger(__name__)

# Every mirrored table has deletion vectors: a MERGE that touches a few rows of a file marks them instead of
# rewriting the file. Every other Delta feature is turned on only by the first DDL that needs it, so a
# table that never needed one stays readable by readers that lack it (delta-rs and the Polars and DuckDB
# readers built on it read column mapping and deletion vectors, but not type widening).
# Auto compaction (OSS Delta since 3.1; the same property on Databricks): after a commit that leaves small
# files to combine (spark.databricks.delta.autoCompact.* tune when), Delta compacts them in a second commit
# of the same write. Without it a MERGE every few seconds leaves tens of thousands of small files and deletion
# vectors a day. That commit is made while the write's session confs are still set, so it carries the
# write's userMetadata (the same A_T: compaction changes no row) and the newest of our commits is still
# found within HISTORY_DEPTH; tests/integration/spark/test_compaction.py holds this.
AUTO_COMPACT = "delta.autoOptimize.autoCompact"
# A mirrored table commits at least once per batch that touches it (a DDL: two to five times), and Delta
# checkpoints every 10 commits by default: a Spark job that rewrites the table's whole file list, 1.5 s on a
# small table and more the more files it has. Every 100 commits instead; a reader then replays at most 99
# small JSON commits after the newest checkpoint.
CHECKPOINT_INTERVAL = ("delta.checkpointInterval", "100")
TABLE_PROPERTIES = {"delta.enableDeletionVectors": "true", CHECKPOINT_INTERVAL[0]: CHECKPOINT_INTERVAL[1]}
# DROP and RENAME COLUMN, and column names Delta cannot store as they are (spaces, commas, ...).
COLUMN_MAPPING = ("delta.columnMapping.mode", "name")
# MODIFY COLUMN to a wider type (INT -> BIGINT, DECIMAL widening, DATE -> DATETIME) without a rewrite.
TYPE_WIDENING = ("delta.enableTypeWidening", "true")
# DATETIME columns (TIMESTAMP_NTZ): Delta turns it on by itself only when a table is created with one.
TIMESTAMP_NTZ = ("delta.feature.timestampNtz", "supported")
# Delta's change data feed: what ``changes`` reads to answer what changed between two TSOs. A MERGE that
# updates or deletes rows writes their before-images beside its data files (docs/benchmarks.md: its cost).
CHANGE_FEED = ("delta.enableChangeDataFeed", "true")
# Column names Delta's change data feed adds to each row: a table with an upstream column of one of them
# cannot have the feed (Delta refuses it), nor one whose name holds a backtick (Delta's MERGE that writes the
# feed quotes names badly and fails), so such a table goes without, and `changes` cannot read it.
FEED_COLUMNS = frozenset({"_change_type", "_commit_version", "_commit_timestamp"})


def feed_possible(names: Iterable[str]) -> bool:
    """Whether Delta lets a table with these columns record its change data feed."""
    folded = {name.casefold() for name in names}
    return not FEED_COLUMNS & folded and not any("`" in name for name in folded)


# Characters Delta refuses in a column name unless the table maps column names.
_UNMAPPED_NAME_CHARS = set(" ,;{}()\n\t=")


def table_exists(spark: SparkSession, path: str) -> bool:
    return delta_io.is_delta_table(spark, path)


@dataclass(frozen=True)
class TableInfo:
    """A mirrored Delta table as the planner needs it: upstream columns, merge key, and whether retired."""

    schema: T.StructType
    key: tuple[str, ...]
    retired: bool
    partitioning: Partitioning | None = None  # None: never recorded
    compacts: bool = False  # auto compaction on
    unique_keys: UniqueKeys | None = None  # None: never recorded
    commit_ts_column: str = COMMIT_TS_COLUMN  # our column: the commit TSO of the change that wrote the row
    generated: Mapping[str, str] = dataclasses.field(default_factory=dict)  # VIRTUAL column -> expression
    change_feed: bool = False  # Delta's change data feed on

    @property
    def columns(self) -> list[str]:
        return self.schema.fieldNames()

    @property
    def case_insensitive(self) -> frozenset[str]:
        """The columns whose collation (as their DDL stated it) folds case."""
        return convert.case_insensitive(self.schema)

    @property
    def column_types(self) -> dict[str, ColumnType] | None:
        """The upstream type of every column, from the columns' comments; None if any is not readable."""
        types = {f.name: convert.column_type_of(f) for f in self.schema.fields}
        return None if any(t is None for t in types.values()) else {k: v for k, v in types.items() if v}


def table_info(spark: SparkSession, path: str, version: int | None = None) -> TableInfo:
    """The Delta table's upstream columns (ours excluded), key columns and retired mark, as of ``version``
    if given."""
    properties = delta_io.properties(spark, path, version)
    key = tuple(orjson.loads(properties.get(PROPERTY_KEY_COLUMNS, "[]")))
    commit_ts = commit_ts_column(properties)
    fields = [f for f in delta_io.read(spark, path, version).schema.fields if f.name != commit_ts]
    retired = properties.get(PROPERTY_RETIRED, NOT_RETIRED) != NOT_RETIRED
    recorded = properties.get(PROPERTY_PARTITIONING)
    partitioning = partitions.from_json(recorded) if recorded else None
    compacts = properties.get(AUTO_COMPACT, "false") == "true"
    keys = properties.get(PROPERTY_UNIQUE_KEYS)
    unique_keys = UniqueKeys.from_json(keys) if keys else None
    generated = dict(orjson.loads(properties.get(PROPERTY_GENERATED, "{}")))
    change_feed = properties.get(CHANGE_FEED[0], "false").lower() == "true"
    return TableInfo(
        T.StructType(fields), key, retired, partitioning, compacts, unique_keys, commit_ts, generated,
        change_feed,
    )  # fmt: skip


def needs_column_mapping(names: Iterable[str]) -> bool:
    """Whether a column name has a character Delta stores only in a table that maps column names."""
    return any(_UNMAPPED_NAME_CHARS & set(name) for name in names)


def _enabled_features(spark: SparkSession, path: str) -> set[tuple[str, str]]:
    """Which of the on-demand features (:data:`COLUMN_MAPPING`, ...) the table has: one metadata read."""
    properties, features = delta_io.properties_and_features(spark, path)
    enabled = set()
    if properties.get(COLUMN_MAPPING[0], "none") != "none":
        enabled.add(COLUMN_MAPPING)
    if features & {"typeWidening", "typeWidening-preview"}:
        enabled.add(TYPE_WIDENING)
    if "timestampNtz" in features:
        enabled.add(TIMESTAMP_NTZ)
    return enabled


def enable_features(spark: SparkSession, path: str, *features: tuple[str, str]) -> None:
    """Turn on the Delta features a DDL is about to need, in one commit; none when all are on already.

    Within the caller's commit context, so the commit carries the table state like the DDL's own.
    """
    missing = _missing_features(spark, path, features)
    if not missing:
        return
    delta_io.set_properties(spark, path, missing)
    logger.info("%s: turned on Delta feature(s) %s", path, ", ".join(missing))


def _missing_features(spark: SparkSession, path: str, features: Iterable[tuple[str, str]]) -> dict[str, str]:
    enabled = _enabled_features(spark, path)
    return dict(f for f in dict.fromkeys(features) if f not in enabled)


def record_changes(
    spark: SparkSession, path: str, info: TableInfo, state: TableState, run_id: int
) -> TableInfo:
    """Turn Delta's change data feed on for a table created without it (before the mirror had the setting):
    one commit that changes no row, carrying the table's ``state`` as it is. ``changes`` answers from here
    on."""
    if info.change_feed or not feed_possible(info.columns):
        return info
    with committing(spark, state_to_metadata(state, run_id=run_id, step="change feed on")):
        delta_io.set_properties(spark, path, dict([CHANGE_FEED]))
    logger.info("%s: turned on Delta's change data feed; changes can be read from this version on", path)
    return dataclasses.replace(info, change_feed=True)


@contextmanager
def feed_paused(
    spark: SparkSession, path: str, metadata: str, *, resume: bool = True, info: TableInfo | None = None
) -> Iterator[bool]:
    """Around a REPLACE TABLE of an existing table (a rewrite, a RENAME's copy, a retired name taken again):
    Delta refuses one while the change data feed is on once the table renamed or dropped a column, and a
    replacement's own changes (every row deleted and inserted again) are not changes upstream made. So the
    feed is off for it, in a commit whose step says so (``feed_paused``), and on again after it (with
    ``resume``). Column mapping first, so the feed's older ranges stay readable under their own schema.
    Yields whether it paused the feed (the replacement must then be made with it off, and with column
    mapping, or Delta reads the older feed under the new table's schema). A crash in between
    leaves it off; the table's next batch turns it on again, and the feed starts there. ``info``: the
    table's, when the caller has read it."""
    if info is None:
        info = table_info(spark, path) if delta_io.is_delta_table(spark, path) else None
    if info is None or not info.change_feed:
        yield False
        return
    with committing(spark, paused_metadata(metadata)):  # one commit: the features and the pause
        features = _missing_features(spark, path, keeps_feed_readable(info))
        delta_io.set_properties(spark, path, {**features, CHANGE_FEED[0]: "false"})
    yield True
    if resume:
        with committing(spark, metadata):
            delta_io.set_properties(spark, path, dict([CHANGE_FEED]))


def keeps_feed_readable(info: TableInfo) -> tuple[tuple[str, str], ...]:
    """The features a change of a column's type needs so the table's older changes stay readable: with
    column mapping Delta reads each range of the change data feed under its own schema; without it, a type
    widened or a table rewritten makes every range before it unreadable."""
    return (COLUMN_MAPPING,) if info.change_feed else ()


def features_for_type(data_type: T.DataType) -> tuple[tuple[str, str], ...]:
    return (TIMESTAMP_NTZ,) if isinstance(data_type, T.TimestampNTZType) else ()
