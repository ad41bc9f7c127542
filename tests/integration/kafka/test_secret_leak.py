"""No secret the run is given reaches anything the run leaves behind.

One whole run of the command line, as a job task runs it: TiCDC Avro from the real broker over SASL/SCRAM +
TLS, its writer schemas from the registry behind basic auth over TLS, both passwords given as ``{{env:...}}``
references. Then ``status``, and runs that fail on a bad setting, a wrong Kafka password and a wrong
registry password. Every output is searched for each secret's text: the commands' stdout and stderr at DEBUG
(Spark's and Kafka's own log lines included), every file under the lake and the checkpoint (Delta logs,
checkpoint offsets, Parquet), and every cell of every Delta table the run wrote, read back through Spark.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from kill import CHILD, child_env
from mirror import delta_rows, expected_rows, located
from pyspark.sql import functions as F
from test_avro import T as ORDERS
from test_avro import U, scenario

from ingest.model import TableId
from ingest.state.progress import progress_path
from testkit.local_services import MIRROR_USER, create_topic, produce_records
from testkit.sample import Stream

WRONG_KAFKA = "wrong-kafka-pass-93c1"
WRONG_REGISTRY = "wrong-registry-pass-5d2e"


def cli(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, "-v", *args],
        capture_output=True, text=True, env={**child_env(), **env}, timeout=600, check=False,
    )  # fmt: skip
    return done.returncode, done.stdout + done.stderr


def delta_tables(root: Path) -> list[Path]:
    return sorted(log.parent for log in root.rglob("_delta_log"))


@pytest.mark.long
def test_no_secret_reaches_a_log_a_table_a_file_or_an_error(spark, kafka_broker, secured_registry, tmp_path):
    kafka_password = kafka_broker.users[MIRROR_USER]
    registry_password = secured_registry.password_file.read_text()
    secrets = {
        "the Kafka password": kafka_password,
        "the registry password": registry_password,
        "a wrong Kafka password": WRONG_KAFKA,
        "a wrong registry password": WRONG_REGISTRY,
    }

    def leaked(text: str) -> list[str]:  # names, not values: a failure must not print the secret either
        return [name for name, secret in secrets.items() if secret in text]

    env = {"KAFKA_PASSWORD": kafka_password, "REGISTRY_PASSWORD": registry_password}

    stream = Stream(topic="leak", partitions=2, protocol="avro", register=secured_registry.client().register)
    scenario(stream)
    for table in (ORDERS, U):
        create_topic(kafka_broker, stream.avro_topic(table), stream.partitions)
    produce_records(kafka_broker, stream.records)

    lake, checkpoint = tmp_path / "lake", tmp_path / "checkpoint"
    kafka = kafka_broker.spark_options(MIRROR_USER, "{{env:KAFKA_PASSWORD}}")
    run = [
        "run", "--source", "kafka", "--kafka-bootstrap-servers", kafka_broker.bootstrap_servers,
        *[f"--{key}={value}" for key, value in kafka.items()],
        "--topic-pattern", "leak_shop_.*", "--protocol", "avro", "--target-path", str(lake),
        "--checkpoint-location", str(checkpoint), "--trigger", "available-now",
        "--schema-registry", secured_registry.url,
        "--schema-registry-user-info", f"{secured_registry.user}:{{{{env:REGISTRY_PASSWORD}}}}",
        "--schema-registry-ca-file", str(secured_registry.tls.ca),
    ]  # fmt: skip
    outputs: dict[str, str] = {}

    code, outputs["run"] = cli(run, env)
    assert code == 0, outputs["run"][-3000:]
    for table in (ORDERS, U):
        assert delta_rows(spark, str(lake), table) == expected_rows(stream, table, stream.tso(60)), table

    code, outputs["status"] = cli(["status", "--target-path", str(lake)], env)
    assert code == 0 and "shop.orders" in outputs["status"], outputs["status"][-3000:]

    # A secret where a setting of another form is expected: the error names the setting, not the value.
    code, outputs["bad setting"] = cli(
        [*run[: run.index("--schema-registry-user-info")], "--schema-registry-user-info",
         "{{env:REGISTRY_PASSWORD}}", "--schema-registry-ca-file", str(secured_registry.tls.ca)], env,
    )  # fmt: skip
    assert code != 0 and "schema-registry-user-info must be user:password" in outputs["bad setting"]

    code, outputs["wrong kafka password"] = cli(run, {**env, "KAFKA_PASSWORD": WRONG_KAFKA})
    assert code != 0 and "refused the mirror's login" in outputs["wrong kafka password"]

    code, outputs["wrong registry password"] = cli(run, {**env, "REGISTRY_PASSWORD": WRONG_REGISTRY})
    assert code != 0 and "HTTP 401" in outputs["wrong registry password"]

    for name, text in outputs.items():
        assert leaked(text) == [], f"in the output of {name}"

    files = [p for root in (lake, checkpoint) for p in root.rglob("*") if p.is_file()]
    assert len(files) > 50
    for path in files:
        assert leaked(path.read_bytes().decode("latin-1")) == [], path

    tables = delta_tables(lake)
    expected = {located(lake, TableId("shop", "orders")), progress_path(str(lake / "_ingest"))}
    assert expected <= {str(t) for t in tables}
    for table in tables:
        frame = spark.read.format("delta").load(str(table))
        cells = frame.select(F.to_json(F.struct(*frame.columns)).alias("row")).collect()
        assert leaked("\n".join(row["row"] for row in cells)) == [], table
    assert os.environ.get("KAFKA_PASSWORD") is None  # the secrets lived only in the children's environment
