from ingest import order
from ingest.model import DdlEvent, PartitionId, Position, TableId, TableState, Watermark
from ingest.mysql.ddl import ddl_event
from ingest.order import (
    DdlStep,
    Segment,
    advance_watermarks,
    ddl_is_new,
    global_watermark,
    plan_table_steps,
)

T = TableId("shop", "t")
P0, P1 = PartitionId("cdc", 0), PartitionId("cdc", 1)


def wm(ts: int, partition: int, offset: int = 0) -> Watermark:
    return Watermark(ts, Position("cdc", partition, offset))


def ddl(ts: int, sql: str = "ALTER TABLE t ADD COLUMN c INT", offset: int = 0) -> DdlEvent:
    return ddl_event(T, ts, sql, "ALTER", Position("cdc", 0, offset))


def test_watermark_regression_is_ignored():
    assert advance_watermarks({P0: 120}, [wm(110, 0), wm(118, 1)]) == {P0: 120, P1: 118}


def test_g_is_zero_until_every_partition_has_a_watermark():
    assert global_watermark({P0: 120}, [P0, P1]) == 0
    assert global_watermark({P0: 120, P1: 115}, [P0, P1]) == 115


def test_replayed_ddl_is_not_new_but_a_ddl_at_the_applied_watermark_is():
    state = TableState(applied_ts=105, ddl_ts=100, ddl_ids=frozenset({ddl(100).identity}))
    assert not ddl_is_new(state, ddl(100))
    assert not ddl_is_new(state, ddl(90))
    assert ddl_is_new(state, ddl(105))  # scenario 14: W@105 read before DDL@105
    assert ddl_is_new(TableState(applied_ts=100, ddl_ts=100, ddl_ids=frozenset({"other"})), ddl(100))


def test_rows_are_cut_at_eligible_ddls_and_rows_at_the_ddl_ts_go_before_it():
    steps = plan_table_steps(
        T, TableState(applied_ts=100), [ddl(110), ddl(130, offset=5)], bound=120, has_rows=True
    )
    assert steps == [
        Segment(T, 100, 110, True, before_ddl=True),
        DdlStep(ddl(110)),
        Segment(T, 110, 120, False),
    ]
    # Before the DDL commits, the table is upstream as of just before the DDL's commitTs.
    assert [s.applied_ts for s in steps if isinstance(s, Segment)] == [109, 120]


def test_after_an_applied_ddl_the_next_segment_excludes_the_ddl_ts():
    state = TableState(applied_ts=110, ddl_ts=110, ddl_ids=frozenset({"x"}))
    assert plan_table_steps(T, state, [], bound=120, has_rows=True) == [Segment(T, 110, 120, False)]
    assert plan_table_steps(T, state, [], bound=110, has_rows=True) == []


def test_nothing_is_planned_while_g_is_zero():
    assert plan_table_steps(T, TableState(), [ddl(110)], bound=0, has_rows=True) == []


def test_segment_admits_by_commit_ts():
    inclusive, exclusive = Segment(T, 100, 120, True), Segment(T, 100, 120, False)
    assert [inclusive.admits(ts) for ts in (99, 100, 120, 121)] == [False, True, True, False]
    assert [exclusive.admits(ts) for ts in (100, 101)] == [False, True]


def test_segments_that_no_row_falls_into_are_dropped_and_ddls_kept():
    t = TableId("s", "t")
    ddls = [
        ddl_event(t, ts, f"ALTER TABLE t ADD COLUMN c{ts} INT", "ALTER", Position("p", 0, ts))
        for ts in (20, 30, 40)
    ]
    steps = order.plan_table_steps(t, TableState(applied_ts=10), ddls, 50, has_rows=True)
    assert [type(s).__name__ for s in steps] == ["Segment", "DdlStep"] * 3 + ["Segment"]
    kept = order.drop_empty_segments(steps, [15, 45])  # rows before the first DDL and after the last
    assert [(s.low, s.high) if isinstance(s, order.Segment) else s.ddl.commit_ts for s in kept] == [
        (10, 20),
        20,
        30,
        40,
        (40, 50),
    ]
    # A row at a segment's exclusive low end (right after a DDL) belongs to the one before: not kept.
    assert all(isinstance(s, order.DdlStep) for s in order.drop_empty_segments(steps[2:-1], [20]))
