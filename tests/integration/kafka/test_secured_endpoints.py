"""Wrong credentials, an unknown CA, an expired certificate and a missing secret, against the real secured
services: the Kafka broker's SASL/SCRAM-over-TLS listener and the registry behind nginx's basic auth over
TLS. Each stops the run at its start with one clear error that says what to check and holds no secret, and
writes nothing: no table, no progress, no checkpoint."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from test_ticdc_corpus_avro import corpus_records

from ingest.commands.stream import run_kafka
from ingest.config import IngestConfig
from ingest.errors import ConfigError, KafkaRefused, RegistryRefused
from ingest.pipeline import run_files
from testkit.local_services import AuthProxy
from testkit.sample import SIMPLE_FOR_TESTS, Stream

WRONG = "not-the-password-7f3a"
# Well under the 10 s Spark's own offset retries take, or the registry client's 60 s budget.
AT_ONCE_S = 8.0


def written(*roots: Path) -> list[str]:
    return sorted(str(p) for root in roots if root.exists() for p in root.rglob("*"))


def kafka_params(feed, tmp_path: Path) -> dict[str, str]:
    stream = Stream(topic="secured", partitions=1)
    stream.create_table(SIMPLE_FOR_TESTS, stream.tso(1))
    stream.watermark(stream.tso(2))
    topic = feed(stream)
    topic.send()
    return {
        "source": "kafka",
        **topic.broker.mirror_params(),
        "topics": topic.topic,
        "target-path": str(tmp_path / "lake"),
        "checkpoint-location": str(tmp_path / "checkpoint"),
    }


def refused_at_once(run, error: type[Exception]) -> tuple[str, float]:
    started = time.monotonic()
    with pytest.raises(error) as raised:
        run()
    return str(raised.value), time.monotonic() - started


def test_kafka_with_a_wrong_password_stops_at_once_and_writes_nothing(spark, feed, tmp_path, monkeypatch):
    params = kafka_params(feed, tmp_path)
    right = params["kafka.sasl.jaas.config"]
    monkeypatch.setenv("KAFKA_PASSWORD", WRONG)
    params["kafka.sasl.jaas.config"] = right.split(' password="')[0] + ' password="{{env:KAFKA_PASSWORD}}";'
    config = IngestConfig.from_params(params)

    message, took = refused_at_once(lambda: run_kafka(spark, config), KafkaRefused)

    assert took < AT_ONCE_S, took
    assert "refused the mirror's login" in message and "kafka.sasl.jaas.config" in message
    assert WRONG not in message and "password=" not in message
    assert written(tmp_path / "lake", tmp_path / "checkpoint") == []


def test_kafka_with_an_unknown_ca_stops_at_once_and_writes_nothing(spark, feed, kafka_broker, tmp_path):
    params = kafka_params(feed, tmp_path)
    params["kafka.ssl.truststore.location"] = str(kafka_broker.tls.other_ca)
    config = IngestConfig.from_params(params)

    message, took = refused_at_once(lambda: run_kafka(spark, config), KafkaRefused)

    assert took < AT_ONCE_S, took
    assert "TLS handshake failed" in message and "kafka.ssl.truststore.location" in message
    assert written(tmp_path / "lake", tmp_path / "checkpoint") == []


def test_kafka_with_a_missing_secret_stops_before_it_starts(feed, tmp_path, monkeypatch):
    params = kafka_params(feed, tmp_path)
    monkeypatch.delenv("KAFKA_PASSWORD", raising=False)
    params["kafka.sasl.jaas.config"] = 'x required username="mirror" password="{{env:KAFKA_PASSWORD}}";'
    with pytest.raises(ConfigError, match=r"kafka\.sasl\.jaas\.config.*\{\{env:KAFKA_PASSWORD\}\}"):
        IngestConfig.from_params(params)


def registry_config(secured_registry, records: Path, lake: Path, **changes: str) -> IngestConfig:
    return IngestConfig.from_params(
        {"input": str(records), "target-path": str(lake), "protocol": "avro", **secured_registry.params(),
         **changes}
    )  # fmt: skip


def test_registry_with_a_wrong_password_stops_at_once_and_writes_nothing(
    spark, secured_registry, tmp_path, monkeypatch
):
    records = corpus_records(secured_registry, tmp_path / "in")
    monkeypatch.setenv("REGISTRY_PASSWORD", WRONG)
    lake = tmp_path / "lake"
    wrong = {"schema-registry-user-info": "cdc-reader:{{env:REGISTRY_PASSWORD}}"}
    config = registry_config(secured_registry, records, lake, **wrong)

    message, took = refused_at_once(lambda: run_files(spark, config), RegistryRefused)

    assert took < AT_ONCE_S, took
    assert "HTTP 401" in message and "--schema-registry-user-info" in message
    assert WRONG not in message and secured_registry.password_file.read_text() not in message
    assert written(lake) == []


def test_registry_with_an_unknown_ca_stops_at_once_and_writes_nothing(spark, secured_registry, tmp_path):
    records = corpus_records(secured_registry, tmp_path / "in")
    lake = tmp_path / "lake"
    config = registry_config(
        secured_registry, records, lake, **{"schema-registry-ca-file": str(secured_registry.tls.other_ca)}
    )

    message, took = refused_at_once(lambda: run_files(spark, config), RegistryRefused)

    assert took < AT_ONCE_S, took
    assert "TLS failed" in message and "--schema-registry-ca-file" in message
    assert written(lake) == []


def test_a_registry_whose_certificate_has_expired_stops_at_once_and_writes_nothing(
    spark, secured_registry, tmp_path
):
    records = corpus_records(secured_registry, tmp_path / "in")
    tls = replace(secured_registry.tls, server_cert=secured_registry.tls.expired_server_cert)
    password = secured_registry.password_file.read_text()
    # The same registry's address behind the same CA, but its certificate's day was in 2020.
    with AuthProxy(tmp_path / "proxy", "http://127.0.0.1:9", tls, secured_registry.user, password) as proxy:
        url = proxy.url + urlsplit(secured_registry.url).path
        lake = tmp_path / "lake"
        config = registry_config(secured_registry, records, lake, **{"schema-registry": url})

        message, took = refused_at_once(lambda: run_files(spark, config), RegistryRefused)

    assert took < AT_ONCE_S, took
    assert "certificate has expired" in message and "--schema-registry-ca-file" in message
    assert written(lake) == []


def test_registry_with_a_missing_secret_stops_before_it_starts(secured_registry, tmp_path):
    gone = tmp_path / "rotated-away"
    with pytest.raises(ConfigError, match=r"schema-registry-user-info.*rotated-away"):
        registry_config(
            secured_registry, tmp_path, tmp_path / "lake",
            **{"schema-registry-user-info": f"cdc-reader:{{{{file:{gone}}}}}"},
        )  # fmt: skip
