"""Schema changes -> Delta: create tables, add columns (with back-fill), truncate. I/O.

Every step ends with a commit that carries the table's new state, even when the change itself touched no
rows (an UPDATE or DELETE on an empty table makes no commit): a DDL must never be half-recorded.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from functools import reduce

import orjson
from delta.tables import DeltaTable, DeltaTableBuilder
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ingest.apply import convert
from ingest.apply.delta_io import prepare_to_create
from ingest.model import TableId, TableSchema
from ingest.plan import partitions
from ingest.plan import schema as plan
from ingest.plan.partitions import Partitioning, PartitionRows
from ingest.state.table_state import (
    COMMIT_TS_COLUMN,
    NOT_RETIRED,
    PROPERTY_APPLIED_TS,
    PROPERTY_KEY_COLUMNS,
    PROPERTY_PARTITIONING,
    PROPERTY_RETIRED,
    PROPERTY_SOURCE_TABLE,
    committing,
)

logger = logging.getLogger(__name__)

# Every mirrored table has deletion vectors: a MERGE that touches a few rows of a file marks them instead of
# rewriting the file. Every other Delta feature is turned on only by the first DDL that needs it, so a
# table that never needed one stays readable by readers that lack it (delta-rs and the Polars and DuckDB
# readers built on it read column mapping and deletion vectors, but not type widening).
TABLE_PROPERTIES = {"delta.enableDeletionVectors": "true"}
# DROP and RENAME COLUMN, and column names Delta cannot store as they are (spaces, commas, ...).
COLUMN_MAPPING = ("delta.columnMapping.mode", "name")
# MODIFY COLUMN to a wider type (INT -> BIGINT, DECIMAL widening, DATE -> DATETIME) without a rewrite.
TYPE_WIDENING = ("delta.enableTypeWidening", "true")
# DATETIME columns (TIMESTAMP_NTZ): Delta turns it on by itself only when a table is created with one.
TIMESTAMP_NTZ = ("delta.feature.timestampNtz", "supported")
# Characters Delta refuses in a column name unless the table maps column names.
_UNMAPPED_NAME_CHARS = set(" ,;{}()\n\t=")


def quote(name: str) -> str:
    """Backtick a column or table name for Spark SQL."""
    return "`" + name.replace("`", "``") + "`"


def table_exists(spark: SparkSession, path: str) -> bool:
    return bool(DeltaTable.isDeltaTable(spark, path))


@dataclass(frozen=True)
class TableInfo:
    """A mirrored Delta table as the planner needs it: upstream columns, merge key, and whether retired."""

    schema: T.StructType
    key: tuple[str, ...]
    retired: bool
    partitioning: Partitioning | None = None  # None: never recorded

    @property
    def columns(self) -> list[str]:
        return self.schema.fieldNames()


def create_table(
    spark: SparkSession,
    path: str,
    table: TableId,
    schema: TableSchema,
    metadata: str,
    *,
    replace: bool = False,
    partitioning: Partitioning | None = None,
) -> None:
    """Create the Delta table for an upstream table; ``replace`` gives a retired name a new table.

    ``partitioning`` is recorded when the CREATE TABLE was seen (None: not known, e.g. created from DML).
    Safe to repeat after a kill at any instant: the table is created or replaced by one commit, and a
    creation cut short before its first commit is started again.
    """
    exists = prepare_to_create(spark, path)
    builder = (
        DeltaTable.replace(spark) if replace and exists else DeltaTable.createIfNotExists(spark)
    ).location(path)
    for column in schema.columns:
        builder = builder.addColumn(
            column.name, convert.spark_type(column.type), nullable=True, comment=f"tidb: {column.type}"
        )
    builder = builder.addColumn(
        COMMIT_TS_COLUMN,
        T.LongType(),
        nullable=True,
        comment="TiDB commitTs of the change that wrote the row",
    )
    builder = _with_mirror_properties(builder, schema.key, table)
    if needs_column_mapping(c.name for c in schema.columns):
        builder = builder.property(*COLUMN_MAPPING)
    if partitioning is not None:
        builder = builder.property(PROPERTY_PARTITIONING, partitioning.to_json())
    with committing(spark, metadata):
        builder.execute()
    logger.info("created Delta table %s at %s, key %s", table, path, ", ".join(schema.key))


def _with_mirror_properties(
    builder: DeltaTableBuilder, key: tuple[str, ...], table: TableId
) -> DeltaTableBuilder:
    """The table properties every mirrored table carries: Delta features, merge key, source, retired mark."""
    for name, value in _mirror_properties(key, table).items():
        builder = builder.property(name, value)
    return builder


def _mirror_properties(key: tuple[str, ...], table: TableId) -> dict[str, str]:
    return {
        **TABLE_PROPERTIES,
        PROPERTY_KEY_COLUMNS: orjson.dumps(list(key)).decode(),
        PROPERTY_SOURCE_TABLE: str(table),
        PROPERTY_RETIRED: NOT_RETIRED,
    }


def needs_column_mapping(names: Iterable[str]) -> bool:
    """Whether a column name has a character Delta stores only in a table that maps column names."""
    return any(_UNMAPPED_NAME_CHARS & set(name) for name in names)


def _enabled_features(spark: SparkSession, path: str) -> set[tuple[str, str]]:
    """Which of the on-demand features (:data:`COLUMN_MAPPING`, ...) the table has: one detail read."""
    detail = spark.sql(f"DESCRIBE DETAIL delta.{quote(path)}").select("properties", "tableFeatures").first()
    if detail is None:
        return set()
    properties, features = detail["properties"] or {}, set(detail["tableFeatures"] or ())
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
    enabled = _enabled_features(spark, path)
    missing = [f for f in dict.fromkeys(features) if f not in enabled]
    if not missing:
        return
    settings = ", ".join(f"'{name}' = '{value}'" for name, value in missing)
    spark.sql(f"ALTER TABLE delta.{quote(path)} SET TBLPROPERTIES ({settings})")
    logger.info("%s: turned on Delta feature(s) %s", path, ", ".join(name for name, _ in missing))


def _features_for_type(data_type: T.DataType) -> tuple[tuple[str, str], ...]:
    return (TIMESTAMP_NTZ,) if isinstance(data_type, T.TimestampNTZType) else ()


def register_catalog_table(spark: SparkSession, name: str, path: str) -> None:
    """Make a path table visible as ``catalog.schema.table`` (or ``schema.table``)."""
    parts = name.split(".")
    if len(parts) >= 2:
        spark.sql(f"CREATE SCHEMA IF NOT EXISTS {'.'.join(quote(p) for p in parts[:-1])}")
    location = path.replace("'", "\\'")
    spark.sql(
        f"CREATE TABLE IF NOT EXISTS {'.'.join(quote(p) for p in parts)} USING DELTA LOCATION '{location}'"
    )


def add_column(spark: SparkSession, path: str, change: plan.AddColumn, timezone: str, metadata: str) -> None:
    """ALTER TABLE ADD COLUMNS (if absent), then give existing rows the value upstream reads for them."""
    data_type = convert.spark_type(change.column.type)
    position = " FIRST" if change.first else (f" AFTER {quote(change.after)}" if change.after else "")
    exists = change.column.name in table_info(spark, path).columns
    with committing(spark, metadata):
        if not exists:
            mapping = (COLUMN_MAPPING,) if needs_column_mapping([change.column.name]) else ()
            enable_features(spark, path, *mapping, *_features_for_type(data_type))
            spark.sql(
                f"ALTER TABLE delta.{quote(path)} ADD COLUMNS "
                f"({quote(change.column.name)} {data_type.simpleString()} "
                f"COMMENT 'tidb: {change.column.type}'{position})"
            )
        if change.backfill is not None:
            value = convert.from_wire(F.lit(change.backfill), data_type, timezone)
            DeltaTable.forPath(spark, path).update(set={change.column.name: value})
            _set_column_defaults(
                spark, path, {**column_defaults(spark, path), change.column.name: change.backfill}
            )


def column_defaults(spark: SparkSession, path: str) -> dict[str, str]:
    """The DEFAULT (wire text) of each column added with one: what a row written before the ADD reads.

    Only the offset-order modes need it: there a row committed before an ADD COLUMN can arrive after it.
    """
    text = get_property(spark, path, PROPERTY_COLUMN_DEFAULTS)
    return dict(orjson.loads(text)) if text else {}


def _set_column_defaults(spark: SparkSession, path: str, defaults: dict[str, str]) -> None:
    """Within the caller's commit context."""
    value = _sql_string(orjson.dumps(defaults).decode())
    spark.sql(f"ALTER TABLE delta.{quote(path)} SET TBLPROPERTIES ('{PROPERTY_COLUMN_DEFAULTS}' = {value})")


def record_column_defaults(spark: SparkSession, path: str, defaults: dict[str, str], metadata: str) -> None:
    """Record the defaults of columns a table was created with (TiCDC Avro: its writer schema's)."""
    if defaults:
        with committing(spark, metadata):
            _set_column_defaults(spark, path, {**column_defaults(spark, path), **defaults})


def truncate(spark: SparkSession, path: str, metadata: str) -> None:
    with committing(spark, metadata):
        DeltaTable.forPath(spark, path).delete()


def delete_partition_rows(
    spark: SparkSession, path: str, change: plan.DeletePartitionRows, metadata: str
) -> None:
    """TRUNCATE/DROP PARTITION: delete the rows those partitions hold, then record the definition after it.

    In this order, a crash in between replays the DDL against the old definition: the delete finds nothing
    more, and the definition is written.
    """
    with committing(spark, metadata):
        if change.rows.clauses:
            DeltaTable.forPath(spark, path).delete(partition_predicate(change.rows))
        _set_partitioning(spark, path, change.partitioning)


def set_partitioning(spark: SparkSession, path: str, partitioning: Partitioning, metadata: str) -> None:
    with committing(spark, metadata):
        _set_partitioning(spark, path, partitioning)


def _set_partitioning(spark: SparkSession, path: str, partitioning: Partitioning) -> None:
    spark.sql(
        f"ALTER TABLE delta.{quote(path)} SET TBLPROPERTIES "
        f"('{PROPERTY_PARTITIONING}' = {_sql_string(partitioning.to_json())})"
    )


def partition_predicate(rows: PartitionRows) -> Column:
    """The rows of some partitions as a Spark condition (true or false, never NULL)."""
    column = F.col(quote(rows.column))

    def literal(text: str) -> Column:
        if rows.kind == partitions.INTEGER:
            # A Decimal literal compares exactly with every integer column, BIGINT UNSIGNED's DECIMAL(20,0)
            # included, and a bound beyond the column's range still compares right.
            return F.lit(Decimal(text))
        return F.lit(text).cast("date" if rows.kind == partitions.DATE else "timestamp_ntz")

    def condition(clause: partitions.Clause) -> Column:
        if isinstance(clause, partitions.IsNull):
            return column.isNull()
        if isinstance(clause, partitions.InValues):
            return F.coalesce(column.isin([literal(v) for v in clause.values]), F.lit(False))
        if isinstance(clause, partitions.InRange):
            parts = [F.lit(True)]
            if clause.low is not None:
                parts.append(column >= literal(clause.low))
            if clause.high is not None:
                parts.append(column < literal(clause.high))
            return F.coalesce(reduce(lambda a, b: a & b, parts), F.lit(False))
        if isinstance(clause, partitions.HashRemainder):
            remainder = F.abs(column % F.lit(clause.modulus)) == F.lit(clause.remainder)
            return F.coalesce(remainder, F.lit(False))
        return ~any_of(clause.clauses)

    def any_of(clauses: tuple[partitions.Clause, ...]) -> Column:
        return reduce(lambda a, b: a | b, [condition(c) for c in clauses], F.lit(False))

    return any_of(rows.clauses)


def mark_applied(spark: SparkSession, path: str, applied_ts: int, metadata: str) -> None:
    """A commit that always happens and records the table state (also readable as a table property)."""
    with committing(spark, metadata):
        spark.sql(
            f"ALTER TABLE delta.{quote(path)} SET TBLPROPERTIES ('{PROPERTY_APPLIED_TS}' = '{applied_ts}')"
        )


def table_info(spark: SparkSession, path: str) -> TableInfo:
    """The Delta table's upstream columns (ours excluded), key columns and retired mark."""
    table = DeltaTable.forPath(spark, path)
    detail = table.detail().select("properties").first()
    properties = detail["properties"] if detail is not None else {}
    key = tuple(orjson.loads(properties.get(PROPERTY_KEY_COLUMNS, "[]")))
    fields = [f for f in table.toDF().schema.fields if not f.name.startswith("_tidb_")]
    retired = properties.get(PROPERTY_RETIRED, NOT_RETIRED) != NOT_RETIRED
    recorded = properties.get(PROPERTY_PARTITIONING)
    partitioning = partitions.from_json(recorded) if recorded else None
    return TableInfo(T.StructType(fields), key, retired, partitioning)


def drop_column(spark: SparkSession, path: str, name: str, metadata: str) -> None:
    """ALTER TABLE DROP COLUMN, if the column is there (column mapping makes it a metadata change)."""
    if name in table_info(spark, path).columns:
        defaults = column_defaults(spark, path)
        with committing(spark, metadata):
            enable_features(spark, path, COLUMN_MAPPING)
            spark.sql(f"ALTER TABLE delta.{quote(path)} DROP COLUMN {quote(name)}")
            if name in defaults:
                _set_column_defaults(spark, path, {k: v for k, v in defaults.items() if k != name})


def rename_column(spark: SparkSession, path: str, old: str, new: str, metadata: str) -> None:
    """RENAME COLUMN (column mapping: metadata only), if the old name is still there; keeps the key right."""
    info = table_info(spark, path)
    if old not in info.columns:
        return
    defaults = column_defaults(spark, path)
    with committing(spark, metadata):
        enable_features(spark, path, COLUMN_MAPPING)
        spark.sql(f"ALTER TABLE delta.{quote(path)} RENAME COLUMN {quote(old)} TO {quote(new)}")
        if old in defaults:
            _set_column_defaults(spark, path, {(new if k == old else k): v for k, v in defaults.items()})
        if old in info.key:
            key = [new if k == old else k for k in info.key]
            spark.sql(
                f"ALTER TABLE delta.{quote(path)} SET TBLPROPERTIES "
                f"('{PROPERTY_KEY_COLUMNS}' = {_sql_string(orjson.dumps(key).decode())})"
            )
        if info.partitioning is not None and info.partitioning.column == old:
            _set_partitioning(spark, path, dataclasses.replace(info.partitioning, column=new))


def change_type(spark: SparkSession, path: str, change: plan.ChangeType, metadata: str) -> str | None:
    """Widen a column to the Delta type of its new TiDB type; returns why not when Delta cannot."""
    info = table_info(spark, path)
    current = next((f.dataType for f in info.schema.fields if f.name == change.name), None)
    target = convert.spark_type(change.type)
    if current is None:
        return f"column {change.name} does not exist"
    if not convert.is_widening(current, target):
        widened = f"{current.simpleString()} -> {target.simpleString()} ({change.type})"
        return f"{widened} is not a widening Delta can apply"
    with committing(spark, metadata):
        if current != target:
            enable_features(spark, path, TYPE_WIDENING, *_features_for_type(target))
            column = quote(change.name)
            spark.sql(f"ALTER TABLE delta.{quote(path)} ALTER COLUMN {column} TYPE {target.simpleString()}")
        spark.sql(
            f"ALTER TABLE delta.{quote(path)} ALTER COLUMN {quote(change.name)} "
            f"COMMENT {_sql_string(f'tidb: {change.type}')}"
        )
    return None


def change_key(spark: SparkSession, path: str, key: tuple[str, ...], metadata: str) -> None:
    """Merge on ``key`` from now on (ADD/DROP PRIMARY KEY). Rows are unique on it upstream, so here too."""
    with committing(spark, metadata):
        spark.sql(
            f"ALTER TABLE delta.{quote(path)} SET TBLPROPERTIES "
            f"('{PROPERTY_KEY_COLUMNS}' = {_sql_string(orjson.dumps(list(key)).decode())})"
        )
    logger.info("%s: merge key is now %s", path, ", ".join(key))


def rewrite_column(spark: SparkSession, path: str, change: plan.ChangeType, metadata: str) -> str | None:
    """Type-change policy "rewrite": rewrite every row with the column cast to its new Delta type.

    TiDB converts the stored values itself and sends no row events, so the mirror must do the same
    conversion; a value the cast cannot carry (text that is no number, say) refuses the rewrite instead of
    turning into NULL. Returns why not, or None when done.
    """
    target = convert.spark_type(change.type)
    table = spark.read.format("delta").load(path)
    column = F.col(quote(change.name))
    cast = column.cast(target) if isinstance(target, T.StringType) else column.try_cast(target)
    lost = table.where(column.isNotNull() & cast.isNull()).count()
    if lost:
        return f"{lost} row(s) hold values that do not convert to {target.simpleString()} ({change.type})"
    with committing(spark, metadata):
        enable_features(spark, path, *_features_for_type(target))
        (
            table.withColumn(change.name, cast)
            .write.format("delta")
            .mode("overwrite")
            .option("overwriteSchema", "true")
            .save(path)
        )
        spark.sql(
            f"ALTER TABLE delta.{quote(path)} ALTER COLUMN {quote(change.name)} "
            f"COMMENT {_sql_string(f'tidb: {change.type}')}"
        )
    logger.info("rewrote %s with column %s as %s", path, change.name, target.simpleString())
    return None


def retire(spark: SparkSession, path: str, reason: str, keep_rows: bool, metadata: str) -> None:
    """Mark a table whose upstream table is gone; its last rows stay readable unless ``keep_rows`` is off."""
    with committing(spark, metadata):
        if not keep_rows:
            DeltaTable.forPath(spark, path).delete()
        mark = f"'{PROPERTY_RETIRED}' = {_sql_string(reason)}"
        spark.sql(f"ALTER TABLE delta.{quote(path)} SET TBLPROPERTIES ({mark})")


def copy_table(
    spark: SparkSession, source_path: str, path: str, table: TableId, metadata: str, *, with_rows: bool = True
) -> bool:
    """RENAME (and CREATE TABLE ... LIKE without rows): (re)create the table at ``path`` with the source's
    schema and key. False: the mirror has no source table.

    Safe to repeat after a kill at any instant: a table already there (from a previous attempt, or a retired
    one) is replaced whole, and a creation cut short before its first commit is started again. With rows,
    one commit defines the table and holds its rows, so no kill leaves it defined but empty under a state
    that says otherwise (a re-sync's swap carries the table's current state).
    """
    if not table_exists(spark, source_path):
        return False
    source = table_info(spark, source_path)
    rows = spark.read.format("delta").load(source_path)
    exists = prepare_to_create(spark, path)
    properties = _mirror_properties(source.key, table)
    if needs_column_mapping(rows.schema.fieldNames()):
        properties[COLUMN_MAPPING[0]] = COLUMN_MAPPING[1]
    if source.partitioning is not None:  # RENAME keeps the partitions, as does CREATE TABLE … LIKE
        properties[PROPERTY_PARTITIONING] = source.partitioning.to_json()
    if with_rows:
        writer = rows.writeTo(f"delta.{quote(path)}").using("delta")
        for name, value in properties.items():
            writer = writer.tableProperty(name, value)
        with committing(spark, metadata):
            writer.createOrReplace()
        return True
    builder = (DeltaTable.replace(spark) if exists else DeltaTable.createIfNotExists(spark)).location(path)
    builder = builder.addColumns(rows.schema)
    for name, value in properties.items():
        builder = builder.property(name, value)
    with committing(spark, metadata):
        builder.execute()
    return True


def _sql_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


PROPERTY_COLUMN_DEFAULTS = "ticdc.columnDefaults"


def set_property(spark: SparkSession, path: str, name: str, value: str, metadata: str) -> None:
    """Record one of our table properties (e.g. the writer schema a TiCDC Avro table follows)."""
    with committing(spark, metadata):
        spark.sql(f"ALTER TABLE delta.{quote(path)} SET TBLPROPERTIES ('{name}' = {_sql_string(value)})")


def get_property(spark: SparkSession, path: str, name: str) -> str | None:
    detail = DeltaTable.forPath(spark, path).detail().select("properties").first()
    return None if detail is None else detail["properties"].get(name)
