"""Partition DDL on real Delta, per protocol: TRUNCATE/DROP PARTITION delete exactly the rows the upstream
model puts in those partitions, ADD PARTITION changes no rows, and what the mirror cannot follow stops.

Expected tables come from ``testkit.sample.Stream``'s upstream model, which places rows in partitions with
its own Python comparisons, not with the code under test.
"""

from __future__ import annotations

from datetime import date

import orjson
import pytest
from delta.tables import DeltaTable
from dumpling_export import write_export
from mirror import delta_rows, expected_rows, located

from ingest.commands.load import load_dumpling
from ingest.errors import TablesStopped
from ingest.load_config import LoadConfig
from ingest.model import TableId
from testkit.sample import HashPartitions, ListPartitions, RangePartitions, Stream

P = TableId("app", "p")
CREATE = "CREATE TABLE `app`.`p` (`id` int(11) NOT NULL, `v` varchar(20) DEFAULT NULL, PRIMARY KEY (`id`))"
RANGES = RangePartitions("id", (("p0", 10), ("p1", 20), ("p2", 30)))


def columns(spark, lake, table: TableId = P) -> list[tuple[str, str]]:
    schema = spark.read.format("delta").load(located(lake, table)).schema
    return [(f.name, f.dataType.simpleString()) for f in schema.fields if not f.name.startswith("_tidb_")]


def recorded_partitions(spark, lake, table: TableId = P) -> list[str]:
    properties = DeltaTable.forPath(spark, located(lake, table)).detail().first()["properties"]
    return [p["name"] for p in orjson.loads(properties["ticdc.partitioning"])["partitions"]]


def history(spark, lake) -> dict[str, str]:
    rows = spark.read.format("delta").load(f"{lake}/_ingest/ddl_history").collect()
    return {r["sql"]: r["action"] for r in rows}


@pytest.mark.parametrize("protocol", ["canal-json", "simple"])
def test_truncate_drop_and_add_partition_follow_upstream(spark, run, lake, protocol):
    s = Stream(topic="cdc", partitions=2, protocol=protocol)
    s.create_table(CREATE, s.tso(1), partitions=RANGES)
    for n, k in enumerate((1, 5, 10, 15, 19, 20, 25)):
        s.insert(P, {"id": k, "v": f"v{k}"}, s.tso(2 + n * 0.1))
    s.watermark(s.tso(3))
    run(s, protocol=protocol)
    assert delta_rows(spark, str(lake), P) == expected_rows(s, P, s.tso(3))
    assert recorded_partitions(spark, lake) == ["p0", "p1", "p2"]

    # TRUNCATE PARTITION p1: rows 10..19 go, at the DDL's position; the schema does not change.
    s.truncate_partition(P, ["p1"], s.tso(4))
    s.watermark(s.tso(4))
    run(s, protocol=protocol)
    after_truncate = expected_rows(s, P, s.tso(4))
    assert sorted(k for (k,) in after_truncate) == [1, 5, 20, 25]  # the model's own view, as a sanity check
    assert delta_rows(spark, str(lake), P) == after_truncate
    assert columns(spark, lake) == [("id", "int"), ("v", "string")]

    # ADD PARTITION changes no rows; DROP PARTITION p0 deletes its rows and p1 then starts below 10;
    # a later TRUNCATE PARTITION p1 takes the rows below 10 too. Later rows land where upstream put them.
    s.add_partition(P, ("p3", None), s.tso(5))
    s.insert(P, {"id": 12, "v": "again"}, s.tso(6))
    s.insert(P, {"id": 99, "v": "max"}, s.tso(6))
    s.drop_partition(P, ["p0"], s.tso(7))
    s.insert(P, {"id": 3, "v": "low"}, s.tso(8))
    s.watermark(s.tso(8))
    run(s, protocol=protocol)
    assert delta_rows(spark, str(lake), P) == expected_rows(s, P, s.tso(8))
    assert recorded_partitions(spark, lake) == ["p1", "p2", "p3"]
    s.truncate_partition(P, ["p1"], s.tso(9))
    s.insert(P, {"id": 4, "v": "later"}, s.tso(10))
    s.watermark(s.tso(10))
    run(s, protocol=protocol)
    assert delta_rows(spark, str(lake), P) == expected_rows(s, P, s.tso(10))
    assert sorted(k for (k,) in delta_rows(spark, str(lake), P)) == [4, 20, 25, 99]
    assert columns(spark, lake) == [("id", "int"), ("v", "string")]
    actions = history(spark, lake)
    assert actions["ALTER TABLE `app`.`p` TRUNCATE PARTITION `p1`"] == "applied"
    assert (
        actions["ALTER TABLE `app`.`p` ADD PARTITION (PARTITION `p3` VALUES LESS THAN MAXVALUE)"] == "applied"
    )


def test_list_columns_partitions_on_a_date_column(spark, run, lake):
    e = TableId("app", "e")
    s = Stream(topic="cdc", partitions=1, protocol="simple")
    days = ListPartitions("day", (("a", (date(2026, 1, 1), date(2026, 1, 3))), ("b", (date(2026, 1, 2),))))
    s.create_table(
        "CREATE TABLE `app`.`e` (`id` int(11) NOT NULL, `day` date NOT NULL, PRIMARY KEY (`id`, `day`))",
        s.tso(1),
        partitions=days,
    )
    for k in range(1, 7):
        s.insert(e, {"id": k, "day": date(2026, 1, 1 + k % 3)}, s.tso(2))
    s.truncate_partition(e, ["a"], s.tso(3))
    s.watermark(s.tso(3))
    run(s, protocol="simple")
    assert delta_rows(spark, str(lake), e) == expected_rows(s, e, s.tso(3))
    assert {row["day"] for row in delta_rows(spark, str(lake), e).values()} == {date(2026, 1, 2)}
    s.insert(e, {"id": 7, "day": date(2026, 1, 3)}, s.tso(4))
    s.watermark(s.tso(4))
    run(s, protocol="simple")
    assert delta_rows(spark, str(lake), e) == expected_rows(s, e, s.tso(4))
    assert columns(spark, lake, e) == [("id", "int"), ("day", "date")]


def test_truncate_partition_of_a_hash_partitioned_table(spark, run, lake):
    h = TableId("app", "h")
    s = Stream(topic="cdc", partitions=2)
    s.create_table(
        "CREATE TABLE `app`.`h` (`id` bigint(20) NOT NULL, `v` varchar(20) DEFAULT NULL, PRIMARY KEY (`id`))",
        s.tso(1),
        partitions=HashPartitions("id", 3),
    )
    for n, k in enumerate((-7, -4, -3, 0, 1, 2, 4, 5, 9_000_000_000_000_000_001)):
        s.insert(h, {"id": k, "v": f"v{n}"}, s.tso(2))
    s.truncate_partition(h, ["p1"], s.tso(3))
    s.watermark(s.tso(3))
    run(s)
    assert delta_rows(spark, str(lake), h) == expected_rows(s, h, s.tso(3))
    assert sorted(k for (k,) in expected_rows(s, h, s.tso(3))) == [-3, 0, 2, 5]  # the model's own view
    s.insert(h, {"id": 7, "v": "later"}, s.tso(4))
    s.truncate_partition(h, ["p0", "p2"], s.tso(5))
    s.insert(h, {"id": 10, "v": "last"}, s.tso(6))
    s.watermark(s.tso(6))
    run(s)
    assert delta_rows(spark, str(lake), h) == expected_rows(s, h, s.tso(6))
    assert columns(spark, lake, h) == [("id", "bigint"), ("v", "string")]


@pytest.mark.parametrize(
    ("sql", "says"),
    [
        (
            "ALTER TABLE `app`.`p` TRUNCATE PARTITION `p0`",
            "never saw the table's CREATE TABLE … PARTITION BY",
        ),
        (
            "ALTER TABLE `app`.`p` EXCHANGE PARTITION `p0` WITH TABLE `app`.`other`",
            "which the mirror does not hold",
        ),
    ],
)
def test_partition_ddl_the_mirror_cannot_apply_stops_even_under_skip(spark, run, lake, sql, says):
    """The table is created from DML (no CREATE TABLE seen), so its partitions are unknown."""
    s = Stream(topic="cdc", partitions=1)
    s.create_table(CREATE, s.tso(1))
    s.records.clear()  # the consumer joined after the CREATE TABLE
    s.insert(P, {"id": 1, "v": "a"}, s.tso(2))
    s.ddl("app", "p", sql, s.tso(3), "ALTER")
    s.insert(P, {"id": 2, "v": "b"}, s.tso(4))
    s.watermark(s.tso(5))
    with pytest.raises(TablesStopped) as stopped:
        run(s, **{"unknown-ddl": "skip"})
    message = str(stopped.value.stopped[P])
    assert message.startswith("app.p: ") and says in message and sql in message
    assert "the table stopped before cdc/0@2" in message and "ticdc-ingest load" in message
    # Rows up to the DDL are applied, nothing after it.
    assert delta_rows(spark, str(lake), P) == expected_rows(s, P, s.tso(2))
    assert history(spark, lake)[sql] == "rejected"


def test_reorganize_of_partitions_the_mirror_does_not_know_keeps_every_row(spark, run, lake):
    """REORGANIZE moves rows between partitions of one table only: the mirror needs no bounds to follow it."""
    s = Stream(topic="cdc", partitions=1)
    s.create_table(CREATE, s.tso(1))
    s.records.clear()  # the consumer joined after the CREATE TABLE
    s.insert(P, {"id": 1, "v": "a"}, s.tso(2))
    sql = "ALTER TABLE `app`.`p` REORGANIZE PARTITION `p0` INTO (PARTITION `a` VALUES LESS THAN (5))"
    s.ddl("app", "p", sql, s.tso(3), "ALTER")
    s.insert(P, {"id": 2, "v": "b"}, s.tso(4))
    s.watermark(s.tso(5))
    run(s)
    assert delta_rows(spark, str(lake), P) == expected_rows(s, P, s.tso(5))
    assert sorted(k for (k,) in delta_rows(spark, str(lake), P)) == [1, 2]
    assert history(spark, lake)[sql] == "recorded"


def test_the_remedy_a_dumpling_load_after_the_ddl_records_the_partitions(spark, run, lake, tmp_path):
    """What the stop message says to do: load the table from an export taken after the DDL, run again."""
    s = Stream(topic="cdc", partitions=1)
    s.create_table(CREATE, s.tso(1), partitions=RANGES)
    s.records.clear()  # the consumer joined after the CREATE TABLE
    for k in (1, 12, 25):
        s.insert(P, {"id": k, "v": f"v{k}"}, s.tso(2))
    s.truncate_partition(P, ["p1"], s.tso(3))
    s.insert(P, {"id": 15, "v": "after"}, s.tso(5))
    s.watermark(s.tso(6))
    with pytest.raises(TablesStopped, match="never saw"):
        run(s)
    snapshot = s.tso(4)
    export = write_export(
        s, snapshot, tmp_path / "export", {P: f"{CREATE}\n{RANGES.clause()}"}, data_format="sql"
    )
    load_dumpling(
        spark, LoadConfig.from_params({"input": str(export), "target-path": str(lake), "force": "true"})
    )
    assert recorded_partitions(spark, lake) == ["p0", "p1", "p2"]
    run(s)
    assert delta_rows(spark, str(lake), P) == expected_rows(s, P, s.tso(6))
    s.truncate_partition(P, ["p1", "p2"], s.tso(7))
    s.watermark(s.tso(7))
    run(s)
    assert delta_rows(spark, str(lake), P) == expected_rows(s, P, s.tso(7))
    assert sorted(k for (k,) in delta_rows(spark, str(lake), P)) == [1]
