"""One segment of one table's rows -> one guarded Delta MERGE. I/O.

Run on executors: UPDATEs that change the key become a DELETE
of the old key and an upsert of the new one; per key the latest change wins by (commit_ts, rank, offset),
where a DELETE ranks below an after-image at the same commit_ts; the MERGE overwrites a row only when the
target's ``_tidb_commit_ts`` is not newer (``<=``) and deletes it only when strictly older (``<``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from functools import reduce
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.window import WindowSpec
from tenacity import (
    before_sleep_log,
    retry,
    retry_if_exception,
    stop_after_attempt,
    wait_random_exponential,
)

from ingest.apply import checksum, convert
from ingest.apply import generated as generated_columns
from ingest.lake import delta_io
from ingest.lake.delta_io import quote
from ingest.lake.sql_text import sql_literal
from ingest.model import BAD_COLUMN, MESSAGE_COLUMNS, Op
from ingest.order import RANK_DELETE, RANK_UPSERT, Segment
from ingest.state.table_state import COMMIT_TS_COLUMN, committing, planned_whole

logger = logging.getLogger(__name__)

RANK_COLUMN = "_tidb_rank"
INSERT_COLUMN = "_tidb_insert"  # the change is an INSERT upstream

# A table of at most SMALL_TABLE_BYTES is MERGEd copy-on-write: the file a change touches is rewritten,
# not kept with a deletion vector beside it. Writing deletion vectors takes Delta seven more Spark jobs
# than rewriting a file of a few MiB (measured: 0.3-1.1 s per table and batch on two cores); on a larger
# table a deletion vector costs less than rewriting each touched file. Set for that MERGE only, in the
# session it runs in.
SMALL_TABLE_BYTES = 32 * 1024 * 1024
COPY_ON_WRITE_CONFS = {"spark.databricks.delta.merge.deletionVectors.persistent": "false"}


@dataclass(frozen=True, slots=True)
class MergeResult:
    upserted: int
    deleted: int
    source_rows: int


def _image(name: str, image: Column) -> Column:
    return image[F.lit(name)]


def slot(index: int) -> str:
    """The frame column that holds the value of the table's ``index``-th upstream column.

    Frames name upstream values by position, never by upstream's own names: those can be anything MySQL
    allows, the names of the engine's own columns (``commit_ts``, ``offset``, ...) included, and then
    nothing could tell the two apart. Upstream names appear only where they address the Delta table.
    """
    return f"c{index}"


def _slots(columns: list[str], names: tuple[str, ...]) -> list[str]:
    """The frame columns of ``names`` among the table's ``columns`` (in the table's column order)."""
    return [slot(columns.index(name)) for name in names]


def segment_rows(dml: DataFrame, segment: Segment) -> DataFrame:
    """The decoded DML rows of one table that fall into a segment (``Segment.admits``, on executors)."""
    return dml.where(
        (F.col("database") == segment.table.schema)
        & (F.col("table") == segment.table.table)
        & F.col("commit_ts").between(segment.first_ts, segment.high)
    )


def normalize(
    rows: DataFrame,
    schema: T.StructType,
    key: tuple[str, ...],
    timezone: str,
    binary: convert.BinaryText = convert.BinaryText.LATIN1,
    generated: Mapping[str, str] | None = None,
    *,
    checked: bool = False,
) -> DataFrame:
    """One row per change with typed columns (named by :func:`slot`), a rank, and the names of columns that
    did not convert.

    ``checked``: the rows carry :func:`checksum.checked`'s verdict; a mismatch makes each of the record's
    changes bad, and one change per record carries its checksum state (for counting)."""
    data, old = F.col("data"), F.col("old")
    before = F.when(old.isNull(), data).otherwise(
        F.map_zip_with(data, old, lambda _k, new, prev: F.coalesce(prev, new))
    )
    key_changed = reduce(
        lambda acc, k: acc | (F.coalesce(_image(k, old), _image(k, data)) != _image(k, data)),
        key,
        F.lit(False),
    )
    typ = F.col("type")
    # The decoded frame's own change kinds, whatever the protocol called them on the wire.
    insert, update, delete = Op.INSERT.value, Op.UPDATE.value, Op.DELETE.value
    changes = F.filter(
        F.array(
            F.when(typ == delete, F.struct(F.lit(RANK_DELETE).alias("rank"), data.alias("image"))),
            F.when(
                (typ == update) & key_changed,
                F.struct(F.lit(RANK_DELETE).alias("rank"), before.alias("image")),
            ),
            F.when(
                typ.isin(insert, update),
                F.struct(F.lit(RANK_UPSERT).alias("rank"), data.alias("image")),
            ),
        ),
        lambda c: c.isNotNull(),
    )
    exploded = rows.select("*", F.explode(changes).alias("change"))
    image = F.col("change.image")
    is_upsert = F.col("change.rank") == RANK_UPSERT
    generated = generated or {}
    values: dict[str, Column] = {}
    problems: list[Column] = []
    for field in schema.fields:
        if field.name in generated:
            continue
        raw = _image(field.name, image)
        value = convert.from_wire(
            raw, field.dataType, timezone, column_type=convert.column_type_of(field), binary=binary
        )
        values[field.name] = value
        failed = convert.conversion_failed(raw, value, field.dataType)
        if field.name in key:
            problem = F.when(raw.isNull(), F.lit(f"missing key column {field.name}")).when(
                failed, F.lit(f"{field.name}: value will not convert to {field.dataType.simpleString()}")
            )
        else:
            problem = F.when(
                is_upsert & failed,
                F.lit(f"{field.name}: value will not convert to {field.dataType.simpleString()}"),
            )
        problems.append(problem)
    values.update(_computed(schema, generated, values))
    extra = _checksum_verdict(problems, is_upsert | (typ == delete)) if checked else []
    return exploded.select(
        *MESSAGE_COLUMNS,
        "commit_ts",
        F.col("change.rank").alias(RANK_COLUMN),
        (typ == insert).alias(INSERT_COLUMN),
        *[values[f.name].alias(slot(i)) for i, f in enumerate(schema.fields)],
        F.concat_ws("; ", *problems).alias(BAD_COLUMN),
        *extra,
    )


def _checksum_verdict(problems: list[Column], counts: Column) -> list[Column]:
    """A checksum mismatch first among a change's problems, and the record's checksum state on the one of
    its changes that ``counts`` it (a key-changing UPDATE is two changes of one record)."""
    problem = F.col(checksum.PROBLEM_COLUMN)
    problems.insert(0, F.when(problem != "", problem))
    state = F.coalesce(F.col(checksum.STATE_COLUMN), F.lit(checksum.STATE_NONE))
    return [F.when(counts, state).alias(checksum.STATE_COLUMN)]


def _computed(
    schema: T.StructType, generated: Mapping[str, str], values: Mapping[str, Column]
) -> dict[str, Column]:
    """The VIRTUAL columns the mirror computes, from the row's other values (a later one may read an
    earlier one, as in MySQL)."""
    types = {f.name: t for f in schema.fields if (t := convert.column_type_of(f)) is not None}
    known = dict(values)
    folding = convert.case_insensitive(schema)
    for field in schema.fields:
        if field.name in generated:
            column_type = types[field.name]
            value = generated_columns.value_of(
                generated[field.name], types, column_type, known.__getitem__, folding
            )
            known[field.name] = value.cast(field.dataType)
    return {name: known[name] for name in generated if name in known}


def with_defaults(rows: DataFrame, defaults: dict[str, str]) -> DataFrame:
    """Offset order: an upsert without a column (written before it was added) reads the column's DEFAULT.

    Upstream, ADD COLUMN ... DEFAULT gave every existing row that value; a row image from before the DDL
    that arrives after it is still such a row, and would otherwise set the column to NULL.
    """
    if not defaults:
        return rows
    pairs = F.create_map(*[x for name, text in defaults.items() for x in (F.lit(name), F.lit(text))])
    data = F.col("data")
    missing = F.map_filter(pairs, lambda k, _v: ~F.map_contains_key(data, k))
    filled = F.when(F.col("type") != Op.DELETE.value, F.map_concat(missing, data)).otherwise(data)
    return rows.withColumn("data", filled)


def net_effect(changes: DataFrame, key: tuple[str, ...], columns: list[str]) -> DataFrame:
    """Exactly one change per key, the greatest by (commit_ts, rank, offset)."""
    order = Window.partitionBy(*_slots(columns, key)).orderBy(
        F.col("commit_ts").desc(),
        F.col(RANK_COLUMN).desc(),
        F.col("partition").desc(),
        F.col("offset").desc(),
    )
    return _latest(changes, order, columns)


def converge_effect(changes: DataFrame, key: tuple[str, ...], columns: list[str]) -> DataFrame:
    """Offset order (TiCDC Avro): exactly one change per key, the last one read from its partition.

    Key-affine dispatch puts every change of a key in one partition, where offsets follow commit order;
    DELETEs (tombstones) have no commitTs, so the offset is the only order that covers them.
    """
    order = Window.partitionBy(*_slots(columns, key)).orderBy(
        F.col("partition").desc(), F.col("offset").desc(), F.col(RANK_COLUMN).desc()
    )
    return _latest(changes, order, columns)


def _latest(changes: DataFrame, order: WindowSpec, columns: list[str]) -> DataFrame:
    """The first change per window partition, as a MERGE source: the slots, ``commit_ts`` and the rank."""
    latest = changes.where(F.col(BAD_COLUMN) == "").withColumn("__n", F.row_number().over(order))
    return latest.where("__n = 1").select(*[slot(i) for i in range(len(columns))], "commit_ts", RANK_COLUMN)


# Python types of key values that F.lit turns back into exactly the value Spark compared. Timestamps are
# left out on purpose: a naive datetime literal is read in the Python process's local zone, not the
# session's, and a shifted bound would make the MERGE miss rows. Unbounded keys only lose the pruning.
_BOUNDABLE = (int, str, Decimal, date)


@dataclass(frozen=True, slots=True)
class ChangeSummary:
    """What one pass over a table's normalized changes says."""

    bad: int  # changes whose values do not convert
    bounds: tuple[Any, Any] | None  # min and max of the good changes' first key column, when boundable
    only_inserts: bool  # every good change is an INSERT upstream
    checksums: checksum.Counts = checksum.NO_COUNTS  # of the records, when their checksums were checked


def summarize(
    spark: SparkSession,
    changes: DataFrame,
    key: tuple[str, ...],
    columns: list[str],
    *,
    checked: bool = False,
) -> ChangeSummary:
    """One pass over the normalized changes: how many are bad, the key bounds of the rest, whether the rest
    are all INSERTs, and (``checked``) what the records' checksums showed.

    The bounds let the MERGE skip target files whose key range misses the batch (Delta prunes files by
    min/max statistics only for predicates on the target alone; ``t.k = s.k`` gives none).
    """
    good = F.col(BAD_COLUMN) == ""
    first = F.col(_slots(columns, key[:1])[0])
    with planned_whole(spark):
        row = changes.agg(
            F.count(F.when(~good, 1)).alias("bad"),
            F.min(F.when(good, first)).alias("lo"),
            F.max(F.when(good, first)).alias("hi"),
            F.count(F.when(good & ~F.col(INSERT_COLUMN), 1)).alias("not_inserts"),
            *(checksum.count_states(F.col(checksum.STATE_COLUMN), good) if checked else ()),
        ).first()
    if row is None:
        return ChangeSummary(0, None, False)
    lo, hi = row["lo"], row["hi"]
    bounds = (lo, hi) if _boundable(lo) and _boundable(hi) else None
    counts = checksum.counts_of(row) if checked else checksum.NO_COUNTS
    return ChangeSummary(int(row["bad"]), bounds, int(row["not_inserts"]) == 0, counts)


def first_bad_commit_ts(changes: DataFrame) -> int | None:
    """The commit_ts of the earliest normalized change whose values do not convert (None: there is none)."""
    row = changes.agg(F.min(F.when(F.col(BAD_COLUMN) != "", F.col("commit_ts"))).alias("first")).first()
    return None if row is None or row["first"] is None else int(row["first"])


def _small(spark: SparkSession, path: str) -> bool:
    """Whether the table at ``path`` holds at most ``SMALL_TABLE_BYTES``. Its size comes from the snapshot
    the MERGE reads anyway, so asking costs no Spark job of its own."""
    with planned_whole(spark):
        size = delta_io.detail(spark, path)["sizeInBytes"]
    return size is not None and int(size) <= SMALL_TABLE_BYTES


def _boundable(value: object) -> bool:
    # datetime is a subclass of date; it must not slip through.
    return isinstance(value, _BOUNDABLE) and not isinstance(value, datetime)


@retry(
    retry=retry_if_exception(delta_io.is_commit_conflict),
    stop=stop_after_attempt(5),
    wait=wait_random_exponential(multiplier=0.5, max=30),
    before_sleep=before_sleep_log(logger, logging.WARNING),
    reraise=True,
)
def apply_merge(
    spark: SparkSession,
    path: str,
    source: DataFrame,
    key: tuple[str, ...],
    columns: list[str],
    metadata: str,
    bounds: tuple[Any, Any] | None = None,
    *,
    commit_ts_column: str = COMMIT_TS_COLUMN,
    by_offset: bool = False,
    insert_only: bool = False,
) -> MergeResult:
    """MERGE the net changes with the commit_ts guard; rebuilt on every retry (the schema may change).

    ``bounds``: min and max of the source's first key column. Target rows outside them cannot match, so
    the condition says so, and Delta skips the files whose statistics lie outside.

    ``by_offset`` (TiCDC Avro, Debezium): a DELETE without a commitTs (an Avro tombstone) always deletes,
    one with it only a row older than it; an upsert never overwrites a row with a newer commitTs, and
    without commitTs (no TiDB extension) it always writes.

    ``insert_only``: every change is an INSERT, of a key the target cannot hold at an older commit (changes
    apply in commit order, so a key's earlier DELETE was applied before its INSERT): only the INSERT clause
    is given, which Delta runs as one anti-join write, and a replayed INSERT still changes nothing.

    A table of at most ``SMALL_TABLE_BYTES`` is written copy-on-write (``COPY_ON_WRITE_CONFS``).
    """
    condition = " AND ".join(
        f"t.{quote(k)} = s.{s_k}" for k, s_k in zip(key, _slots(columns, key), strict=True)
    )
    if bounds is not None:
        condition += f" AND t.{quote(key[0])} BETWEEN {sql_literal(bounds[0])} AND {sql_literal(bounds[1])}"
    # Target columns by upstream's names, source columns by slot: pairs of (target, source).
    pairs = [(quote(c), f"s.{slot(i)}") for i, c in enumerate(columns)]
    pairs.append((quote(commit_ts_column), "s.commit_ts"))
    s_ts, t_ts = "s.commit_ts", f"t.{quote(commit_ts_column)}"
    rank = f"s.{quote(RANK_COLUMN)}"
    if by_offset:
        newer_or_same = f"({s_ts} IS NULL OR {t_ts} IS NULL OR {t_ts} <= {s_ts})"
        # A DELETE with its commitTs (Debezium) is placed by it, so a replayed one cannot remove a newer row.
        delete_guard = f"({s_ts} IS NULL OR {t_ts} IS NULL OR {t_ts} < {s_ts})"
    else:
        newer_or_same, delete_guard = f"{t_ts} <= {s_ts}", f"{t_ts} < {s_ts}"
    upsert, delete = f"{rank} = {sql_literal(RANK_UPSERT)}", f"{rank} = {sql_literal(RANK_DELETE)}"
    insert = (
        f"WHEN NOT MATCHED AND {upsert} THEN INSERT ({', '.join(t for t, _ in pairs)}) "
        f"VALUES ({', '.join(v for _, v in pairs)})"
    )
    clauses = (
        [insert]
        if insert_only
        else [
            f"WHEN MATCHED AND {upsert} AND {newer_or_same} THEN UPDATE SET "
            + ", ".join(f"t.{t} = {v}" for t, v in pairs),
            f"WHEN MATCHED AND {delete} AND {delete_guard} THEN DELETE",
            insert,
        ]
    )
    confs = COPY_ON_WRITE_CONFS if _small(spark, path) else {}
    with committing(spark, metadata, confs=confs):
        stats = delta_io.merge(spark, path, source, condition, *clauses)
    if not stats:
        return MergeResult(0, 0, 0)
    return MergeResult(
        upserted=int(stats.get("num_updated_rows", 0) or 0) + int(stats.get("num_inserted_rows", 0) or 0),
        deleted=int(stats.get("num_deleted_rows", 0) or 0),
        source_rows=int(stats.get("num_affected_rows", 0) or 0),
    )
