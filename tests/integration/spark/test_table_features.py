"""Delta table features on demand: each column DDL, on each column type, starting from a table created
without the feature it needs; and what another Delta reader (delta-rs) can read afterwards."""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
from mirror import delta_rows, expected_rows, located

from ingest.lake import delta_io
from ingest.model import TableId
from testkit.sample import Stream

CREATE = (
    "CREATE TABLE `app`.`{name}` (`id` int(11) NOT NULL, `v` varchar(20) DEFAULT NULL, "
    "`n` int(11) DEFAULT NULL, `d` date DEFAULT NULL, `p` decimal(10,2) DEFAULT NULL, "
    "`r` float DEFAULT NULL, "
    "PRIMARY KEY (`id`) NONCLUSTERED)"
)
FIRST_ROW = {"id": 1, "v": "one", "n": 5, "d": date(2020, 1, 2), "p": Decimal("9.50"), "r": 1.5}


def table_features(spark, lake: Path, table: TableId) -> set[str]:
    detail = delta_io.detail(spark, located(lake, table))
    features = set(detail["tableFeatures"])
    if detail["properties"].get("delta.columnMapping.mode", "none") != "none":
        features.add("columnMapping")
    return features & {"columnMapping", "typeWidening", "timestampNtz"}


def read_with_delta_rs(lake: Path, table: TableId) -> list[dict]:
    """The table as delta-rs (the reader behind Polars and DuckDB's Delta support) reads it."""
    from deltalake import DeltaTable, QueryBuilder

    delta = DeltaTable(located(lake, table))
    result = QueryBuilder().register("t", delta).execute("SELECT * FROM t").read_all()
    return sorted(pa.table(result).to_pylist(), key=lambda r: r["id"])


def started(run, lake: Path, spark, count: int) -> tuple[Stream, list[TableId]]:
    """One table per case, each created plain with one row: a DDL on one cannot turn on another's feature."""
    s = Stream(topic="cdc", partitions=1)
    tables = [s.create_table(CREATE.format(name=f"f{i}"), s.tso(1)) for i in range(count)]
    for table in tables:
        s.insert(table, FIRST_ROW, s.tso(2))
    s.watermark(s.tso(2))
    run(s)
    for table in tables:
        assert table_features(spark, lake, table) == set(), f"{table}: a new table needs no optional feature"
    return s, tables


def finish(s: Stream, run, spark, lake: Path, tables: list[TableId], **params: str) -> None:
    s.watermark(s.tso(9))
    run(s, **params)
    g = s.complete_watermark()
    for table in tables:
        assert delta_rows(spark, str(lake), table) == expected_rows(s, table, g), table


ADDED = [
    ("datetime(6)", datetime(2021, 3, 4, 5, 6, 7, 891234), {"timestampNtz"}),
    ("datetime", datetime(2021, 3, 4, 5, 6, 7), {"timestampNtz"}),
    ("timestamp(3)", datetime(2021, 3, 4, 5, 6, 7, 891000), set()),
    ("date", date(2021, 3, 4), set()),
    ("int(11)", 7, set()),
    ("bigint(20) unsigned", 18446744073709551615, set()),
    ("decimal(20,6)", Decimal("12345678901234.123456"), set()),
    ("varchar(10)", "ten", set()),
    ("json", '{"a": 1}', set()),
    ("time(3)", "-838:59:59.000", set()),
]


def test_add_column_of_each_type_to_a_table_without_the_feature(spark, run, lake):
    s, tables = started(run, lake, spark, len(ADDED) + 1)
    for table, (type_text, value, _) in zip(tables, ADDED, strict=False):
        sql = f"ALTER TABLE `{table.table}` ADD COLUMN `c` {type_text}"
        s.add_column(table, sql, s.tso(3), "c", type_text)
        s.insert(table, {**FIRST_ROW, "id": 2, "c": value}, s.tso(4))
    spaced = tables[-1]  # a name Delta stores only in a table that maps column names
    s.add_column(spaced, "ALTER TABLE `f10` ADD COLUMN `unit price` int", s.tso(3), "unit price", "int")
    s.insert(spaced, {**FIRST_ROW, "id": 2, "unit price": 3}, s.tso(4))
    finish(s, run, spark, lake, tables)
    for table, (type_text, _, features) in zip(tables, ADDED, strict=False):
        assert table_features(spark, lake, table) == features, type_text
        assert [r["id"] for r in read_with_delta_rs(lake, table)] == [1, 2], type_text
    assert table_features(spark, lake, spaced) == {"columnMapping"}
    assert read_with_delta_rs(lake, spaced)[1]["unit price"] == 3


COLUMNS = ("v", "n", "d", "p", "r")


def test_drop_and_rename_column_of_each_type_turn_on_column_mapping(spark, run, lake):
    s, tables = started(run, lake, spark, len(COLUMNS))
    renamed = {}
    for table, column in zip(tables, COLUMNS, strict=True):
        s.drop_column(table, column, s.tso(3))
        other = COLUMNS[(COLUMNS.index(column) + 1) % len(COLUMNS)]
        s.rename_column(table, other, f"{other}_renamed", s.tso(4))
        s.insert(table, {k: v for k, v in FIRST_ROW.items() if k != column} | {"id": 2}, s.tso(5))
        renamed[table] = (column, other)
    finish(s, run, spark, lake, tables)
    for table, (dropped, other) in renamed.items():
        assert table_features(spark, lake, table) == {"columnMapping"}, table
        read = read_with_delta_rs(lake, table)
        assert dropped not in read[0] and f"{other}_renamed" in read[0] and len(read) == 2, table


FEED_READABLE = {"columnMapping"}
WIDENED = [
    ("n", "bigint(20)", 9_000_000_000, {"typeWidening"}),
    ("p", "decimal(14,4)", Decimal("1234567890.1234"), {"typeWidening"}),
    ("r", "double", 2.5e300, {"typeWidening"}),
    ("d", "datetime(6)", datetime(2022, 2, 2, 2, 2, 2, 2), {"typeWidening", "timestampNtz"}),
]


def test_modify_column_widening_of_each_type_turns_on_type_widening(spark, run, lake):
    s, tables = started(run, lake, spark, len(WIDENED))
    for table, (column, type_text, value, _) in zip(tables, WIDENED, strict=True):
        s.modify_column(table, column, type_text, s.tso(3))
        s.insert(table, {**FIRST_ROW, "id": 2, column: value}, s.tso(4))
    s.watermark(s.tso(9))
    run(s)
    g = s.complete_watermark()
    for table, (column, type_text, _, features) in zip(tables, WIDENED, strict=True):
        expected = expected_rows(s, table, g)
        if column == "d":  # DATE widened to DATETIME: the old value reads as midnight, as TiDB converts it
            expected[(1,)]["d"] = datetime(2020, 1, 2)
        assert delta_rows(spark, str(lake), table) == expected, type_text
        # With the change data feed on (the default), column mapping comes first: the feed's older ranges stay
        # readable under their own schema.
        assert table_features(spark, lake, table) == features | FEED_READABLE, type_text


def test_type_change_rewrite_to_datetime_turns_on_timestamp_ntz(spark, run, lake):
    s, (table,) = started(run, lake, spark, 1)
    s.update(table, (1,), {"v": "2020-01-02 03:04:05"}, s.tso(3))
    s.watermark(s.tso(3))
    run(s)
    s.ddl("app", "f0", "ALTER TABLE `f0` MODIFY COLUMN `v` datetime DEFAULT NULL", s.tso(4), "ALTER")
    s.watermark(s.tso(4))
    run(s)
    assert delta_rows(spark, str(lake), table)[(1,)]["v"] == datetime(2020, 1, 2, 3, 4, 5)
    assert table_features(spark, lake, table) == {"timestampNtz"} | FEED_READABLE
