"""Debezium on a real broker: the kit's records (TiCDC v8.3.0's Debezium encoder, every type TiCDC's own
test workloads use) produced to a topic with a restart's replay (the middle third sent again at new
offsets), mirrored by the Structured Streaming source in two runs, the replay falling across them. Every
cell Debezium keeps equals what TiDB returned, and no replayed record moves a row back."""

from __future__ import annotations

import json

from mirror import debezium_problems, debezium_settings
from ticdc_fixture import CORPORA

from ingest.commands.stream import run_kafka
from ingest.config import IngestConfig
from testkit.local_services import create_topic, produce_records

TOPIC = "debezium_replays"
CORPUS = "tidb-tests"


def test_debezium_from_kafka_lands_every_cell_it_keeps_through_a_replay(spark, kafka_broker, tmp_path):
    lines = (CORPORA[CORPUS] / "debezium" / "records.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    replayed = records[len(records) // 3 : 2 * len(records) // 3]
    sent = [{**r, "offset": i} for i, r in enumerate([*records, *replayed])]
    create_topic(kafka_broker, TOPIC, 1)
    config = IngestConfig.from_params(
        {
            "source": "kafka",
            **kafka_broker.mirror_params(),
            "topics": TOPIC,
            "target-path": str(tmp_path / "lake"),
            "protocol": "debezium",
            **debezium_settings(CORPUS),
        }
    )
    # The first run ends inside the replay, which goes back to changes the mirror already holds.
    cut = len(records) + len(replayed) // 2
    produce_records(kafka_broker, sent[:cut], topic=TOPIC)
    early = run_kafka(spark, config)
    produce_records(kafka_broker, sent[cut:], topic=TOPIC)
    late = run_kafka(spark, config)
    assert early and late
    assert sum(r.quarantined for r in [*early, *late]) == 0
    assert debezium_problems(spark, config, CORPUS) == {}
