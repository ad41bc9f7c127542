"""The corpus comparison itself: it must see a wrong cell, a missing row and an extra row, or the corpus
tests could pass on anything."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal

from ticdc_fixture import differences, same_cell

TABLE = {
    "columns": [
        {"name": "id", "type": "int(11)"},
        {"name": "d", "type": "decimal(65,30)"},
        {"name": "f", "type": "float"},
        {"name": "j", "type": "json"},
        {"name": "b", "type": "varbinary(4)"},
    ],
    "key": ["id"],
    "rows": [
        {
            "id": "1",
            "d": "0.000000000000000000000000000001",
            "f": "3.4028234e38",
            "j": '{"a": 1}',
            "b": "00FF",
        },
        {"id": "2", "d": None, "f": None, "j": None, "b": None},
    ],
}
ROW_1 = {"id": 1, "d": "1E-30", "f": 3.4028234663852886e38, "j": '{"a":1}', "b": bytearray(b"\x00\xff")}
ROW_2 = {"id": 2, "d": None, "f": None, "j": None, "b": None}


def test_equal_tables_have_no_differences():
    assert differences(TABLE, [ROW_1, ROW_2]) == []


def test_a_wrong_cell_a_missing_row_and_an_extra_row_are_each_reported():
    assert differences(TABLE, [{**ROW_1, "j": '{"a": 1.0}'}, ROW_2]) == [
        "key ['1'] column j (json): TiDB '{\"a\": 1}', mirror '{\"a\": 1.0}'"
    ]
    assert differences(TABLE, [ROW_1]) == ["missing row with key ['2']"]
    assert len(differences(TABLE, [ROW_1, ROW_2, {**ROW_2, "id": 3}])) == 1


def test_rules_per_type():
    assert same_cell("decimal(20,6)", "1.500000", Decimal("1.5"))
    assert not same_cell("decimal(20,6)", "1.500001", Decimal("1.5"))
    assert same_cell("bigint(20) unsigned", "18446744073709551615", Decimal("18446744073709551615"))
    assert same_cell("timestamp(6)", "1970-01-01T00:00:01.000000", datetime(1970, 1, 1, 0, 0, 1))
    assert same_cell("date", "1000-01-01", date(1000, 1, 1))
    assert same_cell("time(6)", "-838:59:59.000000", "-838:59:59")
    assert not same_cell("varchar(4)", "a", None)
    assert not same_cell("json", "true", "1")
