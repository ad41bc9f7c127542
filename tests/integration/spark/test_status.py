"""``status`` read from the mirror's files without Spark gives what it gives through Spark: the same
progress, and per table the same applied TSO, rows, pending, quarantined rows and last DDL."""

from __future__ import annotations

from datetime import datetime, timezone

from ingest.commands import status
from ingest.config import IngestConfig
from ingest.model import TableId
from ingest.state import ddl_history
from testkit.sample import SIMPLE_FOR_TESTS, build_sample

T = TableId("app", "t")


def _config(lake) -> IngestConfig:
    return IngestConfig.from_params({"input": "-", "target-path": str(lake)})


def test_status_from_the_logs_is_status_through_spark(spark, mirrored_history, run, lake):
    h = mirrored_history
    expected = status.collect(spark, _config(h.lake))
    assert status.collect_local(_config(h.lake)) == expected
    assert [t.rows for t in expected[1]] == [
        len(h.stream.state_at(h.gs[2])[t]) for t in sorted(h.creates_at_g2)
    ]  # the counts are upstream's, not just the same both ways

    # A mirror with quarantined rows, rows pending above G and DDLs in its history.
    s = build_sample()
    t = s.create_table(SIMPLE_FOR_TESTS, s.tso(100))
    s.insert(t, {"id": 1, "v": "a"}, s.tso(101))
    s.append_message(0, {
        "database": "app", "table": "t", "pkNames": ["id"], "isDdl": False, "type": "INSERT",
        "mysqlType": {"id": "int", "v": "varchar"}, "data": [{"id": "not-a-number", "v": "x"}], "old": None,
        "_tidb": {"commitTs": s.tso(101)},
    })  # fmt: skip
    s.watermark(s.tso(102))
    s.insert(t, {"id": 2, "v": "pending"}, s.tso(103))
    run(s, **{"max-bad-ratio": "0.5"})
    expected = status.collect(spark, _config(lake))
    assert status.collect_local(_config(lake)) == expected
    mine = {x.table: x for x in expected[1]}[T]
    assert (mine.rows, mine.pending, mine.quarantined) == (1, 1, 1)


def test_the_last_ddl_rule_in_python_is_the_aggregate_spark_runs(spark, tmp_path):
    """Newest by (commit_ts, recorded_at), nulls first; a refused DDL stops a table until a later one."""
    at = datetime(2026, 11, 27, 10, 0, tzinfo=timezone.utc)
    later = datetime(2026, 11, 27, 11, 0, tzinfo=timezone.utc)
    rows = [
        ("a.x", ddl_history.APPLIED, "create x", 10, at),
        ("a.x", ddl_history.RECORDED, "alter x", 20, at),
        ("a.x", ddl_history.REJECTED, "bad x", 15, at),  # older than the last applied: not stopped
        ("a.y", ddl_history.APPLIED, "create y", 10, at),
        ("a.y", ddl_history.REJECTED, "bad y", 30, at),
        ("a.y", ddl_history.REJECTED, "bad y again", 30, later),  # same commit_ts, recorded later
        ("a.z", ddl_history.REJECTED, "only refused", 5, None),
        ("a.w", ddl_history.APPLIED, "tie early", 7, at),
        ("a.w", ddl_history.APPLIED, "tie late", 7, later),
        ("a.w", None, "no action", 99, later),
        ("a.v", ddl_history.SKIPPED, None, 3, at),
    ]
    state = tmp_path / "state"
    schema = "table STRING, action STRING, sql STRING, commit_ts BIGINT, recorded_at TIMESTAMP"
    spark.createDataFrame(rows, schema).write.format("delta").save(ddl_history.history_path(str(state)))
    names = ("table", "action", "sql", "commit_ts", "recorded_at")
    in_python = status.last_ddls([dict(zip(names, r, strict=True)) for r in rows])
    assert in_python == status._last_ddls(spark, str(state))
    assert in_python == (
        {"a.x": "alter x", "a.y": "create y", "a.w": "tie late"},
        {"a.y": "commitTs 30: bad y again", "a.z": "commitTs 5: only refused"},
    )
