"""A mirror into catalog tables by name (Spark's own session catalog, with Delta): the same outcomes as by
path, with every table and the mirror's own state addressed by its three-part name."""

from __future__ import annotations

import uuid

import pytest
from ticdc_fixture import CORPORA, differences, expected_gone, expected_tables

from ingest.apply import schema as apply_schema
from ingest.catalog_names import TableName
from ingest.config import IngestConfig
from ingest.pipeline import run_files
from ingest.state import progress

pytestmark = pytest.mark.both_modes


@pytest.fixture
def prefix(spark):
    """Schemas of this test alone (the session catalog is shared by the worker's tests); dropped after."""
    name = f"t{uuid.uuid4().hex[:8]}"
    yield name
    for row in spark.sql(f"SHOW SCHEMAS LIKE '{name}*'").collect():
        spark.sql(f"DROP SCHEMA IF EXISTS spark_catalog.`{row[0]}` CASCADE")


def by_name(prefix: str, **params: str) -> IngestConfig:
    return IngestConfig.from_params(
        {
            "target-catalog": "spark_catalog",
            "target-schema": prefix + "_{database}",
            "state-schema": prefix + "_ingest",
            **params,
        }
    )


@pytest.mark.parametrize(("corpus", "variant"), [("views-swaps", "simple-json"), ("tables", "canal-json")])
def test_a_ddl_corpus_lands_in_catalog_tables_by_name(spark, prefix, corpus, variant):
    protocol = {"simple-json": {"protocol": "simple"}}.get(variant, {})
    config = by_name(prefix, input=str(CORPORA[corpus] / variant / "records.jsonl"), **protocol)
    result = run_files(spark, config)
    assert result.quarantined == 0

    problems = {}
    for name, expected in expected_tables(CORPORA[corpus]).items():
        database, table = name.split(".")
        rows = [r.asDict() for r in spark.table(f"spark_catalog.{prefix}_{database}.{table}").collect()]
        found = differences(expected, rows)
        if found:
            problems[name] = found
    assert problems == {}
    for name in expected_gone(CORPORA[corpus]):
        database, table = name.split(".")
        location = config.table_location(database, table)
        assert isinstance(location, TableName)
        if apply_schema.table_exists(spark, location):
            assert apply_schema.table_info(spark, location).retired, name
    # The mirror's own state is catalog tables too.
    state = {r.tableName for r in spark.sql(f"SHOW TABLES IN spark_catalog.{prefix}_ingest").collect()}
    assert {"progress", "ddl_history"} <= state
    committed = progress.load_progress(spark, config.state_path, config.stream_id)
    assert committed.global_watermark == result.global_watermark > 0
