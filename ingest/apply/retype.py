"""A MODIFY/CHANGE COLUMN's new type -> what happens to the values the mirror holds. I/O-free Spark Columns.

TiDB converts a column's stored values itself when a type change is not metadata-only, and sends no row
events for it: the mirror must reach the same values on its own. This module says, for an (old, new) pair
of TiDB types, whether the stored values change (and how, as a Spark expression over the old column with
TiDB's conversion rules), or whether only the Delta type widens, or only the comment changes. The rules
were checked against what TiDB itself returns after each change (tests/fixtures/corpora/typechanges):

- to an integer: DECIMAL rounds half away from zero, FLOAT/DOUBLE half to even, text must be an integer;
  YEAR takes two-digit years as TiDB does (1-69 -> 2001-2069, 70-99 -> 1970-1999);
- to DECIMAL: rounded half away from zero at the new scale; FLOAT/DOUBLE through their shortest decimal
  text (2.0005 -> 2.001, where the binary value 2.000499... would give 2.000);
- to text: FLOAT/DOUBLE in their shortest decimal text without an exponent (1e20 -> 100000000000000000000),
  DATETIME/TIMESTAMP with exactly their fraction digits, TIMESTAMP in the changefeed's time zone; CHAR
  drops trailing spaces;
- text to JSON: TiDB's spelling of the document (``decode.tidb_json``);
- DATETIME/TIMESTAMP/TIME to fewer fraction digits round half up (toward the later time: TIME -10:00:00.5
  becomes -10:00:00); DATETIME to DATE drops the time; BINARY(n) pads with 0x00 to n bytes;
- into a narrower type (``mysql.limits``, what TiDB stores under a non-strict ``sql_mode``): a number out
  of range becomes the nearest limit (signed to UNSIGNED, narrower integers and DECIMALs, FLOAT/DOUBLE to
  UNSIGNED), text keeps its first n characters in CHAR(n)/VARCHAR(n), bytes their first n bytes in
  BINARY(n)/VARBINARY(n).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ingest.apply.convert import spark_type
from ingest.model import ColumnKind, ColumnType
from ingest.mysql import limits
from ingest.mysql.json_text import tidb_json_text

_INTEGERS = frozenset(
    {ColumnKind.TINYINT, ColumnKind.SMALLINT, ColumnKind.MEDIUMINT, ColumnKind.INT, ColumnKind.BIGINT}
)
_NUMBERS = _INTEGERS | {ColumnKind.YEAR, ColumnKind.BIT}
_FLOATS = frozenset({ColumnKind.FLOAT, ColumnKind.DOUBLE})
_TEXTS = frozenset({ColumnKind.CHAR, ColumnKind.VARCHAR, ColumnKind.TEXT})
_LABELS = frozenset({ColumnKind.ENUM, ColumnKind.SET})
_BYTES = frozenset({ColumnKind.BINARY, ColumnKind.VARBINARY, ColumnKind.BLOB})
# Our Python UDFs run row at a time. Left unsaid, pyspark picks the Arrow-batched form when the session
# active at import has spark.sql.execution.pythonUDF.arrow.enabled (a notebook's, not the CLI's), and in
# pyspark 4.2.0 that form hangs the task forever over a columnar scan (SPARK-58241): a rewrite of a Delta
# table waited on its Python worker for good.
ROW_UDF = {"useArrow": False}
_MOMENTS = frozenset({ColumnKind.DATETIME, ColumnKind.TIMESTAMP})
_TIME_TEXT = r"^(-?)(\d+):(\d\d):(\d\d)(?:\.(\d{1,6}))?$"


class Retype(Enum):
    """What a type change does to a mirrored column."""

    COMMENT = "comment"  # same Delta type, same values: only the column's recorded TiDB type changes
    WIDEN = "widen"  # same values in a wider Delta type: Delta type widening, no rewrite
    REWRITE = "rewrite"  # the values change (TiDB converts them): the table is rewritten with them
    REFUSE = "refuse"  # TiDB's conversion is not one the mirror reproduces exactly


@dataclass(frozen=True)
class RetypePlan:
    how: Retype
    reason: str = ""  # for REFUSE: why


def plan_retype(old: ColumnType, new: ColumnType, is_widening: bool) -> RetypePlan:
    """How a column of TiDB type ``old`` becomes ``new``; ``is_widening``: Delta can widen the one Delta type
    to the other."""
    reason = _unsupported(old, new)
    if reason:
        return RetypePlan(Retype.REFUSE, reason)
    if _values_change(old, new):
        return RetypePlan(Retype.REWRITE)
    if spark_type(old) == spark_type(new):
        return RetypePlan(Retype.COMMENT)
    return RetypePlan(Retype.WIDEN if is_widening else Retype.REWRITE)


def within_limits(value: Column, old: ColumnType, new: ColumnType) -> Column | None:
    """For a change whose only conversion is to ``new``'s limits (a narrower length or range, signed to
    UNSIGNED), a predicate true of each value that stays exactly as it is; None for any other change."""
    if new.kind is ColumnKind.VARCHAR and old.kind in (ColumnKind.VARCHAR, ColumnKind.TEXT):
        return F.char_length(value) <= F.lit(limits.length(new))
    if new.kind is ColumnKind.VARBINARY and old.kind in (ColumnKind.VARBINARY, ColumnKind.BLOB):
        return F.octet_length(value) <= F.lit(limits.length(new))
    if new.kind in _FLOATS and new.kind is old.kind:
        return value >= 0
    same_numbers = old.kind in _INTEGERS and new.kind in _INTEGERS | {ColumnKind.DECIMAL}
    if old.kind is ColumnKind.DECIMAL and new.kind is ColumnKind.DECIMAL:
        same_numbers = (new.scale or 0) >= (old.scale or 0)
    bounds = limits.number_range(new)
    if same_numbers and bounds is not None:
        return value.between(F.lit(bounds[0]), F.lit(bounds[1]))
    return None


def _fsp(column_type: ColumnType) -> int:
    return column_type.length or 0 if column_type.kind in (*_MOMENTS, ColumnKind.TIME) else 0


def _values_change(old: ColumnType, new: ColumnType) -> bool:
    """Whether TiDB's conversion changes a stored value beyond its Delta type."""
    if new.kind is ColumnKind.CHAR and old.kind is not ColumnKind.CHAR:
        return True  # CHAR reads back without trailing spaces
    if new.kind is ColumnKind.BINARY and (old.kind is not ColumnKind.BINARY or old.length != new.length):
        return True  # BINARY(n) holds n bytes, 0x00-padded
    if new.kind in (*_MOMENTS, ColumnKind.TIME) and old.kind in (*_MOMENTS, ColumnKind.TIME):
        return _fsp(new) < _fsp(old) or (new.kind is not old.kind)
    if new.kind is ColumnKind.TIME and old.kind is not ColumnKind.TIME:
        return True  # text becomes TIME's own spelling
    if new.kind is ColumnKind.JSON and old.kind is not ColumnKind.JSON:
        return True  # text becomes TiDB's spelling of the JSON it holds
    if new.kind is ColumnKind.YEAR and old.kind is not ColumnKind.YEAR:
        return True  # two-digit years
    if new.kind is ColumnKind.SET and old.kind is not ColumnKind.SET:
        return True  # members in definition order
    if new.kind is ColumnKind.ENUM and old.kind is not ColumnKind.ENUM:
        return True  # labels as the definition spells them
    shorter = new.kind in limits.CHARS | limits.BYTES and limits.shortens(old, new)
    if shorter and old.kind in _TEXTS | _BYTES:
        return True  # the first n characters (bytes) of a longer value
    if new.kind in _FLOATS and new.unsigned and not old.unsigned:
        return True  # a negative number becomes 0
    if new.kind in _INTEGERS | {ColumnKind.DECIMAL} and not _same_numbers(old, new):
        return True  # a number out of the new range becomes its nearest limit
    return spark_type(old) != spark_type(new) and not _same_numbers(old, new)


def _same_numbers(old: ColumnType, new: ColumnType) -> bool:
    """Integers (and integer-valued DECIMALs) that every value of ``old`` keeps exactly in ``new``."""
    if old.kind in _NUMBERS and new.kind in _INTEGERS | {ColumnKind.BIT}:
        return limits.holds(old, new)
    if old.kind in _INTEGERS | {ColumnKind.BIT} and new.kind is ColumnKind.DECIMAL:
        return limits.holds(old, new)
    if old.kind is ColumnKind.DECIMAL and new.kind is ColumnKind.DECIMAL:
        return (new.scale or 0) >= (old.scale or 0) and limits.holds(old, new)
    if old.kind is ColumnKind.FLOAT and new.kind is ColumnKind.DOUBLE:
        return True
    return old.kind is ColumnKind.DATE and new.kind is ColumnKind.DATETIME


def _unsupported(old: ColumnType, new: ColumnType) -> str:
    """Why TiDB's conversion from ``old`` to ``new`` is not reproduced here ("" when it is)."""
    if old.kind is ColumnKind.VECTOR or new.kind is ColumnKind.VECTOR:
        return "VECTOR conversions are not reproduced"
    wide = isinstance(spark_type(new), T.StringType) and new.kind is ColumnKind.DECIMAL
    if wide and not (old.kind is ColumnKind.DECIMAL and (new.scale or 0) >= (old.scale or 0)):
        return "a DECIMAL wider than 38 digits is kept as text, and only a change that keeps its digits is"
    if new.kind is ColumnKind.JSON and old.kind not in (ColumnKind.JSON, *_TEXTS):
        return f"{old.kind.value} to JSON is not reproduced"
    if (old.kind in _BYTES) != (new.kind in _BYTES):
        return "a change between bytes and text converts their charset"  # TiDB refuses it too
    if new.kind in _NUMBERS | {ColumnKind.DECIMAL, *_FLOATS} and old.kind in (
        *_MOMENTS,
        ColumnKind.DATE,
        ColumnKind.TIME,
        ColumnKind.JSON,
        *_LABELS,
    ):
        return f"{old.kind.value} to a number is not reproduced"
    if new.kind in (*_MOMENTS, ColumnKind.DATE) and old.kind in (*_NUMBERS, ColumnKind.DECIMAL, *_FLOATS):
        return f"{old.kind.value} to {new.kind.value} is not reproduced"
    if new.kind is ColumnKind.TIME and old.kind not in (ColumnKind.TIME, *_TEXTS):
        return f"{old.kind.value} to time is not reproduced"
    if old.kind is ColumnKind.BIT and new.kind not in _NUMBERS | {ColumnKind.DECIMAL}:
        return "BIT to anything but a number is not reproduced"
    return ""


def converted(value: Column, old: ColumnType, new: ColumnType) -> Column:
    """``value`` (a mirrored column of TiDB type ``old``) as TiDB converts it to ``new``.

    TIMESTAMPs are read and written in the session's time zone: the caller sets it to the changefeed's.
    Where a stored value would not convert, the result is NULL for the caller to count and refuse.
    """
    target = spark_type(new)
    kind = new.kind
    if kind is ColumnKind.YEAR:
        return _to_year(value, old)
    if kind in _INTEGERS:
        return _clamped(_to_integer(value, old, T.DecimalType(38, 0)), new).try_cast(target)
    if kind in _NUMBERS:
        return _to_integer(value, old, target)
    if kind is ColumnKind.DECIMAL and isinstance(target, T.DecimalType):
        return _clamped(_to_decimal(value, old, T.DecimalType(38, new.scale or 0)), new).try_cast(target)
    if kind is ColumnKind.DECIMAL:
        return _widen_decimal_text(value, old, new)
    if kind in _FLOATS:
        number = value.try_cast(target)
        return F.when(number < 0, F.lit(0).cast(target)).otherwise(number) if new.unsigned else number
    if kind in _BYTES:
        limit = limits.length(new)
        kept = F.substring(value, 1, limit) if limit is not None else value
        if kind is not ColumnKind.BINARY:
            return kept
        return F.concat(kept, F.unhex(F.repeat(F.lit("00"), F.lit(new.length or 0) - F.octet_length(kept))))
    if kind is ColumnKind.DATE:
        return value.try_cast(T.DateType())
    if kind in _MOMENTS:
        return _round_moment(
            value if old.kind in _MOMENTS and old.kind is kind else value.try_cast(target), new
        )
    if kind is ColumnKind.TIME:
        return _time_text(value, _fsp(new))
    return _to_text(value, old, new)


def _clamped(number: Column, new: ColumnType) -> Column:
    """``number`` within ``new``'s range: beyond it, the nearest limit (as TiDB stores it)."""
    bounds = limits.number_range(new)
    if bounds is None:
        return number
    low, high = bounds
    # least and greatest skip a NULL; a NULL stays NULL.
    return F.when(number.isNotNull(), F.least(F.greatest(number, F.lit(low)), F.lit(high)))


def _to_integer(value: Column, old: ColumnType, target: T.DataType) -> Column:
    if old.kind is ColumnKind.DECIMAL:
        return F.round(value.try_cast(T.DecimalType(38, old.scale or 0)), 0).try_cast(target)
    if old.kind in _FLOATS:
        # Beyond a DECIMAL(38)'s digits only as a limit: every integer type's range is far inside it.
        rounded = F.bround(value, 0)
        whole = F.when(rounded > 1e37, F.lit(1e37)).when(rounded < -1e37, F.lit(-1e37)).otherwise(rounded)
        return whole.try_cast(target)
    if old.kind in (*_TEXTS, *_LABELS):
        integral = F.trim(value).rlike(r"^[+-]?\d+$")
        return F.when(integral, F.trim(value).try_cast(T.DecimalType(38, 0))).try_cast(target)
    return value.try_cast(target)


def _to_year(value: Column, old: ColumnType) -> Column:
    number = _to_integer(value, old, T.IntegerType())
    two_digits = (
        F.when(number.between(1, 69), number + 2000)
        .when(number.between(70, 99), number + 1900)
        .otherwise(number)
    )
    return (two_digits if old.kind is not ColumnKind.YEAR else number).try_cast(T.ShortType())


def _to_decimal(value: Column, old: ColumnType, target: T.DecimalType) -> Column:
    if old.kind in _FLOATS:
        # Through the shortest decimal text of the float, as TiDB does; Spark's cast from text rounds half up.
        return _float_text(value, old).try_cast(target)
    if old.kind in (*_TEXTS, *_LABELS):
        return F.trim(value).try_cast(target)
    return value.try_cast(target)


def _widen_decimal_text(value: Column, old: ColumnType, new: ColumnType) -> Column:
    """A DECIMAL kept as text (more than 38 digits): the same digits, with the new scale's zeros."""
    scale, before = new.scale or 0, old.scale or 0
    text = value.cast(T.StringType())
    if scale == before:
        return text
    padded = F.concat(text, F.lit("0" * (scale - before)))
    return padded if before else F.concat(text, F.lit("."), F.lit("0" * scale))


def _float_text(value: Column, old: ColumnType) -> Column:
    """A FLOAT/DOUBLE as TiDB writes it: its shortest decimal digits, never with an exponent."""
    number = value.cast(T.FloatType() if old.kind is ColumnKind.FLOAT else T.DoubleType())
    text = number.cast(T.StringType())  # Java's shortest form: 0.1, 100.0, 1.0E20, 1.5E-7
    mantissa = F.regexp_extract(text, r"^(-?)(\d+)\.(\d+)(?:E(-?\d+))?$", 0)
    sign = F.regexp_extract(text, r"^(-?)", 1)
    whole = F.regexp_extract(text, r"^-?(\d+)\.", 1)
    fraction = F.regexp_replace(F.regexp_extract(text, r"\.(\d+)", 1), r"0+$", "")
    exponent = F.coalesce(F.regexp_extract(text, r"E(-?\d+)$", 1).try_cast(T.IntegerType()), F.lit(0))
    digits = F.concat(whole, fraction)  # the point sits after len(whole) + exponent digits
    point = F.length(whole) + exponent
    plain = (
        F.when(point <= 0, F.concat(F.lit("0."), F.repeat(F.lit("0"), -point), digits))
        .when(point >= F.length(digits), F.concat(digits, F.repeat(F.lit("0"), point - F.length(digits))))
        .otherwise(F.concat(F.substring(digits, 1, point), F.lit("."), F.substring(digits, point + 1, 400)))
    )
    # Leading zeros of the whole part ("00.5" from 0.05E1 never occurs, but 0.x does) are trimmed to one.
    plain = F.regexp_replace(plain, r"^0+(\d)", "$1")
    special = text.isin("NaN", "Infinity", "-Infinity")
    return F.when(mantissa == "", F.when(special, text)).otherwise(F.concat(sign, plain))


def _to_text(value: Column, old: ColumnType, new: ColumnType) -> Column:
    if old.kind in _FLOATS:
        text = _float_text(value, old)
    elif old.kind is ColumnKind.DATETIME or old.kind is ColumnKind.TIMESTAMP:
        fraction = "." + "S" * _fsp(old) if _fsp(old) else ""
        text = F.date_format(value, f"yyyy-MM-dd HH:mm:ss{fraction}")
    else:
        text = value.cast(T.StringType())
    limit = limits.length(new) if new.kind in limits.CHARS else None
    if limit is not None:
        text = F.substring(text, 1, limit)  # characters, not bytes
    if new.kind is ColumnKind.CHAR:
        return F.regexp_replace(text, r" +$", "")
    if new.kind is ColumnKind.ENUM and new.elements:
        return _label(text, new.elements)
    if new.kind is ColumnKind.JSON and old.kind is not ColumnKind.JSON:
        return _json_text(text)
    if new.kind is ColumnKind.SET and new.elements:
        members = F.split(text, ",")
        chosen = [F.when(_has_member(members, e), F.lit(e)) for e in new.elements]
        return F.when(text == "", F.lit("")).otherwise(F.array_join(F.array(*chosen), ","))
    return text


def _has_member(members: Column, element: str) -> Column:
    def same(member: Column) -> Column:
        return F.lower(member) == element.lower()

    return F.exists(members, same)


# TiDB re-spells text it turns into JSON (key order, spacing, numbers): pure Python, run where the rows are.
# No hints (not a pandas UDF), row at a time.
_json_text = F.udf(lambda text: tidb_json_text(text), T.StringType(), **ROW_UDF)


def _label(text: Column, elements: tuple[str, ...]) -> Column:
    """An ENUM value as the definition spells its label (TiDB matches labels without case)."""
    choice = F.lit(None).cast(T.StringType())
    for element in reversed(elements):
        choice = F.when(F.lower(text) == element.lower(), F.lit(element)).otherwise(choice)
    return F.when(text == "", F.lit("")).otherwise(choice)


def _round_moment(value: Column, new: ColumnType) -> Column:
    """A DATETIME or TIMESTAMP rounded half up to the new type's fraction digits."""
    unit = 10 ** (6 - _fsp(new))
    if unit == 1:
        return value
    micros = (F.date_part(F.lit("SECOND"), value) * 1_000_000).cast(T.LongType()) % 1_000_000
    shift = F.floor((micros + unit // 2) / unit) * unit - micros
    shifted: Column = F.timestamp_add("MICROSECOND", shift, value)
    return shifted


def _time_text(value: Column, fsp: int) -> Column:
    """TIME text in TiDB's spelling with ``fsp`` fraction digits, rounded half up (toward the later time)."""
    text = F.trim(value.cast(T.StringType()))
    part = [F.regexp_extract(text, _TIME_TEXT, i) for i in range(1, 6)]
    sign = F.when(part[0] == "-", F.lit(-1)).otherwise(F.lit(1))
    fraction = F.rpad(part[4], 6, "0").try_cast(T.LongType())
    seconds = (
        part[1].try_cast(T.LongType()) * 3600 + part[2].try_cast(T.LongType()) * 60 + part[3].cast("long")
    )
    micros = sign * (seconds * 1_000_000 + fraction)
    unit = 10 ** (6 - fsp)
    rounded = F.floor((micros + unit // 2) / unit) * unit
    magnitude = F.abs(rounded)
    whole = F.floor(magnitude / 1_000_000)
    rendered = F.concat(
        F.when(rounded < 0, F.lit("-")).otherwise(F.lit("")),
        F.format_string("%02d", F.floor(whole / 3600)),
        F.lit(":"),
        F.lpad((F.floor(whole / 60) % 60).cast("string"), 2, "0"),
        F.lit(":"),
        F.lpad((whole % 60).cast("string"), 2, "0"),
        F.lit("." if fsp else ""),
        F.substring(F.lpad((magnitude % 1_000_000).cast("string"), 6, "0"), 1, fsp),
    )
    return F.when(text.rlike(_TIME_TEXT), rendered)
