"""What a TiDB column type holds: number ranges and text/byte lengths, as TiDB's own limits. Pure."""

from __future__ import annotations

from decimal import Decimal

import pytest

from ingest.mysql.limits import holds, length, number_range, shortens
from ingest.mysql.types import parse_mysql_type as t


@pytest.mark.parametrize(
    ("text", "low", "high"),
    [
        ("tinyint", -128, 127), ("tinyint unsigned", 0, 255), ("smallint", -32768, 32767),
        ("mediumint unsigned", 0, 16777215), ("int", -2147483648, 2147483647),
        ("int unsigned", 0, 4294967295), ("bigint", -9223372036854775808, 9223372036854775807),
        ("bigint unsigned", 0, 18446744073709551615), ("decimal(5,2)", Decimal("-999.99"), Decimal("999.99")),
        ("decimal(5,2) unsigned", 0, Decimal("999.99")),
        ("decimal(3,0)", -999, 999), ("year", 0, 2155), ("bit(4)", 0, 15),
    ],
)  # fmt: skip
def test_number_ranges_are_tidbs(text, low, high):
    assert number_range(t(text)) == (Decimal(low), Decimal(high))


def test_a_range_holds_another_only_when_it_contains_it():
    assert holds(t("int"), t("bigint")) and holds(t("int unsigned"), t("bigint"))
    assert not holds(t("int"), t("int unsigned")) and not holds(t("bigint unsigned"), t("bigint"))
    assert holds(t("decimal(5,2)"), t("decimal(7,2)")) and not holds(t("decimal(7,2)"), t("decimal(5,2)"))
    assert holds(t("smallint"), t("decimal(5,0)")) and not holds(t("int"), t("decimal(5,0)"))
    assert not holds(t("double"), t("int"))  # a DOUBLE has no integer range


def test_lengths_are_characters_for_text_and_bytes_for_binary():
    assert length(t("varchar(10)")) == 10 and length(t("char")) == 1 and length(t("binary")) == 1
    assert length(t("text")) is None and length(t("blob")) is None
    assert shortens(t("varchar(30)"), t("varchar(2)")) and shortens(t("text"), t("varchar(255)"))
    assert not shortens(t("varchar(2)"), t("varchar(30)")) and not shortens(t("varchar(5)"), t("text"))
