"""Random TiCDC-like streams through the real pipeline on Spark and Delta, cut into random batches.

The upstream truth comes from the generator's own model (``Stream.state_at``), never from the code under
test. After every batch, each table equals upstream at its applied TSO; every Delta version our commits
mark consistent equals upstream at the TSO it records; the last batch reaches the final G.
"""

from __future__ import annotations

import os
from pathlib import Path

import orjson
import pytest
from delta.tables import DeltaTable
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from mirror import delta_rows, expected_rows, located

from ingest.config import IngestConfig
from ingest.model import TableId
from ingest.pipeline import run_files
from ingest.state.table_state import METADATA_KEY
from testkit.sample import SIMPLE_FOR_TESTS, Stream

# Random streams are where an order kept only within one partition would show.
pytestmark = pytest.mark.usefixtures("several_partitions")

TABLES = [TableId("app", "t"), TableId("app", "u")]
KEYS = st.integers(1, 5)

# CI's examples are sized for its time budget (each is several pipeline batches on real Spark); the explore
# profile draws many more.
settings.register_profile(
    "ci",
    max_examples=4,
    deadline=None,
    derandomize=True,
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=list(HealthCheck),
)
settings.register_profile("explore", max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

OPS = st.one_of(
    st.tuples(st.just("put"), st.integers(0, 1), KEYS, st.text("abcxyz", min_size=1, max_size=3)),
    st.tuples(st.just("delete"), st.integers(0, 1), KEYS),
    st.tuples(st.just("rekey"), st.integers(0, 1), KEYS, KEYS),
    st.tuples(st.just("swap"), st.integers(0, 1), KEYS, KEYS),
    st.tuples(st.just("watermark"), st.lists(st.integers(0, 2), min_size=1, max_size=3)),
    st.tuples(st.just("replay"), st.integers(0, 2), st.integers(1, 6)),
    st.tuples(st.just("add_column"), st.integers(0, 1), st.integers(0, 9)),
    st.tuples(st.just("truncate"), st.integers(0, 1)),
)


def build(ops: list[tuple], partitions: int, tables: list[TableId] = TABLES) -> Stream:
    # DDL texts in TiDB's varied spellings, drawn from the ops so that each example stays reproducible.
    s = Stream(topic="cdc", partitions=partitions, ddl_seed=len(ops) * 31 + partitions)
    for table in tables:
        s.create_table(SIMPLE_FOR_TESTS.replace("`t`", f"`{table.table}`"), s.tso(1))
    added: set[TableId] = set()
    t = 2.0
    for op in ops:
        t += 1
        ts = s.tso(t)
        kind = op[0]
        if kind in ("put", "delete", "rekey", "swap", "add_column", "truncate"):
            table = tables[op[1] % len(tables)]
            rows = s.state_at(ts)[table]
        if kind == "put":
            _, _, key, value = op
            if (key,) in rows:
                s.update(table, (key,), {"v": value}, ts)
            else:
                extra = {c: 0 for c in s.table_columns(table) if c not in ("id", "v")}
                s.insert(table, {"id": key, "v": value, **extra}, ts)
        elif kind == "delete" and (op[2],) in rows:
            s.delete(table, (op[2],), ts)
        elif kind == "rekey" and (op[2],) in rows and (op[3],) not in rows:
            s.update(table, (op[2],), {"id": op[3]}, ts)  # split into DELETE + INSERT at one commitTs
        elif kind == "swap" and op[2] != op[3] and (op[2],) in rows and (op[3],) in rows:
            a, b = rows[(op[2],)], rows[(op[3],)]
            s.delete(table, (op[2],), ts)
            s.delete(table, (op[3],), ts)
            s.insert(table, {**b, "id": op[2]}, ts)
            s.insert(table, {**a, "id": op[3]}, ts)
        elif kind == "watermark":
            s.watermark(ts, partitions=sorted({p % partitions for p in op[1]}))
        elif kind == "replay":
            partition = op[1] % partitions
            offsets = [r["offset"] for r in s.records if r["partition"] == partition]
            if offsets:
                s.replay(partition, max(0, offsets[-1] - op[2] + 1), offsets[-1])
                s.watermark(s.tso(max(1.0, t - op[2])), partitions=[partition])  # a regressing watermark
        elif kind == "add_column" and table not in added:
            added.add(table)
            name = f"c{op[2]}"
            s.add_column(
                table,
                f"ALTER TABLE `{table.table}` ADD COLUMN `{name}` int(11) NOT NULL DEFAULT '{op[2]}'",
                ts,
                name,
                "int",
                default=op[2],
            )
        elif kind == "truncate":
            s.truncate(table, ts)
    s.watermark(s.tso(t + 1))
    return s


def prefix(stream: Stream, fractions: list[float], directory: Path) -> None:
    """Write, for each partition, the first share of its records: batches end at different offsets."""
    counts = {p: sum(1 for r in stream.records if r["partition"] == p) for p in range(stream.partitions)}
    keep = {p: int(counts[p] * fractions[p % len(fractions)]) for p in counts}
    part = Stream(topic=stream.topic, partitions=stream.partitions)
    part.records = [r for r in stream.records if r["offset"] < keep[r["partition"]]]
    part.write(directory)


def run_in_batches(
    spark,
    stream: Stream,
    root: Path,
    partitions: int,
    cuts: list[list[float]],
    checked=lambda table: True,
    extra: dict[str, str] | None = None,
):
    """Mirror ``stream`` into ``root/lake`` in growing per-partition prefixes, then whole; after each batch,
    every table with an applied TSO (and ``checked``) equals upstream at that TSO. Returns the last result."""
    lake = root / "lake"
    batches = [sorted(c) for c in cuts]
    params = {"target-path": str(lake), "partitions": f"cdc:0-{partitions - 1}", **(extra or {})}
    for index, fractions in enumerate([*batches, [1.0]]):
        # Fractions only grow batch to batch, so each input extends the previous one.
        if index and batches:
            fractions = [max(f, g) for f, g in zip(fractions, batches[index - 1], strict=False)] or [1.0]
        directory = root / f"in-{index}"
        if fractions == [1.0]:
            stream.write(directory)
        else:
            prefix(stream, fractions, directory)
        result = run_files(spark, IngestConfig.from_params({"input": str(directory), **params}))
        for table, report in result.tables.items():
            path = located(lake, table)
            if report.applied_ts and DeltaTable.isDeltaTable(spark, path) and checked(table):
                assert delta_rows(spark, str(lake), table) == expected_rows(
                    stream, table, report.applied_ts
                ), (index, table)
    return result


def check_consistent_versions(spark, lake: Path, stream: Stream, table: TableId) -> int:
    path = located(lake, table)
    checked = 0
    for entry in DeltaTable.forPath(spark, path).history().select("version", "userMetadata").collect():
        if not entry["userMetadata"] or METADATA_KEY not in entry["userMetadata"]:
            continue
        meta = orjson.loads(entry["userMetadata"])[METADATA_KEY]
        if not meta["consistent"] or not meta["applied_ts"]:
            continue
        got = delta_rows(spark, str(lake), table, version=entry["version"])
        assert got == expected_rows(stream, table, meta["applied_ts"]), (table, entry["version"], meta)
        checked += 1
    return checked


@given(
    ops=st.lists(OPS, min_size=4, max_size=22),
    partitions=st.integers(1, 3),
    cuts=st.lists(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=3), max_size=2),
)
def test_random_streams_mirror_upstream_at_every_applied_watermark(
    spark, tmp_path_factory, ops, partitions, cuts
):
    mirror_matches_upstream(spark, tmp_path_factory.mktemp("prop"), ops, partitions, cuts, TABLES)


def mirror_matches_upstream(spark, root, ops, partitions, cuts, tables, extra=None) -> None:
    """Mirror the stream the ops build, in the batches the cuts make; every table must equal upstream at
    the final G, and every version we marked consistent must equal upstream at its A_T."""
    lake = root / "lake"
    stream = build(ops, partitions, tables)
    result = run_in_batches(spark, stream, root, partitions, cuts, extra=extra)
    g = stream.complete_watermark()
    assert result.global_watermark == g
    for table in tables:
        assert delta_rows(spark, str(lake), table) == expected_rows(stream, table, g), table
        check_consistent_versions(spark, lake, stream, table)


WIDE = [TableId("app", name) for name in ("t", "u", "v", "w", "x")]
WIDE_OPS = st.one_of(
    st.tuples(st.just("put"), st.integers(0, 4), KEYS, st.text("abcxyz", min_size=1, max_size=3)),
    st.tuples(st.just("delete"), st.integers(0, 4), KEYS),
    st.tuples(st.just("rekey"), st.integers(0, 4), KEYS, KEYS),
    st.tuples(st.just("watermark"), st.lists(st.integers(0, 2), min_size=1, max_size=3)),
    st.tuples(st.just("add_column"), st.integers(0, 4), st.integers(0, 9)),
    st.tuples(st.just("truncate"), st.integers(0, 4)),
)


@settings(max_examples=max(2, settings.default.max_examples // 2))  # five tables each
@given(
    ops=st.lists(WIDE_OPS, min_size=8, max_size=20),
    partitions=st.integers(1, 2),
    cuts=st.lists(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=2), max_size=1),
)
def test_tables_applied_in_parallel_mirror_upstream_at_every_applied_watermark(
    spark, tmp_path_factory, ops, partitions, cuts
):
    root = tmp_path_factory.mktemp("parallel")
    mirror_matches_upstream(spark, root, ops, partitions, cuts, WIDE, extra={"table-parallelism": "3"})
