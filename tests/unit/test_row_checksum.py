"""What each column adds to TiDB's row checksum, computed from the wire text a column at a time, against the
bytes TiDB's ``appendDatumForChecksum`` appends (written out here with ``struct``), and the CRC-32 of whole
rows against ``zlib``. TIMESTAMPs from a zone other than UTC, which the kit's corpora (a UTC TiCDC server)
cannot carry: Simple names the zone next to the value, Avro's text is in the changefeed's configured zone.
The corpora's own checksums are verified through Spark in tests/integration (test_row_checksums)."""

from __future__ import annotations

import struct
import zlib

import pyarrow as pa

from ingest.apply.checksum import encoding
from ingest.decode import row_checksum as rc
from ingest.model import ColumnKind


def _int(v: int) -> str:
    return struct.pack("<Q", v & 0xFFFFFFFFFFFFFFFF).hex().upper()


def _double(v: float) -> str:
    return struct.pack("<d", v).hex().upper()


def _float(v: float) -> str:
    return _double(struct.unpack("<f", struct.pack("<f", v))[0])


def _text(b: bytes) -> str:
    return (struct.pack("<I", len(b)) + b).hex().upper()


K = ColumnKind
# (kind, wire text, the zone Avro's TIMESTAMP text is in, what TiDB appends)
CASES = [
    (K.BIGINT, "-9223372036854775808", "UTC", _int(-(2**63))),
    (K.BIGINT, "18446744073709551615", "UTC", _int(2**64 - 1)),
    (K.INT, "-2147483648", "UTC", _int(-(2**31))),
    (K.BIT, "9223372036854775808", "UTC", _int(2**63)),
    (K.ENUM, "3", "UTC", _int(3)),
    (K.SET, "5", "UTC", _int(5)),
    (K.YEAR, "2155", "UTC", _int(2155)),
    (K.DOUBLE, "1.7976931348623157e308", "UTC", _double(1.7976931348623157e308)),
    (K.DOUBLE, "-2.2250738585072014e-308", "UTC", _double(-2.2250738585072014e-308)),
    (K.DOUBLE, "2.225073858507201e-308", "UTC", _double(2.225073858507201e-308)),  # the largest subnormal
    (K.DOUBLE, "5e-324", "UTC", _double(5e-324)),
    (K.DOUBLE, "-0", "UTC", _double(-0.0)),
    (K.DOUBLE, "1", "UTC", _double(1.0)),
    (K.DOUBLE, "0.1", "UTC", _double(0.1)),
    (K.FLOAT, "-340282350000000000000000000000000000000", "UTC", _float(-3.4028235e38)),
    (K.FLOAT, "1.1", "UTC", _float(1.1)),
    (K.FLOAT, "1.100000023841858", "UTC", _float(1.1)),  # Avro's binary32 widened, as text
    (K.FLOAT, "1.4e-45", "UTC", _float(1.4e-45)),
    (K.DECIMAL, "-0.000001", "UTC", _text(b"-0.000001")),
    (K.VARCHAR, "h\u00e9llo \U0001f30d", "UTC", _text("h\u00e9llo \U0001f30d".encode())),
    (K.VARBINARY, "AP9/gA==", "UTC", _text(b"\x00\xff\x7f\x80")),
    (K.BINARY, "", "UTC", _text(b"")),
    (K.JSON, '{"a": [1, "x"]}', "UTC", _text(b'{"a": [1, "x"]}')),
    (K.TIME, "-838:59:59.000000", "UTC", _text(b"-838:59:59.000000")),
    (K.DATETIME, "9999-12-31 23:59:59.999999", "UTC", _text(b"9999-12-31 23:59:59.999999")),
    (
        K.TIMESTAMP,
        '{"location":"Asia/Shanghai","value":"2024-06-01 08:00:00.5"}',
        "UTC",
        _text(b"2024-06-01 00:00:00.5"),
    ),
    (
        K.TIMESTAMP,
        '{"location":"UTC","value":"2038-01-19 03:14:07.999999"}',
        "UTC",
        _text(b"2038-01-19 03:14:07.999999"),
    ),
    (K.TIMESTAMP, "1970-01-01 08:00:01", "Asia/Shanghai", _text(b"1970-01-01 00:00:01")),
    (K.TIMESTAMP, "2024-03-10 03:30:00.123", "America/New_York", _text(b"2024-03-10 07:30:00.123")),
    (K.TIMESTAMP, "0000-00-00 00:00:00", "Asia/Shanghai", _text(b"0000-00-00 00:00:00")),
]


def test_each_column_adds_the_bytes_tidb_appends():
    found = {}
    for i, (kind, raw, zone, _) in enumerate(CASES):
        pieces, bad = rc.encode(pa.array([raw, None]), encoding(kind), zone)
        assert pieces.to_pylist()[1] == b"" and not bad.any()  # NULL adds nothing
        found[i] = pieces.to_pylist()[0].hex().upper()
    assert found == {i: expected for i, (_, _, _, expected) in enumerate(CASES)}


def test_a_row_sums_its_columns_in_order_and_a_value_that_does_not_read_matches_nothing():
    columns = [rc.SumColumn("id", rc.INTEGER), rc.SumColumn("note", rc.TEXT), rc.SumColumn("d", rc.REAL)]
    values = {
        "id": pa.array(["7", "seven", "8"]),
        "note": pa.array([None, "x", "y"]),
        "d": pa.array(["2.5", "1", "nan?"]),
    }
    sums = rc.checksums(values, columns, "UTC", 3)
    assert sums == [zlib.crc32(bytes.fromhex(_int(7) + _double(2.5))), None, None]


def test_each_image_is_summed_under_its_own_schema_version():
    layouts = {
        1: [rc.SumColumn("id", rc.INTEGER)],
        2: [rc.SumColumn("id", rc.INTEGER), rc.SumColumn("v", rc.TEXT)],
    }
    data = pa.array(
        [[("id", "1")], [("id", "2"), ("v", "a")], [("id", "3")]], pa.map_(pa.string(), pa.string())
    )
    old = pa.array([None, [("id", "2"), ("v", "b")], None], pa.map_(pa.string(), pa.string()))
    sums = rc.image_sums(
        pa.array(["INSERT", "UPDATE", "DELETE"]), pa.array([1, 2, 9]), data, old,
        pa.array([5, 5, 0]), pa.array([0, 5, 5]), layouts, "UTC",
    ).to_pylist()  # fmt: skip
    assert sums[0] == {"new": zlib.crc32(bytes.fromhex(_int(1))), "old": None}
    assert sums[1] == {
        "new": zlib.crc32(bytes.fromhex(_int(2) + _text(b"a"))),
        "old": zlib.crc32(bytes.fromhex(_int(2) + _text(b"b"))),
    }
    assert sums[2] == {"new": None, "old": None}  # a version with no layout: nothing to match
