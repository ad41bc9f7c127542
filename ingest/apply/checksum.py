"""TiDB's row checksums, checked against the values exactly as TiCDC sent them, as Spark columns.

With ``tidb_enable_row_level_checksum`` TiDB stores a CRC-32 (IEEE) of each row it writes; TiCDC with
``integrity-check-level = "correctness"`` sends it along (Simple: ``checksum.current`` / ``previous``; Avro:
``_tidb_row_level_checksum``). The sum runs over the row's columns in column-id order, which is the order of
Simple's table schema and of TiCDC Avro's writer schema when checksums are on; NULLs and VIRTUAL generated
columns (which no protocol carries) add nothing. Each column adds its bytes (TiDB's
``pkg/util/rowcodec/common.go``, ``appendDatumForChecksum``):

- integers, YEAR, BIT, ENUM (its index) and SET (its bitmask): the 64-bit value, little-endian;
- FLOAT and DOUBLE: the value as a binary64, little-endian (a FLOAT is its binary32 widened);
- strings, binaries, DATE, DATETIME, TIME, DECIMAL and JSON: a 4-byte little-endian length, then the bytes of
  the text (a binary's own bytes);
- TIMESTAMP: its text in UTC, as length and bytes.

Everything is computed from the row's wire text in the JVM, before any conversion, so a value that a
conversion would round or drop is still caught. Spark SQL has no function that gives a double's bits; they
are assembled from its exponent and fraction, each exact in binary64 arithmetic.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql import types as T

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

    def __add__(self, other: Counts) -> Counts:
        return Counts(
            self.verified + other.verified,
            self.unverified + other.unverified,
            self.mismatched + other.mismatched,
        )


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
_SIGN_BIT = -(1 << 63)
_WIDE = T.DecimalType(21, 0)
_TWO_TO_63 = "9223372036854775808"
_TWO_TO_64 = "18446744073709551616"
# A MySQL "zero" date or a zero part: TiDB sums its text as it is, in any zone.
_ZERO_DATE = r"^(0000-\d\d-\d\d|\d{4}-00-\d\d|\d{4}-\d\d-00)"
_PLAIN_SECONDS = 19  # len("YYYY-MM-DD hh:mm:ss")


@dataclass(frozen=True)
class Layout:
    """The columns a checksum covers, in column-id order, for one schema version (Simple's ``schemaVersion``,
    TiCDC Avro's writer schema id)."""

    columns: tuple[UpstreamColumn, ...]

    @classmethod
    def of(cls, columns: Sequence[UpstreamColumn]) -> Layout:
        return cls(tuple(c for c in columns if not c.virtual))


def _let(value: Column, body: Callable[[Column], Column]) -> Column:
    """``body`` over ``value`` computed once. Spark copies a column's expression wherever the column is used,
    so an expression that uses a value several times, nested, grows exponentially; a lambda variable is a
    reference."""
    return F.get(F.transform(F.array(value), body), 0)


def _little_endian_hex(value: Column, width: int) -> Column:
    """The low ``width`` bytes of a long, least significant first, as hex."""
    big_endian = F.substring(F.lpad(F.hex(value), 16, "0"), 17 - 2 * width, 2 * width)
    return _reversed_bytes(big_endian)


def _reversed_bytes(hex_digits: Column) -> Column:
    # Reversing the digits reverses the bytes with each byte's two digits swapped; swap them back.
    return F.regexp_replace(F.reverse(hex_digits), "(.)(.)", "$2$1")


def _with_length(data: Column) -> Column:
    """A string's UTF-8 bytes or a binary's bytes, after their 4-byte little-endian length, as hex."""
    return _let(
        data, lambda d: F.concat(_little_endian_hex(F.octet_length(d).cast(T.LongType()), 4), F.hex(d))
    )


def _integer_hex(raw: Column) -> Column:
    """Integer text (signed, or unsigned up to 2^64 - 1) -> its 64-bit two's complement, little-endian, as
    hex; null for text that is not such a number."""

    def bits(wide: Column) -> Column:
        return F.when(wide >= F.lit(_TWO_TO_63).cast(_WIDE), wide - F.lit(_TWO_TO_64).cast(_WIDE)).otherwise(
            wide
        )

    return _little_endian_hex(_let(raw.try_cast(_WIDE), bits).cast(T.LongType()), 8)


def _double_bits(value: Column, negative: Column) -> Column:
    """The IEEE-754 bits of a finite double as a long (NaN and infinities, which TiDB does not store, as 0).

    ``floor(log2(a))`` may be one off; comparing with exact powers of two corrects it. Dividing a normal
    value by its power of two and scaling a subnormal one by 2^1022 and 2^52 are exact in binary64.
    """

    def exponent_of(a: Column) -> Column:
        return _let(
            F.floor(F.log2(a)),
            lambda guess: _let(
                F.pow(F.lit(2.0), guess),
                lambda power: F.when(a < power, guess - 1).when(a >= power * 2, guess + 1).otherwise(guess),
            ),
        )

    def bits(a: Column, exponent: Column) -> Column:
        normal = a >= F.lit(2.0**-1022)
        fraction = F.when(normal, (a / F.pow(F.lit(2.0), exponent) - 1) * F.lit(2.0**52)).otherwise(
            a * F.lit(2.0**1022) * F.lit(2.0**52)
        )
        biased = F.when(normal, exponent + 1023).otherwise(F.lit(0))
        magnitude = F.shiftleft(biased.cast(T.LongType()), 52).bitwiseOR(fraction.cast(T.LongType()))
        magnitude = F.when(a == 0, F.lit(0).cast(T.LongType())).otherwise(magnitude)
        return F.when(negative, magnitude.bitwiseOR(F.lit(_SIGN_BIT))).otherwise(magnitude)

    def of(v: Column) -> Column:
        finite = ~F.isnan(v) & (F.abs(v) != F.lit(float("inf")))
        signed = _let(F.abs(v), lambda a: _let(F.when(a > 0, exponent_of(a)), lambda e: bits(a, e)))
        return (
            F.when(v.isNull(), F.lit(None).cast(T.LongType()))
            .when(finite, signed)
            .otherwise(F.lit(0).cast(T.LongType()))
        )

    return _let(value, of)


def _timestamp_text(raw: Column, timezone: str) -> Column:
    """A TIMESTAMP's text in UTC, with as many fraction digits as it came with. Simple sends it as
    ``{"location", "value"}``; Avro as text in the TiCDC server's zone (``timezone``)."""

    def in_utc(text: Column, zone: Column) -> Column:
        utc = F.convert_timezone(zone, F.lit("UTC"), text.try_cast(T.TimestampNTZType()))
        digits = F.length(text) - (_PLAIN_SECONDS + 1)
        fraction = _let(
            utc,
            lambda u: F.concat(
                F.date_format(u, "yyyy-MM-dd HH:mm:ss"),
                F.when(
                    digits > 0, F.concat(F.lit("."), F.substring(F.date_format(u, "SSSSSS"), 1, digits))
                ).otherwise(F.lit("")),
            ),
        )
        as_sent = (zone == F.lit("UTC")) | text.rlike(_ZERO_DATE)
        return F.when(as_sent, text).otherwise(fraction)

    def of(r: Column) -> Column:
        is_object = r.startswith("{")
        text = F.when(is_object, F.get_json_object(r, "$.value")).otherwise(r)
        zone = F.when(is_object, F.get_json_object(r, "$.location")).otherwise(F.lit(timezone))
        return _let(text, lambda t: _let(zone, lambda z: in_utc(t, z)))

    return _let(raw, of)


def column_hex(raw: Column, column: UpstreamColumn, timezone: str) -> Column:
    """What one column adds to the checksum, as hex: empty for NULL; null when the text does not read as its
    type (the checksum then cannot match)."""
    kind = column.type.kind
    if kind in _INTEGERS:
        piece = _integer_hex(raw)
    elif kind is ColumnKind.FLOAT:
        wide = raw.try_cast(T.FloatType()).cast(T.DoubleType())
        piece = _little_endian_hex(_double_bits(wide, raw.startswith("-")), 8)
    elif kind is ColumnKind.DOUBLE:
        piece = _little_endian_hex(_double_bits(raw.try_cast(T.DoubleType()), raw.startswith("-")), 8)
    elif kind in _BINARIES:
        piece = _with_length(F.try_to_binary(raw, F.lit("base64")))
    elif kind is ColumnKind.TIMESTAMP:
        piece = _with_length(_timestamp_text(raw, timezone))
    elif kind in _TEXTS:
        piece = _with_length(raw)
    else:  # VECTOR: TiDB computes no checksum for a row that has one
        piece = F.lit("")
    return F.when(raw.isNull(), F.lit("")).otherwise(piece)


def row_checksum(image: Column, layout: Layout, timezone: str) -> Column:
    """The CRC-32 of one row image (a map of column name to wire text), as a long."""
    pieces = [column_hex(image.getItem(c.name), c, timezone) for c in layout.columns]
    return F.crc32(F.unhex(F.concat(*pieces))) if pieces else F.lit(0).cast(T.LongType())


def _by_version(image: Column, layouts: Mapping[int, Layout], timezone: str) -> Column:
    version = F.col("schema_version")
    result: Column | None = None
    for number, layout in layouts.items():
        checksum = row_checksum(image, layout, timezone)
        result = (
            F.when(version == number, checksum)
            if result is None
            else result.when(version == number, checksum)
        )
    return F.lit(None).cast(T.LongType()) if result is None else result


def _mismatch(which: str, expected: Column, computed: Column) -> Column:
    found = F.coalesce(computed.cast("string"), F.lit("none (a value does not read as its column type)"))
    return F.concat(
        F.lit(f"checksum mismatch{which}: expected "), expected.cast("string"), F.lit(", computed "), found
    )


_COMPUTED_NEW, _COMPUTED_OLD = "_checksum_new", "_checksum_old"


def checked(
    rows: DataFrame, layouts: Mapping[int, Layout], timezone: str, *, require: bool, deletes_carry_none: bool
) -> DataFrame:
    """The decoded rows with their verdict: why each must not be applied (:data:`PROBLEM_COLUMN`, "" when
    nothing is wrong), and what its check found (:data:`STATE_COLUMN`: verified, none, mismatch; null when
    it carries no checksum fields).

    ``require``: a record without checksum fields is bad too, except a DELETE of a protocol whose deletes
    carry none (``deletes_carry_none``, TiCDC Avro's tombstones). Each step is a projection of its own, so
    the sums are computed once per record, not once per use.
    """
    typ, data = F.col("type"), F.col("data")
    current, previous = F.col("checksum_current"), F.col("checksum_previous")
    is_delete = typ == Op.DELETE.value
    checks_new = F.coalesce(current, F.lit(0)) != 0
    checks_old = F.coalesce(previous, F.lit(0)) != 0
    # Downstream a DELETE's row is in "data": it is the old image the previous checksum covers.
    new_image = F.when(~is_delete, data)
    old_image = F.when(is_delete, data).otherwise(F.col("old"))
    computed = rows.withColumns(
        {
            _COMPUTED_NEW: F.when(checks_new, _by_version(new_image, layouts, timezone)),
            _COMPUTED_OLD: F.when(checks_old, _by_version(old_image, layouts, timezone)),
        }
    )
    missing = current.isNull() & previous.isNull()
    if deletes_carry_none:
        missing = missing & ~is_delete
    judged = computed.withColumn(
        PROBLEM_COLUMN, _problem(checks_new, checks_old, missing if require else None)
    )
    problem = F.col(PROBLEM_COLUMN)
    state = (
        F.when(problem != "", F.lit(STATE_MISMATCH))
        .when(checks_new | checks_old, F.lit(STATE_VERIFIED))
        .when(~(current.isNull() & previous.isNull()), F.lit(STATE_NONE))
    )
    return judged.withColumn(STATE_COLUMN, state).drop(_COMPUTED_NEW, _COMPUTED_OLD)


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
