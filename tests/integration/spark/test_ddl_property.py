"""Random streams that interleave DDL and DML, cut into random batches, against the upstream model.

Column DDL (ADD with a DEFAULT, DROP, RENAME, MODIFY to a wider type), TRUNCATE and RENAME TABLE happen
between rows, replays and watermark regressions; after every batch each live table equals upstream at its
applied TSO, and at the end every live table equals upstream at G. Expected tables come from the model
(``Stream.state_at``), never from the code under test.
"""

from __future__ import annotations

import os

import pytest
from changes_check import replay_problems, stream_problems, upstream_problems
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mirror import delta_rows, expected_rows, located
from test_property import run_in_batches

from ingest.commands import asof
from ingest.model import TableId
from testkit.sample import SIMPLE_FOR_TESTS, Stream

# Random streams are where an order kept only within one partition would show.
pytestmark = pytest.mark.usefixtures("several_partitions")

# Sized for CI's time budget (Simple draws half as many); HYPOTHESIS_PROFILE=explore draws many more.
EXAMPLES = 3 if os.environ.get("HYPOTHESIS_PROFILE", "ci") == "ci" else 40

KEYS = st.integers(1, 5)
OPS = st.one_of(
    st.tuples(st.just("put"), st.integers(0, 1), KEYS, st.text("abcxyz", min_size=1, max_size=3)),
    st.tuples(st.just("delete"), st.integers(0, 1), KEYS),
    st.tuples(st.just("rekey"), st.integers(0, 1), KEYS, KEYS),
    st.tuples(st.just("watermark"), st.lists(st.integers(0, 2), min_size=1, max_size=3)),
    st.tuples(st.just("replay"), st.integers(0, 2), st.integers(1, 6)),
    st.tuples(st.just("add_column"), st.integers(0, 1), st.integers(0, 9)),
    st.tuples(st.just("drop_column"), st.integers(0, 1)),
    st.tuples(st.just("rename_column"), st.integers(0, 1), st.integers(0, 9)),
    st.tuples(st.just("widen"), st.integers(0, 1)),
    st.tuples(st.just("truncate"), st.integers(0, 1)),
    st.tuples(st.just("rename_table"), st.integers(0, 1)),
)


def build(ops: list[tuple], partitions: int, protocol: str = "canal-json") -> tuple[Stream, list[TableId]]:
    # DDL texts in TiDB's varied spellings, drawn from the ops so that each example stays reproducible.
    s = Stream(topic="cdc", partitions=partitions, ddl_seed=len(ops) * 17 + partitions, protocol=protocol)
    names = [TableId("app", "t"), TableId("app", "u")]
    keyword_names = ["status", "value", "date", "order", "key", "comment", "ttl", "clustered"]
    s.create_table(SIMPLE_FOR_TESTS, s.tso(1))
    s.create_table(SIMPLE_FOR_TESTS.replace("`t`", "`u`"), s.tso(1))
    extra: list[dict[str, str]] = [{}, {}]  # added columns per logical table: name -> type
    counter = 0
    t = 2.0
    for op in ops:
        t += 1
        ts = s.tso(t)
        kind = op[0]
        i = op[1] if kind not in ("watermark", "replay") else 0
        table = names[i]
        rows = s.state_at(ts)[table]
        if kind == "put":
            _, _, key, value = op
            if (key,) in rows:
                s.update(table, (key,), {"v": value}, ts)
            else:
                s.insert(table, {"id": key, "v": value, **dict.fromkeys(extra[i], counter)}, ts)
        elif kind == "delete" and (op[2],) in rows:
            s.delete(table, (op[2],), ts)
        elif kind == "rekey" and (op[2],) in rows and (op[3],) not in rows:
            s.update(table, (op[2],), {"id": op[3]}, ts)
        elif kind == "watermark":
            s.watermark(ts, partitions=sorted({p % partitions for p in op[1]}))
        elif kind == "replay":
            partition = op[1] % partitions
            offsets = [r["offset"] for r in s.records if r["partition"] == partition]
            if offsets:
                s.replay(partition, max(0, offsets[-1] - op[2] + 1), offsets[-1])
                s.watermark(s.tso(max(1.0, t - op[2])), partitions=[partition])
        elif kind == "add_column" and len(extra[i]) < 3:
            counter += 1
            # Column names that are keywords in MySQL or TiDB, while they last; each name is used once.
            name = keyword_names.pop(0) if keyword_names else f"c{counter}"
            sql = f"ALTER TABLE `{table.table}` ADD COLUMN `{name}` int(11) NOT NULL DEFAULT '{op[2]}'"
            s.add_column(table, sql, ts, name, "int", default=op[2])
            extra[i][name] = "int"
        elif kind == "drop_column" and extra[i]:
            name = sorted(extra[i])[0]
            s.drop_column(table, name, ts)
            del extra[i][name]
        elif kind == "rename_column" and extra[i]:
            counter += 1
            old, new = sorted(extra[i])[-1], f"r{counter}"
            s.rename_column(table, old, new, ts)
            extra[i][new] = extra[i].pop(old)
        elif kind == "widen" and any(v == "int" for v in extra[i].values()):
            name = next(n for n, v in sorted(extra[i].items()) if v == "int")
            s.modify_column(table, name, "bigint(20)", ts)
            extra[i][name] = "bigint"
        elif kind == "truncate":
            s.truncate(table, ts)
        elif kind == "rename_table" and "_" not in table.table:
            new = TableId(table.schema, f"{table.table}_{counter}")
            s.rename_table(table, new, ts)
            names[i] = new
    s.watermark(s.tso(t + 1))
    return s, names


def _retired(spark, lake, table: TableId) -> bool:
    from delta.tables import DeltaTable

    properties = DeltaTable.forPath(spark, located(lake, table)).detail().first()["properties"]
    return properties.get("ticdc.retired", "no") != "no"


DRAWN = {
    "ops": st.lists(OPS, min_size=6, max_size=24),
    "partitions": st.integers(1, 2),
    "cuts": st.lists(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=2), min_size=2, max_size=2),
    "between": st.randoms(use_true_random=False),
}
ONCE = {"deadline": None, "derandomize": True, "suppress_health_check": list(HealthCheck)}


@settings(max_examples=EXAMPLES, **ONCE)
@given(**DRAWN)
def test_random_ddl_and_dml_mirror_upstream_at_every_applied_watermark(
    spark, tmp_path_factory, ops, partitions, cuts, between
):
    _mirror_and_check(spark, tmp_path_factory, "canal-json", ops, partitions, cuts, between)


@settings(max_examples=max(1, EXAMPLES // 2), **ONCE)
@given(**DRAWN)
def test_random_ddl_and_dml_under_simple_mirror_upstream_and_answer_its_changes(
    spark, tmp_path_factory, ops, partitions, cuts, between
):
    _mirror_and_check(spark, tmp_path_factory, "simple", ops, partitions, cuts, between)


def _mirror_and_check(spark, tmp_path_factory, protocol, ops, partitions, cuts, between):
    root = tmp_path_factory.mktemp("ddlprop")
    lake = root / "lake"
    stream, live = build(ops, partitions, protocol)
    # A renamed-away table keeps its last rows (archive) while upstream has none: only live ones compare.
    extra = {"protocol": protocol} if protocol != "canal-json" else None
    live_only = lambda t: not _retired(spark, lake, t)  # noqa: E731
    result = run_in_batches(spark, stream, root, partitions, cuts, live_only, extra)
    g = stream.complete_watermark()
    assert result.global_watermark == g
    for table in live:
        assert delta_rows(spark, str(lake), table) == expected_rows(stream, table, g), table
    # The changes between every two of the runs' points (or a TSO between a point and the next), applied to
    # the earlier, give the later one: the stream's replays, watermark regressions and DDLs included. Row by
    # row they are upstream's (the model's) changes, and netted one row per key by presence at both ends.
    config = asof.locate(str(lake))
    points = sorted({p.point for p in asof.runs(spark, config.state_path, config.stream_id)})
    for i, a in enumerate(points):
        for j, b in enumerate(points[i + 1 :], start=i + 1):
            to = b if j + 1 == len(points) or between.random() < 0.5 else between.randrange(b, points[j + 1])
            assert replay_problems(spark, config, a, to) == [], (a, to)
            assert upstream_problems(spark, config, stream, a, to) == [], (a, to)
    # And a stream from the first point, run to the end, for every table that kept its schema since.
    assert stream_problems(spark, config, points[0], root) == []
