"""The command line as a user and a Databricks job task call it, in this process (one Spark session)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from kill import child_env
from mirror import delta_rows, expected_rows, located, location_rows
from ticdc_fixture import CORPORA

from ingest.cli import main
from ingest.model import TableId
from testkit.sample import Stream, build_sample


def test_help_explains_every_run_flag(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    for flag in (
        "--source",
        "--input",
        "--protocol",
        "--target-path",
        "--state-path",
        "--timezone",
        "--partitions",
        "--table-name-template",
        "--max-bad-ratio",
        "--stream-id",
        "--drop-table",
    ):
        assert flag in text


def _head_version(spark, path: str) -> int:
    return int(spark.sql(f"DESCRIBE HISTORY delta.`{path}` LIMIT 1").first()["version"])


def _demo(lake, capsys) -> str:
    """``ticdc-ingest demo``, in this process."""
    assert main(["demo", "--target-path", str(lake)]) == 0
    return capsys.readouterr().out


# On Spark Connect the command line runs by name and killed (test_by_name), and in the Kafka and load tests.
def test_demo_mirrors_the_bundled_sample_and_a_second_run_changes_nothing(spark, tmp_path, capsys):
    lake = tmp_path / "lakehouse"
    out = _demo(lake, capsys)
    assert "shop.customers" in out and "pending" in out
    stream = build_sample()
    g = stream.complete_watermark()
    tables = [
        TableId("shop", "customers"),
        TableId("shop", "orders"),
        TableId("shop", "order_items"),
        TableId("inventory", "stock"),
    ]
    before = {}
    for table in tables:
        before[table] = delta_rows(spark, str(lake), table)
        assert before[table] == expected_rows(stream, table, g)
    heads = {t: _head_version(spark, located(lake, t)) for t in tables}
    assert "run 1:" in out
    _demo(lake, capsys)
    for table in tables:
        assert delta_rows(spark, str(lake), table) == before[table]
        version = _head_version(spark, located(lake, table))
        assert version == heads[table], f"{table} got a new Delta version on a replay"


# `make demo` runs it over every format of TiCDC's test workloads.
@pytest.mark.full
def test_demo_across_formats_names_a_format_whose_mirror_differs_and_exits_3(spark, tmp_path, capsys):
    history = tmp_path / "history"
    for name in ("canal-json", "open-protocol", "storage-csv"):
        shutil.copytree(CORPORA["tidb-tests"] / name, history / name)
    shutil.copytree(CORPORA["cutover"] / "simple-json", history / "simple-json")  # another history
    assert main(["demo", "--formats", str(history), "--target-path", str(tmp_path / "lake")]) == 3
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line.strip()}
    tables = len(json.loads((CORPORA["tidb-tests"] / "expected.json").read_text())["tables"])
    assert f"{tables}/{tables} tables" in lines["open-protocol"]
    assert f"{tables}/{tables} tables" in lines["storage-csv"]
    assert "differ: " in lines["simple-json"]


def test_named_parameters_without_subcommand_mean_run(spark, tmp_path, capsys):
    lake = tmp_path / "lake"
    sample = tmp_path / "in"
    build_sample().write(sample)
    assert main([f"--input={sample}", f"--target-path={lake}", "--protocol=canal-json"]) == 0
    assert "run 1:" in capsys.readouterr().out


def test_a_bad_parameter_exits_2_with_a_message(capsys):
    assert main(["run", "--input", "x", "--target-path", "y", "--timezone", "Nowhere/Land"]) == 2
    assert "is not an IANA time zone" in capsys.readouterr().err


def test_unreachable_packages_give_a_clear_error_not_a_bare_gateway_failure():
    # A separate process: one JVM per Python process, and this one must fail to start. The usual cache
    # holds every other package, so only the missing one is asked of Maven Central (a fresh cache fetched
    # Delta's and Kafka's 38 jars first: 40 s).
    code = (
        "from ingest.spark import local_session\n"
        "from ingest.errors import SparkSetupError\n"
        "try:\n"
        "    local_session(extra_packages=['org.example.missing:nothing:0.0.1'])\n"
        "except SparkSetupError as exc:\n"
        "    print('SETUP-ERROR', exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert "SETUP-ERROR Spark could not start" in done.stdout
    assert "could not be fetched from Maven Central" in done.stdout
    assert "org.example.missing:nothing:0.0.1" in done.stdout


def test_status_shows_g_and_each_tables_applied_tso(spark, tmp_path, capsys):
    lake = tmp_path / "lakehouse"
    assert main(["demo", "--target-path", str(lake)]) == 0
    capsys.readouterr()
    assert main(["status", "--target-path", str(lake)]) == 0
    out = capsys.readouterr().out
    g = build_sample().complete_watermark()
    assert f"run 1: G = {g}" in out
    lines = {line.split()[0]: line.split() for line in out.splitlines()[3:]}
    assert lines["shop.customers"][1] == str(g)
    assert lines["shop.customers"][4:6] == ["8", "1"]  # rows, pending


@pytest.mark.full(modes=("connect",))  # the classic run stays in CI
@pytest.mark.both_modes
def test_run_progress_then_status_last_ddl_then_a_resync_that_cannot_reach_a_t(spark, tmp_path, capsys):
    stream = build_sample()
    lake = tmp_path / "lake"
    stream.write(tmp_path / "in")
    assert main(["run", "--progress=on", f"--input={tmp_path / 'in'}", f"--target-path={lake}"]) == 0
    err = capsys.readouterr().err
    per_partition = {p: sum(1 for r in stream.records if r["partition"] == p) for p in (0, 1)}
    assert f"reading: {len(stream.records)} records" in err
    for p, n in per_partition.items():
        assert f"tidb_cdc/{p}: offsets done 0/{n} (0%)" in err
        assert f"tidb_cdc/{p}: offsets done {n}/{n} (100%)" in err

    assert main(["status", "--target-path", str(lake)]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[3:]}
    assert "ALTER TABLE `shop`.`customers` ADD COLUMN `points`" in lines["shop.customers"]
    assert "CREATE TABLE `shop`.`orders`" in lines["shop.orders"]

    # An input that no longer holds the table's history up to its applied TSO: re-sync refuses.
    early = Stream(topic=stream.topic, partitions=stream.partitions)
    early.records = stream.records[:20]
    early.write(tmp_path / "early")
    orders = TableId("shop", "orders")
    before = delta_rows(spark, str(lake), orders)
    args = ["resync", "--table", "shop.orders", f"--input={tmp_path / 'early'}", f"--target-path={lake}"]
    assert main(args) == 2
    assert "no longer holds the table's whole history" in capsys.readouterr().err
    assert (
        delta_rows(spark, str(lake), orders)
        == before
        == expected_rows(stream, orders, stream.complete_watermark())
    )


SELECT_BY_NAME = """
import json, sys
from pyspark.sql import SparkSession
from ingest.spark import local_conf
warehouse = sys.argv[1]
builder = SparkSession.builder.master("local[1]").enableHiveSupport()
settings = {
    **local_conf(),
    "spark.sql.warehouse.dir": warehouse,
    "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={warehouse}/metastore_db",
}
for key, value in settings.items():
    builder = builder.config(key, value)
spark = builder.getOrCreate()
answer = {}
for name in sys.argv[2:]:
    count = spark.sql(f"SELECT count(*) FROM spark_catalog.{name}").first()[0]
    answer[name] = [count, spark.sql(f"DESCRIBE DETAIL spark_catalog.{name}").first()["location"]]
print(json.dumps(answer))
"""


@pytest.mark.full  # by name in CI: test_by_name on Connect
@pytest.mark.long
def test_demo_by_name_leaves_catalog_tables_another_spark_session_selects(spark, tmp_path):
    """``demo --catalog`` in a process of its own; then a plain Spark session of the same warehouse, started
    with Spark's Hive support and nothing of ours but the Delta settings, SELECTs every table by name."""
    warehouse = tmp_path / "warehouse"
    command = [sys.executable, "-m", "ingest.cli", "demo", "--catalog", "--warehouse", str(warehouse)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=child_env(), check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "managed catalog table" in done.stdout and "shop.customers" in done.stdout

    tables = [TableId("shop", "customers"), TableId("shop", "orders"), TableId("shop", "order_items")]
    tables.append(TableId("inventory", "stock"))
    names = [f"{t.schema}.{t.table}" for t in tables]
    select = [sys.executable, "-c", SELECT_BY_NAME, str(warehouse), *names]
    done = subprocess.run(select, capture_output=True, text=True, timeout=600, env=child_env(), check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    stream = build_sample()
    g = stream.complete_watermark()
    for table, name in zip(tables, names, strict=True):
        count, location = answer[name]
        assert location_rows(spark, location) == expected_rows(stream, table, g), name
        assert count == len(expected_rows(stream, table, g)), name
