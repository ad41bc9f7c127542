"""Run the backfill notebook's source once, as a script, against the test session."""

import runpy
from pathlib import Path

from mirror import delta_rows, expected_rows

from ingest.model import TableId
from ingest.sample import build_sample

NOTEBOOK = Path(__file__).parents[2] / "notebooks" / "backfill.py"


def test_backfill_notebook_mirrors_a_directory(spark, tmp_path, monkeypatch):
    stream = build_sample()
    stream.write(tmp_path / "in")
    monkeypatch.setenv("INGEST_INPUT", str(tmp_path / "in"))
    monkeypatch.setenv("INGEST_TARGET_PATH", str(tmp_path / "lake"))
    runpy.run_path(str(NOTEBOOK))
    table = TableId("shop", "orders")
    assert delta_rows(spark, str(tmp_path / "lake"), table) == expected_rows(
        stream, table, stream.complete_watermark()
    )
