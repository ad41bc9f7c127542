"""Kill the job for real (SIGKILL) at the worst moments; a restart must end exactly where an uninterrupted
run ends. The child process patches one function to kill itself; the restart runs in this process."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from kill import child_env
from mirror import delta_rows, expected_rows, located

from ingest.config import IngestConfig
from ingest.model import TableId
from ingest.pipeline import run_files
from ingest.state import ddl_history
from ingest.state.progress import load_progress
from testkit.sample import SIMPLE_FOR_TESTS, Stream

T = TableId("app", "t")
U = TableId("app", "u")

CHILD = textwrap.dedent(
    """
    import os, signal, sys, types
    from ingest.pipeline import watermarked as pipeline
    from ingest.apply import schema
    from ingest.cli import main

    def die(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)

    point = sys.argv[1]
    if point == "after-merges-before-progress":
        pipeline.progress.commit_progress = die
    elif point == "between-tables":
        calls = {"n": 0}
        original = pipeline.apply_table
        def second_table_dies(*args, **kwargs):
            calls["n"] += 1
            if calls["n"] == 2:
                die()
            return original(*args, **kwargs)
        pipeline.apply_table = second_table_dies
    elif point == "mid-ddl":
        # After ALTER TABLE ADD COLUMNS has committed, before the back-fill of existing rows.
        schema.convert = types.SimpleNamespace(**{**vars(schema.convert), "from_wire": die})
    elif point == "after-ddl-history-before-state":
        # The ADD COLUMN is applied and listed in the DDL history; the table's state does not say so yet.
        from ingest.state import ddl_history
        original_record = ddl_history.record
        def record_then_die(*args, **kwargs):
            original_record(*args, **kwargs)
            if "ADD COLUMN" in kwargs["ddl"].sql:
                die()
        ddl_history.record = record_then_die
    sys.exit(main(["run", "--input", sys.argv[2], "--target-path", sys.argv[3]]))
    """
)


def crash_stream() -> Stream:
    s = Stream(topic="cdc", partitions=2)
    s.create_table(SIMPLE_FOR_TESTS, s.tso(1))
    s.create_table(SIMPLE_FOR_TESTS.replace("`t`", "`u`"), s.tso(1))
    for i in range(1, 6):
        s.insert(T, {"id": i, "v": f"t{i}"}, s.tso(2))
        s.insert(U, {"id": i, "v": f"u{i}"}, s.tso(2))
    s.watermark(s.tso(3))
    s.update(T, (1,), {"v": "t1b"}, s.tso(4))
    s.update(T, (2,), {"id": 20}, s.tso(4))  # key change: DELETE + INSERT
    s.delete(U, (3,), s.tso(4))
    s.add_column(T, "ALTER TABLE `t` ADD COLUMN `c` int(11) NOT NULL DEFAULT '7'", s.tso(5), "c", "int", 7)
    s.insert(T, {"id": 6, "v": "t6", "c": 1}, s.tso(6))
    s.update(U, (4,), {"v": "u4b"}, s.tso(6))
    s.watermark(s.tso(7))
    s.insert(T, {"id": 7, "v": "pending", "c": 2}, s.tso(8))  # above the final G: stays pending
    s.watermark(s.tso(9), partitions=[0])
    return s


# CI kills at a point of each kind, a batch's commits and a DDL's; the full profile at every point.
@pytest.mark.parametrize(
    "point",
    [
        "after-merges-before-progress",
        pytest.param("between-tables", marks=pytest.mark.full),
        "mid-ddl",
        pytest.param("after-ddl-history-before-state", marks=pytest.mark.full),
    ],
)
def test_restart_after_sigkill_ends_like_an_uninterrupted_run(spark, tmp_path: Path, point: str):
    stream = crash_stream()
    input_dir, lake = tmp_path / "in", tmp_path / "lake"
    stream.write(input_dir)
    child = subprocess.run(
        [sys.executable, "-c", CHILD, point, str(input_dir), str(lake)],
        capture_output=True,
        text=True,
        timeout=600,
        env=child_env(),
    )
    assert child.returncode == -signal.SIGKILL, child.stderr[-3000:]
    assert load_progress(spark, f"{lake}/_ingest", "default").run_id == 0  # died before progress
    all_committed = point == "after-merges-before-progress"
    heads = {t: _head(spark, lake, t) for t in (T, U)} if all_committed else {}

    result = run_files(spark, IngestConfig.from_params({"input": str(input_dir), "target-path": str(lake)}))

    if all_committed:
        # Scenario 24: every table was committed before the crash; the restart changes no table again.
        assert {t: _head(spark, lake, t) for t in (T, U)} == heads

    g = stream.complete_watermark()
    assert result.global_watermark == g
    for table in (T, U):
        assert delta_rows(spark, str(lake), table) == expected_rows(stream, table, g), table
    assert delta_rows(spark, str(lake), T)[(1,)] == {"id": 1, "v": "t1b", "c": 7}  # back-filled default
    # A second restart after the recovery applies nothing more.
    again = run_files(spark, IngestConfig.from_params({"input": str(input_dir), "target-path": str(lake)}))
    assert all(r.upserted == 0 and r.deleted == 0 and not r.ddls for r in again.tables.values())
    # Each DDL is listed once, however often the runs applied it: two CREATE TABLEs and the ADD COLUMN.
    history = ddl_history.read(spark, f"{lake}/_ingest")
    assert history is not None
    entries = [(r["table"], r["commit_ts"], r["sql"], r["action"]) for r in history.collect()]
    assert len(entries) == len(set(entries)) == 3, entries
    assert [e[0] for e in entries if "ADD COLUMN" in e[2]] == [str(T)], entries


def _head(spark, lake: Path, table: TableId) -> int:
    from delta.tables import DeltaTable

    return int(DeltaTable.forPath(spark, located(lake, table)).history(1).first()["version"])


PARALLEL_CHILD = textwrap.dedent(
    """
    import os, signal, sys, threading
    from ingest.pipeline import segments
    from ingest.cli import main

    lock, calls = threading.Lock(), {"n": 0}
    original = segments.apply_merge

    def second_merge_dies(*args, **kwargs):
        # The other tables' threads are somewhere in their own apply when this one's MERGE has committed.
        result = original(*args, **kwargs)
        with lock:
            calls["n"] += 1
            if calls["n"] == 2:
                os.kill(os.getpid(), signal.SIGKILL)
        return result

    segments.apply_merge = second_merge_dies
    sys.exit(main(["run", "--input", sys.argv[1], "--target-path", sys.argv[2], "--table-parallelism", "4"]))
    """
)
WIDE = [TableId("app", name) for name in ("t", "u", "v", "w", "x")]


def test_restart_after_sigkill_among_tables_applied_in_parallel_ends_like_an_uninterrupted_run(
    spark, tmp_path: Path
):
    s = Stream(topic="cdc", partitions=2)
    for table in WIDE:
        s.create_table(SIMPLE_FOR_TESTS.replace("`t`", f"`{table.table}`"), s.tso(1))
    for n, table in enumerate(WIDE):
        for i in range(1, 5):
            s.insert(table, {"id": i, "v": f"{table.table}{i}"}, s.tso(2 + n * 0.01))
    s.watermark(s.tso(3))
    for n, table in enumerate(WIDE):
        s.update(table, (1,), {"v": "b"}, s.tso(4 + n * 0.01))
        s.update(table, (2,), {"id": 20}, s.tso(4 + n * 0.01))
        s.delete(table, (3,), s.tso(4 + n * 0.01))
    s.watermark(s.tso(5))
    input_dir, lake = tmp_path / "in", tmp_path / "lake"
    s.write(input_dir)
    child = subprocess.run(
        [sys.executable, "-c", PARALLEL_CHILD, str(input_dir), str(lake)],
        capture_output=True,
        text=True,
        timeout=600,
        env=child_env(),
    )
    assert child.returncode == -signal.SIGKILL, child.stderr[-3000:]
    assert load_progress(spark, f"{lake}/_ingest", "default").run_id == 0  # died before progress

    params = {"input": str(input_dir), "target-path": str(lake), "table-parallelism": "4"}
    result = run_files(spark, IngestConfig.from_params(params))

    g = s.complete_watermark()
    assert result.global_watermark == g
    for table in WIDE:
        assert delta_rows(spark, str(lake), table) == expected_rows(s, table, g), table
    again = run_files(spark, IngestConfig.from_params(params))
    assert all(r.upserted == 0 and r.deleted == 0 and not r.ddls for r in again.tables.values())
