"""Kafka source configuration and the position rules that need no broker (R9)."""

import orjson
import pytest

from ingest.config import IngestConfig, KafkaSource, SourceKind, Trigger
from ingest.errors import ConfigError, OrderingError
from ingest.model import PartitionId, TableId
from ingest.source.kafka import PartitionSpan, check_no_gap, starting_offsets

KAFKA = {"source": "kafka", "kafka-bootstrap-servers": "b1:9092", "topics": "cdc", "target-path": "/lake"}


def test_kafka_defaults_checkpoint_under_our_state_and_catch_up_once():
    config = IngestConfig.from_params(KAFKA)
    assert config.source is SourceKind.KAFKA
    assert config.kafka == KafkaSource(bootstrap_servers="b1:9092", topics=("cdc",))
    assert config.kafka.trigger is Trigger.AVAILABLE_NOW
    assert config.kafka.fail_on_data_loss is True
    assert config.checkpoint_location == "/lake/_ingest/checkpoints/default"
    assert IngestConfig.from_params({**KAFKA, "stream-id": "s2"}).checkpoint_location.endswith("/s2")


def test_kafka_options_pass_through_with_their_own_names():
    config = IngestConfig.from_params(
        {**KAFKA, "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "PLAIN", "topics": "a, b"}
    )
    assert config.kafka is not None
    assert config.kafka.options == {"kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "PLAIN"}
    assert config.kafka.topics == ("a", "b")


def test_all_stream_settings_are_read():
    config = IngestConfig.from_params(
        {**KAFKA, "topics": None, "topic-pattern": "cdc_.*", "trigger": "processing-time",
         "trigger-interval": "5 seconds", "checkpoint-location": "/cp", "max-offsets-per-trigger": "1000",
         "fail-on-data-loss": "false"}
    )  # fmt: skip
    assert config.kafka == KafkaSource(
        bootstrap_servers="b1:9092", topic_pattern="cdc_.*", trigger=Trigger.PROCESSING_TIME,
        trigger_interval="5 seconds", checkpoint_location="/cp", max_offsets_per_trigger=1000,
        fail_on_data_loss=False,
    )  # fmt: skip
    assert config.checkpoint_location == "/cp"


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"kafka-bootstrap-servers": None}, "kafka-bootstrap-servers: required with --source kafka"),
        ({"topics": None}, "give exactly one"),
        ({"topic-pattern": "x.*"}, "give exactly one"),
        ({"topics": None, "topic-pattern": "(unclosed"}, "not a regular expression"),
        ({"trigger": "continuous"}, "trigger: 'continuous' is not supported; use one of: available-now"),
        ({"trigger-interval": "5s"}, "write e.g. '30 seconds'"),
        ({"max-offsets-per-trigger": "many"}, "not a whole number"),
        ({"max-offsets-per-trigger": "0"}, "must be a positive number"),
        ({"fail-on-data-loss": "maybe"}, "use true or false"),
        ({"input": "/in"}, "input: not used with --source kafka"),
        ({"kafka.bootstrap.servers": "other:9092"}, "disagree; give only one"),
    ],
)
def test_bad_kafka_settings_fail_at_start_naming_key_and_fix(params, message):
    with pytest.raises(ConfigError, match=message):
        IngestConfig.from_params({k: v for k, v in {**KAFKA, **params}.items() if v is not None})


def test_kafka_settings_without_kafka_source_are_an_error():
    with pytest.raises(ConfigError, match="topics: only apply with --source kafka"):
        IngestConfig.from_params({"input": "/in", "target-path": "/lake", "topics": "cdc"})


def test_starting_offsets_come_from_our_progress_for_subscribed_topics_only():
    source = KafkaSource(bootstrap_servers="b", topics=("cdc",))
    resume = {PartitionId("cdc", 0): 52, PartitionId("cdc", 1): 35, PartitionId("gone", 0): 9}
    assert orjson.loads(starting_offsets(source, resume)) == {"cdc": {"0": 52, "1": 35}}
    assert starting_offsets(source, {}) == "earliest"
    pattern = KafkaSource(bootstrap_servers="b", topic_pattern="cdc_[0-9]+")
    resume = {PartitionId("cdc_1", 0): 4, PartitionId("cdc_1x", 0): 5}
    assert orjson.loads(starting_offsets(pattern, resume)) == {"cdc_1": {"0": 4}}


def test_a_batch_starting_above_our_resume_offset_is_a_gap():
    resume = {PartitionId("cdc", 0): 10, PartitionId("cdc", 1): 5}
    # At or below the resume offset (a replayed batch), and partitions we never saw: fine.
    spans = {
        PartitionId("cdc", 0): PartitionSpan(10, 20, 11),
        PartitionId("cdc", 1): PartitionSpan(0, 7, 8),
        PartitionId("cdc", 2): PartitionSpan(100, 101, 2),
    }
    check_no_gap(spans, resume)
    with pytest.raises(OrderingError, match=r"cdc/1: progress resumes at 5, the batch starts at 6"):
        check_no_gap({PartitionId("cdc", 1): PartitionSpan(6, 7, 2)}, resume)


def test_cli_takes_kafka_options_with_or_without_equals():
    from ingest.cli import _kafka_options

    rest, options = _kafka_options(
        ["run", "--kafka.security.protocol=SSL", "--topics", "cdc", "--kafka.ssl.truststore.location", "/ts"]
    )
    assert rest == ["run", "--topics", "cdc"]
    assert options == {"kafka.security.protocol": "SSL", "kafka.ssl.truststore.location": "/ts"}


def test_batch_result_survives_its_json_in_the_metrics_table():
    from ingest.pipeline import BatchResult, TableReport

    t = TableId("shop", "orders")
    report = TableReport(t, upserted=3, deleted=1, ddls=["ALTER TABLE x"], pending=2, applied_ts=7)
    result = BatchResult(run_id=4, records=9, global_watermark=11, quarantined=1, tables={t: report},
                         seconds=1.5, bytes=99, decoded={t: 5}, lag_seconds=None, batch_id=3)  # fmt: skip
    assert BatchResult.from_json(result.to_json()) == result


@pytest.mark.parametrize("env", [{"IS_SERVERLESS": "TRUE"}, {"DATABRICKS_RUNTIME_VERSION": "client.3.1"}])
def test_processing_time_is_refused_on_serverless_before_the_stream_starts(monkeypatch, env):
    from ingest.commands.stream import start_kafka

    for key, value in env.items():
        monkeypatch.setenv(key, value)
    config = IngestConfig.from_params(
        {"source": "kafka", "kafka-bootstrap-servers": "b:9092", "topics": "t", "target-path": "/lake",
         "trigger": "processing-time"}
    )  # fmt: skip
    with pytest.raises(ConfigError, match=r"does not run on Databricks serverless.*available-now"):
        start_kafka(object(), config)  # type: ignore[arg-type]  # refused before the session is used


# Kafka's own words, as Spark's Kafka source reports them in the failure it raises.
_SASL = (
    "[STREAM_FAILED] Query [id = 1b36] terminated with exception: org.apache.kafka.common.errors."
    "SaslAuthenticationException: Authentication failed during authentication due to invalid credentials "
    "with SASL mechanism SCRAM-SHA-512 SQLSTATE: XXKST\n=== Streaming Query ==="
)
_TLS = (
    "java.util.concurrent.ExecutionException: org.apache.kafka.common.errors.SslAuthenticationException: "
    "SSL handshake failed\nCaused by: javax.net.ssl.SSLHandshakeException: PKIX path building failed"
)
_ACL = "org.apache.kafka.common.errors.TopicAuthorizationException: Not authorized to access topics: [cdc]"


def test_a_refused_login_a_failed_handshake_and_a_denied_topic_each_say_what_to_check():
    from ingest.errors import KafkaRefused
    from ingest.source.kafka import refusal

    source = KafkaSource(bootstrap_servers="b1:9093", topics=("cdc",))

    login, handshake, denied = (refusal(source, text) for text in (_SASL, _TLS, _ACL))

    assert isinstance(login, KafkaRefused) and isinstance(handshake, KafkaRefused)
    assert isinstance(denied, KafkaRefused)
    assert str(login).startswith("Kafka at b1:9093 refused the mirror's login: Authentication failed")
    assert "kafka.sasl.jaas.config" in str(login) and "STREAM_FAILED" not in str(login)
    assert "SSL handshake failed" in str(handshake) and "kafka.ssl.truststore.location" in str(handshake)
    assert "Not authorized to access topics: [cdc]" in str(denied) and "Read on the topics" in str(denied)


def test_other_kafka_failures_are_left_to_the_stream():
    from ingest.source.kafka import refusal

    source = KafkaSource(bootstrap_servers="b1:9093", topics=("cdc",))
    timeout = "org.apache.kafka.common.errors.TimeoutException: Timed out waiting for a node assignment."

    assert refusal(source, timeout) is None
    assert refusal(source, "some Spark failure without a Kafka exception") is None
