"""TiCDC Avro, pure parts: writer schemas, framing, values, and the schema-evolution plan.

Expected values are the examples of ticdc-protocols.md §4 (written out by hand here). The real-registry
and real-Delta path is in tests/integration/kafka/test_avro.py.
"""

from __future__ import annotations

import io
import json
from decimal import Decimal

import fastavro
import pytest

from ingest.config import IngestConfig
from ingest.decode import ticdc_avro as ta
from ingest.errors import ConfigError
from ingest.model import ColumnKind, ColumnType, TableId
from ingest.plan import avro_schema as plan
from ingest.plan.schema import AddColumn, ChangeKey, ChangeType, DropColumn
from testkit.sample import confluent_frame, ticdc_avro_subject, ticdc_avro_type, ticdc_avro_value

# §4.9, as TiCDC registers it for shop.orders with the extension on.
KEY = {
    "type": "record",
    "name": "orders",
    "namespace": "default.shop",
    "fields": [{"name": "id", "type": {"type": "long", "connect.parameters": {"tidb_type": "BIGINT"}}}],
}
VALUE = {"type": "record", "name": "orders", "namespace": "default.shop", "fields": [
    {"name": "id", "type": {"type": "long", "connect.parameters": {"tidb_type": "BIGINT"}}},
    {"name": "amount", "default": None, "type": ["null", {"type": "bytes", "logicalType": "decimal",
     "precision": 12, "scale": 2, "connect.parameters": {"tidb_type": "DECIMAL"}}]},
    {"name": "flags", "default": "\u0000", "type": {"type": "bytes",
     "connect.parameters": {"tidb_type": "BIT", "length": "3"}}},
    {"name": "status", "type": {"type": "string",
     "connect.parameters": {"tidb_type": "ENUM", "allowed": "new,paid"}}},
    {"name": "_tidb_op", "type": "string", "default": ""},
    {"name": "_tidb_commit_ts", "type": "long", "default": 0},
    {"name": "_tidb_commit_physical_time", "type": "long", "default": 0}]}  # fmt: skip
ORDERS = TableId("shop", "orders")


def book() -> ta.SchemaBook:
    return ta.schema_book({7: json.dumps(KEY), 8: json.dumps(VALUE), 9: None})


def frame(schema_id: int, schema: dict, datum: dict) -> bytes:
    return confluent_frame(schema_id, schema, datum)


def test_the_writer_schema_names_the_table_its_columns_and_their_tidb_types():
    writer = ta.parse_writer_schema(8, json.dumps(VALUE))
    assert writer.table == ORDERS and writer.has_extension
    assert writer.names == ("id", "amount", "flags", "status")
    columns = {c.column.name: c for c in writer.columns}
    assert columns["id"].column.type == ColumnType(ColumnKind.BIGINT) and not columns["id"].column.nullable
    assert columns["amount"].column.type == ColumnType(ColumnKind.DECIMAL, precision=12, scale=2)
    assert columns["amount"].column.nullable and columns["amount"].backfill is None
    assert columns["flags"].column.type == ColumnType(ColumnKind.BIT, length=3)
    assert columns["flags"].backfill == "0"  # the default b'0', as bytes "\u0000"
    assert columns["status"].column.type == ColumnType(ColumnKind.ENUM, elements=("new", "paid"))


@pytest.mark.parametrize(
    ("tidb_type", "primitive", "expected"),
    [
        ("INT", "int", ColumnType(ColumnKind.INT)),
        ("INT UNSIGNED", "int", ColumnType(ColumnKind.MEDIUMINT, unsigned=True)),
        ("INT UNSIGNED", "long", ColumnType(ColumnKind.INT, unsigned=True)),
        ("BIGINT UNSIGNED", "string", ColumnType(ColumnKind.BIGINT, unsigned=True)),
        ("DECIMAL", "string", ColumnType(ColumnKind.DECIMAL)),
        ("TiDBVECTORFloat32", "string", ColumnType(ColumnKind.VECTOR)),
        ("YEAR", "int", ColumnType(ColumnKind.YEAR)),
    ],
)
def test_tidb_types_map_to_the_narrowest_type_that_holds_every_value(tidb_type, primitive, expected):
    assert ta.column_type_of(tidb_type, primitive, {"tidb_type": tidb_type}, {}) == expected


def test_enum_members_with_commas_are_unescaped():
    assert ta.split_allowed(r"a,b\,c,d") == ("a", "b,c", "d")
    assert ta.split_allowed("") == ()


def test_the_confluent_frame_is_magic_byte_zero_and_a_big_endian_id():
    assert ta.schema_id(b"\x00\x00\x00\x01\x02rest") == 258
    assert ta.schema_id(b"\x01\x00\x00\x00\x01") is None
    assert ta.schema_id(b"\x00\x00") is None
    assert ta.schema_id(None) is None


@pytest.mark.parametrize(
    ("column_type", "value", "body"),
    [
        # §4.5: DECIMAL(10,4) 123.456 -> unscaled 1234560 -> 12 D6 80; -123.456 -> ED 29 80
        (ColumnType(ColumnKind.DECIMAL, precision=10, scale=4), Decimal("123.456"), b"\x06\x12\xd6\x80"),
        (ColumnType(ColumnKind.DECIMAL, precision=10, scale=4), Decimal("-123.456"), b"\x06\xed\x29\x80"),
        # BIT: big-endian, leading zero bytes stripped, at least one byte (length-prefixed Avro bytes)
        (ColumnType(ColumnKind.BIT, length=7), 0b1000001, b"\x02\x41"),
        (ColumnType(ColumnKind.BIT, length=10), 0b1010101010, b"\x04\x02\xaa"),
        (ColumnType(ColumnKind.BIT, length=10), 0, b"\x02\x00"),
    ],
)
def test_the_sample_encoder_writes_the_bytes_the_reference_gives(column_type, value, body):
    schema = {"type": "record", "name": "r", "fields": [{"name": "c", "type": ticdc_avro_type(column_type)}]}
    from zoneinfo import ZoneInfo

    out = io.BytesIO()
    fastavro.schemaless_writer(
        out, fastavro.parse_schema(schema), {"c": ticdc_avro_value(value, column_type, ZoneInfo("UTC"))}
    )
    assert out.getvalue() == body


def test_an_insert_decodes_to_wire_text_and_its_commit_ts():
    datum = {"id": 5, "amount": Decimal("-12.30"), "flags": b"\x05", "status": "paid", "_tidb_op": "c",
             "_tidb_commit_ts": 470000000000000000, "_tidb_commit_physical_time": 0}  # fmt: skip
    change = ta.decode_record(frame(7, KEY, {"id": 5}), frame(8, VALUE, datum), book())
    assert change.table == ORDERS and change.type == ta.TYPE_INSERT
    assert change.commit_ts == 470000000000000000 and (change.value_schema, change.key_schema) == (8, 7)
    # ENUM labels become Canal-JSON's 1-based index, which apply turns back into the label.
    assert change.data == {"id": "5", "amount": "-12.30", "flags": "5", "status": "2"}


def test_an_update_is_told_by_its_op_and_a_tombstone_is_a_delete_of_its_key():
    datum = {"id": 5, "amount": None, "flags": b"\x00", "status": "new", "_tidb_op": "u",
             "_tidb_commit_ts": 9, "_tidb_commit_physical_time": 0}  # fmt: skip
    update = ta.decode_record(frame(7, KEY, {"id": 5}), frame(8, VALUE, datum), book())
    assert update.type == ta.TYPE_UPDATE and update.data["amount"] is None
    delete = ta.decode_record(frame(7, KEY, {"id": -1}), None, book())
    assert (delete.type, delete.commit_ts, delete.data, delete.value_schema) == (
        ta.TYPE_DELETE,
        None,
        {"id": "-1"},
        None,
    )


def test_unsigned_bigint_in_long_mode_is_unwrapped():
    column = ta.AvroColumn(ta.Column("u", ColumnType(ColumnKind.BIGINT, unsigned=True)), "long")
    assert ta.wire_text(-1, column) == "18446744073709551615"
    assert ta.wire_text(5, column) == "5"


def test_bytes_are_base64_and_a_set_is_its_bitmask():
    blob = ta.AvroColumn(ta.Column("b", ColumnType(ColumnKind.BLOB)), "bytes")
    assert ta.wire_text(bytes([0, 0x80, 0xFF]), blob) == "AID/"
    members = ta.AvroColumn(ta.Column("s", ColumnType(ColumnKind.SET, elements=("a", "b,c", "d"))), "string")
    assert ta.wire_text("a,d", members) == "5" and ta.wire_text("", members) == "0"


@pytest.mark.parametrize(
    ("key", "value", "reason"),
    [
        (b"{}", None, "key is not in the Confluent wire format"),
        (b"\x00\x00\x00\x00\x07" + b"\x0a", b'{"json": 1}', "value is not in the Confluent wire format"),
        (b"\x00\x00\x00\x00\x09" + b"\x0a", None, "schema id 9: the registry does not know this schema id"),
        (b"\x00\x00\x00\x00\x07", None, "body does not decode with schema 7"),
    ],
)
def test_records_that_are_not_ticdc_avro_say_why(key, value, reason):
    with pytest.raises(ta.NotTicdcAvro, match=reason):
        ta.decode_record(key, value, book())


def test_a_schema_that_is_not_ticdcs_is_a_problem_not_a_crash():
    geometry = {"name": "x", "type": {"type": "long", "connect.parameters": {"tidb_type": "GEOMETRY"}}}
    result = ta.schema_book(
        {1: '{"type": "string"}', 2: "not json", 3: json.dumps({**KEY, "fields": [geometry]})}
    )
    assert result.schemas == {}
    assert "not an Avro record" in result.problems[1] and "not JSON" in result.problems[2]
    assert "GEOMETRY" in result.problems[3]


def test_subjects_replace_dots_in_the_topic():
    assert ticdc_avro_subject("tidb.shop.orders", "value") == "tidb_shop_orders-value"


def writer(fields: list[dict], schema_id: int = 20) -> ta.WriterSchema:
    return ta.parse_writer_schema(schema_id, json.dumps({**VALUE, "fields": fields}))


def test_evolution_adds_with_the_default_drops_and_widens_in_column_order():
    bigint = {"type": "long", "connect.parameters": {"tidb_type": "BIGINT"}}
    fields = [VALUE["fields"][0], VALUE["fields"][3], {"name": "qty", "type": [bigint, "null"], "default": 7}]
    current = [
        ("id", ColumnType(ColumnKind.BIGINT)),
        ("amount", ColumnType(ColumnKind.DECIMAL, precision=12, scale=2)),
        ("status", ColumnType(ColumnKind.ENUM, elements=("new",))),
    ]
    changes = plan.plan_evolution(ORDERS, current, ("id",), writer(fields), ("id",))
    assert changes[0] == DropColumn(ORDERS, "amount")
    add = changes[1]
    assert isinstance(add, AddColumn) and add.column.name == "qty" and add.after == "status"
    assert add.backfill == "7"
    assert changes[2] == ChangeType(ORDERS, "status", ColumnType(ColumnKind.ENUM, elements=("new", "paid")))
    assert len(changes) == 3
    assert plan.describe(changes) == "drop amount; add qty bigint; modify status enum('new','paid')"


def test_evolution_to_the_same_columns_changes_nothing_but_a_new_key_moves_the_key():
    target = ta.parse_writer_schema(8, json.dumps(VALUE))
    current = [(c.column.name, c.column.type) for c in target.columns]
    assert plan.plan_evolution(ORDERS, current, ("id",), target, ("id",)) == []
    assert plan.plan_evolution(ORDERS, current, ("id",), target, ("id", "status")) == [
        ChangeKey(ORDERS, ("id", "status"))
    ]


def test_the_newest_schema_is_the_one_of_the_newest_commit_then_the_last_offset():
    uses = [
        plan.SchemaUse(1, 7, 100, 50, 0),
        plan.SchemaUse(2, 7, 200, 10, 0),
        plan.SchemaUse(3, 7, 150, 90, 1),
    ]
    assert plan.newest(uses).value_schema == 2
    no_commit_ts = [plan.SchemaUse(1, 7, 0, 50, 0), plan.SchemaUse(2, 7, 0, 10, 0)]
    assert plan.newest(no_commit_ts).value_schema == 1


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"protocol": "avro"}, "schema-registry: --protocol avro needs"),
        ({"schema-registry": "http://r"}, "applies to --protocol avro only"),
        ({"protocol": "avro", "schema-registry": "http://r", "compression": "lz4"}, "does not compress Avro"),
        ({"protocol": "avro", "schema-registry": "http://r", "schema-registry-timeout": "x"}, "not a number"),
        ({"protocol": "avro", "schema-registry": "http://r", "schema-registry-timeout": "0"}, "positive"),
    ],
)
def test_avro_options_are_checked_at_start(params, message):
    with pytest.raises(ConfigError, match=message):
        IngestConfig.from_params({"input": "in", "target-path": "/lake", **params})


def test_string_modes_for_decimal_and_unsigned_bigint_decode_to_their_text():
    # avro-decimal-handling-mode=string, avro-bigint-unsigned-handling-mode=string (§4.5)
    value = {**VALUE, "fields": [
        VALUE["fields"][0],
        {"name": "u", "type": {"type": "string", "connect.parameters": {"tidb_type": "BIGINT UNSIGNED"}}},
        {"name": "d", "type": {"type": "string", "connect.parameters": {"tidb_type": "DECIMAL"}}},
        *VALUE["fields"][4:]]}  # fmt: skip
    schemas = ta.schema_book({7: json.dumps(KEY), 11: json.dumps(value)})
    datum = {"id": 1, "u": "18446744073709551615", "d": "-123.4560", "_tidb_op": "c", "_tidb_commit_ts": 5,
             "_tidb_commit_physical_time": 0}  # fmt: skip
    change = ta.decode_record(frame(7, KEY, {"id": 1}), frame(11, value, datum), schemas)
    assert change.data == {"id": "1", "u": "18446744073709551615", "d": "-123.4560"}
    columns = {c.column.name: c.column.type for c in schemas.schemas[11][0].columns}
    assert columns["u"] == ColumnType(ColumnKind.BIGINT, unsigned=True)
    assert columns["d"] == ColumnType(ColumnKind.DECIMAL)  # no precision in string mode: kept as exact text


def test_without_the_extension_there_is_no_commit_ts_and_every_upsert_is_an_insert():
    value = {**VALUE, "fields": VALUE["fields"][:4]}
    schemas = ta.schema_book({7: json.dumps(KEY), 12: json.dumps(value)})
    datum = {"id": 1, "amount": None, "flags": b"\x01", "status": "new"}
    change = ta.decode_record(frame(7, KEY, {"id": 1}), frame(12, value, datum), schemas)
    assert (change.type, change.commit_ts) == (ta.TYPE_INSERT, None)
    assert not schemas.schemas[12][0].has_extension


def test_every_writer_schema_ticdc_registered_for_the_corpora_parses():
    """TiCDC writes `DOUBLE … DEFAULT 1e3` as the default 1000, which fastavro's own check refuses for a
    double; no schema TiCDC v8.3.0 registered for the corpora may be a problem."""
    from pathlib import Path

    fixtures = Path(__file__).parent.parent / "fixtures"
    registries = [
        *fixtures.glob("corpora/*/avro*/registry.json"),
        *fixtures.glob("ticdc-v8.3.0/avro/registry.json"),
    ]
    entries = [e for path in registries for e in json.loads(path.read_text())]
    book = ta.schema_book({i: e["schema"] for i, e in enumerate(entries)})
    assert book.problems == {}
    assert any('"default":1000' in e["schema"] for e in entries)  # the schema that was refused
    # Reading a body does not check the defaults again (a NOT NULL DOUBLE's 0, too).
    for _, parsed in book.schemas.values():
        with pytest.raises(EOFError):
            fastavro.schemaless_reader(io.BytesIO(b""), parsed)


def test_bytes_defaults_are_base64_as_ticdc_writes_them():
    """TiCDC writes a bytes field's default as Go's JSON writes a byte slice: base64 text, where the Avro
    specification has one character per byte. Read as the specification says, BIT(64) DEFAULT all ones was
    a 12-byte number that fits no column, and its rows went to quarantine."""
    from pathlib import Path

    registry = Path(__file__).parent.parent / "fixtures" / "corpora" / "columns" / "avro" / "registry.json"
    entry = next(e for e in json.loads(registry.read_text()) if "bt64" in e["schema"])
    writer = ta.parse_writer_schema(entry["id"], entry["schema"])
    backfills = {c.column.name: c.backfill for c in writer.columns}
    assert backfills["bt64"] == "18446744073709551615"  # BIT(64) DEFAULT b'111…1'
    assert backfills["bt"] == "10"  # BIT(8) DEFAULT b'1010'
    assert backfills["bn"] == "YWIAAA=="  # BINARY(4) 'ab' read back padded; binary wire text is base64
