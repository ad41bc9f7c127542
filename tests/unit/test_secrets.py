"""Secret references: resolved at start from the environment, a file or a Databricks secret scope, and masked
in every log record from then on.

The Databricks scope is read here through an injected reader standing in for ``dbutils.secrets.get``
(no Databricks runtime on this machine); the environment and file references are real.
"""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys

import pytest

from ingest import secrets
from ingest.config import IngestConfig
from ingest.errors import ConfigError

SECRET = "s3cr3t-Pa55word-for-tests"


def test_an_environment_variable_a_file_and_a_scope_each_resolve_to_the_secret(tmp_path):
    mounted = tmp_path / "password"
    mounted.write_text(SECRET + "\n")
    env = {"REGISTRY_PASSWORD": SECRET}

    assert secrets.resolve("{{env:REGISTRY_PASSWORD}}", setting="x", environ=env) == SECRET
    assert secrets.resolve(f"{{{{file:{mounted}}}}}", setting="x") == SECRET
    assert secrets.resolve("{{secrets/tidb/registry}}", setting="x", scopes=lambda s, k: f"{s}.{k}") == (
        "tidb.registry"
    )
    assert secrets.resolve("plain value", setting="x") == "plain value"


def test_a_file_reference_may_start_at_the_home_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".secrets").mkdir()
    (tmp_path / ".secrets" / "kafka").write_text(SECRET)

    assert secrets.resolve("{{file:~/.secrets/kafka}}", setting="x") == SECRET


def test_a_reference_inside_a_longer_value_is_replaced_in_place():
    jaas = 'ScramLoginModule required username="cdc" password="{{env:KAFKA_PASSWORD}}";'
    resolved = secrets.resolve(jaas, setting="kafka.sasl.jaas.config", environ={"KAFKA_PASSWORD": SECRET})
    assert resolved == f'ScramLoginModule required username="cdc" password="{SECRET}";'


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        (
            "{{env:NOT_SET_ANYWHERE}}",
            "environment variable NOT_SET_ANYWHERE named by {{env:NOT_SET_ANYWHERE}}",
        ),
        ("{{file:/no/such/secret}}", "cannot read /no/such/secret named by {{file:/no/such/secret}}"),
    ],
)
def test_a_reference_that_cannot_be_resolved_is_a_configuration_error_naming_it(reference, message):
    with pytest.raises(ConfigError, match="schema-registry-user-info: ") as raised:
        secrets.resolve(reference, setting="schema-registry-user-info", environ={})
    assert message in str(raised.value)


def test_an_unreadable_scope_names_the_scope_and_key_but_not_what_the_reader_said():
    def refuse(scope: str, key: str) -> str:
        raise PermissionError(f"denied, by the way the value is {SECRET}")

    with pytest.raises(ConfigError) as raised:
        secrets.resolve("{{secrets/tidb/registry}}", setting="x", scopes=refuse)
    assert "tidb/registry" in str(raised.value)
    assert "PermissionError" in str(raised.value)
    assert SECRET not in str(raised.value)
    assert raised.value.__cause__ is None and raised.value.__suppress_context__


def test_resolved_values_are_masked_in_every_later_log_record_and_traceback():
    """Through logging's own formatter and through pyspark's JSON one, which reads the exception itself."""
    from pyspark.logger.logger import JSONFormatter

    secrets.resolve("{{env:MASKED_ONE}}", setting="x", environ={"MASKED_ONE": SECRET})
    log = logging.getLogger("anything.at.all")
    streams = {"plain": io.StringIO(), "json": io.StringIO()}
    handlers = [logging.StreamHandler(streams["plain"]), logging.StreamHandler(streams["json"])]
    handlers[1].setFormatter(JSONFormatter())
    for handler in handlers:
        log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        log.info("connecting with %s to %s", SECRET, "registry")
        log.warning(f"inline {SECRET} too")
        try:
            raise RuntimeError(f"the client said {SECRET}")
        except RuntimeError:
            log.exception("failed")
    finally:
        for handler in handlers:
            log.removeHandler(handler)
    plain, structured = streams["plain"].getvalue(), streams["json"].getvalue()
    assert SECRET not in plain and SECRET not in structured
    assert "connecting with [REDACTED] to registry" in plain
    assert "inline [REDACTED] too" in plain
    assert "RuntimeError: the client said [REDACTED]" in plain
    assert '"class": "RuntimeError", "msg": "the client said [REDACTED]"' in structured


def test_an_uncaught_exception_that_quotes_a_secret_prints_it_masked():
    # A process of its own: the hook that prints an uncaught exception is the interpreter's, not pytest's.
    program = (
        "from ingest import secrets\n"
        "secrets.resolve('{{env:TOKEN}}', setting='x')\n"
        "raise RuntimeError('the library was given ' + __import__('os').environ['TOKEN'])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], env={**os.environ, "TOKEN": SECRET}, capture_output=True, text=True
    )
    assert done.returncode == 1
    assert "RuntimeError: the library was given [REDACTED]" in done.stderr and SECRET not in done.stderr


def test_a_value_too_short_to_mask_safely_is_left_alone(caplog):
    secrets.resolve("{{env:SHORT}}", setting="x", environ={"SHORT": "7"})
    with caplog.at_level(logging.INFO):
        logging.getLogger("short").info("batch 7 of 17")
    assert "batch 7 of 17" in caplog.text


def test_the_config_resolves_references_and_never_shows_the_credential(monkeypatch, tmp_path):
    monkeypatch.setenv("REGISTRY_USER_INFO", f"key:{SECRET}")
    config = IngestConfig.from_params(
        {
            "target-path": str(tmp_path / "lake"),
            "protocol": "avro",
            "schema-registry": "https://registry.example:8081",
            "schema-registry-user-info": "{{env:REGISTRY_USER_INFO}}",
            "source": "kafka",
            "kafka-bootstrap-servers": "127.0.0.1:9092",
            "topics": "cdc",
            "kafka.sasl.jaas.config": 'x password="{{env:REGISTRY_USER_INFO}}";',
            "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.client.id": "{{env:REGISTRY_USER_INFO}}",
        }
    )
    assert config.schema_registry_user_info == f"key:{SECRET}"
    assert config.kafka is not None
    assert SECRET in str(config.kafka.options)  # the Kafka client gets the value itself
    assert SECRET not in repr(config)
    # The log line still shows the options: a secret-named key masked whole, a resolved value wherever it is.
    assert "'kafka.sasl.mechanism': 'SCRAM-SHA-512'" in repr(config)
    assert "'kafka.sasl.jaas.config': '[REDACTED]'" in repr(config)
    assert "'kafka.client.id': '[REDACTED]'" in repr(config)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"schema-registry-user-info": "no-colon"}, "must be user:password"),
        (
            {"schema-registry-user-info": "a:b", "schema-registry-bearer-token": "t"},
            "give one of them, not both",
        ),
        (
            {"schema-registry-ca-file": "/no/such/ca.pem"},
            "schema-registry-ca-file: no file at /no/such/ca.pem",
        ),
        ({"schema-registry-key-file": "/k.pem"}, "needs --schema-registry-cert-file"),
    ],
)
def test_registry_access_settings_are_checked_at_start(tmp_path, params, message):
    base = {
        "input": str(tmp_path),
        "target-path": str(tmp_path / "lake"),
        "protocol": "avro",
        "schema-registry": "https://registry.example:8081",
    }
    with pytest.raises(ConfigError, match=message):
        IngestConfig.from_params({**base, **params})


def test_registry_access_without_a_registry_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="set only with --schema-registry"):
        IngestConfig.from_params(
            {"input": str(tmp_path), "target-path": str(tmp_path / "l"), "schema-registry-user-info": "a:b"}
        )
