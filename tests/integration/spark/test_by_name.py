"""A mirror into catalog tables by name (Spark's own session catalog, with Delta): the same outcomes as by
path, with every table and the mirror's own state addressed by its three-part name."""

from __future__ import annotations

import random
import uuid

import pytest
from kill import (
    CHILD_TIMEOUT,
    KILLS,
    SEEDS,
    R,
    T,
    child_process,
    kill_marks,
    kill_stream,
    progress_of,
    run_killed,
)
from mirror import expected_rows, location_rows
from ticdc_fixture import CORPORA, differences, expected_gone, expected_tables

from ingest import delta_io
from ingest.apply import schema as apply_schema
from ingest.catalog_names import TableName
from ingest.config import IngestConfig
from ingest.model import TableId
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


def test_a_creation_a_kill_cut_off_from_its_catalog_entry_is_made_again(spark, prefix, tmp_path):
    """Delta commits a managed table's first version, then the catalog lists it: a kill in between leaves
    files at the table's managed location with no catalog entry, over which Spark refuses to create it."""
    stream = kill_stream("simple", random.Random(7))
    stream.write(tmp_path / "in")
    config = by_name(prefix, input=str(tmp_path / "in"), protocol="simple")
    location = config.table_location(T.schema, T.table)
    assert isinstance(location, TableName)
    delta_io.ensure_schema(spark, location)
    left = delta_io.managed_location(spark, location)
    assert left is not None
    spark.range(3).write.format("delta").save(left)  # the commit, without the catalog entry
    assert not apply_schema.table_exists(spark, location)

    result = run_files(spark, config)
    g = stream.complete_watermark()
    assert result.global_watermark == g
    for table in (T, R):
        assert location_rows(spark, config.table_location(table.schema, table.table)) == expected_rows(
            stream, table, g
        ), table


@pytest.mark.parametrize("seed", SEEDS)
def test_a_run_by_name_killed_at_random_instants_ends_like_an_uninterrupted_run(
    spark, spark_mode, prefix, tmp_path, seed
):
    """The command line by name, SIGKILLed at random instants: on classic Spark a local Spark whose catalog
    is an embedded metastore in the warehouse (so the next attempt finds the tables the last one made), on
    Spark Connect the server's catalog."""
    rnd = random.Random(seed)
    stream = kill_stream("simple", rnd)
    input_dir = tmp_path / "in"
    stream.write(input_dir)
    where = ["--target-catalog", "spark_catalog", "--target-schema", f"{prefix}_{{database}}"]
    where += ["--state-schema", f"{prefix}_ingest"]
    if spark_mode == "classic":
        warehouse = tmp_path / "warehouse"
        where += ["--warehouse", str(warehouse)]
    args = ["run", "--input", str(input_dir), "--protocol", "simple", *where]
    uninterrupted = {"input": str(input_dir), "protocol": "simple", "target-path": str(tmp_path / "once")}
    progress_ = progress_of(lambda: run_files(spark, IngestConfig.from_params(uninterrupted)))

    outcomes = run_killed(args, kill_marks(rnd, progress_, KILLS))
    why = f"seed {seed}: {', '.join(outcomes)}"
    print(why)

    def finish() -> None:
        child = child_process(args)
        _, err = child.communicate(timeout=CHILD_TIMEOUT)
        assert child.returncode == 0, err.decode(errors="replace")[-3000:]

    def location(table: TableId) -> str:
        if spark_mode == "classic":  # another process's catalog: its managed tables, read by path
            return str(warehouse / f"{prefix}_{table.schema}.db" / table.table)
        return TableName("spark_catalog", f"{prefix}_{table.schema}", table.table)

    finish()
    g = stream.complete_watermark()
    for table in (T, R):
        assert location_rows(spark, location(table)) == expected_rows(stream, table, g), f"{table}; {why}"
    versions = {t: delta_io.history(spark, location(t), 1).first()["version"] for t in (T, R)}
    finish()  # a further run finds nothing to do
    assert {t: delta_io.history(spark, location(t), 1).first()["version"] for t in (T, R)} == versions, why
