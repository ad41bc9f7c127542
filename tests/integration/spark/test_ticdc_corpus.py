"""Records TiCDC's own encoders wrote from a real TiDB (tests/fixtures/ticdc-v8.3.0) land exactly: every cell
of every table equals what TiDB returned to SELECT. This input was not written by this project."""

from __future__ import annotations

import pytest
from mirror import located
from ticdc_fixture import CORPUS, differences, expected_tables

from ingest.config import IngestConfig
from ingest.model import TableId
from ingest.pipeline import run_files

PARAMS = {
    "canal-json": {},
    "simple-json": {"protocol": "simple"},
    "simple-avro": {"protocol": "simple", "simple-encoding": "avro"},
}


@pytest.mark.parametrize("variant", sorted(PARAMS))
def test_every_cell_equals_what_tidb_returned(spark, tmp_path, variant):
    lake = tmp_path / "lake"
    config = IngestConfig.from_params(
        {"input": str(CORPUS / variant / "records.jsonl"), "target-path": str(lake), **PARAMS[variant]}
    )
    result = run_files(spark, config)
    assert result.quarantined == 0
    for name, expected in expected_tables().items():
        database, table = name.split(".")
        rows = [
            r.asDict()
            for r in spark.read.format("delta").load(located(lake, TableId(database, table))).collect()
        ]
        assert differences(expected, rows) == [], name
    # A second run over the same records changes nothing.
    again = run_files(spark, config)
    assert all(r.upserted == 0 and r.deleted == 0 and not r.ddls for r in again.tables.values())
