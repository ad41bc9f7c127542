import pytest

from ingest.model import ColumnKind, ColumnType, TableId
from ingest.mysql.ddl import (
    AlterTable,
    CreateDatabase,
    CreateTable,
    DropColumn,
    DropDatabase,
    DropTable,
    OtherDdl,
    RecoverTable,
    RenameTables,
    TruncateTable,
    parse_ddl,
)
from ingest.mysql.types import parse_mysql_type
from testkit.sample import ORDER_ITEMS, ORDERS, STOCK


def test_create_table_as_tidb_restores_it_keeps_exact_types_and_key():
    statement = parse_ddl(ORDERS, "ignored")
    assert isinstance(statement, CreateTable)
    assert statement.table == TableId("shop", "orders")
    types = {c.name: c.type for c in statement.schema.columns}
    assert types["order_id"] == ColumnType(ColumnKind.BIGINT, unsigned=True, length=20)
    assert types["amount"] == ColumnType(ColumnKind.DECIMAL, precision=10, scale=2)
    assert types["payload"].kind is ColumnKind.VARBINARY
    assert types["placed_at"] == ColumnType(ColumnKind.DATETIME, length=6)
    assert statement.schema.key == ("order_id",)


def test_composite_primary_key_in_declared_order():
    statement = parse_ddl(ORDER_ITEMS, "x")
    assert isinstance(statement, CreateTable)
    assert statement.schema.key == ("order_id", "line_no")


def test_table_without_primary_key_is_keyed_by_its_not_null_unique_index():
    statement = parse_ddl(
        "CREATE TABLE t (u VARCHAR(10) NOT NULL, n INT, v INT, UNIQUE KEY a (n), UNIQUE KEY b (u))", "s"
    )
    assert isinstance(statement, CreateTable)
    assert statement.schema.key == ("u",)  # n is nullable, so it cannot be the handle


def test_add_column_with_default_and_position():
    statement = parse_ddl(
        "ALTER TABLE `c` ADD COLUMN `points` int(11) NOT NULL DEFAULT '100' AFTER `b`", "shop"
    )
    assert isinstance(statement, AlterTable)
    (add,) = statement.add_columns
    assert (add.column.name, add.column.nullable, add.column.default, add.after) == (
        "points",
        False,
        "'100'",
        "b",
    )


def test_timestamp_binary_and_blob_types():
    statement = parse_ddl(STOCK, "x")
    assert isinstance(statement, CreateTable)
    kinds = {c.name: c.type.kind for c in statement.schema.columns}
    assert kinds["checksum"] is ColumnKind.BINARY
    assert kinds["thumbnail"] is ColumnKind.BLOB
    assert kinds["updated_at"] is ColumnKind.TIMESTAMP


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("TRUNCATE TABLE `shop`.`t`", TruncateTable(TableId("shop", "t"))),
        ("CREATE DATABASE `shop`", CreateDatabase("shop")),
    ],
)
def test_other_statements_we_act_on(sql, expected):
    assert parse_ddl(sql, "x") == expected


def test_statements_we_do_not_handle_yet_say_so():
    assert isinstance(parse_ddl("this is not sql (", "s"), OtherDdl)
    assert isinstance(parse_ddl("RENAME TABLE a b", "s"), OtherDdl)


@pytest.mark.parametrize(
    ("sql", "pairs"),
    [
        ("RENAME TABLE `shop`.`a` TO `shop`.`b`", [(("shop", "a"), ("shop", "b"))]),
        ("RENAME TABLE a TO b, c TO d", [(("s", "a"), ("s", "b")), (("s", "c"), ("s", "d"))]),
        ("rename table `we``ird` to x.`y z`", [(("s", "we`ird"), ("x", "y z"))]),
        ("ALTER TABLE a RENAME TO db2.b", [(("s", "a"), ("db2", "b"))]),
    ],
)
def test_rename_table_forms(sql, pairs):
    assert parse_ddl(sql, "s") == RenameTables(tuple((TableId(*a), TableId(*b)) for a, b in pairs))


def test_drop_statements_and_drop_column():
    assert parse_ddl("DROP TABLE `shop`.`t`", "x") == DropTable(TableId("shop", "t"))
    assert parse_ddl("DROP DATABASE shop", "x") == DropDatabase("shop")
    statement = parse_ddl("ALTER TABLE t ADD COLUMN x INT, DROP COLUMN `y`", "s")
    assert isinstance(statement, AlterTable)
    assert statement.actions[1] == DropColumn("y")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("bigint unsigned", ColumnType(ColumnKind.BIGINT, unsigned=True)),
        ("int unsigned zerofill", ColumnType(ColumnKind.INT, unsigned=True)),
        ("decimal", ColumnType(ColumnKind.DECIMAL)),
        ("decimal(10,4)", ColumnType(ColumnKind.DECIMAL, precision=10, scale=4)),
        ("varbinary(23)", ColumnType(ColumnKind.VARBINARY, length=23)),
        ("mediumblob", ColumnType(ColumnKind.BLOB)),
        ("longtext", ColumnType(ColumnKind.TEXT)),
        ("enum('a','b''c')", ColumnType(ColumnKind.ENUM, elements=("a", "b'c"))),
    ],
)
def test_canal_json_mysql_type_text(text, expected):
    assert parse_mysql_type(text) == expected


@pytest.mark.parametrize(
    ("definition", "expected"),
    [
        ("FLOAT UNSIGNED", ColumnType(ColumnKind.FLOAT, unsigned=True)),
        ("FLOAT UNSIGNED ZEROFILL", ColumnType(ColumnKind.FLOAT, unsigned=True)),
        ("FLOAT ZEROFILL", ColumnType(ColumnKind.FLOAT, unsigned=True)),
        ("FLOAT(7,3) UNSIGNED", ColumnType(ColumnKind.FLOAT, unsigned=True, length=7)),
        ("FLOAT(30) UNSIGNED", ColumnType(ColumnKind.DOUBLE, unsigned=True)),  # FLOAT(p), p > 24: a DOUBLE
        ("DOUBLE UNSIGNED", ColumnType(ColumnKind.DOUBLE, unsigned=True)),
        ("DOUBLE PRECISION UNSIGNED ZEROFILL", ColumnType(ColumnKind.DOUBLE, unsigned=True)),
        ("REAL UNSIGNED", ColumnType(ColumnKind.DOUBLE, unsigned=True)),  # REAL is DOUBLE in TiDB
        ("REAL", ColumnType(ColumnKind.DOUBLE)),
        ("DECIMAL(10,4) UNSIGNED", ColumnType(ColumnKind.DECIMAL, unsigned=True, precision=10, scale=4)),
        ("NUMERIC(5,2) ZEROFILL", ColumnType(ColumnKind.DECIMAL, unsigned=True, precision=5, scale=2)),
        ("FIXED(6,1) ZEROFILL", ColumnType(ColumnKind.DECIMAL, unsigned=True, precision=6, scale=1)),
        ("DEC UNSIGNED", ColumnType(ColumnKind.DECIMAL, unsigned=True, precision=10, scale=0)),
    ],
)
def test_unsigned_and_zerofill_float_double_and_decimal_parse_in_create_add_and_modify(definition, expected):
    created = parse_ddl(f"CREATE TABLE d.t (id INT PRIMARY KEY, c {definition} NOT NULL)", "d")
    assert isinstance(created, CreateTable)
    assert created.schema.columns[1].type == expected
    assert parse_mysql_type(str(expected)) == expected  # the column comment reads back the same type
    for verb in ("ADD COLUMN", "MODIFY COLUMN"):
        altered = parse_ddl(f"ALTER TABLE d.t {verb} c {definition}", "d")
        assert isinstance(altered, AlterTable)
        assert altered.actions[0].column.type == expected


@pytest.mark.parametrize(
    ("definition", "expected"),
    [
        ("INT8", "bigint"), ("INT8 UNSIGNED", "bigint unsigned"), ("INT3", "mediumint"),
        ("MIDDLEINT", "mediumint"),
        ("INT1", "tinyint"), ("INT2", "smallint"), ("INT4", "int"), ("INTEGER", "int"), ("FLOAT4", "float"),
        ("FLOAT8", "double"), ("LONG", "text"), ("LONG VARCHAR", "text"), ("LONG CHAR VARYING", "text"),
        ("LONG VARBINARY", "blob"), ("NATIONAL VARCHAR(10)", "varchar(10)"), ("NATIONAL CHAR(2)", "char(2)"),
        ("NCHAR(3)", "char(3)"), ("INT STORAGE MEMORY", "int"), ("INT COLUMN_FORMAT FIXED", "int"),
        ("INT STORAGE DISK COLUMN_FORMAT DYNAMIC", "int"),
        ("INT CONSTRAINT c1 CHECK (c > 0) NOT ENFORCED", "int"),
        ("INT CHECK (c > 0) ENFORCED", "int"), ("SERIAL", "bigint unsigned"),
        ("VARCHAR(10) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin COMMENT 'x'", "varchar(10)"),
        ("TIMESTAMP(3) DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3)", "timestamp(3)"),
    ],
)  # fmt: skip
def test_every_type_spelling_and_column_attribute_tidb_accepts_parses(definition, expected):
    created = parse_ddl(f"CREATE TABLE d.t (id INT PRIMARY KEY, c {definition})", "d")
    assert isinstance(created, CreateTable), created
    assert str(created.schema.columns[1].type) == expected


@pytest.mark.parametrize(
    ("sql", "table", "source"),
    [
        ("RECOVER TABLE `tt`.`t`", TableId("tt", "t"), TableId("tt", "t")),
        ("recover table t", TableId("d", "t"), TableId("d", "t")),
        ("RECOVER TABLE BY JOB 53", None, None),  # the event's own table is both
        ("FLASHBACK TABLE `tt`.`t` TO `t2`", TableId("tt", "t2"), TableId("tt", "t")),
        ("FLASHBACK TABLE tt.t TO other.t3", TableId("other", "t3"), TableId("tt", "t")),
        ("FLASHBACK TABLE t", TableId("d", "t"), TableId("d", "t")),
    ],
)
def test_recover_and_flashback_table_name_the_table_that_comes_back_and_the_dropped_one(sql, table, source):
    assert parse_ddl(sql, "d") == RecoverTable(table, source)
