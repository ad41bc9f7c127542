"""TiDB's row checksums, as TiCDC v8.3.0 sent them from a TiDB that writes them (the kit's CORPUS_CHECKSUM=1,
tests/fixtures/corpora/checksums): every row image that carries one is verified against the values as they
arrived, with no mismatch, over every type of the kit's type matrix and TIMESTAMPs written in a session time
zone other than UTC. A copy with one value changed quarantines exactly that record as a mismatch, stops its
table below it, and loses nothing else."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import pytest
from mirror import corpus_problems, corpus_rows
from ticdc_fixture import CORPORA

from ingest.config import IngestConfig
from ingest.errors import TooManyBadRecords
from ingest.model import TableId
from ingest.pipeline import run_files
from ingest.state.quarantine import read as read_quarantine
from ingest.state.table_state import read_table_state

CORPUS = CORPORA["checksums"]
VARIANTS = {
    "simple-json": {"protocol": "simple"},
    "simple-avro": {"protocol": "simple", "simple-encoding": "avro"},
}
MISMATCH = re.compile(r"^checksum mismatch( in the old image)?: expected (\d+), computed (\d+)$")


def config_for(records: Path, lake: Path, variant: str, **params: str) -> IngestConfig:
    return IngestConfig.from_params(
        {"input": str(records), "target-path": str(lake), **VARIANTS[variant], **params}
    )


def simple_records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def message(record: dict[str, Any]) -> dict[str, Any]:
    return json.loads(base64.b64decode(record["value"]))


def carried(records: list[dict[str, Any]]) -> tuple[dict[str, int], dict[str, int]]:
    """Per table, the DML records that carry a checksum to check, and those that carry only zeros (the
    halves of a split update), as TiCDC wrote them."""
    verifiable: dict[str, int] = {}
    unverifiable: dict[str, int] = {}
    for record in records:
        m = message(record)
        if m.get("type") not in ("INSERT", "UPDATE", "DELETE"):
            continue
        name = f"{m['database']}.{m['table']}"
        checks = m["checksum"]["current"] or m["checksum"]["previous"]
        counter = verifiable if checks else unverifiable
        counter[name] = counter.get(name, 0) + 1
    return verifiable, unverifiable


# In the full profile: in CI the copy with changed values below verifies every other record of the corpus
# (Simple Avro is read into Simple JSON's form, checksums included).
@pytest.mark.full
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_row_that_carries_a_checksum_is_verified_with_no_mismatch(spark, tmp_path, variant):
    config = config_for(CORPUS / variant / "records.jsonl", tmp_path / "lake", variant)
    result = run_files(spark, config)
    assert result.quarantined == 0
    assert corpus_problems(spark, config, CORPUS) == {}
    verifiable, unverifiable = carried(simple_records(CORPUS / "simple-json" / "records.jsonl"))
    assert sum(verifiable.values()) > 40 and sum(unverifiable.values()) > 0  # the corpus has both
    reported = {
        str(t): (r.verified, r.unverified, r.mismatched) for t, r in result.tables.items() if r.verified
    }
    assert reported == {t: (n, unverifiable.get(t, 0), 0) for t, n in verifiable.items()}
    # What each table's own commits carry (and status shows), since the mirror began.
    for name, n in verifiable.items():
        state = read_table_state(spark, config.mirror.address(TableId(*name.split("."))))
        assert state is not None and (state.rows_verified, state.rows_unverified) == (
            n,
            unverifiable.get(name, 0),
        )


def _mutate(records: list[dict[str, Any]], where: dict[str, Any], image: str, column: str, value: Any) -> int:
    """Change one value of the last DML record matching ``where``; its offset."""
    found = []
    for record in records:
        m = message(record)
        if m.get("type") in ("INSERT", "UPDATE", "DELETE") and all(
            m.get(k) == v if k in ("table", "type") else (m.get("data") or m.get("old") or {}).get(k) == v
            for k, v in where.items()
        ):
            found.append(record)
    assert found, where
    m = message(found[-1])
    assert m[image][column] != value
    m[image][column] = value
    found[-1]["value"] = base64.b64encode(json.dumps(m).encode()).decode()
    return int(found[-1]["offset"])


# One changed value per type family, each in a record that is the last change of its row: an INSERT's new
# image (TIMESTAMP written in Asia/Shanghai, INT, JSON, the largest subnormal DOUBLE), an UPDATE's old image.
MUTATIONS = [
    (
        {"table": "t_cpk", "type": "INSERT", "k1": "4"},
        "data",
        "v_ts",
        {"location": "UTC", "value": "2024-06-01 00:00:00.6"},
    ),
    ({"table": "t_gen", "type": "INSERT", "id": "3"}, "data", "a", "-4"),
    ({"table": "t_uk", "type": "INSERT", "u_code": "txn-row"}, "data", "c_json", '{"t": "y"}'),
    ({"table": "t_types", "type": "INSERT", "id": "10"}, "data", "c_double", "-2.225073858507201e-308"),
    ({"table": "t_uk", "type": "UPDATE", "u_code": "SN-1"}, "old", "c_added_dec", "3.1401"),
]


def test_a_changed_value_is_quarantined_as_a_mismatch_and_its_table_stops_below_it(spark, tmp_path):
    records = simple_records(CORPUS / "simple-json" / "records.jsonl")
    assert [r["offset"] for r in records] == list(range(len(records)))  # one topic, one partition
    changed = {}
    for where, image, column, value in MUTATIONS:
        offset = _mutate(records, where, image, column, value)
        changed[offset] = (f"acc.{where['table']}", image)
    path = tmp_path / "in" / "records.jsonl"
    path.parent.mkdir()
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    config = config_for(path, tmp_path / "lake", "simple-json")
    with pytest.raises(TooManyBadRecords):
        run_files(spark, config)
    quarantined = {r["offset"]: r for r in read_quarantine(spark, config.state_path).collect()}
    # A table stops at its first mismatch: a later one is found when the table goes on past it.
    firsts = {table: offset for offset, (table, _) in sorted(changed.items(), reverse=True)}
    assert set(quarantined) == set(firsts.values())
    for offset, (table, image) in changed.items():
        if offset not in quarantined:
            continue
        found = MISMATCH.match(quarantined[offset]["error"])
        assert found, quarantined[offset]["error"]
        assert bool(found.group(1)) == (image == "old")
        assert found.group(2) != found.group(3)
        assert quarantined[offset]["table"] == table
        assert bytes(quarantined[offset]["value"]) == base64.b64decode(records[offset]["value"])
    # Each table with a mismatch stopped just below it; nothing wrong was applied.
    commits = {int(r["offset"]): message(r)["commitTs"] for r in records if r["offset"] in changed}
    for offset, (table, _) in changed.items():
        state = read_table_state(spark, config.mirror.address(TableId(*table.split("."))))
        assert state is None or state.applied_ts < commits[offset]
    # Tolerated, the rest lands: every table equals upstream but for the rows of the quarantined changes.
    run_files(spark, config_for(path, tmp_path / "lake", "simple-json", **{"max-bad-ratio": "0.2"}))
    quarantined = {r["offset"]: r for r in read_quarantine(spark, config.state_path).collect()}
    assert sorted(quarantined) == sorted(changed)  # each once
    assert all(MISMATCH.match(r["error"]) for r in quarantined.values())
    problems = corpus_problems(spark, config, CORPUS)
    assert set(problems) == {"acc.t_cpk", "acc.t_gen", "acc.t_uk", "acc.t_types"}
    rows = {name: corpus_rows(spark, config, name) for name in problems}
    assert not any(r["k1"] == 4 and r["k2"] == "tz" for r in rows["acc.t_cpk"])
    assert not any(r["id"] == 3 for r in rows["acc.t_gen"])
    assert not any(r["id"] == 10 for r in rows["acc.t_types"])
    uk = {r["u_code"]: r for r in rows["acc.t_uk"]}
    assert "txn-row" not in uk and str(uk["SN-1"]["c_added_dec"]) == "3.1400"
    # Every other record that carries a checksum was verified, as each table's own commits count them.
    verifiable, unverifiable = carried(records)
    for table, _ in changed.values():
        verifiable[table] -= 1
    for name, n in verifiable.items():
        state = read_table_state(spark, config.mirror.address(TableId(*name.split("."))))
        assert state is not None and (state.rows_verified, state.rows_unverified) == (
            n,
            unverifiable.get(name, 0),
        )


def test_without_arrow_udfs_a_pandas_udf_sums_the_same(spark, monkeypatch):
    """pyspark before 4.1 (Databricks Runtime 17) has no Arrow UDF: the same sums run in a pandas UDF."""
    from pyspark.sql import functions as F

    from ingest.apply import checksum
    from ingest.decode import simple as sp
    from ingest.decode.compression import Compression
    from ingest.decode.simple_schema import parse_table_schema
    from ingest.source.decoding import decode_json, prepare_payload
    from ingest.source.files import read_messages

    layouts = {}
    for record in simple_records(CORPUS / "simple-json" / "records.jsonl"):
        schema = message(record).get("tableSchema")
        if schema:
            announced = parse_table_schema(schema)
            layouts[announced.version] = checksum.Layout.of(announced.schema.columns)
    codec = sp.codec()
    messages = read_messages(spark, str(CORPUS / "simple-json"), {})
    decoded = decode_json(prepare_payload(messages, Compression.NONE, codec), codec).where("kind = 'dml'")

    def states() -> dict[int, str]:
        judged = checksum.checked(decoded, layouts, "UTC", require=False, deletes_carry_none=False)
        return {r["offset"]: r[checksum.STATE_COLUMN] for r in judged.collect()}

    with_arrow = states()
    monkeypatch.delattr(F, "arrow_udf", raising=False)
    assert states() == with_arrow
    verifiable, _ = carried(simple_records(CORPUS / "simple-json" / "records.jsonl"))
    assert sorted(with_arrow.values()).count(checksum.STATE_VERIFIED) == sum(verifiable.values())
    assert checksum.STATE_MISMATCH not in with_arrow.values()


def test_require_refuses_every_row_of_a_changefeed_without_the_integrity_check(spark, tmp_path):
    from ticdc_fixture import CORPUS as PLAIN  # TiCDC's records of the same history, without checksums

    config = config_for(
        PLAIN / "simple-json" / "records.jsonl",
        tmp_path / "lake",
        "simple-json",
        **{"row-checksums": "require"},
    )
    with pytest.raises(TooManyBadRecords):
        run_files(spark, config)
    quarantined = read_quarantine(spark, config.state_path).collect()
    dml = [
        r
        for r in simple_records(PLAIN / "simple-json" / "records.jsonl")
        if message(r).get("type") in ("INSERT", "UPDATE", "DELETE")
    ]
    # Each table stops at its first row: that row of each table is quarantined, nothing is applied.
    assert quarantined and all(
        r["error"].startswith("no row checksum, and row-checksums = require") for r in quarantined
    )
    assert {r["table"] for r in quarantined} == {
        f"{message(r)['database']}.{message(r)['table']}" for r in dml
    }
    for table in {r["table"] for r in quarantined}:
        assert not corpus_rows(spark, config, table), table
