"""Column DDL on real Delta: RENAME/CHANGE/MODIFY COLUMN and DEFAULT changes, each checked right after the
DDL and after later rows, with the DDL history table."""

from __future__ import annotations

from decimal import Decimal

import pytest
from delta.tables import DeltaTable
from mirror import delta_rows, expected_rows, located
from pyspark.sql import types as T

from ingest.apply.convert import is_widening
from ingest.errors import TablesStopped
from ingest.model import TableId
from testkit.sample import Stream

TABLE = TableId("app", "m")
CREATE = (
    "CREATE TABLE `app`.`m` (`id` int(11) NOT NULL, `qty` int(11) DEFAULT NULL, "
    "`price` decimal(10,2) DEFAULT NULL, `note` varchar(20) DEFAULT NULL, PRIMARY KEY (`id`))"
)


def rows(spark, lake):
    return {k[0]: v for k, v in delta_rows(spark, str(lake), TABLE).items()}


def schema(spark, lake):
    return {
        f.name: f.dataType.simpleString()
        for f in spark.read.format("delta").load(located(lake, TableId("app", "m"))).schema
    }


def test_widening_rules():
    assert is_widening(T.IntegerType(), T.LongType())
    assert is_widening(T.IntegerType(), T.DecimalType(20, 0))
    assert is_widening(T.DecimalType(10, 2), T.DecimalType(12, 4))
    assert is_widening(T.FloatType(), T.DoubleType())
    assert not is_widening(T.LongType(), T.IntegerType())
    assert not is_widening(T.DecimalType(10, 2), T.DecimalType(10, 3))  # loses an integer digit
    assert not is_widening(T.StringType(), T.LongType())


def test_rename_change_modify_and_default_ddls(spark, run, lake):
    s = Stream(topic="cdc", partitions=1)
    s.create_table(CREATE, s.tso(1))
    s.insert(TABLE, {"id": 1, "qty": 5, "price": Decimal("9.50"), "note": "a"}, s.tso(2))
    s.watermark(s.tso(2))
    run(s)
    s.ddl("app", "m", "ALTER TABLE `m` MODIFY COLUMN `qty` bigint(20) DEFAULT NULL", s.tso(3), "ALTER")
    s.ddl(
        "app",
        "m",
        "ALTER TABLE `m` CHANGE COLUMN `price` `unit_price` decimal(14,4) DEFAULT NULL",
        s.tso(4),
        "ALTER",
    )
    s.ddl("app", "m", "ALTER TABLE `m` RENAME COLUMN `id` TO `m_id`", s.tso(5), "ALTER")
    s.ddl("app", "m", "ALTER TABLE `m` ALTER COLUMN `note` SET DEFAULT 'x'", s.tso(6), "ALTER")
    s.watermark(s.tso(6))
    run(s)
    # Right after the DDLs: types widened, columns renamed (the key too), existing values kept exactly.
    assert schema(spark, lake) == {
        "m_id": "int",
        "qty": "bigint",
        "unit_price": "decimal(14,4)",
        "note": "string",
        "_tidb_commit_ts": "bigint",
    }
    assert rows(spark, lake)[1] == {"m_id": 1, "qty": 5, "unit_price": Decimal("9.5"), "note": "a"}
    # Later rows use the new names and the wider range.
    ts = s.tso(7)
    s.append_message(0, {
        "database": "app", "table": "m", "pkNames": ["m_id"], "isDdl": False, "type": "INSERT",
        "mysqlType": {"m_id": "int", "qty": "bigint", "unit_price": "decimal", "note": "varchar"},
        "data": [{"m_id": "2", "qty": "9000000000", "unit_price": "1.2345", "note": "x"}], "old": None,
        "_tidb": {"commitTs": ts},
    })  # fmt: skip
    s.watermark(s.tso(8))
    run(s)
    assert rows(spark, lake)[2] == {
        "m_id": 2,
        "qty": 9000000000,
        "unit_price": Decimal("1.2345"),
        "note": "x",
    }
    history = {r["sql"]: r for r in spark.read.format("delta").load(f"{lake}/_ingest/ddl_history").collect()}
    assert history["ALTER TABLE `m` RENAME COLUMN `id` TO `m_id`"]["action"] == "applied"
    assert "m_id" in history["ALTER TABLE `m` RENAME COLUMN `id` TO `m_id`"]["schema_after"]
    assert history["ALTER TABLE `m` ALTER COLUMN `note` SET DEFAULT 'x'"]["action"] == "recorded"
    assert history[CREATE]["schema_before"] is None


def test_a_type_change_that_rewrites_values_stops_under_fail_with_table_column_types_and_position(
    spark, run, lake
):
    s = Stream(topic="cdc", partitions=1)
    s.create_table(CREATE, s.tso(1))
    s.ddl("app", "m", "ALTER TABLE `m` MODIFY COLUMN `note` int(11) DEFAULT NULL", s.tso(3), "ALTER")
    s.watermark(s.tso(4))
    with pytest.raises(
        TablesStopped,
        match=r"app\.m: column note: varchar\(20\) -> int\(11\) changes the values TiDB holds, which "
        r"needs a rewrite of the table under type-change policy \"fail\"; the table stopped before cdc/0@1",
    ):
        run(s, **{"type-change": "fail"})
    entries = (
        spark.read.format("delta").load(f"{lake}/_ingest/ddl_history").where("action = 'rejected'").collect()
    )
    assert len(entries) == 1 and "note" in entries[0]["detail"]
    assert (
        DeltaTable.forPath(spark, located(lake, TableId("app", "m"))).toDF().schema["note"].dataType
        == T.StringType()
    )


def test_create_table_like_and_an_unknown_ddl_skipped_by_policy(spark, run, lake):
    s = Stream(topic="cdc", partitions=1)
    s.create_table(CREATE, s.tso(1))
    s.ddl("app", "m2", "CREATE TABLE `app`.`m2` LIKE `app`.`m`", s.tso(2), "CREATE")
    s.ddl("app", "m", "ALTER TABLE `m` ALTER CHECK `chk` NOT ENFORCED", s.tso(3), "QUERY")
    ts = s.tso(4)
    s.append_message(0, {
        "database": "app", "table": "m2", "pkNames": ["id"], "isDdl": False, "type": "INSERT",
        "mysqlType": {"id": "int", "qty": "int", "price": "decimal", "note": "varchar"},
        "data": [{"id": "1", "qty": "2", "price": "3.00", "note": "n"}], "old": None,
        "_tidb": {"commitTs": ts},
    })  # fmt: skip
    s.watermark(s.tso(5))
    with pytest.raises(TablesStopped, match="ALTER CHECK"):
        run(s)  # the default policy stops the table before a DDL it does not know
    run(s, **{"unknown-ddl": "skip"})
    copied = spark.read.format("delta").load(located(lake, TableId("app", "m2")))
    assert {f.name: f.dataType.simpleString() for f in copied.schema} == schema(spark, lake)
    assert [r["id"] for r in copied.collect()] == [1]
    skipped = (
        spark.read.format("delta").load(f"{lake}/_ingest/ddl_history").where("action = 'skipped'").collect()
    )
    assert [r["sql"] for r in skipped] == ["ALTER TABLE `m` ALTER CHECK `chk` NOT ENFORCED"]


def test_a_type_change_rewrites_every_row_by_default_or_refuses(spark, run, lake):
    """MODIFY INT -> VARCHAR (no widening): TiDB rewrites the stored values and sends no rows; so do we."""
    m = TableId("app", "m")
    s = Stream(topic="cdc", partitions=1)
    s.create_table(CREATE, s.tso(1))
    s.insert(m, {"id": 1, "qty": 5, "price": Decimal("1.00"), "note": "a"}, s.tso(2))
    s.insert(m, {"id": 2, "qty": None, "price": Decimal("2.00"), "note": "b"}, s.tso(2))
    s.modify_column(m, "qty", "varchar(20)", s.tso(3))
    s.insert(m, {"id": 3, "qty": "seven", "price": Decimal("3.00"), "note": "c"}, s.tso(4))
    s.watermark(s.tso(5))
    run(s)
    rows = {
        r["id"]: r["qty"]
        for r in spark.read.format("delta").load(located(lake, TableId("app", "m"))).collect()
    }
    assert rows == {1: "5", 2: None, 3: "seven"}  # MySQL renders INT 5 as '5'
    assert schema(spark, lake)["qty"] == "string"
    # Back to INT: 'seven' has no INT value, so the rewrite refuses instead of writing NULL, and writes
    # nothing at all (not even the pause of the change data feed a rewrite makes).
    before = DeltaTable.forPath(spark, located(lake, m)).history(1).collect()[0]["version"]
    s.modify_column(m, "qty", "int(11)", s.tso(6))
    s.watermark(s.tso(7))
    with pytest.raises(
        TablesStopped, match=r"1 row\(s\) hold values that do not convert.*policy \"rewrite\""
    ):
        run(s)
    assert DeltaTable.forPath(spark, located(lake, m)).history(1).collect()[0]["version"] == before


@pytest.mark.parametrize("protocol", ["canal-json", "simple"])
def test_add_primary_key_moves_the_merge_key(spark, run, lake, protocol):
    """A table keyed by a unique index gets a wider primary key; rows that share the old key then coexist."""
    k = TableId("app", "k")
    s = Stream(topic="cdc", partitions=2, protocol=protocol)
    s.create_table(
        "CREATE TABLE `app`.`k` (`a` int(11) NOT NULL, `b` int(11) NOT NULL, `v` varchar(10) DEFAULT NULL, "
        "UNIQUE KEY `uk` (`a`))",
        s.tso(1),
    )
    s.insert(k, {"a": 1, "b": 1, "v": "x"}, s.tso(2))
    s.insert(k, {"a": 2, "b": 1, "v": "y"}, s.tso(2))
    s.change_key(k, ("a", "b"), "ALTER TABLE `app`.`k` ADD PRIMARY KEY (`a`, `b`) NONCLUSTERED", s.tso(3))
    s.ddl("app", "k", "ALTER TABLE `app`.`k` DROP INDEX `uk`", s.tso(4), "DINDEX")
    s.insert(k, {"a": 1, "b": 2, "v": "z"}, s.tso(5))  # same a as an existing row: a new row now
    s.update(k, (2, 1), {"v": "y2"}, s.tso(6))
    s.watermark(s.tso(7))
    run(s, protocol=protocol)
    assert delta_rows(spark, str(lake), k) == expected_rows(s, k, s.tso(7))
    assert len(delta_rows(spark, str(lake), k)) == 3


def test_a_narrowing_type_change_converts_as_tidb_does_under_a_non_strict_sql_mode(spark, run, lake):
    """Under sql_mode '' TiDB accepts a MODIFY COLUMN over values that do not fit and stores them at the new
    type's limits (TiCDC sends no rows for it): text keeps its first characters, a number out of range
    becomes the nearest limit, a negative one 0 in an UNSIGNED column. The values expected are TiDB's."""
    w = TableId("app", "w")
    s = Stream(topic="cdc", partitions=1)
    s.create_table(
        "CREATE TABLE `app`.`w` (`id` int(11) NOT NULL, `b` varchar(30) DEFAULT NULL, "
        "`i` int(11) DEFAULT NULL, `t` bigint(20) DEFAULT NULL, `d` decimal(10,4) DEFAULT NULL, "
        "`f` double DEFAULT NULL, "
        "`n` varchar(30) DEFAULT NULL, PRIMARY KEY (`id`))",
        s.tso(1),
    )
    s.insert(w, {"id": 1, "b": "2023-04-19 11:48:00", "i": -1, "t": 300, "d": Decimal("12345.6789"),
                 "f": -2.5, "n": "ok"}, s.tso(2))  # fmt: skip
    s.insert(w, {"id": 2, "b": "ü€x", "i": 7, "t": -300, "d": Decimal("-1.2355"), "f": 1.5, "n": "ok"},
             s.tso(2))  # fmt: skip
    s.insert(w, {"id": 3, "b": None, "i": None, "t": None, "d": None, "f": None, "n": "ok"}, s.tso(2))
    for column, type_text in [
        ("b", "varchar(2)"), ("i", "int(10) unsigned"), ("t", "tinyint(4)"), ("d", "decimal(5,2)"),
        ("f", "double unsigned"), ("n", "varchar(5)"),
    ]:  # fmt: skip
        s.modify_column(w, column, type_text, s.tso(3))
    s.insert(w, {"id": 4, "b": "zz", "i": 9, "t": 1, "d": Decimal("1.50"), "f": 0.5, "n": "new"}, s.tso(4))
    s.watermark(s.tso(5))
    run(s)
    found = {k[0]: v for k, v in delta_rows(spark, str(lake), w).items()}
    assert {k: (v["b"], v["i"], v["t"], v["d"], v["f"], v["n"]) for k, v in found.items()} == {
        1: ("20", 0, 127, Decimal("999.99"), 0.0, "ok"),
        2: ("ü€", 7, -128, Decimal("-1.24"), 1.5, "ok"),  # characters, not bytes; half away from zero
        3: (None, None, None, None, None, "ok"),
        4: ("zz", 9, 1, Decimal("1.5"), 0.5, "new"),
    }
    fields = spark.read.format("delta").load(located(lake, w)).schema.fields
    types = {f.name: f.dataType.simpleString() for f in fields}
    # Every value of n fits varchar(5): no rewrite, only its comment; i became a wider Delta type.
    assert (types["n"], types["i"], types["t"], types["d"]) == ("string", "bigint", "tinyint", "decimal(5,2)")
