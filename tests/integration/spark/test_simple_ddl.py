"""DDL through the Simple protocol (the SQL, plus tableSchema/preTableSchema), per DDL kind, on real Delta.

Each case checks the schema (types by hand from the type mapping) and the rows (from the upstream model in
``testkit.sample``) right after the DDL, and again after later rows. TRUNCATE/DROP/ADD PARTITION through
Simple are in ``test_partition_ddl.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pytest
from delta.tables import DeltaTable
from mirror import delta_rows, expected_rows, located

from ingest.model import TableId
from testkit.sample import Stream

S = TableId("app", "s")
U = TableId("app", "u")
CREATE = (
    "CREATE TABLE `app`.`s` (`id` int(11) NOT NULL, `v` varchar(20) DEFAULT NULL, `n` int(11) DEFAULT NULL, "
    "PRIMARY KEY (`id`))"
)
RECREATE = "CREATE TABLE `app`.`s` (`id` bigint(20) NOT NULL, `w` date DEFAULT NULL, PRIMARY KEY (`id`))"
BASE = {"id": "int", "v": "string", "n": "int"}


@dataclass
class Case:
    """``ddl`` applies the DDL at a TSO and returns the table later rows go to; ``later`` writes them."""

    ddl: Callable[[Stream, int], TableId]
    types: dict[str, str]  # the Delta types right after the DDL
    later: Callable[[Stream, TableId, int], None]
    types_later: dict[str, str] | None = None


def _later(row: dict[str, Any]) -> Callable[[Stream, TableId, int], None]:
    def write(s: Stream, table: TableId, ts: int) -> None:
        # One change per key and commitTs: TiCDC sends a transaction's net effect per row.
        if (2,) in s.state_at(ts)[table]:
            s.delete(table, (2,), ts)
        s.insert(table, row, ts + 1)

    return write


def _recreate(s: Stream, table: TableId, ts: int) -> None:
    s.create_table(RECREATE, ts)
    s.insert(table, {"id": 7, "w": None}, ts + 1)


CASES = {
    "add column not null default": Case(
        lambda s, ts: s.add_column(
            S, "ALTER TABLE `app`.`s` ADD COLUMN `d` decimal(6,2) NOT NULL DEFAULT '1.50'", ts, "d",
            "decimal(6,2)", Decimal("1.50"),
        ) or S,
        {**BASE, "d": "decimal(6,2)"},
        _later({"id": 9, "v": "x", "n": 1, "d": Decimal("-3.25")}),
    ),
    "drop column": Case(
        lambda s, ts: s.drop_column(S, "v", ts) or S,
        {"id": "int", "n": "int"},
        _later({"id": 9, "n": 1}),
    ),
    "rename column": Case(
        lambda s, ts: s.rename_column(S, "v", "w", ts) or S,
        {"id": "int", "w": "string", "n": "int"},
        _later({"id": 9, "w": "x", "n": 1}),
    ),
    "modify column widening": Case(
        lambda s, ts: s.modify_column(S, "n", "bigint(20)", ts) or S,
        {**BASE, "n": "bigint"},
        _later({"id": 9, "v": "x", "n": 9_000_000_000}),
    ),
    "truncate table": Case(
        lambda s, ts: s.truncate(S, ts) or S,
        BASE,
        _later({"id": 2, "v": "again", "n": 2}),
    ),
    "rename table": Case(
        lambda s, ts: s.rename_table(S, U, ts) or U,
        BASE,
        _later({"id": 9, "v": "x", "n": 1}),
    ),
    "drop table, then a new table of that name": Case(
        lambda s, ts: s.drop_table(S, ts) or S,
        BASE,
        _recreate,
        types_later={"id": "bigint", "w": "date"},
    ),
}  # fmt: skip


def types(spark, lake, table: TableId) -> dict[str, str]:
    df = spark.read.format("delta").load(located(lake, table))
    return {f.name: f.dataType.simpleString() for f in df.schema.fields if not f.name.startswith("_tidb_")}


def retired(spark, lake, table: TableId) -> str:
    path = located(lake, table)
    return str(DeltaTable.forPath(spark, path).detail().first()["properties"]["ticdc.retired"])


@pytest.mark.parametrize("kind", list(CASES))
def test_simple_ddl_follows_upstream_right_after_and_after_later_rows(spark, run, lake, kind):
    case = CASES[kind]
    s = Stream(topic="cdc", partitions=2, protocol="simple")
    s.create_table(CREATE, s.tso(1))
    for k in range(1, 6):
        s.insert(S, {"id": k, "v": f"v{k}", "n": k * 10}, s.tso(2))
    s.watermark(s.tso(2))
    run(s, protocol="simple")
    assert delta_rows(spark, str(lake), S) == expected_rows(s, S, s.tso(2))

    ddl_ts = s.tso(3)
    target = case.ddl(s, ddl_ts)
    s.watermark(ddl_ts)
    run(s, protocol="simple")
    assert types(spark, lake, target) == case.types
    assert list(types(spark, lake, target)) == s.table_columns(target, at=ddl_ts)
    if kind.startswith("drop table"):
        # Archived (the default policy): the last rows upstream had, under a retired mark.
        assert delta_rows(spark, str(lake), S) == expected_rows(s, S, ddl_ts - 1) != {}
        assert retired(spark, lake, S).startswith("dropped by")
    else:
        assert delta_rows(spark, str(lake), target) == expected_rows(s, target, ddl_ts)
    if target != S:
        assert retired(spark, lake, S) == f"renamed to {target}"
        assert delta_rows(spark, str(lake), S) == expected_rows(s, S, ddl_ts - 1)

    case.later(s, target, s.tso(4))
    s.watermark(s.tso(5))
    run(s, protocol="simple")
    assert types(spark, lake, target) == (case.types_later or case.types)
    assert delta_rows(spark, str(lake), target) == expected_rows(s, target, s.tso(5))
    assert retired(spark, lake, target) == "no"
