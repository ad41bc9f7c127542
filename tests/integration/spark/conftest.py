from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from ingest.config import IngestConfig
from ingest.pipeline import BatchResult, run_files
from testkit.sample import Stream

Runner = Callable[..., BatchResult]


@pytest.fixture
def prefix(spark):
    """Schemas of this test alone (the session catalog is shared by the worker's tests); dropped after."""
    name = f"t{uuid.uuid4().hex[:8]}"
    yield name
    for row in spark.sql(f"SHOW SCHEMAS LIKE '{name}*'").collect():
        spark.sql(f"DROP SCHEMA IF EXISTS spark_catalog.`{row[0]}` CASCADE")


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    return tmp_path / "lake"


@pytest.fixture
def run(spark, tmp_path: Path, lake: Path) -> Runner:
    """Write a stream's records (as they are now) to a fresh input directory and mirror it into ``lake``."""
    counter = {"n": 0}

    def _run(stream: Stream, **params: str) -> BatchResult:
        counter["n"] += 1
        input_dir = tmp_path / f"input-{counter['n']}"
        stream.write(input_dir)
        config = IngestConfig.from_params(
            {"input": str(input_dir), "target-path": str(lake), "timezone": stream.tz_name, **params}
        )
        return run_files(spark, config)

    return _run


@pytest.fixture(scope="session")
def mirrored_history(spark, tmp_path_factory: pytest.TempPathFactory):
    """A three-run, three-table mirror of a known upstream history (see ``asof_history``); read-only."""
    from asof_history import build

    return build(spark, tmp_path_factory.mktemp("history"))
