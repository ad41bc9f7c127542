"""TiCDC Avro's row checksums (``_tidb_row_level_checksum``, the string modes checksums require), as TiCDC
v8.3.0 wrote them from a TiDB that writes them (tests/fixtures/corpora/checksums/avro), with the writer
schemas it registered, served by a real registry: every record that carries one is verified with no mismatch,
and a copy with one value changed has exactly that record quarantined as a mismatch."""

from __future__ import annotations

import base64
import io
import json
import re

import fastavro
import pytest
from test_ticdc_corpus_avro import corpus_records, mirror, mirrored
from test_ticdc_ddl_corpora_avro import avro_exact, uncarried_defaults
from ticdc_fixture import CORPORA, differences, expected_tables

from ingest.state.quarantine import read as read_quarantine

CORPUS = CORPORA["checksums"]


def _records() -> list[dict]:
    return [json.loads(line) for line in (CORPUS / "avro" / "records.jsonl").read_text().splitlines()]


def _schemas() -> dict[int, dict]:
    entries = json.loads((CORPUS / "avro" / "registry.json").read_text())
    return {
        e["id"]: fastavro.parse_schema(json.loads(e["schema"]), _ignore_default_error=True) for e in entries
    }


def _datum(record: dict, schemas: dict[int, dict]) -> tuple[int, dict] | None:
    if record["value"] is None:
        return None
    value = base64.b64decode(record["value"])
    schema_id = int.from_bytes(value[1:5], "big")
    return schema_id, fastavro.schemaless_reader(io.BytesIO(value[5:]), schemas[schema_id])


def _carried(schemas: dict[int, dict]) -> dict[str, int]:
    """Per table, the records that carry a checksum to check, as TiCDC wrote them."""
    carried: dict[str, int] = {}
    for record in _records():
        found = _datum(record, schemas)
        if found is not None and found[1]["_tidb_row_level_checksum"] != "0":
            table = record["topic"].removeprefix("tidb_").replace("_", ".", 1)
            carried[table] = carried.get(table, 0) + 1
    return carried


def _mirror(spark, registry, tmp_path, corpus, **params):
    records = corpus_records(registry, tmp_path / "in", corpus)
    return mirror(
        spark,
        records,
        tmp_path / "lake",
        registry,
        **{"column-defaults": uncarried_defaults("checksums")},
        **params,
    )


# CI verifies every other record in the copy with one value changed (below).
@pytest.mark.full
def test_every_avro_record_that_carries_a_checksum_is_verified(spark, secured_registry, tmp_path):
    result = _mirror(spark, secured_registry, tmp_path, CORPUS)
    assert result.quarantined == 0
    for name in avro_exact("checksums"):
        found = differences(
            expected_tables(CORPUS)[name], mirrored(spark, tmp_path / "lake", name), skip_virtual=True
        )
        assert found == [], name
    carried = _carried(_schemas())
    assert sum(carried.values()) > 30
    assert {str(t): r.verified for t, r in result.tables.items() if r.verified} == carried
    assert sum(r.mismatched for r in result.tables.values()) == 0


# On Spark Connect in CI (the sums are an Arrow UDF, which Connect runs beside its server); the classic run,
# whose path the Simple tests walk, in the full profile.
@pytest.mark.both_modes
@pytest.mark.full(modes=("classic",))
def test_a_changed_avro_value_is_quarantined_as_a_mismatch_and_every_other_record_verified(
    spark, secured_registry, tmp_path
):
    schemas = _schemas()
    records = _records()
    # A text value of the last t_cpk row TiCDC sent, changed in a copy of its record.
    index = max(i for i, r in enumerate(records) if r["topic"] == "tidb_acc_t_cpk" and r["value"] is not None)
    schema_id, datum = _datum(records[index], schemas)
    assert datum["_tidb_row_level_checksum"] != "0"
    datum["v_text"] = (datum["v_text"] or "") + "!"
    body = io.BytesIO()
    fastavro.schemaless_writer(body, schemas[schema_id], datum)
    records[index]["value"] = base64.b64encode(
        b"\0" + schema_id.to_bytes(4, "big") + body.getvalue()
    ).decode()
    copy = tmp_path / "copy"
    (copy / "avro").mkdir(parents=True)
    (copy / "avro" / "records.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n")
    (copy / "avro" / "registry.json").write_text((CORPUS / "avro" / "registry.json").read_text())
    result = _mirror(spark, secured_registry, tmp_path, copy, **{"max-bad-ratio": "0.1"})
    quarantined = read_quarantine(spark, str(tmp_path / "lake" / "_ingest")).collect()
    assert [(r["topic"], r["offset"]) for r in quarantined] == [
        (records[index]["topic"], records[index]["offset"])
    ]
    found = re.match(r"^checksum mismatch: expected (\d+), computed (\d+)$", quarantined[0]["error"])
    assert found and found.group(1) == datum["_tidb_row_level_checksum"] and found.group(2) != found.group(1)
    # Every other record that carries a checksum is verified, and nothing else is lost.
    carried = _carried(schemas)
    carried["acc.t_cpk"] -= 1
    assert {str(t): r.verified for t, r in result.tables.items() if r.verified} == carried
    assert {str(t): r.mismatched for t, r in result.tables.items() if r.mismatched} == {"acc.t_cpk": 1}
    for name in avro_exact("checksums"):
        found = differences(
            expected_tables(CORPUS)[name], mirrored(spark, tmp_path / "lake", name), skip_virtual=True
        )
        if name == "acc.t_cpk":  # the changed update is not applied: its row is as before it
            assert found and all("k1=3" in p or "'k1': 3" in p or "3" in p for p in found), found
        else:
            assert found == [], name
