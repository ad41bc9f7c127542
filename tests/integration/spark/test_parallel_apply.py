"""Tables applied from a thread pool, each in a Spark session of its own: the caller's tags, job group and
settings go with them, their commits carry their own metadata and overlap, and the caller's session is left
as it was."""

import threading
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from ingest.config import IngestConfig
from ingest.lake import delta_io
from ingest.model import TableId
from ingest.pipeline import run_files
from ingest.pipeline.parallel import apply_tables
from ingest.pipeline.sessions import TableSessions
from ingest.state.table_state import COMMIT_CONFS, CONF_USER_METADATA, committing, read_table_state
from testkit.sample import Stream

TABLES = [TableId("shop", name) for name in "abcd"]


@pytest.mark.both_modes
def test_every_table_thread_runs_under_the_callers_tags_in_a_session_of_its_own(spark):
    spark.addTag("mirror-batch-7")
    spark.conf.set("spark.sql.shuffle.partitions", "7")
    dml = spark.range(5).withColumn("even", F.col("id") % 2 == 0)
    sessions = TableSessions(spark, dml, 3)
    seen: dict[TableId, tuple[set[str], str, object, str]] = {}

    def apply(table: TableId) -> int:
        with sessions.lease() as lease:
            assert lease.session is not spark
            tags = set(lease.session.getTags())
            partitions = lease.session.conf.get("spark.sql.shuffle.partitions")
            seen[table] = (tags, threading.current_thread().name, lease.session, partitions)
            return lease.dml.where("even").count()

    try:
        results = apply_tables(spark, TABLES, apply, parallelism=3, sessions=sessions)
    finally:
        sessions.close()
        spark.removeTag("mirror-batch-7")
        spark.conf.unset("spark.sql.shuffle.partitions")

    assert results == dict.fromkeys(TABLES, 3)  # the batch's rows, read in each table's session
    assert all(name.startswith("ingest-table") for _, name, _, _ in seen.values())  # the pool's threads
    assert {table: "mirror-batch-7" in tags for table, (tags, *_) in seen.items()} == dict.fromkeys(
        TABLES, True
    )
    assert all(session is not spark for _, _, session, _ in seen.values())
    assert {partitions for *_, partitions in seen.values()} == {"7"}  # the caller's settings came along


@pytest.mark.full(modes=("connect",))  # the classic run stays in CI
@pytest.mark.both_modes
def test_tables_commit_at_the_same_time_each_with_its_own_metadata(spark, tmp_path: Path):
    """Four tables hold their commit settings at once (one session would make them take turns, and the
    barrier inside would never open); each commit carries its own table's metadata."""
    paths = {table: str(tmp_path / table.table) for table in TABLES}
    for path in paths.values():
        spark.range(1).write.format("delta").save(path)
    sessions = TableSessions(spark, spark.range(1), len(TABLES))
    inside = threading.Barrier(len(TABLES), timeout=120)

    def apply(table: TableId) -> None:
        with sessions.lease() as lease, committing(lease.session, f"commit of {table}"):
            inside.wait()
            lease.session.range(2).write.format("delta").mode("append").save(paths[table])

    try:
        apply_tables(spark, TABLES, apply, parallelism=len(TABLES), sessions=sessions)
    finally:
        sessions.close()
    last = {
        table: delta_io.history(spark, path, 1).select("userMetadata").first()["userMetadata"]
        for table, path in paths.items()
    }
    assert last == {table: f"commit of {table}" for table in TABLES}
    assert spark.conf.get(CONF_USER_METADATA, None) is None


@pytest.mark.full(modes=("connect",))  # the classic run stays in CI
@pytest.mark.both_modes
def test_a_batch_applied_in_table_sessions_leaves_the_callers_session_as_it_was(spark, tmp_path: Path):
    """Three tables, two at a time, each in a session of its own: the tables hold upstream's rows, each
    commit its own table's state, and the caller's session keeps no commit setting."""
    s = Stream(topic="cdc", partitions=2)
    for name in "abc":
        s.create_table(f"CREATE TABLE `app`.`{name}` (`id` BIGINT PRIMARY KEY, `v` VARCHAR(16))", s.tso(1))
        for key in range(4):
            s.insert(TableId("app", name), {"id": key, "v": f"{name}{key}"}, s.tso(2))
        s.update(TableId("app", name), (1,), {"v": "new"}, s.tso(3))
    s.watermark(s.tso(4))
    s.write(tmp_path / "in")
    before = {key: spark.conf.get(key, None) for key in (*COMMIT_CONFS, "spark.sql.shuffle.partitions")}
    config = IngestConfig.from_params(
        {"input": str(tmp_path / "in"), "target-path": str(tmp_path / "lake"), "table-parallelism": "2"}
    )
    result = run_files(spark, config)
    assert {str(t): r.upserted for t, r in result.tables.items()} == dict.fromkeys(
        ["app.a", "app.b", "app.c"], 4
    )
    assert {key: spark.conf.get(key, None) for key in before} == before
    rows = spark.read.format("delta").load(config.mirror.address(TableId("app", "b"))).orderBy("id").collect()
    assert [(r["id"], r["v"]) for r in rows] == [(0, "b0"), (1, "new"), (2, "b2"), (3, "b3")]
    for name in "abc":
        assert (
            read_table_state(spark, config.mirror.address(TableId("app", name))).applied_ts
            == result.global_watermark
        )


def test_every_table_that_fails_is_reported_and_the_others_finish(spark):
    """Failures other than a refused DDL (which stops its table only) fail the batch; every failed table is
    named, and the tables already running finish first."""
    from ingest.errors import TablesFailed

    finished = []

    def apply(table: TableId) -> int:
        if table.table in ("a", "c"):
            raise RuntimeError(f"{table} broke")
        finished.append(table)
        return spark.range(1).count()

    with pytest.raises(
        TablesFailed, match=r"2 tables failed: shop\.a: RuntimeError: shop\.a broke; shop\.c"
    ) as failed:
        apply_tables(spark, TABLES, apply, parallelism=2)
    assert [table for table, _ in failed.value.failures] == [TABLES[0], TABLES[2]]
    assert sorted(finished) == [TABLES[1], TABLES[3]]


def test_classic_table_sessions_are_kept_across_batches_with_the_callers_confs_of_each_batch(spark):
    """A long-running mirror makes thousands of batches: their classic sessions are made once, and each batch
    hands them the caller's confs as they are then, a conf the caller has since unset included."""
    unset_later = "spark.sql.autoBroadcastJoinThreshold"

    def one_batch() -> tuple[object, str, str | None]:
        sessions = TableSessions(spark, spark.range(3), 1)
        try:
            with sessions.lease() as lease:
                conf = lease.session.conf
                return lease.session, conf.get("spark.sql.shuffle.partitions"), conf.get(unset_later, None)
        finally:
            sessions.close()

    try:
        spark.conf.set("spark.sql.shuffle.partitions", "5")
        spark.conf.set(unset_later, "1234")
        first, partitions_then, threshold_then = one_batch()
        spark.conf.set("spark.sql.shuffle.partitions", "6")
        spark.conf.unset(unset_later)
        second, partitions_now, threshold_now = one_batch()
    finally:
        spark.conf.unset("spark.sql.shuffle.partitions")
        spark.conf.unset(unset_later)
    assert second is first
    assert (partitions_then, partitions_now) == ("5", "6")
    assert (threshold_then, threshold_now) == ("1234", None)


def test_each_table_thread_has_its_own_copy_of_the_callers_local_properties(spark):
    """Spark keeps a query's SQL execution id in the thread's local properties. Table threads that shared
    one Properties object saw each other's ids: their jobs were filed under executions that had ended, which
    the scheduler never releases (the driver's memory grew with every batch). Each thread writes its own
    mark, waits until all have, and must read back its own."""
    sc = spark.sparkContext  # classic only: Spark Connect keeps local properties on the server
    sc.setLocalProperty("ingest.test.caller", "caller")
    barrier = threading.Barrier(len(TABLES))
    seen = {}

    def apply(table: TableId) -> None:
        inherited = sc.getLocalProperty("ingest.test.caller")
        sc.setLocalProperty("ingest.test.mark", str(table))
        barrier.wait(timeout=60)
        seen[table] = (inherited, sc.getLocalProperty("ingest.test.mark"))

    try:
        apply_tables(spark, TABLES, apply, parallelism=len(TABLES))
    finally:
        sc.setLocalProperty("ingest.test.caller", None)
    assert seen == {table: ("caller", str(table)) for table in TABLES}
    assert sc.getLocalProperty("ingest.test.mark") is None  # the caller's own properties are untouched
