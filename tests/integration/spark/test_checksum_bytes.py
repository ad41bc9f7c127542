"""What each column adds to TiDB's row checksum, computed by Spark from the wire text, against the bytes
TiDB's ``appendDatumForChecksum`` appends (written out here with ``struct``), and the CRC-32 of a whole row
against ``zlib``. TIMESTAMPs from a zone other than UTC, which the kit's corpora (a UTC TiCDC server) cannot
carry: Simple names the zone next to the value, Avro's text is in the changefeed's configured zone."""

from __future__ import annotations

import struct
import zlib

from pyspark.sql import functions as F

from ingest.apply import checksum
from ingest.model import Column, ColumnKind, ColumnType


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


def test_each_column_adds_the_bytes_tidb_appends(spark):
    frame = spark.createDataFrame([(raw,) for _, raw, _, _ in CASES], "raw string")
    pieces = [
        checksum.column_hex(F.col("raw"), Column("c", ColumnType(kind)), zone).alias(f"c{i}")
        for i, (kind, _, zone, _) in enumerate(CASES)
    ]
    rows = frame.select(*pieces).collect()
    found = {i: rows[i][f"c{i}"] for i in range(len(CASES))}
    assert found == {i: expected for i, (_, _, _, expected) in enumerate(CASES)}


def test_a_row_sums_its_columns_in_order_and_leaves_out_nulls_and_virtual_columns(spark):
    columns = (
        Column("id", ColumnType(K.INT)),
        Column("v", ColumnType(K.INT), virtual=True, expression="id * 2"),
        Column("note", ColumnType(K.VARCHAR)),
        Column("d", ColumnType(K.DOUBLE)),
    )
    layout = checksum.Layout.of(columns)
    image = F.create_map(
        F.lit("id"), F.lit("7"), F.lit("note"), F.lit(None).cast("string"), F.lit("d"), F.lit("2.5")
    )
    got = spark.range(1).select(checksum.row_checksum(image, layout, "UTC").alias("c")).first()["c"]
    assert got == zlib.crc32(bytes.fromhex(_int(7) + _double(2.5)))
    wrong = F.create_map(F.lit("id"), F.lit("seven"))
    assert spark.range(1).select(checksum.row_checksum(wrong, layout, "UTC").alias("c")).first()["c"] is None
