"""Open Protocol as TiCDC v8.3.0 wrote it (the kit's records), delivered with the faults a real topic has:
a second partition that carries only the DDL and resolved events TiCDC broadcasts to every partition and
lags behind the first, and records TiCDC sends again after a restart (batches, DDLs and resolved events
that go back). Mirrored over several runs, every cell equals what TiDB returned."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import orjson
import pytest
from mirror import corpus_problems
from ticdc_fixture import CORPORA

from ingest.config import IngestConfig
from ingest.decode import open_protocol as op
from ingest.pipeline import run_files

RUNS = 3


def _kinds(record: dict) -> set[int]:
    key = base64.b64decode(record["key"])
    return {orjson.loads(entry)["t"] for entry, _ in op.entries(key, base64.b64decode(record["value"] or ""))}


def faulty_partitions(records: list[dict]) -> tuple[list[dict], list[dict]]:
    """Partition 0: every record, then the middle third sent again at new offsets. Partition 1: what TiCDC
    broadcasts to a partition no table's rows are dispatched to (each DDL and resolved record)."""
    replayed = records[len(records) // 3 : 2 * len(records) // 3]
    first = [{**r, "offset": i} for i, r in enumerate([*records, *replayed])]
    broadcast = [r for r in records if _kinds(r) & {op.DDL, op.RESOLVED}]
    second = [{**r, "partition": 1, "offset": i} for i, r in enumerate(broadcast)]
    return first, second


def write(path: Path, records: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


@pytest.mark.long
def test_replays_and_a_lagging_partition_land_every_cell_as_one_clean_run(spark, tmp_path):
    corpus = CORPORA["tidb-tests"]
    records = [
        json.loads(line) for line in (corpus / "open-protocol" / "records.jsonl").read_text().splitlines()
    ]
    assert any(len(op.entries(base64.b64decode(r["key"]), base64.b64decode(r["value"]))) > 1 for r in records)
    first, second = faulty_partitions(records)
    lake, captured = tmp_path / "lake", tmp_path / "records.jsonl"
    gs = []
    for n in range(1, RUNS + 1):
        # Each run reads a longer prefix of both partitions; the second is always a third behind the first.
        lagging = second[: len(second) * (n - 1) // RUNS] if n < RUNS else second
        write(captured, [*first[: len(first) * n // RUNS], *lagging])
        config = IngestConfig.from_params(
            {
                "input": str(captured),
                "target-path": str(lake),
                "protocol": "default",
                "partitions": "tidb_cdc:0-1",
            }
        )
        result = run_files(spark, config)
        assert result.quarantined == 0
        gs.append(result.global_watermark)
    assert gs == sorted(gs) and gs[0] < gs[-1]
    assert corpus_problems(spark, config, corpus) == {}
    # G ends at the last resolved event, which both partitions carry.
    assert gs[-1] == max(_resolved(r) for r in records)


def _resolved(record: dict) -> int:
    key = base64.b64decode(record["key"])
    events = [orjson.loads(k) for k, _ in op.entries(key, base64.b64decode(record["value"] or ""))]
    return max((e["ts"] for e in events if e["t"] == op.RESOLVED), default=0)
