"""The DDL history lists each DDL's outcome on a table once, however often a restart records it again.

Each batch reads what the history lists of its DDLs once (``ddl_history.Listed``); a later batch or run, as
after a crash, has a view of its own."""

from __future__ import annotations

from ingest.model import DdlEvent, Position, TableId
from ingest.state import ddl_history

T = TableId("app", "t")
U = TableId("app", "u")
ADD = "ALTER TABLE `t` ADD COLUMN `c` int"


def _record(
    spark, state: str, table: TableId, ddl: DdlEvent, action: str, run_id: int = 1, listed=None
) -> None:
    """Record as a batch of its own would, unless ``listed`` names the batch."""
    ddl_history.record(
        spark, state, table=table, ddl=ddl, action=action, detail="", schema_before="struct<id:int>",
        schema_after="struct<id:int,c:int>", run_id=run_id,
        listed=listed or ddl_history.Listed(state, [table], ddl.commit_ts),
    )  # fmt: skip


def _entries(spark, state: str) -> list[tuple[str, int, str, str]]:
    frame = ddl_history.read(spark, state)
    assert frame is not None
    return sorted((r["table"], r["commit_ts"], r["sql"], r["action"]) for r in frame.collect())


def test_a_ddl_recorded_again_is_listed_once_and_each_outcome_and_statement_once(spark, tmp_path):
    state = str(tmp_path / "_ingest")
    ddl = DdlEvent(T, 100, ADD, "ALTER TABLE", Position("cdc", 0, 7))

    _record(spark, state, T, ddl, ddl_history.REJECTED)
    _record(spark, state, T, ddl, ddl_history.REJECTED, run_id=2)  # the same refusal, a later run
    _record(spark, state, T, ddl, ddl_history.APPLIED, run_id=3)  # applied after a configuration change
    _record(spark, state, T, ddl, ddl_history.APPLIED, run_id=4)  # applied again after a crash
    _record(spark, state, T, ddl, ddl_history.REJECTED, run_id=5)  # refused after that (stricter settings)
    # A replay of the DDL from another position, whitespace aside the same statement.
    _record(spark, state, T, DdlEvent(T, 100, ADD.replace(" ", "  "), "ALTER TABLE", Position("cdc", 1, 3)),
            ddl_history.APPLIED, run_id=6)  # fmt: skip
    other = DdlEvent(T, 100, "ALTER TABLE `t` ADD COLUMN `d` int", "ALTER TABLE", Position("cdc", 0, 8))
    _record(spark, state, T, other, ddl_history.APPLIED)  # another statement at the same commitTs
    _record(spark, state, U, DdlEvent(U, 100, ADD, "ALTER TABLE", Position("cdc", 0, 9)), ddl_history.APPLIED)
    _record(spark, state, T, DdlEvent(T, 90, ADD, "ALTER TABLE", Position("cdc", 0, 5)), ddl_history.APPLIED)

    assert _entries(spark, state) == [
        ("app.t", 90, ADD, "applied"),
        ("app.t", 100, ADD, "applied"),
        ("app.t", 100, ADD, "rejected"),
        ("app.t", 100, "ALTER TABLE `t` ADD COLUMN `d` int", "applied"),
        ("app.u", 100, ADD, "applied"),
    ]


def test_tables_recording_at_the_same_time_in_sessions_of_their_own_are_each_listed_once(spark, tmp_path):
    """Tables applied in parallel record their DDLs at once: the first entries race to create the table,
    and the appends after it overlap, each in its table's session, all in one batch's view."""
    from concurrent.futures import ThreadPoolExecutor

    state = str(tmp_path / "_ingest")
    tables = [TableId("app", f"t{i}") for i in range(4)]
    listed = ddl_history.Listed(state, tables, 100)

    def record_all(table: TableId) -> None:
        session = spark.newSession()
        for ts in range(100, 105):
            statement = f"ALTER TABLE `{table.table}` ADD COLUMN `c{ts}` int"
            ddl = DdlEvent(table, ts, statement, "ALTER TABLE", Position("cdc", 0, ts))
            _record(session, state, table, ddl, ddl_history.APPLIED, listed=listed)

    with ThreadPoolExecutor(len(tables)) as pool:
        list(pool.map(record_all, tables))

    assert _entries(spark, state) == sorted(
        (str(t), ts, f"ALTER TABLE `{t.table}` ADD COLUMN `c{ts}` int", "applied")
        for t in tables
        for ts in range(100, 105)
    )
