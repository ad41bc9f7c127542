"""What a TiDB column type can hold: the range of its numbers and the length of its text or bytes. Pure.

A type change TiDB accepts under a non-strict ``sql_mode`` converts every stored value into the new type's
limits: a number out of range becomes the nearest limit (``-1`` into ``INT UNSIGNED`` is ``0``, ``300`` into
``TINYINT`` is ``127``), text longer than ``VARCHAR(n)``/``CHAR(n)`` keeps its first ``n`` characters and
bytes longer than ``VARBINARY(n)``/``BINARY(n)`` their first ``n`` bytes. In strict mode TiDB refuses such a
change when a value does not fit, so whichever mode upstream ran in, converting to the limits is what TiDB
stored.
"""

from __future__ import annotations

from decimal import Decimal

from ingest.model import ColumnKind, ColumnType

_INTEGER_BITS = {
    ColumnKind.TINYINT: 8, ColumnKind.SMALLINT: 16, ColumnKind.MEDIUMINT: 24, ColumnKind.INT: 32,
    ColumnKind.BIGINT: 64,
}  # fmt: skip
CHARS = frozenset({ColumnKind.CHAR, ColumnKind.VARCHAR})
BYTES = frozenset({ColumnKind.BINARY, ColumnKind.VARBINARY})


def number_range(column_type: ColumnType) -> tuple[Decimal, Decimal] | None:
    """The lowest and highest value of an integer, DECIMAL, YEAR or BIT type (None: another type, or a
    DECIMAL whose precision is not known)."""
    kind = column_type.kind
    if kind in _INTEGER_BITS:
        bits = _INTEGER_BITS[kind]
        if column_type.unsigned:
            return Decimal(0), Decimal(2**bits - 1)
        return Decimal(-(2 ** (bits - 1))), Decimal(2 ** (bits - 1) - 1)
    if kind is ColumnKind.DECIMAL:
        if column_type.precision is None:
            return None
        scale = column_type.scale or 0
        high = Decimal(10) ** (column_type.precision - scale) - Decimal(1).scaleb(-scale)
        return (Decimal(0) if column_type.unsigned else -high), high
    if kind is ColumnKind.YEAR:
        return Decimal(0), Decimal(2155)
    if kind is ColumnKind.BIT:
        return Decimal(0), Decimal(2 ** (column_type.length or 1) - 1)
    return None


def holds(old: ColumnType, new: ColumnType) -> bool:
    """Whether every number of ``old`` is within ``new``'s range (False when either range is unknown)."""
    before, after = number_range(old), number_range(new)
    if before is None or after is None:
        return False
    return after[0] <= before[0] and before[1] <= after[1]


def length(column_type: ColumnType) -> int | None:
    """The characters of a CHAR/VARCHAR or the bytes of a BINARY/VARBINARY it holds (None: no such limit
    known, as for TEXT and BLOB)."""
    if column_type.kind in CHARS | BYTES:
        return column_type.length or (1 if column_type.kind in (ColumnKind.CHAR, ColumnKind.BINARY) else None)
    return None


def shortens(old: ColumnType, new: ColumnType) -> bool:
    """Whether ``new`` holds fewer characters (or bytes) than a value of ``old`` may have."""
    limit = length(new)
    if limit is None:
        return False
    before = length(old)
    return before is None or limit < before
