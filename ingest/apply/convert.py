"""TiDB types -> Spark/Delta types, and Canal-JSON wire text -> typed Spark columns.

The only place that maps a ColumnType to a Spark type. Conversion of wire text is derived from the target
column's Spark type alone, so the Delta table's own schema is the single source of truth at apply time.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ingest.model import ColumnKind, ColumnType

# Spark's DECIMAL stops at 38 digits; wider TiDB DECIMALs (up to 65,30) are kept exactly as text.
MAX_SPARK_DECIMAL = 38
# Canal-JSON's default mysqlType says only "decimal". Without a CREATE TABLE to tell the precision, we use
# DECIMAL(38,18); a value that does not fit (or would be rounded) is quarantined, never changed.
UNKNOWN_DECIMAL = T.DecimalType(38, 18)
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
        if column_type.precision is None:
            return UNKNOWN_DECIMAL
        if column_type.precision > MAX_SPARK_DECIMAL:
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


def from_wire(raw: Column, data_type: T.DataType, timezone: str) -> Column:
    """Convert Canal-JSON wire text to a value of ``data_type``; null when it does not convert.

    Use :func:`conversion_failed` to tell a failed conversion from a SQL NULL.
    """
    if isinstance(data_type, T.StringType):
        return raw
    if isinstance(data_type, T.BinaryType):
        # ISO-8859-1 maps each code point U+0000..U+00FF back to its byte (ticdc-protocols.md §2.7).
        return F.encode(raw, "ISO-8859-1")
    if isinstance(data_type, T.TimestampType):
        # TIMESTAMP text is local time in the TiCDC server's zone, with no marker on the wire.
        return F.try_to_timestamp(F.concat(raw, F.lit(" "), F.lit(timezone)), F.lit(_TIMESTAMP_WITH_ZONE))
    return raw.try_cast(data_type)


def conversion_failed(raw: Column, typed: Column, data_type: T.DataType) -> Column:
    """True where the wire had a value that did not survive conversion exactly."""
    failed = raw.isNotNull() & typed.isNull()
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
