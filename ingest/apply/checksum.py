"""TiDB's row checksums, checked against the values exactly as TiCDC sent them: the verdict per record.

With ``tidb_enable_row_level_checksum`` TiDB stores a CRC-32 of each row it writes; TiCDC with
``integrity-check-level = "correctness"`` sends it along (Simple: ``checksum.current`` / ``previous``; Avro:
``_tidb_row_level_checksum``). The sum runs over the row's columns in column-id order, which is the order of
Simple's table schema and of TiCDC Avro's writer schema when checksums are on. It is computed from the
row's wire text, before any conversion, so a value a conversion would round or drop is still caught, in an
Arrow UDF on the executors (``ingest.decode.row_checksum``: Spark SQL has no function for a double's bits
or little-endian bytes, and the expressions that build them for a wide table outgrow what Spark compiles).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ingest.decode import row_checksum as rc
from ingest.model import Column as UpstreamColumn
from ingest.model import ColumnKind, Op

# Per record: why it must not be applied ("" when nothing is wrong), and what its check found.
PROBLEM_COLUMN = "_checksum_problem"
STATE_COLUMN = "_checksum_state"
STATE_VERIFIED = "verified"  # every checksum it carries matched, and it carries one
STATE_NONE = "none"  # it carries none to check (a split update's halves carry 0, an Avro DELETE nothing)
STATE_MISMATCH = "mismatch"


@dataclass(frozen=True)
class Counts:
    """What the checksums of a set of records showed: applied and verified, applied carrying none to check,
    and mismatched (quarantined)."""

    verified: int = 0
    unverified: int = 0
    mismatched: int = 0


NO_COUNTS = Counts()

_INTEGERS = frozenset(
    {
        ColumnKind.TINYINT, ColumnKind.SMALLINT, ColumnKind.MEDIUMINT, ColumnKind.INT, ColumnKind.BIGINT,
        ColumnKind.YEAR, ColumnKind.BIT, ColumnKind.ENUM, ColumnKind.SET,
    }
)  # fmt: skip
_BINARIES = frozenset({ColumnKind.BINARY, ColumnKind.VARBINARY, ColumnKind.BLOB})
_TEXTS = frozenset(
    {
        ColumnKind.CHAR, ColumnKind.VARCHAR, ColumnKind.TEXT, ColumnKind.DATE, ColumnKind.DATETIME,
        ColumnKind.TIME, ColumnKind.DECIMAL, ColumnKind.JSON,
    }
)  # fmt: skip


@dataclass(frozen=True)
class Layout:
    """The columns a checksum covers, in column-id order, for one schema version (Simple's ``schemaVersion``,
    TiCDC Avro's writer schema id)."""

    columns: tuple[UpstreamColumn, ...]

    @classmethod
    def of(cls, columns: Sequence[UpstreamColumn]) -> Layout:
        return cls(tuple(c for c in columns if not c.virtual))


_COMPUTED = "_checksum_sums"
_COMPUTED_NEW, _COMPUTED_OLD = "_checksum_new", "_checksum_old"
_SUMS = T.StructType([T.StructField("new", T.LongType()), T.StructField("old", T.LongType())])


def _arrow_inputs() -> list[Any]:
    import pyarrow as pa

    image = pa.map_(pa.string(), pa.string())
    return [pa.string(), pa.int64(), image, image, pa.int64(), pa.int64()]


def encoding(kind: ColumnKind) -> str:
    """How a column's wire text goes into the checksum (``ingest.decode.row_checksum``)."""
    if kind in _INTEGERS:
        return rc.WIDE_INTEGER if kind in (ColumnKind.BIGINT, ColumnKind.BIT, ColumnKind.SET) else rc.INTEGER
    if kind is ColumnKind.FLOAT:
        return rc.SINGLE
    if kind is ColumnKind.DOUBLE:
        return rc.REAL
    if kind in _BINARIES:
        return rc.BINARY
    if kind is ColumnKind.TIMESTAMP:
        return rc.TIMESTAMP
    return rc.TEXT if kind in _TEXTS else rc.NOTHING


def _sums(layouts: Mapping[int, Layout], timezone: str) -> Callable[..., Column]:
    """The Arrow UDF that computes each record's sums on the executors, given its layouts by version."""
    plain = {
        v: tuple(rc.SumColumn(c.name, encoding(c.type.kind)) for c in layout.columns)
        for v, layout in layouts.items()
    }

    def sums(typ, version, data, old, current, previous):  # type: ignore[no-untyped-def]
        return rc.image_sums(typ, version, data, old, current, previous, plain, timezone)

    return _arrow_udf(sums)


def _arrow_udf(function: Callable[..., Any]) -> Callable[..., Column]:
    """``function`` (Arrow arrays in, a struct array out) as a UDF: an Arrow UDF where pyspark has them (4.1
    on), else a pandas UDF that hands it the same arrays (Databricks Runtime 17, Spark 4.0)."""
    arrow_udf = getattr(F, "arrow_udf", None)
    if arrow_udf is not None:
        return arrow_udf(_SUMS)(function)  # type: ignore[no-any-return]

    import pandas as pd
    import pyarrow as pa

    def on_pandas(
        typ: pd.Series,
        version: pd.Series,
        data: pd.Series,
        old: pd.Series,
        current: pd.Series,
        previous: pd.Series,
    ) -> pd.DataFrame:
        series = (typ, version, data, old, current, previous)
        arrays = [pa.array(s.tolist(), t) for s, t in zip(series, _arrow_inputs(), strict=True)]
        result = function(*arrays)
        flat = pa.Table.from_arrays(result.flatten(), names=[f.name for f in _SUMS.fields])
        return flat.to_pandas(integer_object_nulls=True)

    # pyspark reads the annotations to tell the UDF's kind; under postponed evaluation they are strings it
    # cannot resolve from here.
    on_pandas.__annotations__ = {
        **dict.fromkeys(("typ", "version", "data", "old", "current", "previous"), pd.Series),
        "return": pd.DataFrame,
    }
    return F.pandas_udf(on_pandas, _SUMS)  # type: ignore[attr-defined,no-any-return]


def _mismatch(which: str, expected: Column, computed: Column) -> Column:
    found = F.coalesce(computed.cast("string"), F.lit("none (a value does not read as its column type)"))
    return F.concat(
        F.lit(f"checksum mismatch{which}: expected "), expected.cast("string"), F.lit(", computed "), found
    )


def checked(
    rows: DataFrame, layouts: Mapping[int, Layout], timezone: str, *, require: bool, deletes_carry_none: bool
) -> DataFrame:
    """The decoded rows with their verdict: why each must not be applied (:data:`PROBLEM_COLUMN`, "" when
    nothing is wrong), and what its check found (:data:`STATE_COLUMN`: verified, none, mismatch; null when
    it carries no checksum fields).

    ``require``: a record without checksum fields is bad too, except a DELETE of a protocol whose deletes
    carry none (``deletes_carry_none``, TiCDC Avro's tombstones). Only the images of records that carry a
    checksum go to the Python worker.
    """
    current, previous = F.col("checksum_current"), F.col("checksum_previous")
    checks_new, checks_old = F.coalesce(current, F.lit(0)) != 0, F.coalesce(previous, F.lit(0)) != 0
    carries = checks_new | checks_old
    sums = _sums(layouts, timezone)(
        F.col("type"), F.col("schema_version"), F.when(carries, F.col("data")), F.when(carries, F.col("old")),
        current, previous,
    )  # fmt: skip
    computed = rows.withColumn(_COMPUTED, sums).withColumns(
        {_COMPUTED_NEW: F.col(_COMPUTED)["new"], _COMPUTED_OLD: F.col(_COMPUTED)["old"]}
    )
    missing = current.isNull() & previous.isNull()
    if deletes_carry_none:
        missing = missing & (F.col("type") != Op.DELETE.value)
    judged = computed.withColumn(
        PROBLEM_COLUMN, _problem(checks_new, checks_old, missing if require else None)
    )
    problem = F.col(PROBLEM_COLUMN)
    state = (
        F.when(problem != "", F.lit(STATE_MISMATCH))
        .when(checks_new | checks_old, F.lit(STATE_VERIFIED))
        .when(~(current.isNull() & previous.isNull()), F.lit(STATE_NONE))
    )
    return judged.withColumn(STATE_COLUMN, state).drop(_COMPUTED, _COMPUTED_NEW, _COMPUTED_OLD)


def _problem(checks_new: Column, checks_old: Column, missing: Column | None) -> Column:
    current, previous = F.col("checksum_current"), F.col("checksum_previous")
    computed_new, computed_old = F.col(_COMPUTED_NEW), F.col(_COMPUTED_OLD)
    new_wrong = checks_new & ~F.coalesce(computed_new == current, F.lit(False))
    old_wrong = checks_old & ~F.coalesce(computed_old == previous, F.lit(False))
    corrupted = F.concat(
        F.lit("checksum mismatch: TiCDC marked the row corrupted (expected "),
        current.cast("string"),
        F.lit(")"),
    )
    problem = (
        F.when(F.coalesce(F.col("checksum_corrupted"), F.lit(False)), corrupted)
        .when(new_wrong, _mismatch("", current, computed_new))
        .when(old_wrong, _mismatch(" in the old image", previous, computed_old))
    )
    if missing is not None:
        problem = problem.when(
            missing,
            F.lit("no row checksum, and row-checksums = require: the changefeed needs [integrity] "
                  'integrity-check-level = "correctness"'),
        )  # fmt: skip
    return F.coalesce(problem, F.lit(""))


def count_states(state: Column, good: Column) -> tuple[Column, Column, Column]:
    """Aggregates over normalized changes (whose state is set on one change per record): verified and
    unverified among the good ones, and the mismatches."""
    return (
        F.count(F.when(good & (state == STATE_VERIFIED), 1)).alias("checksums_verified"),
        F.count(F.when(good & (state == STATE_NONE), 1)).alias("checksums_unverified"),
        F.count(F.when(state == STATE_MISMATCH, 1)).alias("checksums_mismatched"),
    )


def counts_of(row: Row) -> Counts:
    """The :func:`count_states` aggregates of one collected row."""
    return Counts(
        int(row["checksums_verified"]), int(row["checksums_unverified"]), int(row["checksums_mismatched"])
    )
