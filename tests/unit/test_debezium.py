"""TiCDC's Debezium records -> the changes they become: the row schemas and the TiDB types they carry, the
values in Canal-JSON's forms, keys from table-keys, and what TiCDC v8.3.0's own Debezium encoder wrote for
every kit corpus against what its Canal-JSON encoder wrote for the same history."""

from __future__ import annotations

import base64
import json
from collections import defaultdict
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import orjson
import pytest
from ticdc_fixture import handle_keys

from ingest.config import IngestConfig
from ingest.decode import debezium as dz
from ingest.errors import ConfigError
from ingest.model import ColumnKind, ColumnType, TableId

CORPORA = Path(__file__).resolve().parents[1] / "fixtures" / "corpora"
KIT = sorted(p.parent.name for p in CORPORA.glob("*/debezium"))


def records(corpus: str, variant: str) -> list[bytes]:
    lines = (CORPORA / corpus / variant / "records.jsonl").read_text().splitlines()
    return [base64.b64decode(r["value"]) for r in map(json.loads, lines) if r["value"]]


def reader_for(corpus: str) -> dz.Reader:
    tables = {dz.row_schema(orjson.loads(v)).table for v in records(corpus, "debezium")}
    return dz.Reader(dict.fromkeys(tables, 1), {})


# -- the kit's records ------------------------------------------------------------------------------------


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace(" ", "T"))


def _micros(text: str) -> int:
    sign = -1 if text.startswith("-") else 1
    hours, minutes, seconds = text.lstrip("-").split(":")
    return sign * round((int(hours) * 3600 + int(minutes) * 60 + float(seconds)) * 1_000_000)


def same_value(mysql_type: str, canal: str | None, ours: str | None) -> bool:
    """Whether Debezium's value says what Canal-JSON's says, where Debezium's encoding is exact; the lossy
    encodings (README, Debezium) compare by what survives them."""
    if canal is None or ours is None:
        return canal == ours or (mysql_type in ("date", "datetime", "timestamp") and ours is None)
    word = mysql_type.split("(")[0].split()[0]
    if word == "decimal":  # a double: the decimal rounded to float64
        return float(Decimal(canal)) == float(ours)
    if word == "bigint" and "unsigned" in mysql_type:  # an int64: the bits, not the sign
        return int(canal) % (1 << 64) == int(ours) % (1 << 64)
    if word in ("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"):
        return base64.b64decode(ours) == canal.encode("latin-1")
    if word in ("float", "double"):
        return float(canal) == float(ours)
    if word in ("datetime", "timestamp"):
        zero = canal.startswith("0000") and ours.startswith("1970-01-01")
        return zero or _instant(canal) == _instant(ours)
    if word == "date":
        return canal == ours or (canal.startswith("0000") and ours == "1970-01-01")
    if word == "time":
        return _micros(canal) == _micros(ours)
    if word == "json":
        return json.loads(canal) == json.loads(ours)
    return canal == ours


def changes_by_table(values, decode):
    found = defaultdict(list)
    for value in values:
        change = decode(value)
        if change is not None:
            found[change[0]].append(change[1:])
    return found


def canal_change(value: bytes):
    message = orjson.loads(value)
    if message.get("isDdl") or message.get("type") not in ("INSERT", "UPDATE", "DELETE"):
        return None
    table = TableId(message["database"], message["table"])
    return table, message["_tidb"]["commitTs"], message["type"], message["data"][0], message["mysqlType"]


@pytest.mark.parametrize("corpus", KIT)
def test_every_record_the_kit_wrote_says_what_its_canal_json_says_where_debezium_is_exact(corpus):
    reader = reader_for(corpus)

    def ours(value: bytes):
        _, error, change = dz.classify(value, 0, reader)
        assert error is None, error
        return change.table, change.commit_ts, change.type, change.data

    canal = changes_by_table(records(corpus, "canal-json"), canal_change)
    debezium = changes_by_table(records(corpus, "debezium"), ours)
    assert set(debezium) == set(canal)
    compared = 0
    for table, theirs in canal.items():
        assert [(ts, typ) for ts, typ, _ in debezium[table]] == [(ts, typ) for ts, typ, _, _ in theirs]
        for (_, _, data), (_, _, row, types) in zip(debezium[table], theirs, strict=True):
            # VIRTUAL generated columns are computed on read: neither encoder sends them.
            assert set(data) == set(row), table
            for name, text in row.items():
                assert same_value(types[name], text, data[name]), (table, name, types[name], text, data[name])
                compared += 1
    assert compared > 0


@pytest.mark.parametrize("corpus", KIT)
def test_every_row_schema_the_kit_wrote_becomes_a_writer_schema_keyed_as_ticdc_keys_it(corpus):
    keys = {TableId(*name.split(".", 1)): tuple(key) for name, key in handle_keys(CORPORA / corpus).items()}
    rows = {
        dz.row_schema(orjson.loads(v)).text: dz.row_schema(orjson.loads(v))
        for v in records(corpus, "debezium")
    }
    for row in rows.values():
        writer = dz.writer_schema(row, {})
        assert writer.id == row.id and writer.table == row.table
        assert all(c.default_unknown for c in writer.columns)
        key = dz.key_schema(row.table, keys[row.table], writer)
        assert key.names == keys[row.table]


# -- types and values -------------------------------------------------------------------------------------


def field(connect: str, name: str | None = None, **parameters: str) -> dict:
    entry = {"type": connect, "optional": True, "field": "c"}
    if name:
        entry["name"] = name
    if parameters:
        entry["parameters"] = parameters
    return entry


@pytest.mark.parametrize(
    ("entry", "value", "text"),
    [
        (
            field("int64", "io.debezium.time.MicroTimestamp"),
            1_704_067_200_123_456,
            "2024-01-01 00:00:00.123456",
        ),
        (field("int64", "io.debezium.time.Timestamp"), -1, "1969-12-31 23:59:59.999000"),
        (field("int32", "io.debezium.time.Date"), -1, "1969-12-31"),
        (field("int64", "io.debezium.time.MicroTime"), -3_020_399_000_000, "-838:59:59.000000"),
        (
            field("string", "io.debezium.time.ZonedTimestamp"),
            "2024-09-09T03:06:50.123Z",
            "2024-09-09 03:06:50.123",
        ),
        (field("bytes", "io.debezium.data.Bits", length="10"), "qgI=", "682"),  # little-endian AA 02
        (field("boolean"), True, "1"),
        (field("float"), 3.4028235e38, "3.4028235e+38"),
        (field("string", "io.debezium.data.Enum", allowed="1,2,x"), "2", "2"),
        (field("string", "io.debezium.data.Enum", allowed="b,a"), "a", "2"),
        (field("string", "io.debezium.data.EnumSet", allowed="a,b,c"), "a,c", "5"),
        (field("string", "io.debezium.data.EnumSet", allowed="a,b,c"), "", "0"),
        (field("int64"), -1, "-1"),
    ],
)
def test_values_become_canal_json_text(entry, value, text):
    assert dz.wire_text(value, entry, dz.column_type(entry)) == text


def test_a_bigint_unsigned_column_named_in_column_types_is_unwrapped_and_others_keep_their_sign():
    entry = field("int64")
    typ = dz.column_type(entry, ColumnType(ColumnKind.BIGINT, unsigned=True))
    assert typ == ColumnType(ColumnKind.BIGINT, unsigned=True)
    assert dz.wire_text(-1, entry, typ) == "18446744073709551615"
    assert dz.wire_text(-1, entry, dz.column_type(entry)) == "-1"


def test_column_types_may_name_a_decimal_a_double_holds_exactly_and_nothing_it_would_round():
    decimal15 = ColumnType(ColumnKind.DECIMAL, precision=15, scale=6)
    assert dz.column_type(field("double"), decimal15) == decimal15
    with pytest.raises(dz.NotDebezium, match="at most 15 digits exactly; decimal\\(20,6\\) would be rounded"):
        dz.column_type(field("double"), ColumnType(ColumnKind.DECIMAL, precision=20, scale=6))
    with pytest.raises(dz.NotDebezium, match="does not fit Debezium's"):
        dz.column_type(field("int32"), ColumnType(ColumnKind.BIGINT, unsigned=True))
    assert (
        dz.column_type(field("string"), ColumnType(ColumnKind.VARBINARY, length=4)).kind
        is ColumnKind.VARBINARY
    )


def test_a_record_without_its_schema_or_commit_ts_or_key_is_bad_and_says_what_to_change():
    value = records("tables", "debezium")[0]
    message = orjson.loads(value)
    table = dz.row_schema(message).table
    reader = dz.Reader({table: 1}, {})
    assert dz.classify(value, 0, reader)[0] == "dml"
    without_schema = orjson.dumps({"payload": message["payload"]})
    assert "debezium-disable-schema to false" in dz.classify(without_schema, 0, reader)[1]
    message["payload"]["source"].pop("commit_ts")
    assert "no commit_ts" in dz.classify(orjson.dumps(message), 0, reader)[1]
    assert "table-keys" in dz.classify(value, 0, dz.Reader({}, {}))[1]
    assert "not JSON" in dz.classify(b"{", 0, reader)[1]


# -- table-keys -------------------------------------------------------------------------------------------


def test_table_keys_take_patterns_first_match_and_backtick_quoted_names():
    rules = dz.parse_table_keys("nm.keyed=`k.e y`,`k,2`; shop.* = id ;*.*=a , `b``c`")
    assert dz.key_of(TableId("nm", "keyed"), rules) == ("k.e y", "k,2")
    assert dz.key_of(TableId("shop", "orders"), rules) == ("id",)
    assert dz.key_of(TableId("x", "y"), rules) == ("a", "b`c")
    assert dz.key_of(TableId("x", "y"), ()) is None
    with pytest.raises(ValueError, match="unclosed backtick"):
        dz.parse_table_keys("a.b=`x")


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({}, "table-keys: --protocol debezium needs each table's key columns"),
        ({"table-keys": "a.b=id", "timezone": "Asia/Tokyo"}, "Debezium sends TIMESTAMP values in UTC"),
        ({"table-keys": "a.b"}, "table-keys: expected 'database.table=column"),
        (
            {"protocol": "canal-json", "table-keys": "a.b=id"},
            "table-keys applies to --protocol debezium only",
        ),
        (
            {"protocol": "canal-json", "column-types": "a.b.c=bigint unsigned"},
            "except under --protocol debezium",
        ),
    ],
)
def test_settings_that_cannot_work_fail_at_start(tmp_path, params, message):
    with pytest.raises(ConfigError, match=message):
        IngestConfig.from_params(
            {"input": str(tmp_path), "target-path": str(tmp_path / "lake"), "protocol": "debezium", **params}
        )
