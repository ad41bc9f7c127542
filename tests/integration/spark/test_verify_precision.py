"""Verify sees a difference of one unit of every type's finest precision: one microsecond, one unit of a
decimal's last digit, one ulp of a float, one bit of a BIT(64), one byte of a binary, one character.

Each row of the table below is upstream's row with one column moved by that unit (and one row whose JSON is
only spelt differently, which is the same value). Against a Dumpling export (SQL and CSV) and against a
second mirror of that upstream, every moved row must be named by its key with that column, and no other.
"""

from __future__ import annotations

import json
import struct
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from math import nextafter
from pathlib import Path

from dumpling_export import write_export

from ingest.cli import main
from ingest.commands.verify import verify_mirrors, verify_snapshot
from ingest.commands.verify_rules import DiffKind
from ingest.config import IngestConfig
from ingest.load_config import LoadConfig
from ingest.model import TableId
from ingest.pipeline import run_files
from testkit.sample import Stream

TABLE = TableId("app", "exact")
CREATE = """CREATE TABLE `app`.`exact` (
  `id` int(11) NOT NULL,
  `ti` tinyint(4) DEFAULT NULL, `bi` bigint(20) DEFAULT NULL, `biu` bigint(20) unsigned DEFAULT NULL,
  `d` decimal(10,4) DEFAULT NULL, `d38` decimal(38,30) DEFAULT NULL, `d65` decimal(65,30) DEFAULT NULL,
  `f` float DEFAULT NULL, `db` double DEFAULT NULL,
  `c` char(4) DEFAULT NULL, `vc` varchar(64) DEFAULT NULL,
  `b` binary(4) DEFAULT NULL, `vb` varbinary(64) DEFAULT NULL,
  `dt` date DEFAULT NULL, `dtm` datetime(6) DEFAULT NULL, `ts` timestamp(6) NULL DEFAULT NULL,
  `tm` time(6) DEFAULT NULL, `yr` year(4) DEFAULT NULL,
  `bt` bit(64) DEFAULT NULL, `bt8` bit(8) DEFAULT NULL,
  `e` enum('a','b') DEFAULT NULL, `st` set('x','y') DEFAULT NULL, `js` json DEFAULT NULL,
  PRIMARY KEY (`id`)
)"""

BASE = {
    "ti": 127, "bi": 9223372036854775807, "biu": 18446744073709551615,
    "d": Decimal("123456.7891"), "d38": Decimal("12345678.123456789012345678901234567890"),
    "d65": Decimal("9" * 35 + "." + "9" * 30),
    "f": 3.140000104904175, "db": 0.1,
    "c": "abcd", "vc": "Zoë 测试", "b": b"\x00\x01\x02\x03", "vb": bytes(range(40)),
    "dt": date(2026, 1, 2), "dtm": datetime(2022, 1, 4, 19, 28, 6, 105925),
    "ts": datetime(2022, 1, 4, 19, 28, 6, 215147, tzinfo=timezone.utc), "tm": "-838:59:58.999999",
    "yr": 2024, "bt": (1 << 63) | 5, "bt8": 0b1010, "e": "a", "st": "x", "js": '{"k": [1, 2], "a": "z"}',
}  # fmt: skip


def _next_float32(value: float) -> float:
    (bits,) = struct.unpack("<I", struct.pack("<f", value))
    return float(struct.unpack("<f", struct.pack("<I", bits + 1))[0])


# Each column moved by one unit of its type's finest precision.
MOVED = {
    "ti": 126, "bi": 9223372036854775806, "biu": 18446744073709551614,
    "d": Decimal("123456.7892"), "d38": Decimal("12345678.123456789012345678901234567891"),
    "d65": Decimal("9" * 35 + "." + "9" * 29 + "8"),
    "f": _next_float32(BASE["f"]), "db": nextafter(0.1, 1.0),
    "c": "abce", "vc": "Zoë 测诗", "b": b"\x00\x01\x02\x04", "vb": bytes(range(39)) + b"\x28",
    "dt": date(2026, 1, 3), "dtm": BASE["dtm"] + timedelta(microseconds=1),
    "ts": BASE["ts"] + timedelta(microseconds=1), "tm": "-838:59:58.999998",
    "yr": 2025, "bt": (1 << 63) | 4, "bt8": 0b1011, "e": "b", "st": "x,y", "js": '{"k": [1, 3], "a": "z"}',
}  # fmt: skip
COLUMNS = list(MOVED)
RESPELT_ID = len(COLUMNS) + 1  # its JSON spelt without spaces and with the keys in another order
RESPELT_JSON = '{"a":"z","k":[1,2]}'


def _upstream(moved: bool, only: str | None = None) -> Stream:
    """Upstream at G: row i (from 1) holds BASE with column i moved when ``moved`` (only the column
    ``only``, when given), and one more row."""
    s = Stream(tz_name="UTC")
    table = s.create_table(CREATE, s.tso(1))
    for i, column in enumerate(COLUMNS, start=1):
        row = {"id": i, **BASE}
        if moved and only in (None, column):
            row[column] = MOVED[column]
        s.insert(table, row, s.tso(2))
    respelt = moved and only in (None, "js")
    s.insert(table, {"id": RESPELT_ID, **BASE, **({"js": RESPELT_JSON} if respelt else {})}, s.tso(2))
    s.watermark(s.tso(3))
    return s


def _mirror(spark, s: Stream, root: Path) -> Path:
    s.write(root / "input")
    lake = root / "lake"
    config = IngestConfig.from_params({"input": str(root / "input"), "target-path": str(lake)})
    assert run_files(spark, config).global_watermark == s.complete_watermark()
    return lake


def _parse(text: str) -> dict:
    return json.loads(text, parse_float=Decimal)  # every digit of DECIMAL(38,30)


def _moved_columns(report) -> dict[int, set[str]]:
    (verdict,) = report.tables
    found = {}
    for diff in verdict.diffs:
        assert diff.kind is DiffKind.DIFFERENT, diff
        left, right = _parse(diff.left), _parse(diff.right)
        found[_parse(diff.key)["id"]] = {k for k, v in left.items() if right[k] != v}
    return found


def _load(export: Path, lake: Path) -> LoadConfig:
    return LoadConfig.from_params({"input": str(export), "target-path": str(lake)})


EXPECTED = {i: {column} for i, column in enumerate(COLUMNS, start=1)}


def test_verify_sees_one_unit_of_every_type_against_exports_and_another_mirror(spark, tmp_path, capsys):
    """One test, so that the two mirrors are built once (by one test worker)."""
    base, moved = _upstream(False), _upstream(True)
    lake, other = _mirror(spark, base, tmp_path / "a"), _mirror(spark, moved, tmp_path / "b")
    g = base.complete_watermark()
    for data_format in ("sql", "csv"):
        same = write_export(
            base, g, tmp_path / f"same-{data_format}", {TABLE: CREATE}, data_format=data_format
        )
        assert verify_snapshot(spark, _load(same, lake)).matches, data_format
        export = write_export(
            moved, g, tmp_path / f"moved-{data_format}", {TABLE: CREATE}, data_format=data_format
        )
        report = verify_snapshot(spark, _load(export, lake))
        assert not report.matches and _moved_columns(report) == EXPECTED, data_format

    assert verify_mirrors(spark, str(lake), str(lake)).matches
    assert _moved_columns(verify_mirrors(spark, str(lake), str(other))) == EXPECTED

    # The command line: one microsecond alone makes it exit 1 and name the key, with both values.
    export = write_export(_upstream(True, "dtm"), g, tmp_path / "dtm", {TABLE: CREATE}, data_format="sql")
    capsys.readouterr()
    assert main(["verify", "--target-path", str(lake), "--snapshot", str(export)]) == 1
    out = capsys.readouterr().out
    row = COLUMNS.index("dtm") + 1
    assert "MISMATCH: 0 of 1 tables match" in out and f'key {{"id":{row}}}: values differ' in out
    assert '"dtm":"2022-01-04T19:28:06.105925"' in out and '"dtm":"2022-01-04T19:28:06.105926"' in out


def test_the_moved_upstream_differs_from_the_base_in_exactly_one_column_per_row():
    """The table above is what the other tests rely on: each row moved in its own column only."""
    g = _upstream(False).complete_watermark()
    base, moved = _upstream(False).state_at(g)[TABLE], _upstream(True).state_at(g)[TABLE]
    changed = {key[0]: {c for c in COLUMNS if base[key][c] != moved[key][c]} for key in base}
    assert changed == {**EXPECTED, RESPELT_ID: {"js"}}
    assert moved[(RESPELT_ID,)]["js"] == RESPELT_JSON
