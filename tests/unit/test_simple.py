"""Pure Simple-protocol decoding: table schemas, handle keys, control events, the Avro flavour."""

from __future__ import annotations

import orjson
import pytest

from ingest.decode import simple as sp
from ingest.decode.compression import Compression, compress, decompress
from ingest.errors import DecodeError
from ingest.model import ColumnKind, ColumnType, DdlEvent, Position, TableId, Watermark
from testkit.sample import SIMPLE_FOR_TESTS, Stream, _simple_avro_bytes

HERE = Position("cdc", 0, 7)

# The example of ticdc-protocols.md §3.4, verbatim.
ORDERS_SCHEMA = {
    "schema": "shop", "table": "orders", "tableID": 112, "version": 452413046183362561,
    "columns": [
        {"name": "id", "dataType": {"mysqlType": "bigint", "charset": "binary", "collate": "binary",
                                    "length": 20}, "nullable": False, "default": None},
        {"name": "note", "dataType": {"mysqlType": "varchar", "charset": "utf8mb4", "collate": "utf8mb4_bin",
                                      "length": 32}, "nullable": True, "default": None},
    ],
    "indexes": [{"name": "primary", "unique": True, "primary": True, "nullable": False, "columns": ["id"]}],
}  # fmt: skip


def test_a_table_schema_gives_types_key_and_version():
    parsed = sp.parse_table_schema(ORDERS_SCHEMA)
    assert parsed.table == TableId("shop", "orders") and parsed.version == 452413046183362561
    assert parsed.schema.key == ("id",)
    assert [c.type for c in parsed.schema.columns] == [
        ColumnType(ColumnKind.BIGINT, length=20),
        ColumnType(ColumnKind.VARCHAR, length=32),
    ]


@pytest.mark.parametrize(
    ("data_type", "expected"),
    [
        ({"mysqlType": "bigint", "unsigned": True, "length": 20},
         ColumnType(ColumnKind.BIGINT, True, length=20)),
        ({"mysqlType": "decimal", "length": 65, "decimal": 30},
         ColumnType(ColumnKind.DECIMAL, precision=65, scale=30)),
        ({"mysqlType": "timestamp", "length": 19, "decimal": 3}, ColumnType(ColumnKind.TIMESTAMP, length=3)),
        ({"mysqlType": "enum", "elements": ["a", "b"]}, ColumnType(ColumnKind.ENUM, elements=("a", "b"))),
        ({"mysqlType": "longblob", "length": -1}, ColumnType(ColumnKind.BLOB)),
        ({"mysqlType": "bit", "length": 64, "unsigned": True}, ColumnType(ColumnKind.BIT, True, length=64)),
    ],
)  # fmt: skip
def test_data_types_map_to_column_types(data_type, expected):
    assert sp.column_type(data_type) == expected


def test_without_a_primary_key_the_narrowest_not_null_unique_index_is_the_handle():
    indexes = [
        {"name": "u_wide", "unique": True, "primary": False, "nullable": False, "columns": ["a", "b"]},
        {"name": "u_null", "unique": True, "primary": False, "nullable": True, "columns": ["c"]},
        {"name": "plain", "unique": False, "primary": False, "nullable": False, "columns": ["d"]},
        {"name": "u_one", "unique": True, "primary": False, "nullable": False, "columns": ["e"]},
    ]
    assert sp.handle_key(indexes) == ("e",)
    assert sp.handle_key(indexes[1:3]) == ()


def test_control_events():
    watermark = sp.control_event({"type": "WATERMARK", "commitTs": 5}, HERE)
    assert watermark == Watermark(5, HERE)
    bootstrap = sp.control_event({"type": "BOOTSTRAP", "commitTs": 0, "tableSchema": ORDERS_SCHEMA}, HERE)
    assert isinstance(bootstrap, sp.Bootstrap) and bootstrap.schema.table == TableId("shop", "orders")
    ddl = sp.control_event(
        {"type": "ALTER", "commitTs": 9, "sql": "ALTER TABLE `orders` ADD COLUMN `x` int",
         "tableSchema": orjson.dumps(ORDERS_SCHEMA).decode()}, HERE
    )  # fmt: skip
    assert ddl == DdlEvent(
        TableId("shop", "orders"),
        9,
        "ALTER TABLE `orders` ADD COLUMN `x` int",
        "ALTER",
        HERE,
        handle_key=("id",),
    )
    # Schema-level DDL has no tableSchema: the database is only inside the SQL.
    drop = sp.control_event({"type": "QUERY", "commitTs": 10, "sql": "DROP DATABASE `shop`"}, HERE)
    assert isinstance(drop, DdlEvent) and drop.table == TableId("shop", "")
    with pytest.raises(DecodeError, match="without commitTs"):
        sp.control_event({"type": "ALTER", "sql": "ALTER TABLE t ADD COLUMN x int"}, HERE)


def test_the_avro_flavour_reads_as_the_json_flavour():
    T = TableId("app", "t")
    for encoding in ("json", "avro"):
        s = Stream(topic="cdc", partitions=1, protocol="simple", encoding=encoding)
        s.create_table(SIMPLE_FOR_TESTS, s.tso(1))
        s.insert(T, {"id": 1, "v": "a"}, s.tso(2))
        s.delete(T, (1,), s.tso(3))
        s.watermark(s.tso(4))
        if encoding == "json":
            json_values = [r["value"] for r in s.records]
        else:
            avro_values = [r["value"] for r in s.records]
    schema = sp.avro_schema()
    import base64

    for json_b64, avro_b64 in zip(json_values, avro_values, strict=True):
        want = orjson.loads(base64.b64decode(json_b64))
        got = orjson.loads(sp.avro_to_json(base64.b64decode(avro_b64), schema))
        # The Avro flavour has no temporal fsp and always sends length; the rest is the same message.
        for message in (want, got):
            for name in ("tableSchema", "preTableSchema"):
                for column in (message.get(name) or {}).get("columns", []):
                    column["dataType"] = {k: v for k, v in column["dataType"].items() if k == "mysqlType"}
            message.pop("buildTs", None)
            message.pop("tableID", None) if message.get("type") == "BOOTSTRAP" else None
        want.pop("commitTs") if want["type"] == "BOOTSTRAP" else None  # Avro BOOTSTRAP has no commitTs
        assert got == want


def test_unsigned_bigint_and_bytes_survive_the_avro_flavour():
    message = {
        "type": "INSERT", "database": "d", "table": "t", "tableID": 1, "commitTs": 5, "buildTs": 1,
        "schemaVersion": 3,
        "data": {
            "u": ("com.pingcap.simple.avro.UnsignedBigint", {"value": -1}),
            "b": ("bytes", bytes(range(256))),
            "f": ("float", 3.14),
            "ts": (
                "com.pingcap.simple.avro.Timestamp",
                {"location": "Asia/Tokyo", "value": "2024-09-09 03:06:50"},
            ),
        },
    }  # fmt: skip
    got = orjson.loads(sp.avro_to_json(_simple_avro_bytes(message), sp.avro_schema()))
    assert got["data"]["u"] == "18446744073709551615"
    import base64

    assert base64.b64decode(got["data"]["b"]) == bytes(range(256))
    assert got["data"]["ts"] == {"location": "Asia/Tokyo", "value": "2024-09-09 03:06:50"}
    import struct

    assert struct.pack("<f", float(got["data"]["f"])) == struct.pack("<f", 3.14)


def test_garbage_is_not_an_avro_message():
    with pytest.raises(ValueError, match="not a Simple Avro message"):
        sp.avro_to_json(b"\x16\x06garbage", sp.avro_schema())


@pytest.mark.parametrize("compression", [Compression.LZ4, Compression.SNAPPY])
def test_compression_round_trips_and_rejects_plain_bytes(compression):
    value = orjson.dumps({"type": "WATERMARK", "commitTs": 1}) * 50
    assert decompress(compress(value, compression), compression) == value
    with pytest.raises(ValueError, match=f"not {compression.value}-compressed"):
        decompress(b"{plain json}", compression)


def test_a_default_that_is_not_utf8_reads_in_the_avro_flavour_as_in_the_json_one():
    """TiCDC's Simple Avro encoder puts ``VARBINARY … DEFAULT x'00ff'`` into an Avro string as raw bytes;
    its JSON encoder writes U+FFFD for the 0xFF. Both variants of the columns corpus carry the same
    table schemas, so the messages that carry that default must read the same."""
    import base64
    from pathlib import Path

    corpus = Path(__file__).parent.parent / "fixtures" / "corpora" / "columns"

    def values(variant: str) -> list[bytes]:
        lines = (corpus / variant / "records.jsonl").read_text().splitlines()
        return [base64.b64decode(orjson.loads(line)["value"]) for line in lines]

    schema = sp.avro_schema()
    compared = 0
    for json_value, avro_value in zip(values("simple-json"), values("simple-avro"), strict=True):
        want, got = orjson.loads(json_value), orjson.loads(sp.avro_to_json(avro_value, schema))
        for column in (want.get("tableSchema") or {}).get("columns", []):
            if column["name"] == "vb":
                (vb,) = [c for c in got["tableSchema"]["columns"] if c["name"] == "vb"]
                assert vb["default"] == column["default"] == "\x00\ufffd"
                compared += 1
    assert compared > 0
