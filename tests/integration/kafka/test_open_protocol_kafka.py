"""Open Protocol on a real broker: the kit's records (TiCDC v8.3.0's encoder, batches of several events)
produced to a two-partition topic with a lagging partition and a restart's replay, mirrored by the
Structured Streaming source in two runs: every cell equals what TiDB returned."""

from __future__ import annotations

import json

from mirror import corpus_problems
from open_faults import faulty_partitions, last_resolved
from ticdc_fixture import CORPORA

from ingest.commands.stream import run_kafka
from ingest.config import IngestConfig
from testkit.local_services import create_topic, produce_records

TOPIC = "open_protocol_faults"


def test_open_protocol_from_kafka_lands_every_cell_through_replays_and_a_lagging_partition(
    spark, kafka_broker, tmp_path
):
    corpus = CORPORA["tidb-tests"]
    lines = (corpus / "open-protocol" / "records.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    first, second = faulty_partitions(records)
    create_topic(kafka_broker, TOPIC, 2)
    config = IngestConfig.from_params(
        {
            "source": "kafka",
            **kafka_broker.mirror_params(),
            "topics": TOPIC,
            "target-path": str(tmp_path / "lake"),
            "protocol": "default",
        }
    )
    # The first run sees two thirds of partition 0 and a third of partition 1; the second, the rest.
    produce_records(kafka_broker, [*first[: 2 * len(first) // 3], *second[: len(second) // 3]], topic=TOPIC)
    early = run_kafka(spark, config)
    produce_records(kafka_broker, [*first[2 * len(first) // 3 :], *second[len(second) // 3 :]], topic=TOPIC)
    late = run_kafka(spark, config)
    assert early and late
    assert sum(r.quarantined for r in [*early, *late]) == 0
    assert early[-1].global_watermark < late[-1].global_watermark == last_resolved(records)
    assert corpus_problems(spark, config, corpus) == {}
