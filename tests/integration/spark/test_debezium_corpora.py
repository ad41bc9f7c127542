"""The kit's corpora through TiCDC's Debezium, read from captured records: each table's key given as a user
gives it (the handle key TiCDC uses), and column-types for what Debezium's records cannot tell (BIGINT
UNSIGNED, binary strings, DECIMALs a double holds exactly), as a user gives them. Debezium carries no DDL,
so what it cannot show is known in advance (``shown_without_ddl``, TiCDC Avro's rule), and so are the cells
it loses (the README's Debezium section): DECIMALs of more than 15 digits, which mirror as DOUBLE, rows older
than an ADD COLUMN with a DEFAULT, VIRTUAL generated columns. Every other cell lands exactly."""

from __future__ import annotations

import uuid

import pytest
from mirror import debezium_problems, debezium_settings
from ticdc_fixture import CORPORA

from ingest.config import IngestConfig
from ingest.pipeline import run_files

WITH_DEBEZIUM = sorted(name for name in CORPORA if (CORPORA[name] / "debezium").is_dir())


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
    assert debezium_problems(spark, config, corpus) == {}


@pytest.fixture
def prefix(spark):
    """Schemas of this test alone (the session catalog is shared by the worker's tests); dropped after."""
    name = f"t{uuid.uuid4().hex[:8]}"
    yield name
    for row in spark.sql(f"SHOW SCHEMAS LIKE '{name}*'").collect():
        spark.sql(f"DROP SCHEMA IF EXISTS spark_catalog.`{row[0]}` CASCADE")


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
