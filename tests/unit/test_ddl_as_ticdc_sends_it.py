"""DDL text as TiCDC's owner rewrites it (tiflow's addSpecialComment: TiDB's parser restores every statement
with backquoted names, upper-case keywords, a charset introducer on every string literal and TiDB options in
/*T![…] */ comments), and the planning of what it means. The statements here are as the owner wrote them
in the corpora under tests/fixtures/corpora."""

from __future__ import annotations

import pytest

from ingest.model import ColumnKind, ColumnType, DdlEvent, Position, TableId
from ingest.mysql.ddl import (
    DatabaseOptions,
    NonDataObject,
    RenameTables,
    TableOptions,
    ddl_event,
    default_literal,
    parse_ddl,
)
from ingest.plan import partitions
from ingest.plan.keys import UniqueKeys
from ingest.plan.renames import RenameGroup, order_pairs
from ingest.plan.schema import (
    AddColumn,
    ChangeKey,
    CopyFrom,
    CreateTable,
    ExchangeRows,
    ExchangeSides,
    RecordOnly,
    Reject,
    Retire,
    SetUniqueKeys,
    affected_tables,
    literal_wire_text,
    plan_schema_changes,
    reads_other_tables,
)

T = TableId("col", "t")


def event(sql: str, table: TableId = T, commit_ts: int = 100) -> DdlEvent:
    return ddl_event(table, commit_ts, sql, "ALTER", Position("tidb_cdc", 0, 7))


def backfill(sql: str) -> str | None:
    (change,) = plan_schema_changes(event(sql), ["id"])
    assert isinstance(change, AddColumn), change
    return change.backfill


@pytest.mark.parametrize(
    ("sql", "existing_rows_read"),
    [
        # every string DEFAULT carries the charset introducer of the session's charset
        ("ALTER TABLE `col`.`t` ADD COLUMN `s` VARCHAR(20) NOT NULL DEFAULT _UTF8MB4'n/a'", "n/a"),
        ("ALTER TABLE `col`.`t` ADD COLUMN `q` CHAR(10) DEFAULT _UTF8MB4'it''s \"q\"'", 'it\'s "q"'),
        ("ALTER TABLE `col`.`t` ADD COLUMN `e` VARCHAR(20) DEFAULT _UTF8MB4'tab\there\\\\'", "tab\there\\"),
        (
            "ALTER TABLE `col`.`t` ADD COLUMN `l` VARCHAR(10) CHARACTER SET LATIN1 DEFAULT _UTF8MB4'café'",
            "café",
        ),
        ("ALTER TABLE `col`.`t` ADD COLUMN `x` VARCHAR(10) DEFAULT _LATIN1 X'E9'", "é"),
        ("ALTER TABLE `col`.`t` ADD COLUMN `d` DECIMAL(10,3) DEFAULT _UTF8MB4'12.5' AFTER `id`", "12.5"),
        ("ALTER TABLE `col`.`t` ADD COLUMN `f` DOUBLE DEFAULT 1e+03", "1e+03"),
        ("ALTER TABLE `col`.`t` ADD COLUMN `n` DECIMAL(5,2) DEFAULT -0.5", "-0.5"),
        ("ALTER TABLE `col`.`t` ADD COLUMN `b` TINYINT(1) DEFAULT TRUE", "1"),
        ("ALTER TABLE `col`.`t` ADD COLUMN `bt` BIT(8) DEFAULT b'1010'", "10"),
        ("ALTER TABLE `col`.`t` ADD COLUMN `h` VARCHAR(8) DEFAULT x'414243'", "ABC"),
        # BINARY(n) reads back padded with 0x00; bytes that are not UTF-8 come back as U+FFFD, as TiDB keeps
        # a DEFAULT as text in its JSON table info
        ("ALTER TABLE `col`.`t` ADD COLUMN `bn` BINARY(4) DEFAULT _UTF8MB4'ab'", "ab\x00\x00"),
        ("ALTER TABLE `col`.`t` ADD COLUMN `vb` VARBINARY(8) DEFAULT x'00ff'", "\x00\xef\xbf\xbd"),
        ("ALTER TABLE `col`.`t` ADD COLUMN `nn` BINARY(3) NOT NULL", "\x00\x00\x00"),
        # NOT NULL without DEFAULT: the type's implicit value, an ENUM's first element
        ("ALTER TABLE `col`.`t` ADD COLUMN `ne` ENUM('first','second') NOT NULL", "first"),
        ("ALTER TABLE `col`.`t` ADD COLUMN `nj` JSON NOT NULL", "null"),
        ("ALTER TABLE `col`.`t` ADD COLUMN `nt` TIME NOT NULL", "00:00:00"),
        ("ALTER TABLE `col`.`t` ADD COLUMN `ns` SET('p','q') NOT NULL", ""),
    ],
)
def test_existing_rows_read_the_default_as_upstream_reads_it(sql, existing_rows_read):
    assert backfill(sql) == existing_rows_read


def test_a_default_that_is_not_a_literal_stops_with_the_statement_and_what_to_do():
    (change,) = plan_schema_changes(
        event("ALTER TABLE `ref`.`r_now` ADD COLUMN `created` DATETIME DEFAULT CURRENT_TIMESTAMP()"), ["id"]
    )
    assert isinstance(change, Reject) and not change.unknown
    assert "CURRENT_TIMESTAMP()" in change.reason and "ticdc-ingest load --force" in change.reason
    assert "--column-defaults 'col.t.created=<value>'" in change.reason


def test_default_literals_are_one_canonical_spelling():
    import sqlglot

    def literal(text: str) -> str | None:
        return default_literal(sqlglot.parse_one(f"SELECT {text}", read="mysql").expressions[0])

    assert literal("_UTF8MB4'x''y'") == literal("'x''y'") == "'x''y'"
    assert literal("_BINARY'ab'") == "X'6162'"
    assert literal("_LATIN1 x'E9'") == "'é'"
    assert literal("NULL") is None
    assert literal("CURRENT_TIMESTAMP(3)") == "CURRENT_TIMESTAMP(3)"
    assert literal_wire_text("X'0102'", ColumnType(ColumnKind.INT)) == "258"


@pytest.mark.parametrize(
    ("sql", "name"),
    [
        (
            "CREATE ALGORITHM = UNDEFINED DEFINER = CURRENT_USER SQL SECURITY DEFINER VIEW `app`.`v_orders` "
            "AS SELECT `id`,`amount` FROM `app`.`orders` WHERE `amount`>1",
            TableId("app", "v_orders"),
        ),
        (
            "CREATE OR REPLACE ALGORITHM = MERGE DEFINER = CURRENT_USER SQL SECURITY INVOKER VIEW "
            "`app`.`v odd ``name``` (`uid`) AS SELECT 1",
            TableId("app", "v odd `name`"),
        ),
        ("DROP VIEW `app`.`v_join`", TableId("app", "v_join")),
        ("CREATE SEQUENCE app.seq START WITH 10", TableId("app", "seq")),
    ],
)
def test_views_and_sequences_hold_no_rows_and_are_only_recorded(sql, name):
    statement = parse_ddl(sql, "app")
    assert isinstance(statement, NonDataObject) and statement.name == name
    assert affected_tables(event(sql, name), []) == [name]
    (change,) = plan_schema_changes(event(sql, name), None, table=name)
    assert isinstance(change, RecordOnly)


def test_statements_the_owner_writes_without_a_table_action_change_nothing():
    # TTL_ENABLE = 'OFF' is restored as nothing at all (RestoreWithTTLEnableOff).
    assert isinstance(parse_ddl("ALTER TABLE `tbl`.`t_opts`", "tbl"), TableOptions)
    assert isinstance(parse_ddl("ALTER TABLE `tbl`.`t_opts` /*T![ttl] REMOVE TTL */", "tbl"), TableOptions)
    database = parse_ddl("ALTER DATABASE `tbl2` CHARACTER SET = utf8mb4 COLLATE = utf8mb4_general_ci", "")
    assert database == DatabaseOptions("tbl2")
    assert (
        affected_tables(event("ALTER DATABASE `tbl2` CHARACTER SET = utf8mb4", TableId("tbl2", "")), []) == []
    )


def test_alter_table_rename_as_is_a_rename():
    assert parse_ddl("ALTER TABLE `tbl`.`t_latin` RENAME AS `tbl2`.`t_latin3`", "tbl") == RenameTables(
        ((TableId("tbl", "t_latin"), TableId("tbl2", "t_latin3")),)
    )


def test_virtual_generated_columns_are_kept_where_computed_exactly_and_left_out_with_a_warning_otherwise():
    sql = (
        "CREATE TABLE `col`.`t` (`id` INT PRIMARY KEY,`a` INT,`s` INT GENERATED ALWAYS AS(`a`+1) STORED,"
        "`v` INT GENERATED ALWAYS AS(`a`*2) VIRTUAL,`w` VARCHAR(32) GENERATED ALWAYS AS(MD5(`a`)) VIRTUAL)"
    )
    create, left_out = plan_schema_changes(event(sql), None)
    assert isinstance(create, CreateTable)
    assert [c.name for c in create.schema.columns] == ["id", "a", "s", "v"]
    assert create.schema.columns[3].virtual and create.schema.columns[3].expression == "`a` * 2"
    assert isinstance(left_out, RecordOnly) and left_out.warning and "MD5" in left_out.reason
    types = {"id": ColumnType(ColumnKind.INT), "a": ColumnType(ColumnKind.INT)}
    (added,) = plan_schema_changes(
        event("ALTER TABLE `col`.`t` ADD COLUMN `v2` INT GENERATED ALWAYS AS(`a`-1) VIRTUAL"),
        ["id", "a"],
        column_types=types,
    )
    assert isinstance(added, AddColumn) and added.column.expression == "`a` - 1" and added.backfill is None
    (left,) = plan_schema_changes(
        event("ALTER TABLE `col`.`t` ADD COLUMN `v3` INT GENERATED ALWAYS AS(RAND()) VIRTUAL"),
        ["id", "a"],
        column_types=types,
    )
    assert isinstance(left, RecordOnly) and left.warning


# -- the handle key TiCDC picks, followed through index DDL --------------------------------------------------
UK_TABLE = (
    "CREATE TABLE `col`.`t` (`code` VARCHAR(10) NOT NULL,`seq` INT NOT NULL,`v` INT,UNIQUE `uk_code`(`code`))"
)


def keys_after(*statements: str) -> tuple[UniqueKeys, list]:
    create, *_ = plan_schema_changes(event(UK_TABLE), None)
    keys, key, changes = create.unique_keys, create.schema.key, []
    for sql in statements:
        changes = plan_schema_changes(event(sql), ["code", "seq", "v"], key=key, unique_keys=keys)
        for change in changes:
            if isinstance(change, SetUniqueKeys):
                keys = change.keys
            if isinstance(change, ChangeKey):
                key = change.key
    return keys, changes


def test_the_handle_follows_ticdcs_rule_primary_then_fewest_not_null_columns_then_oldest():
    keys, changes = keys_after("ALTER TABLE `col`.`t` ADD UNIQUE `uk_seq`(`seq`)")
    assert keys.handle() == ("code",)  # a tie: the older index wins; nothing moves
    assert not any(isinstance(c, ChangeKey | Reject) for c in changes)
    keys, changes = keys_after(
        "ALTER TABLE `col`.`t` ADD UNIQUE `uk_seq`(`seq`)",
        "ALTER TABLE `col`.`t` ADD PRIMARY KEY(`seq`) /*T![clustered_index] NONCLUSTERED */",
    )
    assert ChangeKey(T, ("seq",)) in changes
    keys, changes = keys_after(
        "ALTER TABLE `col`.`t` ADD UNIQUE `uk_seq`(`seq`)",
        "ALTER TABLE `col`.`t` ADD PRIMARY KEY(`seq`) /*T![clustered_index] NONCLUSTERED */",
        "ALTER TABLE `col`.`t` DROP PRIMARY KEY",
    )
    assert ChangeKey(T, ("code",)) in changes  # back to the oldest NOT NULL unique key
    keys, changes = keys_after("ALTER TABLE `col`.`t` DROP INDEX `uk_code`")
    assert isinstance(changes[-1], Reject) and "no longer replicates" in changes[-1].reason


def test_a_new_unique_index_on_a_table_keyed_by_its_primary_key_changes_nothing():
    create, *_ = plan_schema_changes(event("CREATE TABLE `col`.`t` (`id` INT PRIMARY KEY,`c` INT)"), None)
    for sql in ("CREATE UNIQUE INDEX `uc` ON `col`.`t` (`c`)", "ALTER TABLE `col`.`t` ADD UNIQUE `uc`(`c`)"):
        changes = plan_schema_changes(event(sql), ["id", "c"], key=("id",), unique_keys=create.unique_keys)
        assert not any(isinstance(c, ChangeKey | Reject) for c in changes), sql


def test_unnamed_unique_indexes_are_named_as_tidb_names_them():
    keys = UniqueKeys((), frozenset({"a"})).add(None, ("a",)).add(None, ("a", "b"))
    assert [i.name for i in keys.indexes] == ["a", "a_2"]
    assert keys.drop("A").handle() == ()  # a_2 has a nullable column


# -- a RENAME statement as one step ----------------------------------------------------------------------
OLD, NEW, LIVE = TableId("app", "orders_old"), TableId("app", "orders_new"), TableId("app", "orders")


@pytest.mark.parametrize("pairs", [[(LIVE, OLD), (NEW, LIVE)], [(NEW, LIVE), (LIVE, OLD)]])
def test_a_table_swap_ends_as_upstream_in_whatever_order_its_events_arrive(pairs):
    group = RenameGroup.of(pairs, {LIVE, NEW})
    assert group.pairs == ((LIVE, OLD), (NEW, LIVE))
    assert group.source_of(OLD) == LIVE and group.source_of(LIVE) == NEW
    assert group.retires(NEW) and not group.retires(LIVE) and not group.retires(OLD)
    ddl = event("RENAME TABLE `app`.`orders_new` TO `app`.`orders`", LIVE, commit_ts=500)
    assert plan_schema_changes(ddl, ["id"], table=LIVE, rename_group=group) == [CopyFrom(LIVE, NEW, 500)]
    (retire,) = plan_schema_changes(ddl, ["id"], table=NEW, rename_group=group)
    assert isinstance(retire, Retire) and retire.keep_rows and "app.orders" in retire.reason
    # The table's other events of the same statement only record: it got its end result already.
    (again,) = plan_schema_changes(ddl, ["id"], table=LIVE, rename_group=group, first_of_group=False)
    assert isinstance(again, RecordOnly)


def test_a_rotation_through_a_temporary_name_swaps_the_two_tables():
    a, b, tmp = TableId("app", "a"), TableId("app", "b"), TableId("app", "tmp")
    group = RenameGroup.of([(tmp, b), (b, a), (a, tmp)], {a, b})
    assert group.holders() == {a: b, b: a}
    assert order_pairs([(tmp, b), (b, a), (a, tmp)], {a, b}) == ((a, tmp), (b, a), (tmp, b))


def test_cross_table_ddls_read_other_tables():
    assert reads_other_tables(event("RENAME TABLE `app`.`a` TO `app`.`b`"))
    assert reads_other_tables(event("CREATE TABLE `app`.`b` LIKE `app`.`a`"))
    exchange = event("ALTER TABLE `part`.`r` EXCHANGE PARTITION `p1` WITH TABLE `part`.`r_nt`")
    assert reads_other_tables(exchange)
    assert affected_tables(exchange, []) == [TableId("part", "r"), TableId("part", "r_nt")]
    assert not reads_other_tables(event("DROP DATABASE `app`"))


# -- EXCHANGE PARTITION: both sides from the same facts -------------------------------------------------
PT, NT = TableId("part", "r"), TableId("part", "r_nt")
EXCHANGE = event("ALTER TABLE `part`.`r` EXCHANGE PARTITION `p1` WITH TABLE `part`.`r_nt`", PT, 700)
RANGE = partitions.Partitioning(
    "range", "id", "integer", (partitions.Partition("p0", "100"), partitions.Partition("p1", "200"))
)


def test_exchange_partition_plans_both_tables_to_read_each_other_before_it():
    sides = ExchangeSides(PT, NT, RANGE, True, True)
    rows = partitions.rows_of(RANGE, ("p1",))
    assert plan_schema_changes(EXCHANGE, ["id"], table=PT, exchange=sides) == [
        ExchangeRows(PT, NT, rows, True, 700)
    ]
    assert plan_schema_changes(EXCHANGE, ["id"], table=NT, exchange=sides) == [
        ExchangeRows(NT, PT, rows, False, 700)
    ]


@pytest.mark.parametrize(
    ("sides", "says"),
    [
        (ExchangeSides(PT, NT, partitions.unsupported("PARTITION BY KEY"), True, True), "KEY"),
        (ExchangeSides(PT, NT, None, True, True), "never saw its CREATE TABLE"),
        (ExchangeSides(PT, NT, RANGE, True, False), "does not hold"),
    ],
)
def test_an_exchange_the_mirror_cannot_follow_stops_both_tables(sides, says):
    for table in (PT, NT):
        (change,) = plan_schema_changes(EXCHANGE, ["id"], table=table, exchange=sides)
        assert isinstance(change, Reject) and says in change.reason and not change.unknown
