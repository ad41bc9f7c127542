"""A kill at any instant costs nothing but time: the next run ends where an uninterrupted run ends.

The first tests rebuild exactly what a kill inside a table's creation leaves on disk: a ``_delta_log/``
with nothing in it but an empty ``_staged_commits/``. The randomized tests kill a real ``ticdc-ingest run``
process group (SIGKILL) at random moments, several times, then let it finish; the tables must equal the
upstream model at G and a further run must change nothing. ``KILL_PROFILE=explore`` runs many more seeds;
a failure names its seed, and ``KILL_SEEDS=<seed>`` replays it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mirror import delta_rows, expected_rows

from ingest.config import IngestConfig
from ingest.model import TableId
from ingest.pipeline import run_files
from ingest.sample import SIMPLE_FOR_TESTS, Stream

T = TableId("app", "t")
U = TableId("app", "u")
STATE_TABLES = ("progress", "buffer", "quarantine", "ddl_history", "schemas")


def _cut_short(location: Path) -> None:
    """What a kill between Delta's first mkdir and its first commit leaves behind."""
    (location / "_delta_log" / "_staged_commits").mkdir(parents=True)


def _small_stream(protocol: str) -> Stream:
    s = Stream(topic="cdc", partitions=2, protocol=protocol)
    s.create_table(SIMPLE_FOR_TESTS, s.tso(1))
    s.insert(T, {"id": 1, "v": "a"}, s.tso(2))
    s.insert(T, {"id": 2, "v": "b"}, s.tso(2))
    s.append_raw(1, b'{"database": "app"')  # quarantined
    s.watermark(s.tso(3))
    s.insert(T, {"id": 3, "v": "pending"}, s.tso(4))  # above G: buffered
    s.watermark(s.tso(5), partitions=[0])
    return s


@pytest.mark.parametrize(
    ("protocol", "where"), [("canal-json", "mirrored"), ("canal-json", "state"), ("simple", "both")]
)
def test_tables_whose_creation_was_cut_short_are_created_again(
    spark, tmp_path: Path, protocol: str, where: str
):
    stream = _small_stream(protocol)
    input_dir, lake = tmp_path / "in", tmp_path / "lake"
    stream.write(input_dir)
    if where in ("mirrored", "both"):
        _cut_short(lake / "app" / "t")
    if where in ("state", "both"):
        for name in STATE_TABLES:
            _cut_short(lake / "_ingest" / name)
    config = IngestConfig.from_params(
        {"input": str(input_dir), "target-path": str(lake), "protocol": protocol, "max-bad-ratio": "0.5"}
    )

    result = run_files(spark, config)

    g = stream.complete_watermark()
    assert result.global_watermark == g
    assert delta_rows(spark, str(lake), T) == expected_rows(stream, T, g)
    assert result.quarantined == 1
    assert spark.read.format("delta").load(f"{lake}/_ingest/quarantine").count() == 1
    assert spark.read.format("delta").load(f"{lake}/_ingest/buffer").count() >= 1
    assert spark.read.format("delta").load(f"{lake}/_ingest/ddl_history").count() == 1
    if protocol == "simple":
        assert spark.read.format("delta").load(f"{lake}/_ingest/schemas").count() >= 1
    again = run_files(spark, config)
    assert all(r.upserted == 0 and r.deleted == 0 and not r.ddls for r in again.tables.values())
