"""The kit's corpora through TiCDC's Debezium, read from captured records: each table's key given as a user
gives it (the handle key TiCDC uses), and column-types for what Debezium's records cannot tell (BIGINT
UNSIGNED, binary strings, DECIMALs a double holds exactly), as a user gives them. Debezium carries no DDL,
so what it cannot show is known in advance (``shown_without_ddl``, TiCDC Avro's rule), and so are the cells
it loses (the README's Debezium section): DECIMALs of more than 15 digits, which mirror as DOUBLE, rows older
than an ADD COLUMN with a DEFAULT, VIRTUAL generated columns. Every other cell lands exactly."""

from __future__ import annotations

import json
import os
import re

import pytest
from mirror import corpus_rows
from ticdc_fixture import CORPORA, differences, expected_tables, handle_keys, shown_without_ddl

from ingest.config import IngestConfig
from ingest.pipeline import run_files

PROFILE = os.environ.get("CORPUS_PROFILE", "ci")
WITH_DEBEZIUM = sorted(name for name in CORPORA if (CORPORA[name] / "debezium").is_dir())
# CI: TiCDC's own test workloads (every type TiDB has, unsigned and zero-filled ones among them) and the
# corpus of tables created, dropped and renamed; `full`: every corpus.
IN_CI = ("tidb-tests", "tables")
_DECIMAL = re.compile(r"decimal\((\d+),(\d+)\)")
_BINARY = re.compile(r"^(var)?binary\(\d+\)|^(tiny|medium|long)?blob$")
_DEFAULT = re.compile(r"\bDEFAULT\s+(?!NULL\b)", re.IGNORECASE)


def quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def user_settings(corpus: str) -> dict[str, str]:
    """table-keys and column-types as a user who knows the tables writes them."""
    keys = handle_keys(CORPORA[corpus])
    types = []
    for name, table in expected_tables(CORPORA[corpus]).items():
        for column in table["columns"]:
            typ = column["type"].lower()
            decimal = _DECIMAL.match(typ)
            if typ.startswith("bigint") and "unsigned" in typ:
                types.append(f"{name}.{column['name']}=bigint unsigned")
            elif _BINARY.match(typ) or (decimal and int(decimal.group(1)) <= 15):
                types.append(f"{name}.{column['name']}={typ.split()[0]}")
    return {
        "table-keys": ";".join(f"{table}={','.join(map(quote, key))}" for table, key in keys.items()),
        "column-types": ";".join(t for t in types if ";" not in t),
    }


def added_with_default(corpus: str) -> set[str]:
    """Tables with an ADD COLUMN … DEFAULT: Debezium cannot carry what their older rows read."""
    tables = set()
    for step in json.loads((CORPORA[corpus] / "events.json").read_text()):
        for event in step.get("events", []):
            if event["type"] == "add column" and _DEFAULT.search(event["query"]):
                tables.add(f"{event['schema']}.{event['table']}")
    return tables


def lossy_columns(table: dict) -> set[str]:
    """Columns whose values Debezium rounds: DECIMALs a double cannot hold."""
    found = set()
    for column in table["columns"]:
        decimal = _DECIMAL.match(column["type"].lower())
        if decimal and int(decimal.group(1)) > 15:
            found.add(column["name"])
    return found


@pytest.mark.long
@pytest.mark.parametrize("corpus", [c for c in WITH_DEBEZIUM if PROFILE == "full" or c in IN_CI])
def test_every_table_debezium_can_show_lands_every_cell_it_keeps(spark, tmp_path, corpus):
    config = IngestConfig.from_params(
        {
            "input": str(CORPORA[corpus] / "debezium" / "records.jsonl"),
            "target-path": str(tmp_path / "lake"),
            "protocol": "debezium",
            **user_settings(corpus),
        }
    )
    result = run_files(spark, config)
    assert result.quarantined == 0
    expected = expected_tables(CORPORA[corpus])
    shown = [name for name in shown_without_ddl(corpus) if name not in added_with_default(corpus)]
    assert shown
    problems = {}
    for name in shown:
        rows = corpus_rows(spark, config, name)
        lossy = lossy_columns(expected[name])
        found = (
            ["missing table"] if rows is None else differences(expected[name], rows, None, skip_virtual=True)
        )
        kept = [p for p in found if not any(f" column {c} (" in p for c in lossy)]
        if kept:
            problems[name] = kept
    assert problems == {}
