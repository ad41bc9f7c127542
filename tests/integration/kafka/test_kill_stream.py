"""The Kafka mirror SIGKILLed at random instants, micro-batches in flight, then restarted: it continues
exactly where its progress stands, and ends equal to the upstream model at G."""

from __future__ import annotations

import random

import pytest
from kill import KILLS, SEEDS, R, T, kill_marks, kill_stream, progress_of, run_killed
from mirror import delta_rows, expected_rows

from ingest.commands.stream import run_kafka
from ingest.config import IngestConfig


def mirror_args(access: dict[str, str], topic: str, lake, protocol: str) -> list[str]:
    # Small batches: a kill lands inside a micro-batch, with others committed before it and others after.
    return [
        "run", "--source", "kafka", *[f"--{k}={v}" for k, v in access.items()], "--topics", topic,
        "--target-path", str(lake), "--protocol", protocol, "--trigger", "available-now",
        "--max-offsets-per-trigger", "20",
    ]  # fmt: skip


@pytest.mark.long
@pytest.mark.parametrize("seed", SEEDS)
def test_kafka_mirror_killed_at_random_instants_continues_exactly(spark, feed, tmp_path, seed: int):
    protocol = "canal-json"
    rnd = random.Random(seed)
    stream = kill_stream(protocol, rnd)
    topic = feed(stream)
    topic.send()
    access = topic.broker.mirror_params()
    lake = tmp_path / "lake"

    def config_for(target) -> IngestConfig:
        return IngestConfig.from_params(
            {"source": "kafka", **access, "topics": topic.topic,
             "target-path": str(target), "protocol": protocol, "max-offsets-per-trigger": "20"}
        )  # fmt: skip

    marks = kill_marks(rnd, progress_of(lambda: run_kafka(spark, config_for(tmp_path / "once"))), KILLS)

    outcomes = run_killed(mirror_args(access, topic.topic, lake, protocol), marks)

    why = f"seed {seed}: {', '.join(outcomes)}"
    print(why)  # shown with -rP: where the kills landed
    config = config_for(lake)
    run_kafka(spark, config)
    g = stream.complete_watermark()
    for table in (T, R):
        assert delta_rows(spark, str(lake), table) == expected_rows(stream, table, g), f"{table}; {why}"
    again = run_kafka(spark, config)
    changed = [r for b in again for r in b.tables.values() if r.upserted or r.deleted or r.ddls]
    assert not changed, f"a further run changed {changed}; {why}"
