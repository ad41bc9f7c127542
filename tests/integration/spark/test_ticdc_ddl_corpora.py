"""Corpora TiCDC v8.3.0's own code wrote for DDL histories of ours (tests/fixtures/corpora): every DDL form
TiDB documents, as the owner rewrites it, through Canal-JSON, Simple JSON and Simple Avro. Every cell of
every table equals what TiDB returned to SELECT at the end, and no table that is gone upstream (dropped,
renamed away, a view, a table TiCDC does not replicate) is a live table in the mirror."""

from __future__ import annotations

import pytest
from ticdc_fixture import CORPORA, differences, expected_gone, expected_tables

from ingest.apply import schema as apply_schema
from ingest.config import IngestConfig
from ingest.pipeline import run_files

VARIANTS = {
    "canal-json": {},
    "simple-json": {"protocol": "simple"},
    "simple-avro": {"protocol": "simple", "simple-encoding": "avro"},
}


def mirror(spark, corpus: str, variant: str, lake):
    config = IngestConfig.from_params(
        {
            "input": str(CORPORA[corpus] / variant / "records.jsonl"),
            "target-path": str(lake),
            **VARIANTS[variant],
        }
    )
    return config, run_files(spark, config)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("corpus", sorted(CORPORA))
def test_every_cell_lands_and_nothing_gone_stays_live(spark, tmp_path, corpus, variant):
    lake = tmp_path / "lake"
    config, result = mirror(spark, corpus, variant, lake)
    assert result.quarantined == 0
    problems = {}
    for name, expected in expected_tables(CORPORA[corpus]).items():
        database, table = name.split(".")
        path = config.table_path(database, table)
        if not apply_schema.table_exists(spark, path):
            problems[name] = ["missing table"]
            continue
        rows = [r.asDict() for r in spark.read.format("delta").load(path).collect()]
        if differences(expected, rows):
            problems[name] = differences(expected, rows)
    for name in expected_gone(CORPORA[corpus]):
        database, table = name.split(".")
        path = config.table_path(database, table)
        if apply_schema.table_exists(spark, path) and not apply_schema.table_info(spark, path).retired:
            problems[name] = ["gone upstream, live in the mirror"]
    assert problems == {}
