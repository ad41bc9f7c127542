"""TiCDC Avro records that TiCDC's own encoder wrote from a real TiDB (tests/fixtures/ticdc-v8.3.0/avro), with
the writer schemas it registered, served by a real Confluent-compatible registry that answers only basic auth
over TLS (nginx in front of Apicurio), the password a secret reference: every cell lands as TiDB
returned it, except what the wire cannot carry, which is warned about and can be supplied."""

from __future__ import annotations

import base64
import json
import logging
from pathlib import Path

from mirror import located
from ticdc_fixture import CORPUS, differences, expected_tables

from ingest.config import IngestConfig
from ingest.model import TableId
from ingest.pipeline import run_files
from ingest.state.ddl_history import history_path
from testkit.local_services import SecuredRegistry

# Rows of acc.t_uk written before `ADD COLUMN c_added_dec DECIMAL(12,4) DEFAULT 3.1400` and never updated.
UNCARRIED_DEFAULT = "3.1400"


def corpus_records(secured: SecuredRegistry, target: Path, corpus: Path = CORPUS) -> Path:
    """The corpus records, their schema ids mapped to the ids this registry gave the same schemas."""
    registry = secured.client()
    ids = {
        entry["id"]: registry.register(entry["subject"], entry["schema"])
        for entry in json.loads((corpus / "avro" / "registry.json").read_text())
    }

    def remap(text: str | None) -> str | None:
        if text is None:
            return None
        data = base64.b64decode(text)
        assert data[0] == 0, "Confluent framing"
        new_id = ids[int.from_bytes(data[1:5], "big")]
        return base64.b64encode(data[:1] + new_id.to_bytes(4, "big") + data[5:]).decode()

    target.mkdir(parents=True)
    lines = []
    for line in (corpus / "avro" / "records.jsonl").read_text().splitlines():
        record = json.loads(line)
        record["key"], record["value"] = remap(record["key"]), remap(record["value"])
        lines.append(json.dumps(record))
    (target / "records.jsonl").write_text("\n".join(lines) + "\n")
    return target


def mirror(spark, records: Path, lake: Path, secured: SecuredRegistry, **params: str):
    config = IngestConfig.from_params(
        {"input": str(records), "target-path": str(lake), "protocol": "avro", **secured.params(), **params}
    )
    return run_files(spark, config)


def mirrored(spark, lake: Path, name: str) -> list[dict]:
    database, table = name.split(".")
    return [
        r.asDict() for r in spark.read.format("delta").load(located(lake, TableId(database, table))).collect()
    ]


def test_every_cell_lands_with_the_default_the_user_gives(spark, secured_registry, tmp_path):
    records = corpus_records(secured_registry, tmp_path / "in")
    lake = tmp_path / "lake"
    result = mirror(
        spark,
        records,
        lake,
        secured_registry,
        **{"column-defaults": f"acc.t_uk.c_added_dec={UNCARRIED_DEFAULT}"},
    )
    assert result.quarantined == 0
    for name, expected in expected_tables().items():
        assert differences(expected, mirrored(spark, lake, name), skip_virtual=True) == [], name


def test_without_it_the_uncarried_default_is_warned_about_and_recorded(
    spark, secured_registry, tmp_path, caplog
):
    records = corpus_records(secured_registry, tmp_path / "in")
    lake = tmp_path / "lake"
    with caplog.at_level(logging.WARNING):
        mirror(spark, records, lake, secured_registry)
    tables = expected_tables()
    for name, expected in tables.items():
        if name != "acc.t_uk":
            assert differences(expected, mirrored(spark, lake, name), skip_virtual=True) == [], name
    # Exactly the rows that read the DEFAULT upstream differ, and only in that column.
    problems = differences(tables["acc.t_uk"], mirrored(spark, lake, "acc.t_uk"), skip_virtual=True)
    before_add = [r for r in tables["acc.t_uk"]["rows"] if r["c_added_dec"] == UNCARRIED_DEFAULT]
    assert before_add and len(problems) == len(before_add)
    assert all("column c_added_dec" in p and "mirror None" in p for p in problems)
    warning = [r.getMessage() for r in caplog.records if "c_added_dec" in r.getMessage()]
    assert warning and "--column-defaults acc.t_uk.c_added_dec=" in warning[0]
    history = spark.read.format("delta").load(history_path(str(lake / "_ingest"))).collect()
    assert any("c_added_dec" in (row["detail"] or "") and "null default" in row["detail"] for row in history)
