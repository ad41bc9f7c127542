"""The DDL corpora (tests/fixtures/corpora) under TiCDC Avro, with the writer schemas TiCDC v8.3.0 registered,
served by a real registry behind basic auth over TLS. Avro carries no DDL, so what it cannot show is known
in advance from the corpus's own record of what happened upstream (events.json): rows a DDL moves or
removes without row events (TRUNCATE, DROP, RENAME, partition DDL, EXCHANGE), values a MODIFY COLUMN
rewrites, a key that moves, column names outside [A-Za-z0-9_] (TiCDC sanitises them) or its own field names
(a table with one has no record at all), and the DEFAULT of a
DECIMAL added to a table with rows (TiCDC writes a null default for a logical type, so the user gives it).
Every other table lands exactly, every cell, and no record of TiCDC's is refused."""

from __future__ import annotations

import json
import os
import re

import pytest
from test_ticdc_corpus_avro import corpus_records, mirror, mirrored
from ticdc_fixture import CORPORA, differences, expected_tables, shown_without_ddl

_AVRO_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Fields TiCDC's Avro encoder adds itself: a table with a column of one of these names has no record.
_TICDC_FIELDS = {"_tidb_op", "_tidb_commit_ts", "_tidb_commit_physical_time"}


def avro_exact(corpus: str) -> list[str]:
    """The tables whose history Avro records can show whole (``shown_without_ddl``) and whose every column
    name is one TiCDC keeps."""
    return shown_without_ddl(
        corpus,
        lambda column: bool(_AVRO_NAME.fullmatch(column["name"])) and column["name"] not in _TICDC_FIELDS,
    )


def uncarried_defaults(corpus: str) -> str:
    """``column-defaults`` for every column whose older rows' value TiCDC's schema cannot carry (a DECIMAL
    registered with a null default, a DEFAULT CURRENT_TIMESTAMP), where every row reads the same upstream:
    what TiDB returns (expected.json), as a user would give it."""
    entries = []
    for entry in json.loads((CORPORA[corpus] / "avro" / "registry.json").read_text()):
        schema = json.loads(entry["schema"])
        table = entry["subject"].removeprefix("tidb_").removesuffix("-value")
        for name, expected in expected_tables(CORPORA[corpus]).items():
            if name.replace(".", "_") != table or not entry["subject"].endswith("-value"):
                continue
            for field in schema["fields"]:
                types = field["type"] if isinstance(field["type"], list) else [field["type"]]
                decimal = any(isinstance(t, dict) and t.get("logicalType") == "decimal" for t in types)
                moment = str(field.get("default")).startswith("CURRENT_TIMESTAMP")
                column = next((c for c in expected["columns"] if c["name"] == field["name"]), None)
                if ((decimal and field.get("default") is None) or moment) and column is not None:
                    values = {r[field["name"]] for r in expected["rows"]} - {None}
                    if len(values) == 1:  # every row reads the same: the DEFAULT older rows read
                        # TiDB shows a DATETIME as '2026-05-01 00:01:00'; the corpus renders it with a T.
                        entries.append(f"{name}.{field['name']}={values.pop().replace('T', ' ')}")
    return ";".join(sorted(set(entries)))


# CI runs the corpus of tables created, dropped and renamed (tables), which no other CI run lands. The `full`
# profile (CORPUS_PROFILE=full) runs every corpus with Avro records, among them those whose Avro records are
# their own traps: a tombstone whose key moved (columns), a writer schema that changes a column's type
# between rows of one batch (generated).
PROFILE = os.environ.get("CORPUS_PROFILE", "ci")
CI_CORPORA = ("tables",)


@pytest.mark.parametrize(
    "corpus",
    sorted(c for c in CORPORA if (CORPORA[c] / "avro").is_dir() and (PROFILE == "full" or c in CI_CORPORA)),
)
def test_every_table_avro_can_show_lands_and_no_record_is_refused(spark, secured_registry, tmp_path, corpus):
    records = corpus_records(secured_registry, tmp_path / "in", CORPORA[corpus])
    defaults = uncarried_defaults(corpus)
    params = {"max-bad-ratio": "0.1", **({"column-defaults": defaults} if defaults else {})}
    result = mirror(spark, records, tmp_path / "lake", secured_registry, **params)
    problems = {}
    exact = avro_exact(corpus)  # none in views-swaps: every table there is renamed
    for name in exact:
        found = differences(
            expected_tables(CORPORA[corpus])[name],
            mirrored(spark, tmp_path / "lake", name),
            skip_virtual=True,
        )
        if found:
            problems[name] = found
    assert problems == {}
    # A tombstone whose key columns are no longer the table's key (it moved by ADD/DROP PRIMARY KEY) is the
    # only record the mirror may set aside: Avro says nothing that would tell the row.
    assert result.quarantined == (1 if corpus == "columns" else 0)
