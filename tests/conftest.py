"""Markers by folder, so no test escapes its group, and one Spark session for the whole run."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

_FOLDER_MARKERS = {"spark": "spark", "kafka": "kafka", "notebooks": "notebook"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        parts = Path(str(item.fspath)).parts
        for folder, marker in _FOLDER_MARKERS.items():
            if folder in parts:
                item.add_marker(getattr(pytest.mark, marker))


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from ingest.spark import local_session

    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = local_session(
        app_name="ticdc-ingest-tests", warehouse_dir=str(tmp_path_factory.mktemp("warehouse"))
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """One real Kafka broker (KRaft, single node, 127.0.0.1) per test session; killed at the end."""
    from testkit.local_services import KafkaBroker

    broker = KafkaBroker(tmp_path_factory.mktemp("kafka"))
    broker.start()
    try:
        yield broker
    finally:
        broker.kill()


@pytest.fixture(scope="session")
def schema_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL of a real Confluent-compatible schema registry (Apicurio, in memory), e.g.
    ``http://127.0.0.1:PORT/apis/ccompat/v7``; one per test session, killed at the end."""
    from testkit.local_services import RegistryServer

    registry = RegistryServer(tmp_path_factory.mktemp("registry"))
    registry.start()
    try:
        yield registry.url
    finally:
        registry.kill()
