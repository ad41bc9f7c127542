"""The kit's corpora through TiCDC's Debezium, read from captured records: each table's key given as a user
gives it (the handle key TiCDC uses), and column-types for what Debezium's records cannot tell (BIGINT
UNSIGNED, binary strings, DECIMALs a double holds exactly), as a user gives them. Debezium carries no DDL,
so what it cannot show is known in advance (``shown_without_ddl``, TiCDC Avro's rule), and so are the cells
it loses (the README's Debezium section): DECIMALs of more than 15 digits, which mirror as DOUBLE, rows older
than an ADD COLUMN with a DEFAULT, VIRTUAL generated columns. Every other cell lands exactly."""

from __future__ import annotations

import base64
import json

import pytest
from mirror import corpus_rows, debezium_problems, debezium_settings
from ticdc_fixture import CORPORA

from ingest.config import IngestConfig
from ingest.pipeline import run_files

WITH_DEBEZIUM = sorted(name for name in CORPORA if (CORPORA[name] / "debezium").is_dir())
# Every table of these has a DDL Debezium cannot show (a rename, a swap, a MODIFY, an ADD COLUMN … DEFAULT):
# their records are read (tests/unit/test_debezium compares each with its Canal-JSON), no cell is compared.
NOTHING_SHOWN = ("columns", "refusals", "views-swaps")


# CI reads TiCDC's own test workloads from a real broker (test_debezium_kafka), through the same decoding.
@pytest.mark.full
@pytest.mark.long
@pytest.mark.parametrize("corpus", WITH_DEBEZIUM)
def test_every_table_debezium_can_show_lands_every_cell_it_keeps(spark, tmp_path, corpus):
    config = IngestConfig.from_params(
        {
            "input": str(CORPORA[corpus] / "debezium" / "records.jsonl"),
            "target-path": str(tmp_path / "lake"),
            "protocol": "debezium",
            **debezium_settings(corpus),
        }
    )
    result = run_files(spark, config)
    assert result.quarantined == 0
    nothing = {corpus: ["no table Debezium can show"]}
    assert debezium_problems(spark, config, corpus) == (nothing if corpus in NOTHING_SHOWN else {})


@pytest.mark.full
@pytest.mark.long
@pytest.mark.parametrize("spark", ["connect"], indirect=True)
def test_debezium_lands_in_catalog_tables_by_name_on_spark_connect(spark, prefix):
    config = IngestConfig.from_params(
        {
            "input": str(CORPORA["tidb-tests"] / "debezium" / "records.jsonl"),
            "target-catalog": "spark_catalog",
            "target-schema": prefix + "_{database}",
            "state-schema": prefix + "_ingest",
            "protocol": "debezium",
            **debezium_settings("tidb-tests"),
        }
    )
    result = run_files(spark, config)
    assert result.quarantined == 0
    assert debezium_problems(spark, config, "tidb-tests") == {}


def _message(op: str, ts: int, before: dict | None, after: dict | None) -> bytes:
    struct = [
        {"type": "int32", "optional": False, "field": "id"},
        {"type": "string", "optional": True, "field": "u"},
    ]
    fields = [{"type": "struct", "optional": True, "field": f, "fields": struct} for f in ("before", "after")]
    source = {"db": "d", "table": "t", "commit_ts": ts, "ts_ms": ts >> 18}
    payload = {"source": source, "op": op, "before": before, "after": after}
    return json.dumps({"payload": payload, "schema": {"type": "struct", "fields": fields}}).encode()


def test_a_replayed_delete_of_a_split_update_does_not_remove_the_row_its_insert_wrote(spark, tmp_path):
    """TiCDC splits an UPDATE of a unique key into a DELETE and an INSERT of the same row at one commitTs;
    when a restart replays that DELETE after its INSERT was applied, the row must stay."""
    ts = [(1_000 + i) << 18 for i in range(3)]
    batches = [
        [_message("c", ts[0], None, {"id": 1, "u": "a"})],
        [_message("d", ts[1], {"id": 1, "u": "a"}, None), _message("c", ts[1], None, {"id": 1, "u": "b"})],
        [_message("d", ts[1], {"id": 1, "u": "a"}, None)],  # the replay
    ]
    records, offset = tmp_path / "records.jsonl", 0
    config = IngestConfig.from_params(
        {
            "input": str(records),
            "target-path": str(tmp_path / "lake"),
            "protocol": "debezium",
            "table-keys": "d.t=id",
        }
    )
    for batch in batches:
        with records.open("a") as out:
            for value in batch:
                line = {"topic": "tidb_cdc", "partition": 0, "offset": offset, "timestamp": 0, "key": None}
                out.write(json.dumps({**line, "value": base64.b64encode(value).decode()}) + "\n")
                offset += 1
        assert run_files(spark, config).quarantined == 0
    assert corpus_rows(spark, config, "d.t") == [{"id": 1, "u": "b"}]
