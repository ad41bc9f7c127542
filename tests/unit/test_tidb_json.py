"""Text becomes JSON as TiDB prints it: checked against what TiDB itself returned after a MODIFY COLUMN from
TEXT to JSON (the typechanges corpus, table tc.t_text_json)."""

from __future__ import annotations

import json

import pytest
from ticdc_fixture import CORPORA

from ingest.mysql.json_text import es6_number, tidb_json_text

# The texts the corpus's history stored before the MODIFY, by row id (its SQL literals, unescaped).
STORED = {
    "1": '{"b":2,"a":1}',
    "2": "[1,2]",
    "3": '{"b": 1, "aa": [2.50, 1e2, 1E21, 1.5e-7, 0.000001, -0.0]}',
    "4": "[18446744073709551615, 18446744073709551616, -9223372036854775808, 9223372036854775808, 1.0]",
    "5": '{"s": "tab\\there \\u2028 \\u0001 <&> \\u00e9\\/", "k": 1, "k": 2}',
    "6": '  {"nested" : {"z": null, "y": true, "x": false}}  ',
    "7": '"just text"',
    "8": "123456789.125",
}


def _tidb() -> dict[str, str]:
    tables = json.loads((CORPORA["typechanges"] / "expected.json").read_text())["tables"]
    return {row["id"]: row["c"] for row in tables["tc.t_text_json"]["rows"]}


@pytest.mark.parametrize("row", sorted(STORED))
def test_text_becomes_the_json_text_tidb_prints(row):
    assert tidb_json_text(STORED[row]) == _tidb()[row]


@pytest.mark.parametrize("text", ["", "{", "[1,]", "NaN", "[Infinity]", "1e400", "{'a': 1}", "[1] [2]"])
def test_text_that_is_no_json_gives_none(text):
    assert tidb_json_text(text) is None


def test_none_stays_none():
    assert tidb_json_text(None) is None


def test_floats_switch_to_an_exponent_outside_1e_minus_6_to_1e21_as_es6_does():
    assert [es6_number(x) for x in (1e21, 1e20, 1e-6, 1e-7, 1.5e-10, -2.5, 0.0)] == [
        "1e+21", "100000000000000000000", "0.000001", "1e-7", "1.5e-10", "-2.5", "0",
    ]  # fmt: skip
