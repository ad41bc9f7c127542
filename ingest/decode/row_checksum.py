"""TiDB's row checksum of row images given as wire text, a batch at a time on Arrow arrays. Pure (pyarrow).

TiDB (``pkg/util/rowcodec/common.go``, ``appendDatumForChecksum``) folds a row's columns, in column-id order,
into one CRC-32 (IEEE); NULLs and VIRTUAL generated columns add nothing. Each column adds:

- integers, YEAR, BIT, ENUM (its index) and SET (its bitmask): the 64-bit value, little-endian;
- FLOAT and DOUBLE: the value as a binary64, little-endian (a FLOAT is its binary32 widened; NaN and
  infinities, which TiDB does not store, as 0);
- strings, DATE, DATETIME, TIME, DECIMAL and JSON: a 4-byte little-endian length, then the text's bytes;
  binaries: their length and bytes;
- TIMESTAMP: its text in UTC, as length and bytes.

Whole columns are encoded at once (Arrow casts, NumPy byte views, Arrow's element-wise binary join); only the
CRC itself, binaries' base64 and TIMESTAMPs from another zone go value by value.
"""

from __future__ import annotations

import binascii
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache
from zoneinfo import ZoneInfo

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from ingest.model import Op

INTEGER, WIDE_INTEGER, REAL, SINGLE, TEXT, BINARY, TIMESTAMP, NOTHING = (
    "integer", "wide-integer", "double", "float", "text", "binary", "timestamp", "nothing",
)  # fmt: skip
_UTC = "UTC"


@dataclass(frozen=True)
class SumColumn:
    """One column a checksum covers: its name and how its wire text is encoded (one of the kinds above)."""

    name: str
    encoding: str


def _fixed(data: bytes, width: int, n: int) -> pa.Array:
    return pa.FixedSizeBinaryArray.from_buffers(pa.binary(width), n, [None, pa.py_buffer(data)]).cast(
        pa.binary()
    )


def _no_bad(values: pa.Array) -> np.ndarray:
    return np.zeros(len(values), dtype=bool)


def _parsed(values: pa.Array, parse: Callable[[str], object]) -> tuple[list[object], np.ndarray]:
    """Value by value, where a whole-column cast refuses some value: the parsed values (None: NULL or not
    readable), and where the text did not read."""
    texts = values.to_pylist()
    parsed = [None if t is None else parse(t) for t in texts]
    return parsed, np.array(
        [t is not None and p is None for t, p in zip(texts, parsed, strict=True)], dtype=bool
    )


def _integer(text: str) -> int | None:
    try:
        value = int(text)
    except ValueError:
        return None
    return value & 0xFFFFFFFFFFFFFFFF if -(1 << 63) <= value < (1 << 64) else None


def _integers(values: pa.Array, wide: bool) -> tuple[pa.Array, np.ndarray]:
    """Little-endian 64-bit two's complement of integer text (unsigned values above 2^63 - 1 wrap)."""
    try:
        negative = pc.any(pc.starts_with(values, "-")).as_py()
        target = pa.uint64() if wide and not negative else pa.int64()
        numbers = pc.fill_null(pc.cast(values, target), 0).to_numpy(zero_copy_only=False)
        bad = _no_bad(values)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        parsed, bad = _parsed(values, _integer)
        numbers = np.array([p or 0 for p in parsed], dtype=np.uint64)
    layout = "<u8" if numbers.dtype == np.uint64 else "<i8"
    return _fixed(numbers.astype(layout).tobytes(), 8, len(values)), bad


def _real(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _reals(values: pa.Array, single: bool) -> tuple[pa.Array, np.ndarray]:
    """Little-endian binary64 of FLOAT (read as a binary32, then widened) and DOUBLE text."""
    kind = pa.float32() if single else pa.float64()
    try:
        numbers = pc.cast(values, kind)
        bad = _no_bad(values)
    except pa.ArrowInvalid:
        parsed, bad = _parsed(values, _real)
        numbers = pa.array(parsed, kind)
    doubles = pc.fill_null(numbers, 0.0).to_numpy(zero_copy_only=False).astype(np.float64)
    doubles = np.where(np.isfinite(doubles), doubles, 0.0)
    return _fixed(doubles.astype("<f8").tobytes(), 8, len(values)), bad


def _with_length(data: pa.Array) -> pa.Array:
    lengths = pc.fill_null(pc.binary_length(data), 0).to_numpy(zero_copy_only=False).astype("<u4")
    return pc.binary_join_element_wise(_fixed(lengths.tobytes(), 4, len(data)), data, b"")


def _base64(text: str) -> bytes | None:
    try:
        return binascii.a2b_base64(text, strict_mode=True)
    except (binascii.Error, ValueError):
        return None


@lru_cache(maxsize=65536)
def _timestamp(text: str, zone: str) -> bytes | None:
    """A TIMESTAMP's text in UTC with the fraction digits it came with. Simple sends it as ``{"location",
    "value"}``; Avro as text in the changefeed's zone (``zone``)."""
    if text.startswith("{"):
        try:
            value = orjson.loads(text)
            text, zone = str(value["value"]), str(value["location"])
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return None
    if zone == _UTC or text.startswith("0000-") or "-00" in text[:10]:  # a zero date stays as it is
        return text.encode()
    try:
        local = datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(zone))
    except (ValueError, KeyError):
        return None
    utc = local.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
    digits = len(text) - 20
    return (utc[:19] + (utc[19 : 20 + digits] if digits > 0 else "")).encode()


def _one_by_one(values: pa.Array, convert: Callable[[str], bytes | None]) -> tuple[pa.Array, np.ndarray]:
    parsed, bad = _parsed(values, convert)
    return _with_length(pa.array(parsed, pa.binary())), bad


def encode(values: pa.Array, encoding: str, zone: str) -> tuple[pa.Array, np.ndarray]:
    """What each value (wire text) adds to its row's checksum (NULL: nothing), and where a value does not
    read as its type (its row's checksum then matches nothing)."""
    if encoding in (INTEGER, WIDE_INTEGER):
        pieces, bad = _integers(values, encoding == WIDE_INTEGER)
    elif encoding in (REAL, SINGLE):
        pieces, bad = _reals(values, encoding == SINGLE)
    elif encoding == TEXT:
        pieces, bad = _with_length(values.cast(pa.binary())), _no_bad(values)
    elif encoding == BINARY:
        pieces, bad = _one_by_one(values, _base64)
    elif encoding == TIMESTAMP:
        pieces, bad = _one_by_one(values, lambda text: _timestamp(text, zone))
    else:  # VECTOR: TiDB computes no checksum for a row that has one
        return pa.array([b""] * len(values), pa.binary()), _no_bad(values)
    return pc.if_else(pc.is_null(values), b"", pieces), bad


def checksums(
    values: Mapping[str, pa.Array], columns: Sequence[SumColumn], zone: str, n: int
) -> list[int | None]:
    """The CRC-32 of each of ``n`` row images, given each column's wire text (``values`` by column name; a
    column it lacks is NULL); None where a value does not read as its type."""
    if n == 0:
        return []
    nulls = pa.nulls(n, pa.string())
    pieces, bad = [], np.zeros(n, dtype=bool)
    for column in columns:
        piece, wrong = encode(values.get(column.name, nulls), column.encoding, zone)
        pieces.append(piece)
        bad |= wrong
    if not pieces:
        return [0] * n
    joined = pc.binary_join_element_wise(*pieces, b"") if len(pieces) > 1 else pieces[0]
    return [None if wrong else zlib.crc32(row) for row, wrong in zip(joined.to_pylist(), bad, strict=True)]


def columns_of(maps: pa.MapArray, names: Sequence[str]) -> dict[str, pa.Array]:
    """Each named column's values out of row images (maps of column name to text), in one pass over the
    maps' entries: an entry's row and its column's index place it (a name missing from a row: null)."""
    n = len(maps)
    keys, items = maps.keys, maps.items
    offsets = maps.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
    start = offsets[:-1]
    lengths = np.where(maps.is_null().to_numpy(zero_copy_only=False), 0, np.diff(offsets))
    rows = np.repeat(np.arange(n), lengths)
    # Each entry's position among the flattened keys: its row's start plus its place within the row.
    first = np.cumsum(lengths) - lengths
    within = np.repeat(start - first, lengths) + np.arange(int(lengths.sum()))
    column = pc.index_in(keys.take(pa.array(within)), value_set=pa.array(list(names), pa.string()))
    column = pc.fill_null(column, -1).to_numpy(zero_copy_only=False)
    placed = np.full((n, len(names)), -1, dtype=np.int64)
    known = column >= 0
    placed[rows[known], column[known]] = within[known]
    return {name: items.take(pa.array(placed[:, j], mask=placed[:, j] < 0)) for j, name in enumerate(names)}


def image_sums(
    typ: pa.Array,
    version: pa.Array,
    data: pa.Array,
    old: pa.Array,
    current: pa.Array,
    previous: pa.Array,
    layouts: Mapping[int, Sequence[SumColumn]],
    zone: str,
) -> pa.StructArray:
    """Per record, the checksum of its new image where it carries a current one, and of its old image where
    it carries a previous one (a DELETE's old image is in ``data``), each under its schema version's
    layout; null where there is none to compute, or the version has no layout."""
    n = len(typ)
    sums: dict[str, list[int | None]] = {"new": [None] * n, "old": [None] * n}
    is_delete = pc.fill_null(pc.equal(typ, Op.DELETE.value), False).to_numpy(zero_copy_only=False)
    has_current = pc.fill_null(pc.not_equal(current, 0), False).to_numpy(zero_copy_only=False)
    has_previous = pc.fill_null(pc.not_equal(previous, 0), False).to_numpy(zero_copy_only=False)
    versions = pc.fill_null(version, -1).to_numpy(zero_copy_only=False)
    groups = (
        ("new", data, has_current & ~is_delete),
        ("old", data, has_previous & is_delete),
        ("old", old, has_previous & ~is_delete),
    )
    for target, images, wanted in groups:
        for number in np.unique(versions[wanted]):
            at = np.nonzero(wanted & (versions == number))[0]
            layout = layouts.get(int(number))
            if layout is None:
                continue
            values = columns_of(images.take(pa.array(at)), [c.name for c in layout])
            for row, value in zip(at, checksums(values, layout, zone, len(at)), strict=True):
                sums[target][row] = value
    return pa.StructArray.from_arrays(
        [pa.array(sums["new"], pa.int64()), pa.array(sums["old"], pa.int64())], names=["new", "old"]
    )
