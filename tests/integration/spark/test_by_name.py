"""A mirror into catalog tables by name (Spark's own session catalog, with Delta): the same outcomes as by
path, with every table and the mirror's own state addressed by its three-part name."""

from __future__ import annotations

import random

import pytest
from changes_check import replay_problems
from dumpling_export import write_export
from kill import (
    CHILD_TIMEOUT,
    KILLS,
    PROFILE,
    SEEDS,
    R,
    T,
    child_process,
    kill_marks,
    kill_stream,
    progress_of,
    run_killed,
)
from mirror import expected_rows, location_rows, upstream_rows
from test_initial_load import _history
from test_ticdc_ddl_corpora import BY_NAME as BY_NAME_CORPORA
from test_ticdc_ddl_corpora import BY_NAME_IN_CI
from ticdc_fixture import CORPORA, differences, expected_gone, expected_tables

from ingest.apply.table import table_exists, table_info
from ingest.commands import asof, changes
from ingest.commands.load import load_dumpling
from ingest.commands.resync import resync_table
from ingest.commands.verify import verify_snapshot
from ingest.config import IngestConfig
from ingest.errors import TablesStopped
from ingest.lake import delta_io
from ingest.lake import names as catalog_names
from ingest.lake.names import TableName
from ingest.load_config import LoadConfig
from ingest.model import TableId
from ingest.pipeline import run_files
from ingest.state import ddl_history, progress
from testkit.sample import SIMPLE_FOR_TESTS, Stream

pytestmark = pytest.mark.both_modes


def by_name(prefix: str, **params: str) -> IngestConfig:
    return IngestConfig.from_params(
        {
            "target-catalog": "spark_catalog",
            "target-schema": prefix + "_{database}",
            "state-schema": prefix + "_ingest",
            **params,
        }
    )


# Corpora run by name in each Spark mode (test_ticdc_ddl_corpora.BY_NAME); in CI only BY_NAME_IN_CI.
@pytest.mark.long
@pytest.mark.parametrize(
    ("spark", "corpus", "variant"),
    [run if run == BY_NAME_IN_CI else pytest.param(*run, marks=pytest.mark.full) for run in BY_NAME_CORPORA],
    indirect=["spark"],
)
def test_a_ddl_corpus_lands_in_catalog_tables_by_name(spark, prefix, corpus, variant):
    protocol = {"simple-json": {"protocol": "simple"}}.get(variant, {})
    config = by_name(prefix, input=str(CORPORA[corpus] / variant / "records.jsonl"), **protocol)
    result = run_files(spark, config)
    assert result.quarantined == 0

    problems = {}
    for name, expected in expected_tables(CORPORA[corpus]).items():
        database, table = name.split(".")
        found = differences(
            expected, upstream_rows(spark, config.mirror.address(TableId(database, table))), ours=None
        )
        if found:
            problems[name] = found
    assert problems == {}
    for name in expected_gone(CORPORA[corpus]):
        database, table = name.split(".")
        location = config.mirror.address(TableId(database, table))
        assert isinstance(location, TableName)
        if table_exists(spark, location):
            assert table_info(spark, location).retired, name
    # The mirror's own state is catalog tables too.
    state = {r.tableName for r in spark.sql(f"SHOW TABLES IN spark_catalog.{prefix}_ingest").collect()}
    assert {"progress", "ddl_history"} <= state
    committed = progress.load_progress(spark, config.state_path, config.stream_id)
    assert committed.global_watermark == result.global_watermark > 0


@pytest.mark.full(modes=("connect",))  # the classic run stays in CI
def test_a_creation_a_kill_cut_off_from_its_catalog_entry_is_made_again(spark, prefix, tmp_path):
    """Delta commits a managed table's first version, then the catalog lists it: a kill in between leaves
    files at the table's managed location with no catalog entry, over which Spark refuses to create it."""
    stream = Stream(topic="cdc", partitions=1)
    stream.create_table(SIMPLE_FOR_TESTS, stream.tso(1))
    stream.insert(T, {"id": 1, "v": "a"}, stream.tso(2))
    stream.watermark(stream.tso(3))
    stream.write(tmp_path / "in")
    config = by_name(prefix, input=str(tmp_path / "in"))
    location = config.mirror.address(T)
    assert isinstance(location, TableName)
    delta_io.ensure_schema(spark, location)
    left = delta_io.managed_location(spark, location)
    assert left is not None
    spark.range(3).write.format("delta").save(left)  # the commit, without the catalog entry
    assert not table_exists(spark, location)

    result = run_files(spark, config)
    g = stream.complete_watermark()
    assert result.global_watermark == g
    assert location_rows(spark, location) == expected_rows(stream, T, g)


# CI kills the run by name on Spark Connect only: a classic run's kill starts two more JVMs and an embedded
# metastore, and the cut-off catalog entry a kill can leave is tested in both modes above. The explore
# profile kills both.
KILLED_MODES = ["connect"] if PROFILE == "ci" else ["classic", "connect"]


@pytest.mark.long
@pytest.mark.parametrize("spark", KILLED_MODES, indirect=True)
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
    if spark_mode == "classic":  # one more JVM and metastore start: the Connect run checks a further run
        return
    versions = {t: delta_io.history(spark, location(t), 1).first()["version"] for t in (T, R)}
    finish()  # a further run finds nothing to do
    assert {t: delta_io.history(spark, location(t), 1).first()["version"] for t in (T, R)} == versions, why


@pytest.mark.full(modes=("classic",))  # the Connect run stays in CI
@pytest.mark.long
def test_load_verify_stream_as_of_and_resync_by_name(spark, prefix, tmp_path):
    """A Dumpling snapshot loaded by name verifies against its export, the stream continues it without gap
    or duplicate, as-of answers with queries that name the catalog tables, and a re-sync rebuilds a table
    through schemas of its own and swaps it in."""
    s, snapshot, creates, late = _history()
    export = write_export(s, snapshot, tmp_path / "export", creates, data_format="sql")
    where = {
        "target-catalog": "spark_catalog",
        "target-schema": prefix + "_{database}",
        "state-schema": prefix + "_ingest",
        "timezone": s.tz_name,
    }
    load = LoadConfig.from_params({"input": str(export), **where})
    load_dumpling(spark, load)
    stream = load.stream
    for table in creates:
        rows = location_rows(spark, stream.mirror.address(table))
        assert rows == expected_rows(s, table, snapshot), table
    report = verify_snapshot(spark, load)
    assert report.matches, report.render()

    s.write(tmp_path / "stream")
    config = IngestConfig.from_params({"input": str(tmp_path / "stream"), **where})
    run_files(spark, config)
    final = s.complete_watermark()
    for table in [*creates, late]:
        rows = location_rows(spark, config.mirror.address(table))
        assert rows == expected_rows(s, table, final), table

    answer = asof.resolve(spark, config, final)
    assert answer.g == final
    customers = next(t for t in answer.tables if t.table == TableId("shop", "customers"))
    assert customers.sql() == (
        f"SELECT * FROM spark_catalog.{prefix}_shop.customers VERSION AS OF {customers.version}"
    )
    assert {normalize_row(r) for r in spark.sql(customers.sql()).collect()} == {
        normalize_row(r) for r in delta_io.read(spark, customers.path).collect()
    }

    # What changed between the snapshot and the stream's end replays onto the snapshot; the SQL names the
    # catalog tables and reads the same rows.
    assert replay_problems(spark, config, snapshot, final) == []
    span = changes.resolve(spark, config, snapshot, final, [customers.table]).table(customers.table)
    [query] = [q for q in span.sql() if q.startswith("SELECT")]
    assert f"table_changes('`spark_catalog`.`{prefix}_shop`.`customers`'" in query
    expected_changes = changes.changes(spark, config, snapshot, final, [customers.table])[customers.table]
    assert spark.sql(query.rstrip(";")).count() == expected_changes.count()

    before = delta_io.history(spark, customers.path, 1).first()["version"]
    result = resync_table(spark, config, customers.table)
    assert result.after.applied_ts == final
    assert delta_io.history(spark, customers.path, 1).first()["version"] > before  # swapped in
    rows = location_rows(spark, customers.path)
    assert rows == expected_rows(s, customers.table, final)
    staged = {r.namespace for r in spark.sql(f"SHOW SCHEMAS LIKE '{prefix}_ingest_resync*'").collect()}
    assert staged == {f"{prefix}_ingest_resync", f"{prefix}_ingest_resync_state"}
    # A range across the re-sync is refused for that table alone: its rows came from the input again.
    refused = changes.resolve(spark, config, snapshot, final, strict=False).refused
    assert (
        list(refused) == [customers.table]
        and "was rebuilt inside the range (resync of" in refused[customers.table]
    )


def normalize_row(row) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in row.asDict().items()))


@pytest.mark.full(modes=("connect",))  # the classic run stays in CI
def test_replays_buffered_rows_and_a_lost_progress_table_by_name(spark, prefix, tmp_path):
    """TiCDC's at-least-once replays never bring a deleted row back, a row above G waits in the buffer
    table across runs, and losing the progress table costs a re-read that changes nothing."""
    s = Stream(topic="cdc", partitions=2)
    s.create_table(SIMPLE_FOR_TESTS, s.tso(1))
    s.insert(T, {"id": 1, "v": "a"}, s.tso(100), partition=0)
    s.watermark(s.tso(105))
    config_of = mirror_by_name(spark, s, prefix, tmp_path)
    s.delete(T, (1,), s.tso(110), partition=0)
    s.insert(T, {"id": 2, "v": "above G"}, s.tso(130), partition=1)
    s.watermark(s.tso(120))
    config = config_of()
    buffered = delta_io.read(spark, catalog_names.child(config.state_path, "buffer"))
    assert [r["partition"] for r in buffered.collect()] == [1]
    s.replay(0, 0, len([r for r in s.records if r["partition"] == 0]) - 1)  # everything on 0, again
    s.watermark(s.tso(135))
    config = config_of()
    g = s.complete_watermark()
    location = config.mirror.address(T)
    assert location_rows(spark, location) == expected_rows(s, T, g) == {(2,): {"id": 2, "v": "above G"}}
    assert delta_io.read(spark, catalog_names.child(config.state_path, "buffer")).count() == 0

    head = delta_io.history(spark, location, 1).first()["version"]
    spark.sql(f"DROP TABLE {catalog_names.child(config.state_path, 'progress')}")
    config_of()  # everything is read again
    assert location_rows(spark, location) == expected_rows(s, T, g)
    assert delta_io.history(spark, location, 1).first()["version"] == head


def mirror_by_name(spark, s: Stream, prefix: str, tmp_path):
    """Run the stream as it is now (each time into a new input directory), by name; returns a function
    that does it again and returns the config."""

    def run() -> IngestConfig:
        directory = tmp_path / f"in-{len(list(tmp_path.glob('in-*')))}"
        s.write(directory)
        config = by_name(prefix, input=str(directory), partitions=f"cdc:0-{s.partitions - 1}")
        run_files(spark, config)
        return config

    run()
    return run


@pytest.mark.parametrize("spark", ["classic"], indirect=True)
def test_a_table_name_the_catalog_cannot_hold_stops_that_table_with_the_fix(spark, prefix, tmp_path):
    """Spark's session catalog takes letters, digits and _ only: `app`.`t-1` stops at its CREATE TABLE,
    recorded as refused, and every other table lands."""
    s = Stream(topic="cdc", partitions=1)
    s.create_table(SIMPLE_FOR_TESTS, s.tso(1))
    bad = s.create_table(SIMPLE_FOR_TESTS.replace("`t`", "`t-1`"), s.tso(2))
    s.insert(T, {"id": 1, "v": "a"}, s.tso(3))
    s.insert(bad, {"id": 1, "v": "b"}, s.tso(4))
    s.watermark(s.tso(10))
    s.write(tmp_path / "in")
    config = by_name(prefix, input=str(tmp_path / "in"))
    with pytest.raises(TablesStopped) as stopped:
        run_files(spark, config)
    assert set(stopped.value.stopped) == {bad}
    message = str(stopped.value.stopped[bad])
    assert "the catalog refuses this name" in message and "--target-path" in message
    assert location_rows(spark, config.mirror.address(T)) == expected_rows(s, T, s.tso(10))
    history = ddl_history.read(spark, config.state_path)
    assert history is not None
    assert [r["action"] for r in history.where(f"table = '{bad}'").collect()] == [ddl_history.REJECTED]
