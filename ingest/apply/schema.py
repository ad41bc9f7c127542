"""Schema changes -> Delta, as ALTER TABLE makes them: create and copy tables, add (with back-fill), drop and
rename columns, change types and keys, truncate, partitions. I/O.

Every step ends with a commit that carries the table's new state, even when the change itself touched no
rows (an UPDATE or DELETE on an empty table makes no commit): a DDL must never be half-recorded.

A change that rewrites every row is in :mod:`ingest.apply.rewrite`; what a mirrored table is made of (its
Delta features and properties, and ``TableInfo``) in :mod:`ingest.apply.table`.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from contextlib import nullcontext
from decimal import Decimal

import orjson
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ingest.apply import convert, retype
from ingest.apply.rewrite import add_generated, rewrite_column, unless_all_within_limits
from ingest.apply.table import (
    AUTO_COMPACT,
    CHANGE_FEED,
    COLUMN_MAPPING,
    TABLE_PROPERTIES,
    TYPE_WIDENING,
    TableInfo,
    enable_features,
    features_for_type,
    feed_paused,
    feed_possible,
    keeps_feed_readable,
    needs_column_mapping,
    table_exists,
    table_info,
)
from ingest.lake import delta_io, sql_text
from ingest.lake.delta_io import prepare_to_create, quote
from ingest.lake.sql_text import sql_literal, sql_string
from ingest.model import TableId, TableSchema
from ingest.plan import partitions
from ingest.plan import schema as plan
from ingest.plan.keys import UniqueKeys
from ingest.plan.partitions import Partitioning, PartitionRows
from ingest.state.table_state import (
    NOT_RETIRED,
    PROPERTY_APPLIED_TS,
    PROPERTY_COMMIT_TS_COLUMN,
    PROPERTY_GENERATED,
    PROPERTY_KEY_COLUMNS,
    PROPERTY_PARTITIONING,
    PROPERTY_RETIRED,
    PROPERTY_SOURCE_TABLE,
    PROPERTY_UNIQUE_KEYS,
    committing,
    free_commit_ts_column,
    paused_metadata,
    session_confs,
)

logger = logging.getLogger(__name__)


def create_table(
    spark: SparkSession,
    path: str,
    table: TableId,
    schema: TableSchema,
    metadata: str,
    *,
    replace: bool = False,
    partitioning: Partitioning | None = None,
    compaction: bool = True,
    unique_keys: UniqueKeys | None = None,
    change_feed: bool = True,
) -> None:
    """Create the Delta table for an upstream table; ``replace`` gives a retired name a new table.

    ``partitioning`` is recorded when the CREATE TABLE was seen (None: not known, e.g. created from DML).
    Safe to repeat after a kill at any instant: the table is created or replaced by one commit, and a
    creation cut short before its first commit is started again.
    """
    delta_io.check_name(path)
    exists = prepare_to_create(spark, path)
    fields = [
        _field(c.name, convert.spark_type(c.type), convert.type_comment(c.type, c.collation))
        for c in schema.columns
    ]
    commit_ts = free_commit_ts_column(c.name for c in schema.columns)
    fields.append(_commit_ts_field(commit_ts))
    properties = _mirror_properties(schema.key, table, compaction, commit_ts)
    if change_feed and feed_possible(c.name for c in schema.columns):
        properties[CHANGE_FEED[0]] = CHANGE_FEED[1]
    if needs_column_mapping(c.name for c in schema.columns):
        properties[COLUMN_MAPPING[0]] = COLUMN_MAPPING[1]
    if partitioning is not None:
        properties[PROPERTY_PARTITIONING] = partitioning.to_json()
    if unique_keys is not None:
        properties[PROPERTY_UNIQUE_KEYS] = unique_keys.to_json()
    generated = {c.name: c.expression for c in schema.columns if c.virtual and c.expression is not None}
    if generated:
        properties[PROPERTY_GENERATED] = orjson.dumps(generated).decode()
    replacing = (
        feed_paused(spark, path, metadata, resume=change_feed) if replace and exists else nullcontext()
    )
    with replacing as paused:
        if paused:  # and column mapping stays on, so the feed before the replacement stays readable
            properties |= dict([(CHANGE_FEED[0], "false"), COLUMN_MAPPING])
        with committing(spark, metadata):
            delta_io.create_table(
                spark, path, T.StructType(fields), properties=properties, replace=replace and exists
            )
    logger.info("created Delta table %s at %s, key %s", table, path, ", ".join(schema.key))


def _field(name: str, data_type: T.DataType, comment: str) -> T.StructField:
    return T.StructField(name, data_type, nullable=True, metadata={"comment": comment})


def _commit_ts_field(name: str) -> T.StructField:
    return _field(name, T.LongType(), "TiDB commitTs of the change that wrote the row")


def _mirror_properties(
    key: tuple[str, ...], table: TableId, compaction: bool, commit_ts: str
) -> dict[str, str]:
    """The table properties every mirrored table carries: Delta features, merge key, source, retired mark,
    and the name of our commit-TSO column."""
    return {
        **TABLE_PROPERTIES,
        AUTO_COMPACT: str(compaction).lower(),
        PROPERTY_KEY_COLUMNS: orjson.dumps(list(key)).decode(),
        PROPERTY_SOURCE_TABLE: str(table),
        PROPERTY_RETIRED: NOT_RETIRED,
        PROPERTY_COMMIT_TS_COLUMN: commit_ts,
    }


def _make_way(spark: SparkSession, path: str, info: TableInfo, name: str) -> None:
    """Before upstream takes ``name`` for a column: if it is our commit-TSO column's name, ours moves to a
    free one of our own (a metadata rename under column mapping). Within the caller's commit context."""
    if name.casefold() != info.commit_ts_column.casefold():
        return
    moved = free_commit_ts_column([*info.columns, name])
    enable_features(spark, path, COLUMN_MAPPING)
    delta_io.rename_column(spark, path, info.commit_ts_column, moved)
    delta_io.set_properties(spark, path, {PROPERTY_COMMIT_TS_COLUMN: moved})
    logger.info("%s: our commit-TSO column is now %s, as upstream names a column %s", path, moved, name)


def register_catalog_table(spark: SparkSession, name: str, path: str) -> None:
    """Make a path table visible as ``catalog.schema.table`` (or ``schema.table``)."""
    parts = name.split(".")
    if len(parts) >= 2:
        spark.sql(f"CREATE SCHEMA IF NOT EXISTS {'.'.join(quote(p) for p in parts[:-1])}")
    name = ".".join(quote(p) for p in parts)
    spark.sql(f"CREATE TABLE IF NOT EXISTS {name} USING DELTA LOCATION {sql_string(path)}")


def add_column(
    spark: SparkSession,
    path: str,
    change: plan.AddColumn,
    timezone: str,
    metadata: str,
    *,
    keep_default: bool = True,
) -> None:
    """ALTER TABLE ADD COLUMNS (if absent), then give existing rows the value upstream reads for them;
    ``keep_default``: also record it for rows that arrive later yet were written before the ADD (offset
    order, see :func:`column_defaults`)."""
    if change.column.virtual:
        add_generated(spark, path, change, timezone, metadata)
        return
    data_type = convert.spark_type(change.column.type)
    position = "FIRST" if change.first else (delta_io.after(change.after) if change.after else "")
    info = table_info(spark, path)
    exists = change.column.name in info.columns
    if not exists and info.change_feed and not feed_possible([change.column.name]):
        with committing(spark, paused_metadata(metadata)):
            delta_io.set_properties(spark, path, {CHANGE_FEED[0]: "false"})
    with committing(spark, metadata):
        if not exists:
            _make_way(spark, path, info, change.column.name)
            mapping = (COLUMN_MAPPING,) if needs_column_mapping([change.column.name]) else ()
            enable_features(spark, path, *mapping, *features_for_type(data_type))
            field = _field(
                change.column.name,
                data_type,
                convert.type_comment(change.column.type, change.column.collation),
            )
            delta_io.add_column(spark, path, field, position)
        if change.backfill is not None:
            value = convert.from_wire(F.lit(change.backfill), data_type, timezone)
            delta_io.update(spark, path, {change.column.name: sql_text.sql_value(spark, value, data_type)})
            if keep_default:
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
    delta_io.set_properties(spark, path, {PROPERTY_COLUMN_DEFAULTS: orjson.dumps(defaults).decode()})


def record_column_defaults(spark: SparkSession, path: str, defaults: dict[str, str], metadata: str) -> None:
    """Record the defaults of columns a table was created with (TiCDC Avro: its writer schema's)."""
    if defaults:
        with committing(spark, metadata):
            _set_column_defaults(spark, path, {**column_defaults(spark, path), **defaults})


def truncate(spark: SparkSession, path: str, metadata: str) -> None:
    with committing(spark, metadata):
        delta_io.delete(spark, path)


def delete_partition_rows(
    spark: SparkSession, path: str, change: plan.DeletePartitionRows, metadata: str
) -> None:
    """TRUNCATE/DROP PARTITION: delete the rows those partitions hold, then record the definition after it.

    In this order, a crash in between replays the DDL against the old definition: the delete finds nothing
    more, and the definition is written.
    """
    with committing(spark, metadata):
        if change.rows.clauses:
            delta_io.delete(spark, path, partition_predicate(change.rows))
        _set_partitioning(spark, path, change.partitioning)


def exchange_rows(
    spark: SparkSession,
    path: str,
    partner_path: str,
    change: plan.ExchangeRows,
    partner_version: int | None,
    metadata: str,
) -> None:
    """One side of EXCHANGE PARTITION, in one commit. The partitioned table's partition is replaced by every
    row of the other table; the other table is replaced by the rows that partition held. The partner is read
    at ``partner_version`` (just before the DDL), so this gives the same result whichever side goes first,
    and again after a crash."""
    predicate = partition_predicate(change.rows)
    target = delta_io.read(spark, path).schema
    if partner_version is None:
        incoming = spark.createDataFrame([], target)
    else:
        incoming = delta_io.read(spark, partner_path, partner_version)
        if not change.partitioned:
            incoming = incoming.where(predicate)
        # Same upstream structure on both sides (TiDB requires it); typed as this table's columns. Each
        # side may name its commit-TSO column its own way.
        ours = table_info(spark, path).commit_ts_column
        theirs = table_info(spark, partner_path, partner_version).commit_ts_column
        incoming = incoming.select(
            [
                F.col(quote(theirs if f.name == ours else f.name)).cast(f.dataType).alias(f.name)
                for f in target.fields
            ]
        )
    with committing(spark, metadata):
        if change.partitioned:
            delta_io.write(incoming, path, mode="overwrite", replaceWhere=predicate)
        else:
            delta_io.write(incoming, path, mode="overwrite")


def set_partitioning(spark: SparkSession, path: str, partitioning: Partitioning, metadata: str) -> None:
    with committing(spark, metadata):
        _set_partitioning(spark, path, partitioning)


def _set_partitioning(spark: SparkSession, path: str, partitioning: Partitioning) -> None:
    delta_io.set_properties(spark, path, {PROPERTY_PARTITIONING: partitioning.to_json()})


def partition_predicate(rows: PartitionRows) -> str:
    """The rows of some partitions as a Spark SQL condition (true or false, never NULL)."""
    column = quote(rows.column)

    def literal(text: str) -> str:
        if rows.kind == partitions.INTEGER:
            # A Decimal literal compares exactly with every integer column, BIGINT UNSIGNED's DECIMAL(20,0)
            # included, and a bound beyond the column's range still compares right.
            return sql_literal(Decimal(text))
        return f"CAST({sql_string(text)} AS {'DATE' if rows.kind == partitions.DATE else 'TIMESTAMP_NTZ'})"

    def condition(clause: partitions.Clause) -> str:
        if isinstance(clause, partitions.IsNull):
            return f"({column} IS NULL)"
        if isinstance(clause, partitions.InValues):
            if not clause.values:
                return "FALSE"
            return f"coalesce({column} IN ({', '.join(literal(v) for v in clause.values)}), FALSE)"
        if isinstance(clause, partitions.InRange):
            parts = ["TRUE"]
            if clause.low is not None:
                parts.append(f"{column} >= {literal(clause.low)}")
            if clause.high is not None:
                parts.append(f"{column} < {literal(clause.high)}")
            return f"coalesce({' AND '.join(parts)}, FALSE)"
        if isinstance(clause, partitions.HashRemainder):
            remainder = f"abs({column} % {sql_literal(clause.modulus)}) = {sql_literal(clause.remainder)}"
            return f"coalesce({remainder}, FALSE)"
        return f"(NOT {any_of(clause.clauses)})"

    def any_of(clauses: tuple[partitions.Clause, ...]) -> str:
        return "(" + " OR ".join(["FALSE", *(condition(c) for c in clauses)]) + ")"

    return any_of(rows.clauses)


def mark_applied(spark: SparkSession, path: str, applied_ts: int, metadata: str) -> None:
    """A commit that always happens and records the table state (also readable as a table property)."""
    with committing(spark, metadata):
        delta_io.set_properties(spark, path, {PROPERTY_APPLIED_TS: str(applied_ts)})


def drop_column(spark: SparkSession, path: str, name: str, metadata: str) -> None:
    """ALTER TABLE DROP COLUMN, if the column is there (column mapping makes it a metadata change)."""
    info = table_info(spark, path)
    if name in info.columns:
        defaults = column_defaults(spark, path)
        with committing(spark, metadata):
            enable_features(spark, path, COLUMN_MAPPING)
            delta_io.drop_column(spark, path, name)
            if name in defaults:
                _set_column_defaults(spark, path, {k: v for k, v in defaults.items() if k != name})
            if name in info.generated:
                _set_generated(spark, path, {k: v for k, v in info.generated.items() if k != name})


def rename_column(spark: SparkSession, path: str, old: str, new: str, metadata: str) -> None:
    """RENAME COLUMN (column mapping: metadata only), if the old name is still there; keeps the key right."""
    info = table_info(spark, path)
    if old not in info.columns:
        return
    defaults = column_defaults(spark, path)
    with committing(spark, metadata):
        enable_features(spark, path, COLUMN_MAPPING)
        if new.casefold() != old.casefold():
            _make_way(spark, path, info, new)
        _rename(spark, path, old, new)
        if old in defaults:
            _set_column_defaults(spark, path, {(new if k == old else k): v for k, v in defaults.items()})
        if old in info.key:
            key = [new if k == old else k for k in info.key]
            delta_io.set_properties(spark, path, {PROPERTY_KEY_COLUMNS: orjson.dumps(key).decode()})
        if info.partitioning is not None and info.partitioning.column == old:
            _set_partitioning(spark, path, dataclasses.replace(info.partitioning, column=new))
        if old in info.generated:
            _set_generated(spark, path, {(new if k == old else k): v for k, v in info.generated.items()})


def _set_generated(spark: SparkSession, path: str, expressions: Mapping[str, str]) -> None:
    """Within the caller's commit context."""
    delta_io.set_properties(spark, path, {PROPERTY_GENERATED: orjson.dumps(dict(expressions)).decode()})


def _rename(spark: SparkSession, path: str, old: str, new: str) -> None:
    """RENAME COLUMN; one that changes only case too (Spark matches names without case, so it would take the
    new name for the old column and refuse it as already there)."""
    if old != new and old.casefold() == new.casefold():
        with session_confs(spark, {"spark.sql.caseSensitive": "true"}):
            delta_io.rename_column(spark, path, old, new)
        return
    delta_io.rename_column(spark, path, old, new)


def change_type(
    spark: SparkSession, path: str, change: plan.ChangeType, metadata: str, *, timezone: str, rewrite: bool
) -> str | None:
    """Give a column its new TiDB type, with the values TiDB gives it; returns why not, or None when done.

    Only the column's comment changes where the values and the Delta type stay; Delta widens the type where
    only that changes; otherwise the values change and, with ``rewrite``, the table is rewritten with them
    (:func:`rewrite_column`).
    """
    info = table_info(spark, path)
    field = next((f for f in info.schema.fields if f.name == change.name), None)
    if field is None:
        return f"column {change.name} does not exist"
    old = convert.column_type_of(field) or convert.column_type_for(field.dataType)
    target = convert.spark_type(change.type)
    widening = convert.is_widening(field.dataType, target)
    plan_ = retype.plan_retype(old, change.type, widening)
    if plan_.how is retype.Retype.REWRITE:
        plan_ = unless_all_within_limits(spark, path, change, old, plan_, widening)
    described = f"{old} -> {change.type}"
    if plan_.how is retype.Retype.REFUSE:
        return f"{described}: {plan_.reason}"
    if plan_.how is retype.Retype.REWRITE and not rewrite:
        return f"{described} changes the values TiDB holds, which needs a rewrite of the table"
    if plan_.how is retype.Retype.REWRITE:
        return rewrite_column(spark, path, change, old, timezone, metadata)
    with committing(spark, metadata):
        if plan_.how is retype.Retype.WIDEN:
            enable_features(
                spark, path, TYPE_WIDENING, *features_for_type(target), *keeps_feed_readable(info)
            )
            delta_io.change_column_type(spark, path, change.name, target)
        delta_io.comment_column(spark, path, change.name, convert.type_comment(change.type, change.collation))
    return None


def change_key(spark: SparkSession, path: str, key: tuple[str, ...], metadata: str) -> None:
    """Merge on ``key`` from now on (ADD/DROP PRIMARY KEY). Rows are unique on it upstream, so here too."""
    with committing(spark, metadata):
        delta_io.set_properties(spark, path, {PROPERTY_KEY_COLUMNS: orjson.dumps(list(key)).decode()})
    logger.info("%s: merge key is now %s", path, ", ".join(key))


def retire(spark: SparkSession, path: str, reason: str, keep_rows: bool, metadata: str) -> None:
    """Mark a table whose upstream table is gone; its last rows stay readable unless ``keep_rows`` is off."""
    with committing(spark, metadata):
        if not keep_rows:
            delta_io.delete(spark, path)
        delta_io.set_properties(spark, path, {PROPERTY_RETIRED: reason})


def copy_table(
    spark: SparkSession,
    source_path: str,
    path: str,
    table: TableId,
    metadata: str,
    *,
    with_rows: bool = True,
    version: int | None = None,
) -> bool:
    """RENAME (and CREATE TABLE ... LIKE without rows): (re)create the table at ``path`` with the source's
    schema and key, as of the source's ``version`` if given. False: the mirror has no source table.

    Safe to repeat after a kill at any instant: a table already there (from a previous attempt, or a retired
    one) is replaced whole, and a creation cut short before its first commit is started again. With rows,
    one commit defines the table and holds its rows, so no kill leaves it defined but empty under a state
    that says otherwise (a re-sync's swap carries the table's current state).
    """
    if not table_exists(spark, source_path):
        return False
    delta_io.check_name(path)
    source = table_info(spark, source_path, version)
    rows = delta_io.read(spark, source_path, version)
    exists = prepare_to_create(spark, path)
    # The copy compacts as its source did: the setting it was created with, or one the user set since.
    properties = _mirror_properties(source.key, table, source.compacts, source.commit_ts_column)
    if needs_column_mapping(rows.schema.fieldNames()):
        properties[COLUMN_MAPPING[0]] = COLUMN_MAPPING[1]
    if source.partitioning is not None:  # RENAME keeps the partitions, as does CREATE TABLE … LIKE
        properties[PROPERTY_PARTITIONING] = source.partitioning.to_json()
    if source.unique_keys is not None:  # and the indexes
        properties[PROPERTY_UNIQUE_KEYS] = source.unique_keys.to_json()
    if source.generated:  # and the columns the mirror computes
        properties[PROPERTY_GENERATED] = orjson.dumps(dict(source.generated)).decode()
    # Made with the feed off, turned on after it: Delta refuses a copy of a table that renamed or dropped a
    # column (its columns' mapped names come with the rows) into a table whose feed is on.
    replacing = feed_paused(spark, path, metadata, resume=False) if exists else nullcontext()
    with replacing as paused:
        if paused:  # column mapping stays on, so the feed before the copy stays readable
            properties[COLUMN_MAPPING[0]] = COLUMN_MAPPING[1]
        _write_copy(spark, path, rows, properties, metadata, with_rows=with_rows, exists=exists)
    if source.change_feed:
        with committing(spark, metadata):
            delta_io.set_properties(spark, path, dict([CHANGE_FEED]))
    return True


def _write_copy(
    spark: SparkSession, path: str, rows: DataFrame, properties: dict[str, str], metadata: str, *,
    with_rows: bool, exists: bool,
) -> None:  # fmt: skip
    if with_rows:
        delta_io.ensure_schema(spark, path)
        writer = rows.writeTo(sql_text.table_ref(path)).using("delta")
        for name, value in properties.items():
            writer = writer.tableProperty(name, value)
        with committing(spark, metadata), delta_io.catalog_naming(path):
            writer.createOrReplace()
        return
    with committing(spark, metadata):
        delta_io.create_table(spark, path, rows.schema, properties=properties, replace=exists)


PROPERTY_COLUMN_DEFAULTS = "ticdc.columnDefaults"


def set_property(spark: SparkSession, path: str, name: str, value: str, metadata: str) -> None:
    """Record one of our table properties (e.g. the writer schema a TiCDC Avro table follows)."""
    with committing(spark, metadata):
        delta_io.set_properties(spark, path, {name: value})


def get_property(spark: SparkSession, path: str, name: str) -> str | None:
    return delta_io.properties(spark, path).get(name)
