import pytest

from ingest.decode import canal_json as cj
from ingest.errors import DecodeError
from ingest.model import DdlEvent, Position, TableId, Watermark

POS = Position("cdc", 0, 42)


def test_binary_values_round_trip_every_byte():
    raw = bytes(range(256))
    assert cj.binary_from_wire(cj.binary_to_wire(raw)) == raw
    # The documented example (ticdc-protocols.md §2.7) after JSON unescaping.
    assert cj.binary_from_wire("\u0005\u0007\n\u000f$2+cx<&ÿþ-7F") == bytes(
        [5, 7, 10, 15, 36, 50, 43, 99, 120, 60, 38, 255, 254, 45, 55, 70]
    )


@pytest.mark.parametrize(
    ("mysql_type", "binary"),
    [
        ("varbinary", True),
        ("blob", True),
        ("longblob", True),
        ("binary(16)", True),
        ("varchar", False),
        ("text", False),
        ("bit", False),
    ],
)
def test_binary_columns_are_recognised_by_mysql_type(mysql_type, binary):
    assert cj.is_binary_mysql_type(mysql_type) is binary


def test_ddl_and_watermark_control_events():
    ddl = cj.control_event(
        {
            "isDdl": True,
            "database": "shop",
            "table": "t",
            "type": "ALTER",
            "sql": "ALTER TABLE t ADD COLUMN c INT",
            "_tidb": {"commitTs": 447984084414103554},
        },
        POS,
    )
    assert ddl == DdlEvent(
        TableId("shop", "t"), 447984084414103554, "ALTER TABLE t ADD COLUMN c INT", "ALTER", POS
    )
    watermark = cj.control_event({"isDdl": False, "type": "TIDB_WATERMARK", "_tidb": {"watermarkTs": 7}}, POS)
    assert watermark == Watermark(7, POS)


def test_ddl_without_extension_is_an_error_with_position():
    with pytest.raises(DecodeError, match=r"canal-json: DDL without _tidb.commitTs.*at cdc/0@42"):
        cj.control_event({"isDdl": True, "sql": "x"}, POS)
