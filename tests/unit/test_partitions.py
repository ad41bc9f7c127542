"""Partition clauses and partition DDL: parsing, the recorded definition, and the rows a partition holds."""

from __future__ import annotations

import pytest

from ingest.model import DdlEvent, Position, TableId
from ingest.mysql import partition as mp
from ingest.mysql.ddl import CreateTable, PartitionDdl, ddl_event, parse_ddl
from ingest.plan import partitions
from ingest.plan.partitions import HashRemainder, InRange, InValues, IsNull, NoneOf, Partition, Partitioning
from ingest.plan.schema import (
    CreateTable as PlannedCreate,
)
from ingest.plan.schema import (
    DeletePartitionRows,
    RecordOnly,
    Reject,
    SetPartitioning,
    Truncate,
    affected_tables,
    plan_schema_changes,
)

T = TableId("s", "pt")
COLUMNS = "(`id` int NOT NULL, `d` date, `dt` datetime, `name` varchar(10), PRIMARY KEY (`id`))"
RANGE = (
    f"CREATE TABLE `s`.`pt` {COLUMNS} ENGINE=InnoDB\nPARTITION BY RANGE (`id`)\n"
    "(PARTITION `p0` VALUES LESS THAN (10),\n PARTITION `p1` VALUES LESS THAN (20) COMMENT 'x',\n"
    " PARTITION `p2` VALUES LESS THAN MAXVALUE)"
)
LIST = (
    f"CREATE TABLE `s`.`pt` {COLUMNS} PARTITION BY LIST COLUMNS(`d`) (PARTITION a VALUES IN ('2020-01-01', "
    "NULL), PARTITION b VALUES IN ('2020-01-02'), PARTITION rest DEFAULT)"
)


def event(sql: str) -> DdlEvent:
    return ddl_event(T, 100, sql, "ALTER", Position("cdc", 0, 7))


def planned_partitioning(sql: str) -> Partitioning:
    (change,) = plan_schema_changes(event(sql), None)
    assert isinstance(change, PlannedCreate)
    return change.partitioning


def holds(rows: partitions.PartitionRows, value: object) -> bool:
    """A tiny evaluator of the clauses over Python values (integers here), written from MySQL's rules."""

    def clause(c: partitions.Clause) -> bool:
        if isinstance(c, IsNull):
            return value is None
        if isinstance(c, InValues):
            return value is not None and str(value) in c.values
        if isinstance(c, InRange):
            return (
                value is not None
                and (c.low is None or int(str(value)) >= int(c.low))
                and (c.high is None or int(str(value)) < int(c.high))
            )
        if isinstance(c, HashRemainder):
            # TiDB: ret = value % n (Go: the sign of value), then -ret if negative.
            return value is not None and abs(int(str(value))) % c.modulus == c.remainder
        assert isinstance(c, NoneOf)
        return not any(clause(x) for x in c.clauses)

    return any(clause(c) for c in rows.clauses)


def test_create_table_keeps_its_columns_and_records_a_range_definition():
    statement = parse_ddl(RANGE, "x")
    assert isinstance(statement, CreateTable)
    assert [c.name for c in statement.schema.columns] == ["id", "d", "dt", "name"]
    assert statement.schema.key == ("id",)
    assert planned_partitioning(RANGE) == Partitioning(
        "range", "id", "integer", (Partition("p0", "10"), Partition("p1", "20"), Partition("p2", None))
    )


def test_a_list_columns_definition_with_null_and_default_survives_json():
    definition = planned_partitioning(LIST)
    assert definition.partitions == (
        Partition("a", values=("2020-01-01", None)),
        Partition("b", values=("2020-01-02",)),
        Partition("rest", is_default=True),
    )
    assert partitions.from_json(definition.to_json()) == definition


def test_an_unpartitioned_create_table_is_known_as_such():
    assert planned_partitioning(f"CREATE TABLE `s`.`pt` {COLUMNS}") == partitions.NOT_PARTITIONED


@pytest.mark.parametrize(
    ("clause", "why"),
    [
        ("PARTITION BY LINEAR HASH(`id`) PARTITIONS 4", "LINEAR HASH"),
        ("PARTITION BY HASH(`d`) PARTITIONS 4", "HASH on the date column d"),
        ("PARTITION BY KEY(`id`) PARTITIONS 4", "KEY"),
        ("PARTITION BY RANGE (YEAR(`d`)) (PARTITION p0 VALUES LESS THAN (2000))", "expression YEAR(d)"),
        ("PARTITION BY RANGE COLUMNS(id, d) (PARTITION p0 VALUES LESS THAN (1, '2000-01-01'))", "columns"),
        ("PARTITION BY LIST COLUMNS(name) (PARTITION p0 VALUES IN ('a'))", "collation"),
        ("PARTITION BY RANGE (id) INTERVAL (10) FIRST PARTITION LESS THAN (10) LAST PARTITION LESS THAN (90)",
         "INTERVAL"),
    ],
)  # fmt: skip
def test_definitions_the_mirror_cannot_follow_are_recorded_with_the_reason(clause, why):
    definition = planned_partitioning(f"CREATE TABLE `s`.`pt` {COLUMNS} {clause}")
    assert definition.method == "unsupported" and why in definition.reason


@pytest.mark.parametrize(
    ("sql", "action"),
    [
        ("ALTER TABLE `s`.`pt` TRUNCATE PARTITION `p0`, p1;", mp.TruncatePartitions(("p0", "p1"))),
        ("alter table pt truncate partition all", mp.TruncatePartitions((), every=True)),
        ("ALTER TABLE pt DROP PARTITION IF EXISTS p1", mp.DropPartitions(("p1",))),
        (
            "ALTER TABLE pt ADD PARTITION (PARTITION p3 VALUES LESS THAN (40), PARTITION p4 VALUES IN (-1))",
            mp.AddPartitions((mp.PartitionDef("p3", bound="40"), mp.PartitionDef("p4", values=("-1",)))),
        ),
        ("ALTER TABLE pt REMOVE PARTITIONING", mp.Repartition(None)),
        ("ALTER TABLE pt COALESCE PARTITION 2", mp.Recount(-2)),
        ("ALTER TABLE `s`.`pt` ADD PARTITION PARTITIONS 3", mp.Recount(3)),
        (
            "ALTER TABLE `s`.`pt` EXCHANGE PARTITION `p1` WITH TABLE `s`.`nt`",
            mp.ExchangePartition("p1", ("s", "nt")),
        ),
        (
            "ALTER TABLE pt EXCHANGE PARTITION p1 WITH TABLE nt WITHOUT VALIDATION",
            mp.ExchangePartition("p1", ("nt",)),
        ),
        (
            "ALTER TABLE `s`.`pt` REORGANIZE PARTITION `p3`,`pmax` INTO "
            "(PARTITION `p3a` VALUES LESS THAN (500), PARTITION `pmax2` VALUES LESS THAN (MAXVALUE))",
            mp.Reorganize(("p3", "pmax"), (mp.PartitionDef("p3a", bound="500"), mp.PartitionDef("pmax2"))),
        ),
    ],
)
def test_partition_ddl_forms(sql, action):
    assert parse_ddl(sql, "s") == PartitionDdl(T, action)


@pytest.mark.parametrize(
    ("sql", "method", "why"),
    [
        ("ALTER TABLE `s`.`pt` PARTITION BY KEY (`a`) PARTITIONS 7", "KEY", "KEY: the mirror does not"),
        ("ALTER TABLE pt PARTITION BY LINEAR KEY (a) PARTITIONS 3", "KEY", "LINEAR KEY"),
        ("ALTER TABLE pt PARTITION BY KEY () PARTITIONS 2", "KEY", "KEY"),
        ("ALTER TABLE pt PARTITION BY KEY COLUMNS (a) PARTITIONS 7", "KEY", "KEY"),
        ("ALTER TABLE pt PARTITION BY LINEAR HASH (a) PARTITIONS 3", "HASH", "LINEAR HASH"),
        (
            "ALTER TABLE pt PARTITION BY RANGE (a) SUBPARTITION BY HASH (a) SUBPARTITIONS 2 "
            "(PARTITION p0 VALUES LESS THAN (10))",
            "RANGE",
            "SUBPARTITION",
        ),
    ],
)
def test_a_partition_by_the_mirror_does_not_follow_is_recorded_whatever_its_clause_holds(sql, method, why):
    statement = parse_ddl(sql, "s")
    assert isinstance(statement, PartitionDdl) and isinstance(statement.action, mp.Repartition)
    assert statement.action.partition_by is not None
    assert statement.action.partition_by.method == method and why in statement.action.partition_by.unsupported


def test_table_options_before_a_partition_by_change_no_row_and_the_partitioning_is_followed():
    statement = parse_ddl(
        "ALTER TABLE pt COMMENT = 'x', ENGINE = InnoDB, DEFAULT CHARACTER SET = utf8mb4 PARTITION BY "
        "RANGE (a) (PARTITION p0 VALUES LESS THAN (10), PARTITION p1 VALUES LESS THAN (MAXVALUE))",
        "s",
    )
    assert statement == PartitionDdl(
        T,
        mp.Repartition(
            mp.PartitionBy("RANGE", "a", (mp.PartitionDef("p0", bound="10"), mp.PartitionDef("p1")))
        ),
    )
    hashed = parse_ddl("ALTER TABLE pt COMMENT 'x' PARTITION BY HASH (a) PARTITIONS 2", "s")
    assert isinstance(hashed, PartitionDdl) and isinstance(hashed.action, mp.Repartition)
    assert hashed.action.partition_by is not None and not hashed.action.partition_by.unsupported


def test_columns_named_like_partitions_are_no_partition_ddl():
    assert not isinstance(parse_ddl("ALTER TABLE pt ADD COLUMN partition_id int", "s"), PartitionDdl)
    assert not isinstance(parse_ddl("ALTER TABLE pt ADD COLUMN `partition` int", "s"), PartitionDdl)


def test_range_partitions_hold_their_interval_and_the_first_one_null():
    definition = planned_partitioning(RANGE)
    p0, p1, p2 = (partitions.rows_of(definition, (n,)) for n in ("p0", "P1", "p2"))
    assert [v for v in (None, -5, 9, 10, 19, 20, 10**12) if holds(p0, v)] == [None, -5, 9]
    assert [v for v in (None, 9, 10, 19, 20) if holds(p1, v)] == [10, 19]
    assert [v for v in (None, 19, 20, 10**12) if holds(p2, v)] == [20, 10**12]
    # After DROP PARTITION p1, p2 starts where p0 ends.
    dropped = partitions.drop(definition, ("p1",))
    assert [v for v in (9, 10, 19, 20) if holds(partitions.rows_of(dropped, ("p2",)), v)] == [10, 19, 20]


def test_list_partitions_and_the_default_partition():
    definition = Partitioning(
        "list", "id", "integer", (Partition("a", values=("1", None)), Partition("b", values=("2", "3")),
                                  Partition("rest", is_default=True)),
    )  # fmt: skip
    assert [v for v in (None, 1, 2, 4) if holds(partitions.rows_of(definition, ("a",)), v)] == [None, 1]
    assert [v for v in (None, 1, 2, 3, 4) if holds(partitions.rows_of(definition, ("b",)), v)] == [2, 3]
    assert [v for v in (None, 1, 2, 3, 4, 5) if holds(partitions.rows_of(definition, ("rest",)), v)] == [4, 5]


def test_bounds_are_normalised_to_what_the_column_compares():
    sql = (
        f"CREATE TABLE `s`.`pt` {COLUMNS} PARTITION BY RANGE COLUMNS(dt) "
        "(PARTITION p0 VALUES LESS THAN ('2020-01-01'), "
        "PARTITION p1 VALUES LESS THAN ('2020-06-01 12:00:00.5'))"
    )
    bounds = [p.bound for p in planned_partitioning(sql).partitions]
    assert bounds == ["2020-01-01 00:00:00", "2020-06-01 12:00:00.500000"]
    bad = f"CREATE TABLE `s`.`pt` {COLUMNS} PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN ('x'))"
    assert planned_partitioning(bad).method == "unsupported"


def plan(sql: str, current: Partitioning | None, columns=("id", "d", "dt", "name")):
    return plan_schema_changes(event(sql), list(columns), partitioning=current)


def test_truncate_and_drop_partition_plan_a_delete_with_the_definition_after():
    definition = planned_partitioning(RANGE)
    (truncate,) = plan("ALTER TABLE pt TRUNCATE PARTITION p1", definition)
    assert truncate == DeletePartitionRows(T, ("p1",), partitions.rows_of(definition, ("p1",)), definition)
    (drop,) = plan("ALTER TABLE pt DROP PARTITION p1", definition)
    assert isinstance(drop, DeletePartitionRows)
    assert [p.name for p in drop.partitioning.partitions] == ["p0", "p2"]
    # Replayed after a crash that came after the definition was written: nothing more to delete.
    (again,) = plan("ALTER TABLE pt DROP PARTITION p1", drop.partitioning)
    assert isinstance(again, DeletePartitionRows) and again.rows.clauses == ()
    assert plan("ALTER TABLE pt TRUNCATE PARTITION ALL", definition) == [Truncate(T)]


def test_add_partition_extends_the_definition_once():
    definition = planned_partitioning(
        f"CREATE TABLE `s`.`pt` {COLUMNS} PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (10))"
    )
    (change,) = plan("ALTER TABLE pt ADD PARTITION (PARTITION p1 VALUES LESS THAN (20))", definition)
    assert isinstance(change, SetPartitioning)
    assert change.partitioning.partitions == (Partition("p0", "10"), Partition("p1", "20"))
    (again,) = plan("ALTER TABLE pt ADD PARTITION (PARTITION p1 VALUES LESS THAN (20))", change.partitioning)
    assert isinstance(again, SetPartitioning) and again.partitioning == change.partitioning
    (unknown,) = plan("ALTER TABLE pt ADD PARTITION (PARTITION p1 VALUES LESS THAN (20))", None)
    assert isinstance(unknown, RecordOnly)


@pytest.mark.parametrize(
    ("current", "sql", "says"),
    [
        (None, "ALTER TABLE pt TRUNCATE PARTITION p0", "never saw the table's CREATE TABLE"),
        (partitions.NOT_PARTITIONED, "ALTER TABLE pt DROP PARTITION p0", "not partitioned"),
        (partitions.unsupported("PARTITION BY KEY"), "ALTER TABLE pt TRUNCATE PARTITION p0", "KEY"),
        (Partitioning("hash", "id", "integer", (Partition("p0"), Partition("p1"))),
         "ALTER TABLE pt DROP PARTITION p0", "does not apply to HASH"),
        (Partitioning("range", "id", "integer", (Partition("p0", "1"),)),
         "ALTER TABLE pt TRUNCATE PARTITION p9", "no partition p9"),
        (None, "ALTER TABLE pt TRUNCATE PARTITION p0, ADD COLUMN c int", "cannot apply"),
    ],
)  # fmt: skip
def test_partition_ddl_the_mirror_cannot_apply_stops_and_skip_does_not_pass_it(current, sql, says):
    (change,) = plan(sql, current)
    assert isinstance(change, Reject)
    assert says in change.reason and not change.unknown
    assert sql in change.reason and "ticdc-ingest load" in change.reason


def test_partition_ddl_belongs_to_its_table():
    assert affected_tables(event("ALTER TABLE `s`.`pt` TRUNCATE PARTITION p0"), []) == [T]


def test_hash_partitions_hold_the_absolute_remainder_and_the_first_one_null():
    definition = planned_partitioning(f"CREATE TABLE `s`.`pt` {COLUMNS} PARTITION BY HASH(`id`) PARTITIONS 3")
    assert [p.name for p in definition.partitions] == ["p0", "p1", "p2"]
    values = (None, -7, -4, -3, 0, 1, 4, 5, 2**31 - 1)
    assert [v for v in values if holds(partitions.rows_of(definition, ("p0",)), v)] == [None, -3, 0]
    assert [v for v in values if holds(partitions.rows_of(definition, ("p1",)), v)] == [
        -7,
        -4,
        1,
        4,
        2**31 - 1,
    ]
    # COALESCE and ADD PARTITIONS move rows between the partitions, which TiDB numbers p0 … p<n-1> again.
    (change,) = plan("ALTER TABLE pt COALESCE PARTITION 1", definition)
    assert isinstance(change, SetPartitioning)
    assert [p.name for p in change.partitioning.partitions] == ["p0", "p1"]
    assert [v for v in values if holds(partitions.rows_of(change.partitioning, ("p0",)), v)] == [
        None,
        -4,
        0,
        4,
    ]
    (more,) = plan("ALTER TABLE pt ADD PARTITION PARTITIONS 3", change.partitioning)
    assert [p.name for p in more.partitioning.partitions] == ["p0", "p1", "p2", "p3", "p4"]
