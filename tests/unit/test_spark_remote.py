"""Where Spark runs: --spark-remote / SPARK_REMOTE select a Spark Connect server, before any Spark starts."""

import os

import pytest

from ingest.cli import _parser, _without_subcommand
from ingest.errors import SparkSetupError


@pytest.mark.parametrize(
    "argv",
    [["--spark-remote", "sc://127.0.0.1:15002", "demo"], ["demo", "--spark-remote=sc://127.0.0.1:15002"]],
)
def test_spark_remote_is_taken_before_or_after_the_subcommand(argv):
    args = _parser().parse_args(argv)
    assert (args.command, args.spark_remote) == ("demo", "sc://127.0.0.1:15002")


def test_spark_remote_is_not_a_mirror_parameter():
    args = _parser().parse_args(["run", "--input", "in", "--target-path", "lake"])
    assert not hasattr(args, "spark_remote")


def test_named_parameters_with_spark_remote_still_mean_run():
    assert _without_subcommand(["--spark-remote=sc://h:1", "--input=in"])
    assert not _without_subcommand(["--spark-remote", "sc://h:1", "status", "--target-path", "lake"])
    assert not _without_subcommand(["--help"])


def test_a_url_that_is_not_spark_connect_is_refused_with_the_form_to_use(monkeypatch):
    from ingest.spark import get_session

    monkeypatch.delenv("DATABRICKS_RUNTIME_VERSION", raising=False)
    with pytest.raises(SparkSetupError, match="not a Spark Connect URL; write sc://host:port"):
        get_session(remote="http://127.0.0.1:15002")


def test_the_warehouse_is_a_session_flag_not_a_mirror_parameter():
    from ingest.cli import _params

    args = _parser().parse_args(["run", "--warehouse", "wh", "--input", "in", "--target-catalog", "c"])
    assert args.warehouse == "wh"
    params = _params(args)
    assert "warehouse" not in params and params["target-catalog"] == "c"
    assert _without_subcommand(["--warehouse=wh", "--input=in"])


@pytest.mark.parametrize(
    ("master", "cores"), [("local[1]", 1), ("local[4]", 4), ("local[*]", 2), ("local", 2), ("local[0]", 2)]
)
def test_a_local_session_splits_small_data_into_as_many_partitions_as_it_has_task_threads(master, cores):
    from ingest.spark import local_conf, local_cores

    conf = local_conf(packages=["x:y:1"], partitions=local_cores(master))
    split = (
        "spark.sql.shuffle.partitions",
        "spark.default.parallelism",
        "spark.databricks.delta.snapshotPartitions",
    )
    assert {conf[key] for key in split} == {str(cores)}


def test_a_local_session_runs_on_the_master_the_environment_names(monkeypatch):
    from ingest import spark as spark_module

    made: list[dict] = []
    monkeypatch.setattr(spark_module, "local_session", lambda **kw: made.append(kw))
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    monkeypatch.delenv(spark_module.LOCAL_MASTER_ENV, raising=False)
    spark_module.get_session()
    monkeypatch.setenv(spark_module.LOCAL_MASTER_ENV, "local[8]")
    spark_module.get_session(catalog_warehouse="w")
    assert [m["master"] for m in made] == ["local[2]", "local[8]"]


def test_a_local_session_waits_minutes_not_seconds_for_python_to_fetch_a_collect():
    """A collect that a busy driver thread fetches 15 s late failed as "Connection refused" (CI, views-swaps
    through the storage sink): the JVM had closed the socket it offered."""
    from ingest.spark import local_conf

    timeout = local_conf(packages=["x:y:1"])["spark.python.authenticate.socketTimeout"]
    assert timeout.endswith("s") and int(timeout[:-1]) >= 120


def test_a_local_session_lets_the_driver_python_wait_as_long_as_the_jvm(monkeypatch):
    """CI, names through Simple JSON: a collect whose connect-and-auth took over pyspark's 15 s stopped a
    table ("cannot access local variable 'sockfile'", pyspark's finally masking CANNOT_OPEN_SOCKET)."""
    from ingest.spark import local_conf, set_driver_python_env

    # A copy of the environment, so what the call sets is gone after the test.
    unset = {k: v for k, v in os.environ.items() if k != "SPARK_AUTH_SOCKET_TIMEOUT"}
    monkeypatch.setattr(os, "environ", unset)
    set_driver_python_env()
    jvm_side = local_conf(packages=["x:y:1"])["spark.python.authenticate.socketTimeout"]
    assert os.environ["SPARK_AUTH_SOCKET_TIMEOUT"] + "s" == jvm_side


def test_a_local_spark_runs_the_throughput_collector_whatever_else_its_jvm_is_given():
    from ingest.spark import local_conf, persistent_catalog_conf

    for conf in (local_conf(packages=["x:y:1"]), persistent_catalog_conf("warehouse")):
        assert "-XX:+UseParallelGC" in conf["spark.driver.extraJavaOptions"].split()
