"""The bundled demo stream is exactly what its generator writes, and the generator encodes like TiCDC."""

from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from ingest.model import ColumnKind, ColumnType
from testkit.sample import build_sample, wire_text

BUNDLED = Path(__file__).parents[2] / "ingest" / "samples" / "canal_json"


def test_bundled_sample_is_reproduced_by_its_generator(tmp_path):
    written = build_sample().write(tmp_path)
    assert sorted(p.name for p in written) == sorted(p.name for p in BUNDLED.glob("*.jsonl"))
    for path in written:
        assert path.read_bytes() == (BUNDLED / path.name).read_bytes(), f"run `make sample` ({path.name})"


def test_sample_records_of_a_partition_are_not_in_file_order():
    stream = build_sample()
    assert {r["partition"] for r in stream.records} == {0, 1}


@pytest.mark.parametrize(
    ("value", "column_type", "expected"),
    [
        (18446744073709551615, ColumnType(ColumnKind.BIGINT, unsigned=True), "18446744073709551615"),
        (Decimal("123.456"), ColumnType(ColumnKind.DECIMAL, precision=10, scale=4), "123.4560"),
        (3.14, ColumnType(ColumnKind.FLOAT), "3.14"),
        (3.4028234663852886e38, ColumnType(ColumnKind.FLOAT), "340282350000000000000000000000000000000"),
        (1e-06, ColumnType(ColumnKind.DOUBLE), "0.000001"),
        (
            datetime(2024, 3, 11, 8, 51, 1, 461270),
            ColumnType(ColumnKind.DATETIME, length=6),
            "2024-03-11 08:51:01.461270",
        ),
        (
            datetime(2020, 2, 20, 2, 20, 20, tzinfo=timezone.utc),
            ColumnType(ColumnKind.TIMESTAMP),
            "2020-02-20 10:20:20",
        ),
        (bytes([5, 0, 0xE9, 0xFF]), ColumnType(ColumnKind.VARBINARY), "\u0005\u0000éÿ"),
    ],
)
def test_wire_text_matches_ticdc(value, column_type, expected):
    assert wire_text(value, column_type, ZoneInfo("Asia/Shanghai")) == expected
