"""The Kafka source end to end: a real KRaft broker, real Spark Structured Streaming, real Delta.

Expected tables come from the upstream model in ``testkit.sample``, never from the mirror's own output.
"""

from __future__ import annotations

import base64
import shutil
import time
import uuid
from decimal import Decimal

import pytest
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewPartitions
from mirror import delta_rows, expected_rows, located, location_rows

from ingest.commands.stream import OBSERVED, run_kafka, start_kafka
from ingest.config import IngestConfig
from ingest.errors import OrderingError
from ingest.model import TableId
from ingest.state.progress import commit_progress, load_progress
from testkit.sample import SIMPLE_FOR_TESTS, Stream, build_sample

SAMPLE_TABLES = [
    TableId("shop", "customers"),
    TableId("shop", "orders"),
    TableId("shop", "order_items"),
    TableId("inventory", "stock"),
]
T = TableId("app", "t")


def kafka_config(feed, lake, **params: str) -> IngestConfig:
    return IngestConfig.from_params(
        {
            "source": "kafka",
            **feed.broker.mirror_params(),
            "topics": feed.topic,
            "target-path": str(lake),
            "timezone": feed.stream.tz_name,
            **params,
        }
    )


def run_counting(spark, config: IngestConfig) -> tuple[list, int]:
    """Run AvailableNow to the end; returns the batch results and how many records Spark read from Kafka."""
    mirror = start_kafka(spark, config)
    mirror.await_termination()
    observed = [observed_metrics(p) for p in mirror.query.recentProgress]
    return mirror.results(), sum(m["records"] for m in observed if m)


def observed_metrics(progress) -> dict | None:
    """Our observed metrics in a query progress, by name. Spark Connect's progress holds the row as its
    values and its schema (``Row(values=[...], schema={...})``), classic Spark's as a row by name."""
    row = progress.get("observedMetrics", {}).get(OBSERVED)
    if row is None:
        return None
    if set(row.__fields__) == {"values", "schema"}:
        return dict(zip((f["name"] for f in row["schema"]["fields"]), row["values"], strict=True))
    return row.asDict()


def assert_mirror_exact(spark, lake, stream: Stream, tables: list[TableId]) -> int:
    """Every table equals the upstream model at G (the last watermark every partition announced), row for
    row: no duplicate keys either. Returns G."""
    g = stream.complete_watermark()
    for table in tables:
        expected = expected_rows(stream, table, g)
        assert delta_rows(spark, str(lake), table) == expected, table
        path = located(lake, table)
        assert spark.read.format("delta").load(path).count() == len(expected), table
    return g


@pytest.mark.long
def test_multi_partition_topic_restart_and_lost_checkpoint_are_exact(spark, feed, lake):
    stream = build_sample()
    topic = feed(stream)
    assert stream.partitions == 2
    topic.send()
    config = kafka_config(topic, lake)

    first, read = run_counting(spark, config)
    g1 = assert_mirror_exact(spark, lake, stream, SAMPLE_TABLES)
    assert first and first[-1].global_watermark == g1
    assert read == len(stream.records)
    # Rows committed above G stay pending, as with the files source.
    assert 1010 not in {k[0] for k in delta_rows(spark, str(lake), TableId("shop", "customers"))}
    after_first = load_progress(spark, config.state_path, config.stream_id)

    # A second AvailableNow run over the same checkpoint reads only what was produced since.
    customers, orders = TableId("shop", "customers"), TableId("shop", "orders")
    t = 60.0
    stream.update(customers, (1001,), {"balance": Decimal("1.25")}, stream.tso(t))
    stream.delete(orders, (9_000_000_000_000_000_003,), stream.tso(t + 0.5))
    stream.watermark(stream.tso(t + 1))
    new = topic.send()
    _, read = run_counting(spark, config)
    assert read == new
    g2 = assert_mirror_exact(spark, lake, stream, SAMPLE_TABLES)
    assert g2 > g1
    assert 1010 in {k[0] for k in delta_rows(spark, str(lake), customers)}  # the pending row, now below G

    # Spark's checkpoint is lost: the next run starts from our progress, not from the earliest offsets.
    shutil.rmtree(config.checkpoint_location)
    stream.insert(customers, {"id": 1011, "name": "Niklaus Wirth", "email": None, "balance": Decimal("3.00"),
                              "points": 7, "vip": 0, "signed_up_at": None, "birthday": None},
                  stream.tso(t + 2))  # fmt: skip
    stream.watermark(stream.tso(t + 3))
    new = topic.send()
    _, read = run_counting(spark, config)
    assert read == new
    assert_mirror_exact(spark, lake, stream, SAMPLE_TABLES)

    # Our progress restored to an older state while the checkpoint moved on: the records in between were
    # never applied by that progress, so the stream refuses to go on instead of skipping them.
    stale = IngestConfig.from_params(
        {**_params(config), "stream-id": "restored", "checkpoint-location": str(lake.parent / "stale-cp")}
    )
    shutil.copytree(config.checkpoint_location, stale.checkpoint_location)
    commit_progress(spark, stale.state_path, "restored", after_first)
    stream.watermark(stream.tso(t + 4))
    topic.send()
    with pytest.raises(OrderingError, match=r"checkpoint is ahead of our progress.*Delete the checkpoint"):
        run_kafka(spark, stale)

    # The topic gained a partition our progress never saw, and the checkpoint is lost: Spark accepts
    # specific starting offsets only for every partition, so the stream reads from the earliest offsets
    # and drops what our progress already holds. Still exact.
    admin = AdminClient(topic.broker.client_config())
    admin.create_partitions([NewPartitions(topic.topic, 3)])[topic.topic].result(timeout=30)
    shutil.rmtree(config.checkpoint_location)
    stream.update(customers, (1011,), {"points": 8}, stream.tso(t + 5))
    stream.watermark(stream.tso(t + 6))
    topic.send()
    _, read = run_counting(spark, config)
    assert read == len(stream.records)
    assert_mirror_exact(spark, lake, stream, SAMPLE_TABLES)


def _params(config: IngestConfig) -> dict[str, str]:
    assert config.kafka is not None
    return {
        "source": "kafka",
        "kafka-bootstrap-servers": config.kafka.bootstrap_servers,
        **config.kafka.options,
        "topics": ",".join(config.kafka.topics),
        "target-path": config.target_path,
        "timezone": config.timezone,
    }


def wait_for(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def test_broker_restart_mid_stream_keeps_a_processing_time_query_exact(spark, feed, lake, kafka_broker):
    stream = Stream(topic="restart", partitions=3)
    stream.create_table(SIMPLE_FOR_TESTS, stream.tso(1))
    for i in range(12):
        stream.insert(T, {"id": i, "v": f"a{i}"}, stream.tso(10 + i))
    stream.watermark(stream.tso(30))
    topic = feed(stream)
    topic.send()
    config = kafka_config(topic, lake, trigger="processing-time", **{"trigger-interval": "1 second"})

    def applied_up_to(ts: int):
        return lambda: load_progress(spark, config.state_path, config.stream_id).global_watermark >= ts

    mirror = start_kafka(spark, config)
    try:
        wait_for(applied_up_to(stream.tso(30)), 240, "the first round")
        assert_mirror_exact(spark, lake, stream, [T])

        kafka_broker.stop()  # the query keeps triggering against a broker that is gone
        time.sleep(3)
        kafka_broker.start()  # same port, same data directory
        for i in range(0, 12, 3):
            stream.update(T, (i,), {"v": f"b{i}"}, stream.tso(40 + i))
        stream.delete(T, (1,), stream.tso(55))
        stream.insert(T, {"id": 100, "v": "c"}, stream.tso(56))
        stream.watermark(stream.tso(60))
        topic.send()
        if mirror.query.isActive:
            wait_for(applied_up_to(stream.tso(60)), 240, "the round after the broker restart")
            survived = True
        else:
            survived = False
    finally:
        mirror.stop()
    if not survived:
        # The query gave up while the broker was away; the next run continues from our progress.
        print("the processing-time query failed while the broker was down; an AvailableNow run continued")
        run_kafka(spark, IngestConfig.from_params({**_params(config)}))
    else:
        print("the processing-time query survived the broker restart")
    assert_mirror_exact(spark, lake, stream, [T])


def test_every_batch_reports_metrics(spark, feed, lake):
    stream = Stream(topic="metrics", partitions=2)
    stream.create_table(SIMPLE_FOR_TESTS, stream.tso(1))
    stream.insert(T, {"id": 1, "v": "a"}, stream.tso(10))
    stream.insert(T, {"id": 2, "v": "b"}, stream.tso(11))
    stream.update(T, (2,), {"v": "c"}, stream.tso(12))
    stream.watermark(stream.tso(20))
    topic = feed(stream)
    topic.send()
    before = time.time()
    mirror = start_kafka(spark, kafka_config(topic, lake))
    mirror.await_termination()
    [result] = mirror.results()
    metrics = result.metrics()
    # Decoded: the CREATE TABLE and three rows. Applied: the DDL and one upsert per key (the insert and
    # the update of id 2 net out to one), so 3.
    assert metrics["tables"]["app.t"] == {"decoded": 4, "applied": 3, "pending": 0}
    assert metrics["records"] == len(stream.records)
    assert metrics["bytes"] == sum(len(base64.b64decode(r["value"])) for r in stream.records)
    watermark_time = stream.tso(20) >> 18
    assert metrics["lag_seconds"] >= before - watermark_time / 1000
    progress = mirror.query.lastProgress
    observed = progress["observedMetrics"][OBSERVED]
    assert (observed["records"], observed["bytes"]) == (metrics["records"], metrics["bytes"])


@pytest.mark.full(modes=("connect",))  # the classic run stays in CI
@pytest.mark.long
@pytest.mark.both_modes
def test_available_now_restarts_read_only_what_is_new_and_a_batch_error_reaches_the_caller(spark, feed, lake):
    # On Spark Connect the batch function runs in a Python process beside the server: what each batch did
    # and the error it raised come back through our Delta state (progress, metrics), nothing else.
    stream = Stream(topic="restart", partitions=2)
    stream.create_table(SIMPLE_FOR_TESTS, stream.tso(1))
    for i in range(6):
        stream.insert(T, {"id": i, "v": f"a{i}"}, stream.tso(10 + i))
    stream.watermark(stream.tso(20))
    topic = feed(stream)
    topic.send()
    config = kafka_config(topic, lake)
    first, read = run_counting(spark, config)
    assert read == len(stream.records)
    assert sum(r.records for r in first) == read and first[-1].global_watermark == stream.tso(20)
    assert_mirror_exact(spark, lake, stream, [T])
    after_first = load_progress(spark, config.state_path, config.stream_id)

    # A restart over the same checkpoint reads only what was produced since.
    stream.update(T, (1,), {"v": "b1"}, stream.tso(30))
    stream.delete(T, (2,), stream.tso(31))
    stream.watermark(stream.tso(40))
    new = topic.send()
    second, read = run_counting(spark, config)
    assert read == new and sum(r.records for r in second) == new
    assert [r.run_id for r in second] == list(
        range(after_first.run_id + 1, after_first.run_id + 1 + len(second))
    )
    assert_mirror_exact(spark, lake, stream, [T])

    # Progress restored to an older state while the checkpoint moved on: the batch raises OrderingError,
    # and the caller gets that error, not only Spark's StreamingQueryException.
    stale = IngestConfig.from_params(
        {**_params(config), "stream-id": "restored", "checkpoint-location": str(lake.parent / "stale-cp")}
    )
    shutil.copytree(config.checkpoint_location, stale.checkpoint_location)
    commit_progress(spark, stale.state_path, "restored", after_first)
    stream.watermark(stream.tso(50))
    topic.send()
    with pytest.raises(OrderingError, match=r"checkpoint is ahead of our progress.*Delete the checkpoint"):
        run_kafka(spark, stale)


def test_cli_runs_a_kafka_stream(spark, feed, lake, capsys):
    from ingest.cli import main

    stream = Stream(topic="cli", partitions=2)
    stream.create_table(SIMPLE_FOR_TESTS, stream.tso(1))
    stream.insert(T, {"id": 1, "v": "a"}, stream.tso(10))
    stream.insert(T, {"id": 2, "v": "b"}, stream.tso(11))
    stream.watermark(stream.tso(20))
    stream.insert(T, {"id": 3, "v": "above G"}, stream.tso(21))
    topic = feed(stream)
    topic.send()
    code = main(
        ["run", "--source", "kafka", *[f"--{k}={v}" for k, v in topic.broker.mirror_params().items()],
         "--topics", topic.topic, "--target-path", str(lake), "--kafka.client.id=ticdc-ingest-cli-test"]
    )  # fmt: skip
    assert code == 0
    assert_mirror_exact(spark, lake, stream, [T])
    assert "1 pending above G" in capsys.readouterr().out


@pytest.mark.both_modes
def test_a_kafka_mirror_by_name_keeps_only_its_checkpoint_at_a_path(spark, feed, tmp_path):
    """Tables and state are catalog tables; the one path is Spark's checkpoint. On Spark Connect the
    batches' results come back through the metrics table, by name too."""
    stream = Stream(topic="byname", partitions=2)
    stream.create_table(SIMPLE_FOR_TESTS, stream.tso(1))
    stream.insert(T, {"id": 1, "v": "a"}, stream.tso(10))
    stream.update(T, (1,), {"v": "b"}, stream.tso(11))
    stream.insert(T, {"id": 2, "v": "c"}, stream.tso(12))
    stream.watermark(stream.tso(20))
    topic = feed(stream)
    topic.send()
    schema = f"k{uuid.uuid4().hex[:8]}"
    config = IngestConfig.from_params(
        {
            "source": "kafka",
            **topic.broker.mirror_params(),
            "topics": topic.topic,
            "target-catalog": "spark_catalog",
            "target-schema": schema + "_{database}",
            "state-schema": schema + "_ingest",
            "checkpoint-location": str(tmp_path / "checkpoint"),
            "timezone": stream.tz_name,
        }
    )
    try:
        mirror = start_kafka(spark, config)
        mirror.await_termination()
        [result] = mirror.results()
        assert result.metrics()["tables"]["app.t"]["applied"] == 3
        location = config.mirror.address(T)
        assert location_rows(spark, location) == expected_rows(stream, T, stream.complete_watermark())
        state = {r.tableName for r in spark.sql(f"SHOW TABLES IN spark_catalog.{schema}_ingest").collect()}
        assert {"progress", "metrics"} <= state
        assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint"]
    finally:
        for suffix in ("_app", "_ingest"):
            spark.sql(f"DROP SCHEMA IF EXISTS spark_catalog.{schema}{suffix} CASCADE")
