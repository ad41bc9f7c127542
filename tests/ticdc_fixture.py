"""The corpus TiCDC's own encoders wrote (tests/fixtures/ticdc-v8.3.0): paths, and a cell-by-cell comparison
of a mirrored table with what TiDB returned to SELECT, by the corpus README's rules.

Those rules, per TiDB type: integers and BIT by value; DECIMAL by exact decimal value; FLOAT after rounding
both sides to float32; DOUBLE by value; DATE/DATETIME/TIMESTAMP by rendered text (TIMESTAMP in UTC); TIME
by microseconds; strings exactly; binaries by bytes (TiDB renders HEX); JSON by parsed value, where an int
is not a float.
"""

from __future__ import annotations

import base64
import json
import re
import struct
from collections.abc import Callable
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

CORPUS = Path(__file__).parent / "fixtures" / "ticdc-v8.3.0"
# Corpora the kit wrote for our own DDL histories (tests/fixtures/corpora/<name>).
CORPORA = {
    path.name: path
    for path in sorted((Path(__file__).parent / "fixtures" / "corpora").iterdir())
    if path.is_dir()
}
VARIANTS = ("canal-json", "simple-json", "simple-avro", "avro")


def expected_tables(corpus: Path = CORPUS) -> dict[str, dict[str, Any]]:
    return json.loads((corpus / "expected.json").read_text())["tables"]


def expected_gone(corpus: Path) -> list[str]:
    """Tables (and views) a DDL named that do not exist upstream at the end, and tables TiCDC never
    replicates: none of them may be a live table in the mirror."""
    expected = json.loads((corpus / "expected.json").read_text())
    return [*expected.get("absent", []), *expected.get("ineligible", [])]


def is_virtual(column: dict[str, Any]) -> bool:
    """A VIRTUAL generated column: no protocol carries its values; the mirror computes it (TiCDC Avro's
    writer schemas leave it out)."""
    return str(column.get("generated", "")).upper().startswith("VIRTUAL")


def _float32(value: float) -> float:
    return struct.unpack("<f", struct.pack("<f", float(value)))[0]


def _time_micros(text: str) -> int:
    match = re.fullmatch(r"(-?)(\d+):(\d\d):(\d\d)(?:\.(\d{1,6}))?", text.strip())
    assert match, f"not a TIME: {text!r}"
    sign, hours, minutes, seconds, fraction = match.groups()
    micros = ((int(hours) * 60 + int(minutes)) * 60 + int(seconds)) * 1_000_000
    micros += int((fraction or "0").ljust(6, "0"))
    return -micros if sign else micros


def _strict_json(value: Any) -> Any:
    """A parsed JSON value with its kinds made explicit, so that 1 and 1.0 (or true and 1) differ."""
    if isinstance(value, dict):
        return {k: _strict_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_strict_json(v) for v in value]
    return (type(value).__name__, value)


def same_cell(column_type: str, expected: str | None, actual: Any) -> bool:
    """Whether a Delta value equals TiDB's rendering of the same cell, for a column of ``column_type``."""
    if expected is None or actual is None:
        return expected is None and actual is None
    kind = column_type.split("(")[0].split()[0].lower()
    if kind in ("tinyint", "smallint", "mediumint", "int", "integer", "bigint", "year", "bit"):
        return int(expected) == int(actual)
    if kind in ("decimal", "numeric"):
        return Decimal(expected) == Decimal(str(actual))
    if kind == "float":
        return _float32(float(expected)) == _float32(actual)
    if kind == "double":
        return float(expected) == float(actual)
    if kind == "date":
        assert isinstance(actual, date), actual
        return actual.isoformat() == expected
    if kind in ("datetime", "timestamp"):
        assert isinstance(actual, datetime), actual
        return actual.strftime("%Y-%m-%dT%H:%M:%S.%f") == expected
    if kind == "time":
        return _time_micros(expected) == _time_micros(str(actual))
    if kind in ("binary", "varbinary") or kind.endswith("blob"):
        return bytes(actual).hex().upper() == expected
    if kind == "json":
        return _strict_json(json.loads(expected)) == _strict_json(json.loads(actual))
    return actual == expected


def differences(
    expected: dict[str, Any],
    actual_rows: list[dict[str, Any]],
    ours: str | None = "_tidb_commit_ts",
    *,
    skip_virtual: bool = False,
) -> list[str]:
    """Every cell (and missing or extra row, or column) where the mirror differs from TiDB's table.

    ``ours``: the mirror's own column in ``actual_rows``, left out of the comparison (None: the rows hold
    upstream's columns only). Any other column, whatever its name, is upstream's."""
    types = {c["name"]: c["type"] for c in expected["columns"] if not (skip_virtual and is_virtual(c))}
    key = expected["key"]
    problems = []
    columns = {name for row in actual_rows for name in row if name != ours}
    if actual_rows and columns != set(types):
        problems.append(f"columns {sorted(columns)} != {sorted(types)}")
    unmatched = list(actual_rows)
    for row in expected["rows"]:
        match = next(
            (a for a in unmatched if all(same_cell(types[k], row[k], a.get(k)) for k in key)),
            None,
        )
        if match is None:
            problems.append(f"missing row with key {[row[k] for k in key]}")
            continue
        unmatched.remove(match)
        for name, column_type in types.items():
            if not same_cell(column_type, row[name], match.get(name)):
                problems.append(
                    f"key {[row[k] for k in key]} column {name} ({column_type}): "
                    f"TiDB {row[name]!r}, mirror {match.get(name)!r}"
                )
    problems.extend(f"extra row {row}" for row in unmatched)
    return problems


# DDL events whose effect on rows or names no record of a protocol without DDL (TiCDC Avro, Debezium) shows
# (tiflow's job type names).
INVISIBLE = {
    "truncate table", "drop table", "rename table", "rename tables", "drop schema", "truncate partition",
    "drop partition", "exchange partition", "modify column", "alter table multi-schema change",
    "add primary key", "drop primary key",
}  # fmt: skip
_QUALIFIED = re.compile(r"`((?:[^`]|``)+)`\.`((?:[^`]|``)+)`")


def shown_without_ddl(corpus: str, column_ok: Callable[[dict[str, Any]], bool] = lambda _: True) -> list[str]:
    """The tables whose history row records alone can show whole: no DDL of theirs is in INVISIBLE (every
    table such a statement names counts, a rename's source and an exchange's partner too), and every column
    passes ``column_ok``."""
    touched, dropped = set(), set()
    for step in json.loads((CORPORA[corpus] / "events.json").read_text()):
        for event in step.get("events", []):
            if event["type"] == "drop schema":
                dropped.add(event["schema"])
            if event["type"] in INVISIBLE:
                touched.add(f"{event['schema']}.{event['table']}")
                touched.update(f"{a}.{b}" for a, b in _QUALIFIED.findall(event["query"]))
    return [
        name
        for name, table in expected_tables(CORPORA[corpus]).items()
        if name not in touched and name.split(".")[0] not in dropped and all(map(column_ok, table["columns"]))
    ]


def handle_keys(corpus: Path) -> dict[str, list[str]]:
    """Each table's key as TiCDC chose it (Open Protocol's handle-key flag in the corpus's own records): what
    a user of a protocol that does not name it (Debezium) gives."""
    from ingest.decode import open_protocol

    keys: dict[str, list[str]] = {}
    for line in (corpus / "open-protocol" / "records.jsonl").read_text().splitlines():
        record = json.loads(line)
        value = base64.b64decode(record["value"]) if record["value"] else b""
        for key, entry in open_protocol.entries(base64.b64decode(record["key"]), value):
            head = json.loads(key)
            if head["t"] == open_protocol.ROW:
                image = json.loads(entry)
                image = image.get("u") or image.get("d")
                flagged = [n for n, c in image.items() if c["f"] & open_protocol.HANDLE_KEY_FLAG]
                keys[f"{head['scm']}.{head['tbl']}"] = sorted(flagged)
    return keys
