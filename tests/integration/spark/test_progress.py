"""The progress table of a long-running mirror stays small: one row per run, but bounded files and rows."""

from __future__ import annotations

import pytest
from delta.tables import DeltaTable

from ingest.model import PartitionId, TableId, TableState
from ingest.state import progress

P0 = PartitionId("cdc", 0)


def commit(spark, state: str, stream: str, run: int) -> None:
    progress.commit_progress(
        spark,
        state,
        stream,
        progress.Progress(
            run_id=run,
            global_watermark=1000 + run,
            resume={P0: run * 10},
            watermarks={P0: 1000 + run},
            tables={TableId("app", "t"): TableState(applied_ts=1000 + run)},
            buffered=0,
        ),
    )


def live_files(spark, state: str) -> int:
    detail = DeltaTable.forPath(spark, progress.progress_path(state)).detail().first()
    assert detail is not None
    return int(detail["numFiles"])


def runs_of(spark, state: str, stream: str) -> list[int]:
    table = spark.read.format("delta").load(progress.progress_path(state))
    return sorted(r["run_id"] for r in table.where(table.stream_id == stream).select("run_id").collect())


def test_progress_keeps_the_newest_runs_in_few_files(spark, tmp_path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(progress, "COMPACT_EVERY", 5)
    monkeypatch.setattr(progress, "KEEP_RUNS", 8)
    state = str(tmp_path / "_ingest")
    commit(spark, state, "other", 1)
    for run in range(1, 23):
        commit(spark, state, "mine", run)

    loaded = progress.load_progress(spark, state, "mine")
    assert (loaded.run_id, loaded.global_watermark, loaded.resume) == (22, 1022, {P0: 220})
    assert loaded.tables == {TableId("app", "t"): TableState(applied_ts=1022)}
    # Compacted at run 20, keeping runs 13..20; runs 21 and 22 came after, one file each.
    assert runs_of(spark, state, "mine") == list(range(13, 23))
    assert live_files(spark, state) <= 3
    # Another stream sharing the state path keeps its rows.
    assert runs_of(spark, state, "other") == [1]
    assert progress.load_progress(spark, state, "other").run_id == 1


def test_load_progress_of_a_stream_that_never_committed_is_empty(spark, tmp_path):
    state = str(tmp_path / "_ingest")
    commit(spark, state, "mine", 1)
    assert progress.load_progress(spark, state, "nobody") == progress.Progress()
