"""Schema changes that rewrite every row of a table: REPLACE TABLE AS SELECT, one commit that carries the
table's new state, so readers see the table before or after, never between. A column's values converted to
its new type as TiDB converts them, and a VIRTUAL generated column computed from each row. I/O.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import orjson
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ingest.apply import convert, generated, retype
from ingest.apply.table import TIMESTAMP_NTZ, TableInfo, feed_paused, table_info
from ingest.lake import delta_io, sql_text
from ingest.lake.delta_io import quote
from ingest.model import ColumnType
from ingest.plan import schema as plan
from ingest.state.table_state import PROPERTY_GENERATED, committing, session_confs

logger = logging.getLogger(__name__)


def add_generated(
    spark: SparkSession,
    path: str,
    change: plan.AddColumn | plan.ChangeGenerated,
    timezone: str,
    metadata: str,
) -> None:
    """ADD or MODIFY of a VIRTUAL generated column the mirror computes: the table is rewritten with the
    column's values computed from each row, in one commit (TiDB computes them whenever a row is read)."""
    info = table_info(spark, path)
    with feed_paused(spark, path, metadata, info=info):
        _add_generated(spark, path, info, change, timezone, metadata)


def _add_generated(
    spark: SparkSession,
    path: str,
    info: TableInfo,
    change: plan.AddColumn | plan.ChangeGenerated,
    timezone: str,
    metadata: str,
) -> None:
    column = change.column
    assert column.expression is not None
    rows = delta_io.read(spark, path)
    types = {f.name: t for f in info.schema.fields if (t := convert.column_type_of(f)) is not None}
    with session_confs(spark, {"spark.sql.session.timeZone": timezone}):
        value = generated.value_of(
            column.expression, types, column.type, lambda n: F.col(quote(n)), info.case_insensitive
        )
        comment = {"comment": convert.type_comment(column.type, column.collation)}
        computed = value.cast(convert.spark_type(column.type)).alias(column.name, metadata=comment)
        names = [n for n in rows.columns if n != column.name]
        selected = [F.col(quote(n)) for n in names]
        selected.insert(_position(names, change, info), computed)
        expressions = {**info.generated, column.name: column.expression}
        changed = {PROPERTY_GENERATED: orjson.dumps(expressions).decode()}
        replace_table(spark, path, rows.select(*selected), metadata, changed)
    logger.info("%s: computed VIRTUAL column %s AS (%s)", path, column.name, column.expression)


def _position(names: list[str], change: plan.AddColumn | plan.ChangeGenerated, info: TableInfo) -> int:
    """Where the (re)computed column goes among the table's other columns."""
    if isinstance(change, plan.ChangeGenerated):
        name = change.column.name
        return info.columns.index(name) if name in info.columns else len(info.columns)
    if change.first:
        return 0
    if change.after is not None and change.after in names:
        return names.index(change.after) + 1
    return len(info.columns)


def rewrite_column(
    spark: SparkSession, path: str, change: plan.ChangeType, old: ColumnType, timezone: str, metadata: str
) -> str | None:
    """Rewrite every row with the column's values converted as TiDB converts them (:mod:`retype`), in one
    commit, so readers see the table before or after it. TiDB converts its stored values itself and sends
    no row events; a value that would not convert (which TiDB would have refused) refuses the rewrite
    instead of becoming NULL, before anything is written. Returns why not, or None when done. TIMESTAMPs
    are read and written in the changefeed's ``timezone``."""
    refused = _unconvertible(spark, path, change, old, timezone)
    if refused is not None:
        return refused
    # The rows are read again inside the pause: turning column mapping on under a read already planned
    # trips Delta's check that the table's schema did not change beneath it.
    with feed_paused(spark, path, metadata), session_confs(spark, {"spark.sql.session.timeZone": timezone}):
        rows = delta_io.read(spark, path)
        value = retype.converted(F.col(quote(change.name)), old, change.type)
        comment = {"comment": convert.type_comment(change.type, change.collation)}
        replace_table(
            spark, path, rows.withColumn(change.name, value.alias(change.name, metadata=comment)), metadata
        )
    logger.info("rewrote %s with column %s as %s", path, change.name, change.type)
    return None


def unless_all_within_limits(
    spark: SparkSession,
    path: str,
    change: plan.ChangeType,
    old: ColumnType,
    rewrite: retype.RetypePlan,
    widening: bool,
) -> retype.RetypePlan:
    """A change that converts only the values beyond the new type's limits (a narrower VARCHAR, a signed
    column made UNSIGNED) rewrites nothing when every value is within them (one aggregate), as in strict
    mode, where TiDB refuses the change otherwise: only the comment changes, or Delta widens the type."""
    column = F.col(quote(change.name))
    fits = retype.within_limits(column, old, change.type)
    target = convert.spark_type(change.type)
    same = convert.spark_type(old) == target
    if fits is None or not (same or widening):
        return rewrite
    beyond = delta_io.read(spark, path).agg(F.count_if(column.isNotNull() & ~fits)).first()
    if beyond is None or beyond[0]:
        return rewrite
    return retype.RetypePlan(retype.Retype.COMMENT if same else retype.Retype.WIDEN)


def _unconvertible(
    spark: SparkSession, path: str, change: plan.ChangeType, old: ColumnType, timezone: str
) -> str | None:
    """Why the column's values cannot be rewritten as ``change.type`` (None: every value converts, and the
    rewrite to come is logged with the table's row count)."""
    column = F.col(quote(change.name))
    with session_confs(spark, {"spark.sql.session.timeZone": timezone}):
        value = retype.converted(column, old, change.type)
        lost = F.count_if(column.isNotNull() & value.isNull())
        count, lost_count = delta_io.read(spark, path).agg(F.count(F.lit(1)), lost).first() or (0, 0)
    if lost_count:
        return f"{lost_count} row(s) hold values that do not convert to {change.type}"
    logger.warning(
        "%s: rewriting all %d rows for column %s: %s -> %s, as TiDB converted them",
        path, count, change.name, old, change.type,
    )  # fmt: skip
    return None


def replace_table(
    spark: SparkSession, path: str, rows: DataFrame, metadata: str, changed: Mapping[str, str] | None = None
) -> None:
    """Replace the table's schema and rows with ``rows`` in one commit (REPLACE TABLE AS SELECT), keeping its
    properties (``changed``: properties that change with it); column metadata (comments) comes with
    ``rows``."""
    current = delta_io.properties(spark, path).items()
    properties = {k: v for k, v in current if not k.startswith(_DELTA_MANAGED)} | dict(changed or {})
    if any(isinstance(f.dataType, T.TimestampNTZType) for f in rows.schema.fields):
        properties[TIMESTAMP_NTZ[0]] = TIMESTAMP_NTZ[1]  # Delta turns it on by itself only at creation
    writer = rows.writeTo(sql_text.table_ref(path)).using("delta")
    for name, value in properties.items():
        writer = writer.tableProperty(name, value)
    with committing(spark, metadata), delta_io.catalog_naming(path):
        writer.createOrReplace()


# Properties Delta keeps itself; a REPLACE TABLE that names them again is refused or confuses the protocol.
_DELTA_MANAGED = (
    "delta.feature.",
    "delta.minReaderVersion",
    "delta.minWriterVersion",
    "delta.columnMapping.maxColumnId",
)
