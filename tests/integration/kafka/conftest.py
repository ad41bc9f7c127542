from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from testkit.local_services import KafkaBroker, create_topic, produce_records
from testkit.sample import Stream

_names = itertools.count(1)


@dataclass
class Feed:
    """A stream's records produced to a real topic round by round, each partition in offset order."""

    broker: KafkaBroker
    stream: Stream
    topic: str
    sent: int = 0
    rounds: list[int] = field(default_factory=list)

    def send(self) -> int:
        """Produce every record the stream has gained since the last call; returns how many."""
        fresh = self.stream.records[self.sent :]
        produce_records(self.broker, fresh, topic=self.topic)
        self.sent += len(fresh)
        self.rounds.append(len(fresh))
        return len(fresh)


@pytest.fixture
def feed(kafka_broker: KafkaBroker):
    def _feed(stream: Stream) -> Feed:
        topic = f"cdc_{next(_names)}_{stream.topic}"
        create_topic(kafka_broker, topic, stream.partitions)
        return Feed(kafka_broker, stream, topic)

    return _feed


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    return tmp_path / "lake"
