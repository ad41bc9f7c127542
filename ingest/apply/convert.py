"""TiDB types -> Spark/Delta types, and JSON wire text (Canal-JSON, Simple) -> typed Spark columns.

The only place that maps a ColumnType to a Spark type. Conversion of wire text is derived from the target
column's Spark type and the upstream type in its comment, so the Delta table's own schema is the single
source of truth at apply time.
"""

from __future__ import annotations

import re

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ingest.decode.codec import BinaryText as BinaryText  # how the codec writes bytes as text
from ingest.model import ColumnKind, ColumnType
from ingest.mysql.columns import folds_case
from ingest.mysql.types import UnknownTypeError, parse_mysql_type

# Spark's DECIMAL stops at 38 digits; wider TiDB DECIMALs (up to 65,30) are kept exactly as text.
MAX_SPARK_DECIMAL = 38
UNSIGNED_BIGINT = T.DecimalType(20, 0)
# TiDB renders fsp 0..6 fraction digits; we append the changefeed's zone id before parsing.
_TIMESTAMP_WITH_ZONE = "yyyy-MM-dd HH:mm:ss[.SSSSSS] VV"


def spark_type(column_type: ColumnType) -> T.DataType:
    """The Delta column type that holds every value of a TiDB column type exactly."""
    kind, unsigned = column_type.kind, column_type.unsigned
    integral: dict[ColumnKind, tuple[T.DataType, T.DataType]] = {
        ColumnKind.TINYINT: (T.ByteType(), T.ShortType()),
        ColumnKind.SMALLINT: (T.ShortType(), T.IntegerType()),
        ColumnKind.MEDIUMINT: (T.IntegerType(), T.IntegerType()),
        ColumnKind.INT: (T.IntegerType(), T.LongType()),
        ColumnKind.BIGINT: (T.LongType(), UNSIGNED_BIGINT),
    }
    if kind in integral:
        signed_type, unsigned_type = integral[kind]
        return unsigned_type if unsigned else signed_type
    if kind is ColumnKind.DECIMAL:
        # A DECIMAL whose precision the stream does not say (Canal-JSON's mysqlType is just "decimal", TiCDC
        # Avro in string mode) may be TiDB's DECIMAL(65,30): only text holds every such value exactly.
        if column_type.precision is None or column_type.precision > MAX_SPARK_DECIMAL:
            return T.StringType()
        return T.DecimalType(column_type.precision, column_type.scale or 0)
    if kind is ColumnKind.BIT:
        return T.LongType() if column_type.length is not None and column_type.length < 64 else UNSIGNED_BIGINT
    simple: dict[ColumnKind, T.DataType] = {
        ColumnKind.FLOAT: T.FloatType(),
        ColumnKind.DOUBLE: T.DoubleType(),
        ColumnKind.BINARY: T.BinaryType(),
        ColumnKind.VARBINARY: T.BinaryType(),
        ColumnKind.BLOB: T.BinaryType(),
        ColumnKind.DATE: T.DateType(),
        ColumnKind.DATETIME: T.TimestampNTZType(),
        ColumnKind.TIMESTAMP: T.TimestampType(),
        ColumnKind.YEAR: T.ShortType(),
    }
    # CHAR/VARCHAR/TEXT, TIME (may exceed 24h), ENUM, SET, JSON and VECTOR are kept as text.
    return simple.get(kind, T.StringType())


COMMENT_PREFIX = "tidb: "
# MySQL "zero" dates (0000-00-00, or a zero month or day) have no value in Spark's calendar; they land as
# NULL, by design and documented, instead of sending the whole row to quarantine.
_ZERO_DATE = r"(0000-\d\d-\d\d|\d{4}-00-\d\d|\d{4}-\d\d-00)"
_TWO_TO_64 = 18446744073709551616


_COLLATE = re.compile(r" collate ([a-z0-9_]+)$")


def type_comment(column_type: ColumnType, collation: str | None = None) -> str:
    """A mirrored column's comment: its upstream type, and the collation its DDL stated (the mirror computes
    a REGEXP over the column by it)."""
    return f"{COMMENT_PREFIX}{column_type}" + (f" collate {collation}" if collation else "")


def _recorded(field: T.StructField) -> str | None:
    """What a mirrored column's comment records after ``tidb: `` (None: not a comment of ours)."""
    comment = (field.metadata or {}).get("comment") or ""
    return comment[len(COMMENT_PREFIX) :] if comment.startswith(COMMENT_PREFIX) else None


def column_type_of(field: T.StructField) -> ColumnType | None:
    """The upstream type recorded in a mirrored column's comment (``tidb: enum('a','b')``), if readable."""
    recorded = _recorded(field)
    if recorded is None:
        return None
    try:
        return parse_mysql_type(_COLLATE.sub("", recorded))
    except UnknownTypeError:
        return None


def case_insensitive(schema: T.StructType) -> frozenset[str]:
    """The columns of a mirrored table whose recorded collation folds case."""
    return frozenset(f.name for f in schema.fields if folds_case(collation_of(f)))


def collation_of(field: T.StructField) -> str | None:
    """The collation recorded in a mirrored column's comment (None: TiDB's default)."""
    found = _COLLATE.search(_recorded(field) or "")
    return found.group(1) if found else None


def column_type_for(data_type: T.DataType) -> ColumnType:
    """A TiDB type whose values a Delta column of ``data_type`` holds, for a column whose comment does not
    record one (a table created outside the mirror)."""
    if isinstance(data_type, T.DecimalType):
        return ColumnType(ColumnKind.DECIMAL, precision=data_type.precision, scale=data_type.scale)
    kinds: dict[type, ColumnKind] = {
        T.ByteType: ColumnKind.TINYINT,
        T.ShortType: ColumnKind.SMALLINT,
        T.IntegerType: ColumnKind.INT,
        T.LongType: ColumnKind.BIGINT,
        T.FloatType: ColumnKind.FLOAT,
        T.DoubleType: ColumnKind.DOUBLE,
        T.BinaryType: ColumnKind.VARBINARY,
        T.DateType: ColumnKind.DATE,
        T.TimestampNTZType: ColumnKind.DATETIME,
        T.TimestampType: ColumnKind.TIMESTAMP,
    }
    kind = kinds.get(type(data_type), ColumnKind.TEXT)
    return ColumnType(kind, length=6 if kind in (ColumnKind.DATETIME, ColumnKind.TIMESTAMP) else None)


def from_wire(
    raw: Column,
    data_type: T.DataType,
    timezone: str,
    *,
    column_type: ColumnType | None = None,
    binary: BinaryText = BinaryText.LATIN1,
) -> Column:
    """Convert JSON wire text to a value of ``data_type``; null when it does not convert.

    ``column_type`` (from the column comment) lets ENUM indexes and SET bitmasks become labels, and BIT(64)
    values that an Avro long wrapped negative come back unsigned. Use :func:`conversion_failed` to tell a
    failed conversion from a SQL NULL.
    """
    kind = column_type.kind if column_type is not None else None
    if kind is ColumnKind.ENUM and column_type is not None and column_type.elements:
        return _enum_label(raw, column_type.elements)
    if kind is ColumnKind.SET and column_type is not None and column_type.elements:
        return _set_labels(raw, column_type.elements)
    if isinstance(data_type, T.StringType):
        return raw
    if isinstance(data_type, T.BinaryType):
        if binary is BinaryText.BASE64:
            return F.try_to_binary(raw, F.lit("base64"))
        # ISO-8859-1 maps each code point U+0000..U+00FF back to its byte.
        return F.encode(raw, "ISO-8859-1")
    if isinstance(data_type, T.TimestampType):
        # TIMESTAMP text is local time in the TiCDC server's zone: Simple names the zone next to the value
        # ({"location", "value"}); Canal-JSON and Avro do not, and the configured zone applies.
        is_object = raw.startswith("{")
        text = F.when(is_object, F.get_json_object(raw, "$.value")).otherwise(raw)
        zone = F.when(is_object, F.get_json_object(raw, "$.location")).otherwise(F.lit(timezone))
        value = F.try_to_timestamp(F.concat(text, F.lit(" "), zone), F.lit(_TIMESTAMP_WITH_ZONE))
        return F.when(~text.rlike("^" + _ZERO_DATE), value)
    if isinstance(data_type, T.DateType | T.TimestampNTZType):
        return F.when(~raw.rlike("^" + _ZERO_DATE), raw.try_cast(data_type))
    if kind is ColumnKind.BIT and isinstance(data_type, T.DecimalType):
        wide = raw.try_cast(T.DecimalType(21, 0))
        two_to_64 = F.lit(str(_TWO_TO_64)).cast(T.DecimalType(21, 0))
        return F.when(wide < 0, wide + two_to_64).otherwise(wide).try_cast(data_type)
    return raw.try_cast(data_type)


def _enum_label(raw: Column, elements: tuple[str, ...]) -> Column:
    # 1-based index; 0 is MySQL's empty "invalid" value. Text that is not a number is already a label.
    index = raw.try_cast(T.IntegerType())
    labels = F.array(*[F.lit(e) for e in elements])
    return (
        F.when(index.isNull(), raw)
        .when(index == 0, F.lit(""))
        .when((index > 0) & (index <= len(elements)), F.try_element_at(labels, index))
    )


def _set_labels(raw: Column, elements: tuple[str, ...]) -> Column:
    # Bit i of the mask set <=> the i-th member (0-based) is in the set; labels in definition order.
    mask = raw.try_cast(T.LongType())
    chosen = F.array(
        *[F.when(F.shiftright(mask, i).bitwiseAND(F.lit(1)) == 1, F.lit(e)) for i, e in enumerate(elements)]
    )
    fits = F.shiftright(mask, len(elements)) == 0 if len(elements) < 63 else F.lit(True)
    return F.when(mask.isNull(), raw).when((mask >= 0) & fits, F.array_join(chosen, ","))


def conversion_failed(raw: Column, typed: Column, data_type: T.DataType) -> Column:
    """True where the wire had a value that did not survive conversion exactly."""
    failed = raw.isNotNull() & typed.isNull()
    if isinstance(data_type, T.DateType | T.TimestampNTZType | T.TimestampType):
        zero = raw.rlike("^" + _ZERO_DATE) | raw.rlike('"value" ?: ?"' + _ZERO_DATE)
        failed = failed & ~F.coalesce(zero, F.lit(False))
    if isinstance(data_type, T.DecimalType):
        # Spark rounds extra fraction digits silently; a value with more scale than the column is bad input.
        too_fine = raw.rlike(rf"\.\d{{{data_type.scale}}}\d*[1-9]")
        failed = failed | too_fine
    return failed


_INTEGRAL_ORDER = (T.ByteType(), T.ShortType(), T.IntegerType(), T.LongType())


def is_widening(old: T.DataType, new: T.DataType) -> bool:
    """Whether Delta type widening (Delta 4, Spark 4) can change ``old`` to ``new`` without a rewrite.

    A subset of Delta's rules that TiDB MODIFY COLUMN produces: wider integers, integer to a decimal
    that holds it, float to double, wider decimals (scale and integer digits both not smaller), date to
    timestamp_ntz.
    """
    if old == new:
        return True
    if old in _INTEGRAL_ORDER and new in _INTEGRAL_ORDER:
        return _INTEGRAL_ORDER.index(new) > _INTEGRAL_ORDER.index(old)
    if old in _INTEGRAL_ORDER and isinstance(new, T.DecimalType):
        digits = (3, 5, 10, 20)[_INTEGRAL_ORDER.index(old)]
        return new.precision - new.scale >= digits
    if isinstance(old, T.FloatType) and isinstance(new, T.DoubleType):
        return True
    if isinstance(old, T.DecimalType) and isinstance(new, T.DecimalType):
        return new.scale >= old.scale and new.precision - new.scale >= old.precision - old.scale
    return isinstance(old, T.DateType) and isinstance(new, T.TimestampNTZType)
