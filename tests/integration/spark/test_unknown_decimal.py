"""A DECIMAL whose precision the stream does not say (a Canal-JSON table known only from its DML, whose
mysqlType is just "decimal") may be TiDB's DECIMAL(65,30): it lands exactly, as text, unless column-types
names its type."""

from __future__ import annotations

from decimal import Decimal

from mirror import located

from ingest.model import TableId
from testkit.sample import Stream

WIDE = "-12345678901234567890123456789012345.123456789012345678901234567890"
TINY = "0.000000000000000000000000000001"


def dml_only_stream() -> Stream:
    s = Stream(topic="cdc", partitions=1)
    for i, value in enumerate((WIDE, TINY, "3.1400"), start=1):
        ts = s.tso(i)
        s.append_message(0, {
            "database": "shop", "table": "items", "pkNames": ["id"], "isDdl": False, "type": "INSERT",
            "mysqlType": {"id": "int", "price": "decimal"}, "sqlType": {"id": 4, "price": 3},
            "data": [{"id": str(i), "price": value}], "old": None, "_tidb": {"commitTs": ts},
        })  # fmt: skip
    s.watermark(s.tso(4))
    return s


def prices(spark, lake) -> tuple[str, dict[int, object]]:
    df = spark.read.format("delta").load(located(lake, TableId("shop", "items")))
    return df.schema["price"].dataType.simpleString(), {r["id"]: r["price"] for r in df.collect()}


def test_a_decimal_of_unknown_precision_keeps_every_digit(spark, run, lake):
    result = run(dml_only_stream())
    assert result.quarantined == 0
    data_type, values = prices(spark, lake)
    assert data_type == "string"
    assert values == {1: WIDE, 2: TINY, 3: "3.1400"}


def test_column_types_gives_it_a_decimal_type(spark, run, lake):
    s = Stream(topic="cdc", partitions=1)
    ts = s.tso(1)
    s.append_message(0, {
        "database": "shop", "table": "items", "pkNames": ["id"], "isDdl": False, "type": "INSERT",
        "mysqlType": {"id": "int", "price": "decimal"}, "sqlType": {"id": 4, "price": 3},
        "data": [{"id": "1", "price": "3.1400"}], "old": None, "_tidb": {"commitTs": ts},
    })  # fmt: skip
    s.watermark(s.tso(2))
    run(s, **{"column-types": "shop.items.price=decimal(12,4)"})
    data_type, values = prices(spark, lake)
    assert (data_type, values) == ("decimal(12,4)", {1: Decimal("3.1400")})
