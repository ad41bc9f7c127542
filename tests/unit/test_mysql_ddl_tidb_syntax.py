# ruff: noqa: E501  (a table of whole SQL statements reads better one statement a line)
"""TiDB DDL as users type it and as TiDB/TiCDC pass it on: each statement's meaning, written from the
MySQL and TiDB documentation (a statement's columns, types, nullability, defaults, key, actions)."""

from __future__ import annotations

from typing import Any

import pytest

from ingest.model import Column, ColumnKind, ColumnType, TableId
from ingest.mysql.ddl import (
    AddColumn,
    AddIndex,
    AlterDefault,
    AlterTable,
    CreateDatabase,
    CreateTable,
    CreateTableLike,
    DropColumn,
    DropDatabase,
    DropIndex,
    DropTable,
    IndexChange,
    IndexDef,
    ModifyColumn,
    OtherDdl,
    PrimaryKeyChange,
    RenameColumn,
    RenameIndex,
    RenameTables,
    TableOptions,
    TruncateTable,
    parse_ddl,
)

K = ColumnKind
T = TableId("db", "t")
_NONE = object()


def ty(kind: ColumnKind, **kw: Any) -> ColumnType:
    return ColumnType(kind, **kw)


def col(name: str, type_: ColumnType, nullable: bool = True, default: Any = _NONE) -> Column:
    """``default``: absent (no DEFAULT clause), None (DEFAULT NULL) or the SQL literal text."""
    if default is _NONE:
        return Column(name, type_, nullable)
    return Column(name, type_, nullable, default, True)


def create(table: TableId, columns: list[Column], key: tuple[str, ...], if_not_exists: bool = False) -> Any:
    return ("create", table, tuple(_column_shape(c) for c in columns), key, if_not_exists)


def alter(table: TableId, *actions: Any, adds_unique: bool = False) -> Any:
    return ("alter", table, tuple(_action_shape(a) for a in actions), adds_unique)


def options(table: TableId) -> Any:
    return ("options", table)


def _literal(text: str | None) -> Any:
    """A DEFAULT by meaning: a string literal as its value, anything else as its upper-case text."""
    if text is None:
        return None
    stripped = text.strip()
    if len(stripped) >= 2 and stripped[0] == stripped[-1] and stripped[0] in "'\"":
        body, out, i = stripped[1:-1], [], 0
        while i < len(body):
            if body[i] == "\\" and i + 1 < len(body):
                out.append(body[i + 1])
                i += 2
            elif body[i] == stripped[0] and body[i + 1 : i + 2] == stripped[0]:
                out.append(body[i])
                i += 2
            else:
                out.append(body[i])
                i += 1
        return ("string", "".join(out))
    canonical = "".join(stripped.upper().split())
    # CURRENT_TIMESTAMP and CURRENT_TIMESTAMP() are the same function.
    return canonical[:-2] if canonical.endswith("()") else canonical


def _column_shape(c: Column) -> Any:
    return (c.name, c.type, c.nullable, _literal(c.default), c.has_default)


def _action_shape(action: Any) -> Any:
    if isinstance(action, AddColumn):
        return ("add", _column_shape(action.column), action.first, action.after)
    if isinstance(action, ModifyColumn):
        return ("modify", action.old, _column_shape(action.column))
    return action


def shape(statement: Any) -> Any:
    if isinstance(statement, CreateTable):
        columns = tuple(_column_shape(c) for c in statement.schema.columns)
        return ("create", statement.table, columns, statement.schema.key, statement.if_not_exists)
    if isinstance(statement, AlterTable):
        return (
            "alter",
            statement.table,
            tuple(_action_shape(a) for a in statement.actions),
            statement.adds_unique,
        )
    if isinstance(statement, TableOptions):
        return ("options", statement.table)
    return statement


ID = col("id", ty(K.INT), nullable=False)
V_INT = col("v", ty(K.INT))

# (statement, expected meaning); unqualified names belong to database "db".
STATEMENTS: list[tuple[str, Any]] = [
    # -- clustered / nonclustered primary keys ------------------------------------------------------
    (
        "CREATE TABLE order_items ( order_id BIGINT UNSIGNED NOT NULL, line_no SMALLINT UNSIGNED NOT NULL, "
        "sku CHAR(8) NOT NULL, PRIMARY KEY (order_id, line_no) NONCLUSTERED )",
        create(
            TableId("db", "order_items"),
            [
                col("order_id", ty(K.BIGINT, unsigned=True), False),
                col("line_no", ty(K.SMALLINT, unsigned=True), False),
                col("sku", ty(K.CHAR, length=8), False),
            ],
            ("order_id", "line_no"),
        ),
    ),
    ("CREATE TABLE t (id INT, v INT, PRIMARY KEY (id) CLUSTERED)", create(T, [ID, V_INT], ("id",))),
    ("create table t (id int primary key clustered, v int)", create(T, [ID, V_INT], ("id",))),
    ("CREATE TABLE t (id INT PRIMARY KEY NONCLUSTERED, v INT)", create(T, [ID, V_INT], ("id",))),
    (
        "CREATE TABLE t (id INT, v INT, PRIMARY KEY (id) /*T![clustered_index] CLUSTERED */)",
        create(T, [ID, V_INT], ("id",)),
    ),
    (
        "CREATE TABLE t (id INT NOT NULL, v INT, PRIMARY KEY (`id`) /*T![clustered_index] NONCLUSTERED */) "
        "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
        create(T, [ID, V_INT], ("id",)),
    ),
    (
        "CREATE TABLE t (id INT PRIMARY KEY /*T![clustered_index] CLUSTERED */, v INT)",
        create(T, [ID, V_INT], ("id",)),
    ),
    (
        "CREATE TABLE t (id INT, v INT, PRIMARY KEY (id) USING BTREE COMMENT 'pk' NONCLUSTERED)",
        create(T, [ID, V_INT], ("id",)),
    ),
    # -- executable comments are executed, ordinary comments are not --------------------------------
    (
        "CREATE TABLE t (id INT NOT NULL, v INT, PRIMARY KEY (id) NONCLUSTERED) /*T! SHARD_ROW_ID_BITS=4 PRE_SPLIT_REGIONS=2 */",
        create(T, [ID, V_INT], ("id",)),
    ),
    (
        "CREATE TABLE t (id INT PRIMARY KEY) ENGINE=InnoDB /*!40101 DEFAULT CHARSET=latin1 */",
        create(T, [ID], ("id",)),
    ),
    (
        "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10) /*!40100 CHARACTER SET utf8mb4 */ NOT NULL)",
        create(T, [ID, col("v", ty(K.VARCHAR, length=10), False)], ("id",)),
    ),
    (
        "CREATE TABLE t (id INT PRIMARY KEY /*!50100 , extra INT DEFAULT 7 */)",
        create(T, [ID, col("extra", ty(K.INT), True, "7")], ("id",)),
    ),
    ("CREATE TABLE t (id INT PRIMARY KEY) /*! ENGINE=InnoDB */", create(T, [ID], ("id",))),
    ("CREATE TABLE t (id INT PRIMARY KEY /* , ghost INT */, v INT)", create(T, [ID, V_INT], ("id",))),
    (
        "CREATE TABLE t (\n  id INT PRIMARY KEY, -- the key, v2 INT\n  v INT # trailing, w INT\n)",
        create(T, [ID, V_INT], ("id",)),
    ),
    ("/*!40101 CREATE TABLE t (id INT PRIMARY KEY) */", create(T, [ID], ("id",))),
    # -- AUTO_RANDOM ---------------------------------------------------------------------------------
    (
        "CREATE TABLE t (id BIGINT AUTO_RANDOM PRIMARY KEY, v INT)",
        create(T, [col("id", ty(K.BIGINT), False), V_INT], ("id",)),
    ),
    (
        "CREATE TABLE t (id BIGINT AUTO_RANDOM(5), v INT, PRIMARY KEY (id))",
        create(T, [col("id", ty(K.BIGINT), False), V_INT], ("id",)),
    ),
    (
        "CREATE TABLE t (id BIGINT UNSIGNED NOT NULL AUTO_RANDOM(5, 54) COMMENT 'r', PRIMARY KEY (id) CLUSTERED)",
        create(T, [col("id", ty(K.BIGINT, unsigned=True), False)], ("id",)),
    ),
    (
        "CREATE TABLE `t` (\n  `id` bigint(20) NOT NULL /*T![auto_rand] AUTO_RANDOM(5) */,\n  `v` int(11) DEFAULT NULL,\n"
        "  PRIMARY KEY (`id`) /*T![clustered_index] CLUSTERED */\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 "
        "COLLATE=utf8mb4_bin /*T![auto_rand_base] AUTO_RANDOM_BASE=30001 */",
        create(
            T,
            [col("id", ty(K.BIGINT, length=20), False), col("v", ty(K.INT, length=11), True, None)],
            ("id",),
        ),
    ),
    (
        "create table if not exists t (id bigint unsigned not null auto_random(5) primary key clustered, v longtext)",
        create(T, [col("id", ty(K.BIGINT, unsigned=True), False), col("v", ty(K.TEXT))], ("id",), True),
    ),
    # -- TiDB table options --------------------------------------------------------------------------
    ("CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY) AUTO_ID_CACHE=1", create(T, [ID], ("id",))),
    (
        "CREATE TABLE t (id INT NOT NULL AUTO_INCREMENT, PRIMARY KEY (id)) ENGINE=InnoDB AUTO_INCREMENT=100 "
        "/*T![auto_id_cache] AUTO_ID_CACHE=1 */",
        create(T, [ID], ("id",)),
    ),
    (
        "CREATE TABLE t (id INT PRIMARY KEY, created_at TIMESTAMP) TTL = created_at + INTERVAL 1 DAY",
        create(T, [ID, col("created_at", ty(K.TIMESTAMP))], ("id",)),
    ),
    (
        "CREATE TABLE t (id INT PRIMARY KEY, ts DATETIME) TTL = `ts` + INTERVAL 3 MONTH TTL_ENABLE = 'OFF' "
        "TTL_JOB_INTERVAL = '1h'",
        create(T, [ID, col("ts", ty(K.DATETIME))], ("id",)),
    ),
    (
        "CREATE TABLE t (id INT PRIMARY KEY, ts DATETIME) ENGINE=InnoDB /*T![ttl] TTL=`ts` + INTERVAL 1 DAY */ "
        "/*T![ttl] TTL_ENABLE='ON' */ /*T![ttl] TTL_JOB_INTERVAL='1h' */",
        create(T, [ID, col("ts", ty(K.DATETIME))], ("id",)),
    ),
    ("CREATE TABLE t (id INT PRIMARY KEY) PLACEMENT POLICY=p1", create(T, [ID], ("id",))),
    (
        "CREATE TABLE t (id INT PRIMARY KEY) /*T![placement] PLACEMENT POLICY=`p1` */",
        create(T, [ID], ("id",)),
    ),
    (
        "CREATE TABLE t (id INT PRIMARY KEY) ENGINE=InnoDB, PLACEMENT POLICY p2, COMMENT 'x'",
        create(T, [ID], ("id",)),
    ),
    (
        "CREATE TABLE t (id INT PRIMARY KEY) SHARD_ROW_ID_BITS = 4, COMMENT = 'sharded'",
        create(T, [ID], ("id",)),
    ),
    # -- charsets, collations, comments --------------------------------------------------------------
    (
        "CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci "
        "NOT NULL DEFAULT '', code CHAR(2) CHARSET ascii)",
        create(
            T,
            [ID, col("name", ty(K.VARCHAR, length=20), False, "''"), col("code", ty(K.CHAR, length=2))],
            ("id",),
        ),
    ),
    ("CREATE TABLE t (id INT PRIMARY KEY) CHARACTER SET = utf8 COLLATE = utf8_bin", create(T, [ID], ("id",))),
    (
        "CREATE TABLE t (id INT PRIMARY KEY COMMENT 'it''s', v INT COMMENT \"say \\\"hi\\\"\") COMMENT='表 😀'",
        create(T, [ID, V_INT], ("id",)),
    ),
    (
        "CREATE TABLE t (id INT PRIMARY KEY COMMENT '/*T! NONCLUSTERED */ not code', v INT COMMENT 'a, b) c')",
        create(T, [ID, V_INT], ("id",)),
    ),
    (
        "CREATE TABLE `訂單` (`編號` INT PRIMARY KEY, `😀` VARCHAR(4) COMMENT 'émoji ✓')",
        create(
            TableId("db", "訂單"),
            [col("編號", ty(K.INT), False), col("😀", ty(K.VARCHAR, length=4))],
            ("編號",),
        ),
    ),
    # -- generated columns ---------------------------------------------------------------------------
    (
        "CREATE TABLE t (id INT PRIMARY KEY, a INT, b INT AS (a + 1) VIRTUAL, c INT GENERATED ALWAYS AS (a * 2) STORED, "
        "d VARCHAR(10) AS (concat('x', a)) NOT NULL)",
        create(
            T,
            [
                ID,
                col("a", ty(K.INT)),
                col("b", ty(K.INT)),
                col("c", ty(K.INT)),
                col("d", ty(K.VARCHAR, length=10), False),
            ],
            ("id",),
        ),
    ),
    (
        "CREATE TABLE t (id INT PRIMARY KEY, doc JSON, city VARCHAR(64) GENERATED ALWAYS AS "
        "(JSON_UNQUOTE(JSON_EXTRACT(doc, '$.city'))) VIRTUAL)",
        create(T, [ID, col("doc", ty(K.JSON)), col("city", ty(K.VARCHAR, length=64))], ("id",)),
    ),
    # -- indexes and constraints ---------------------------------------------------------------------
    (
        "CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(10), KEY k1 (name), INDEX i2 (name(3)), UNIQUE KEY u1 (name), "
        "UNIQUE INDEX u2 (name, id), FULLTEXT KEY f (name))",
        create(T, [ID, col("name", ty(K.VARCHAR, length=10))], ("id",)),
    ),
    (
        "CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(10), INDEX e ((lower(name))), KEY inv (name) INVISIBLE, "
        "KEY c (name) COMMENT 'x' USING BTREE)",
        create(T, [ID, col("name", ty(K.VARCHAR, length=10))], ("id",)),
    ),
    (
        "CREATE TABLE t (id INT PRIMARY KEY, p INT NOT NULL, CONSTRAINT fk_p FOREIGN KEY (p) REFERENCES parent (id) "
        "ON DELETE CASCADE ON UPDATE SET NULL, CONSTRAINT chk CHECK (p > 0), CHECK (id <> p))",
        create(T, [ID, col("p", ty(K.INT), False)], ("id",)),
    ),
    (
        "CREATE TABLE t (id INT PRIMARY KEY, q INT CHECK (q >= 0), FOREIGN KEY (q) REFERENCES other (id))",
        create(T, [ID, col("q", ty(K.INT))], ("id",)),
    ),
    (
        "CREATE TABLE t (u VARCHAR(10) NOT NULL, n INT NOT NULL, UNIQUE KEY (n, u), UNIQUE INDEX ux (u))",
        create(T, [col("u", ty(K.VARCHAR, length=10), False), col("n", ty(K.INT), False)], ("u",)),
    ),
    (
        "CREATE TABLE t (a INT, b INT, UNIQUE KEY (a))",
        create(T, [col("a", ty(K.INT)), col("b", ty(K.INT))], ()),
    ),
    (
        "CREATE TABLE t (a INT NOT NULL UNIQUE, b INT)",
        create(T, [col("a", ty(K.INT), False), col("b", ty(K.INT))], ("a",)),
    ),
    # SERIAL is BIGINT UNSIGNED NOT NULL AUTO_INCREMENT UNIQUE: a NOT NULL unique key, so the handle.
    (
        "CREATE TABLE t (id SERIAL, v INT)",
        create(T, [col("id", ty(K.BIGINT, unsigned=True), False), V_INT], ("id",)),
    ),
    (
        "CREATE TABLE t (id INT NOT NULL, v INT, PRIMARY KEY (id) /*T![global_index] GLOBAL */) "
        "PARTITION BY HASH (id) PARTITIONS 4",
        create(T, [ID, V_INT], ("id",)),
    ),
    # -- names ---------------------------------------------------------------------------------------
    (
        "create table `order` (`key` int primary key, `status` int, `date` date, `value` int)",
        create(
            TableId("db", "order"),
            [
                col("key", ty(K.INT), False),
                col("status", ty(K.INT)),
                col("date", ty(K.DATE)),
                col("value", ty(K.INT)),
            ],
            ("key",),
        ),
    ),
    (
        "CREATE TABLE events (status INT, date DATE, value INT, id INT PRIMARY KEY, comment TEXT)",
        create(
            TableId("db", "events"),
            [
                col("status", ty(K.INT)),
                col("date", ty(K.DATE)),
                col("value", ty(K.INT)),
                ID,
                col("comment", ty(K.TEXT)),
            ],
            ("id",),
        ),
    ),
    (
        "CREATE TABLE t (clustered INT PRIMARY KEY NONCLUSTERED, ttl INT, placement INT, auto_random INT)",
        create(
            T,
            [
                col("clustered", ty(K.INT), False),
                col("ttl", ty(K.INT)),
                col("placement", ty(K.INT)),
                col("auto_random", ty(K.INT)),
            ],
            ("clustered",),
        ),
    ),
    (
        "CREATE TABLE `my db`.`my.table` (`a b` INT PRIMARY KEY, `c.d` INT, `e``f` INT)",
        create(
            TableId("my db", "my.table"),
            [col("a b", ty(K.INT), False), col("c.d", ty(K.INT)), col("e`f", ty(K.INT))],
            ("a b",),
        ),
    ),
    ("CREATE TABLE shop.orders (id INT PRIMARY KEY)", create(TableId("shop", "orders"), [ID], ("id",))),
    (
        "CREATE TABLE IF NOT EXISTS `shop`.`t` (id INT PRIMARY KEY)",
        create(TableId("shop", "t"), [ID], ("id",), True),
    ),
    (
        "CrEaTe TaBlE MiXeD (Id InT NoT NuLl, PrImArY kEy (Id) NonClustered) EnGiNe=InnoDB",
        create(TableId("db", "MiXeD"), [col("Id", ty(K.INT), False)], ("Id",)),
    ),
    # -- ALTER TABLE ---------------------------------------------------------------------------------
    (
        "ALTER TABLE t ADD COLUMN a INT, ADD INDEX ia (a), DROP COLUMN b, MODIFY c BIGINT",
        alter(T, AddColumn(col("a", ty(K.INT))), DropColumn("b"), ModifyColumn("c", col("c", ty(K.BIGINT)))),
    ),
    (
        "ALTER TABLE t ADD COLUMN (a INT, b VARCHAR(10) NOT NULL DEFAULT 'x,y')",
        alter(
            T, AddColumn(col("a", ty(K.INT))), AddColumn(col("b", ty(K.VARCHAR, length=10), False, "'x,y'"))
        ),
    ),
    (
        "ALTER TABLE t ADD (a DECIMAL(5,2))",
        alter(T, AddColumn(col("a", ty(K.DECIMAL, precision=5, scale=2)))),
    ),
    ("ALTER TABLE t ADD COLUMN IF NOT EXISTS a INT", alter(T, AddColumn(col("a", ty(K.INT))))),
    (
        "ALTER TABLE t ADD COLUMN IF NOT EXISTS (a INT, b INT)",
        alter(T, AddColumn(col("a", ty(K.INT))), AddColumn(col("b", ty(K.INT)))),
    ),
    ("ALTER TABLE t DROP COLUMN IF EXISTS a", alter(T, DropColumn("a"))),
    ("ALTER TABLE t DROP COLUMN a, DROP COLUMN b", alter(T, DropColumn("a"), DropColumn("b"))),
    (
        "ALTER TABLE t CHANGE COLUMN a b BIGINT NOT NULL",
        alter(T, ModifyColumn("a", col("b", ty(K.BIGINT), False))),
    ),
    ("ALTER TABLE t CHANGE a a VARCHAR(20)", alter(T, ModifyColumn("a", col("a", ty(K.VARCHAR, length=20))))),
    ("ALTER TABLE t RENAME COLUMN a TO b", alter(T, RenameColumn("a", "b"))),
    ("ALTER TABLE t ALTER COLUMN a SET DEFAULT 3", alter(T, AlterDefault("a"))),
    ("ALTER TABLE t ALTER a DROP DEFAULT", alter(T, AlterDefault("a"))),
    (
        "ALTER TABLE t MODIFY COLUMN a INT UNSIGNED NOT NULL DEFAULT 0 FIRST",
        alter(T, ModifyColumn("a", col("a", ty(K.INT, unsigned=True), False, "0"))),
    ),
    ("ALTER TABLE t ADD COLUMN a INT AFTER b", alter(T, AddColumn(col("a", ty(K.INT)), after="b"))),
    ("ALTER TABLE t ADD COLUMN z INT FIRST", alter(T, AddColumn(col("z", ty(K.INT)), first=True))),
    ("alter table t add column a int after `b`", alter(T, AddColumn(col("a", ty(K.INT)), after="b"))),
    ("Alter Table t Add Column z Int First", alter(T, AddColumn(col("z", ty(K.INT)), first=True))),
    (
        "ALTER TABLE t ADD COLUMN c VARCHAR(10) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin COMMENT 'it''s' DEFAULT 'x'",
        alter(T, AddColumn(col("c", ty(K.VARCHAR, length=10), True, "'x'"))),
    ),
    (
        'ALTER TABLE t ADD COLUMN d DATETIME(3) NOT NULL DEFAULT \'2024-01-01 00:00:00.000\' COMMENT "é \\"q\\""',
        alter(T, AddColumn(col("d", ty(K.DATETIME, length=3), False, "'2024-01-01 00:00:00.000'"))),
    ),
    (
        "ALTER TABLE t ADD COLUMN a INT, ALGORITHM=INSTANT, LOCK=NONE",
        alter(T, AddColumn(col("a", ty(K.INT)))),
    ),
    ("ALTER TABLE t ADD COLUMN a INT, COMMENT = 'x'", alter(T, AddColumn(col("a", ty(K.INT))))),
    (
        "ALTER TABLE t ADD UNIQUE KEY u (a), ADD COLUMN b INT",
        alter(T, AddColumn(col("b", ty(K.INT))), adds_unique=True),
    ),
    (
        "ALTER TABLE `order` ADD COLUMN `key` INT, ADD COLUMN `value` VARCHAR(10)",
        alter(
            TableId("db", "order"),
            AddColumn(col("key", ty(K.INT))),
            AddColumn(col("value", ty(K.VARCHAR, length=10))),
        ),
    ),
    ("alter table db2.T add column X int", alter(TableId("db2", "T"), AddColumn(col("X", ty(K.INT))))),
    ("ALTER TABLE t ADD COLUMN `ttl` INT", alter(T, AddColumn(col("ttl", ty(K.INT))))),
    ("ALTER TABLE t ADD COLUMN g INT AS (a + 1) NOT NULL", alter(T, AddColumn(col("g", ty(K.INT), False)))),
    ("ALTER TABLE t CHANGE ttl clustered INT", alter(T, ModifyColumn("ttl", col("clustered", ty(K.INT))))),
    ("ALTER TABLE t COMMENT='new comment'", options(T)),
    ("ALTER TABLE t COMMENT 'it''s 😀'", options(T)),
    ("ALTER TABLE t AUTO_INCREMENT=1000", options(T)),
    ("ALTER TABLE t SET TIFLASH REPLICA 1", options(T)),
    ("alter table db2.t set tiflash replica 2 location labels 'zone', 'rack'", options(TableId("db2", "t"))),
    ("ALTER TABLE t PLACEMENT POLICY=p1", options(T)),
    ("ALTER TABLE t PLACEMENT POLICY = DEFAULT", options(T)),
    ("ALTER TABLE t TTL = `ts` + INTERVAL 1 MONTH", options(T)),
    ("ALTER TABLE t TTL_ENABLE = 'OFF'", options(T)),
    ("ALTER TABLE t TTL_JOB_INTERVAL = '24h'", options(T)),
    ("ALTER TABLE t REMOVE TTL", options(T)),
    ("ALTER TABLE t SHARD_ROW_ID_BITS = 4", options(T)),
    ("ALTER TABLE t CACHE", options(T)),
    ("ALTER TABLE t NOCACHE", options(T)),
    ("ALTER TABLE t DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin", options(T)),
    ("ALTER TABLE t ENGINE = InnoDB", options(T)),
    ("ALTER TABLE t ADD INDEX ia (a)", IndexChange(adds_unique=False)),
    ("ALTER TABLE t ADD UNIQUE INDEX u (a)", IndexChange(True, (AddIndex(IndexDef("u", ("a",))),))),
    ("ALTER TABLE t ADD FULLTEXT INDEX f (a)", IndexChange(adds_unique=False)),
    ("ALTER TABLE t ADD INDEX e ((lower(a)))", IndexChange(adds_unique=False)),
    ("ALTER TABLE t DROP INDEX ia", IndexChange(False, (DropIndex("ia"),))),
    ("ALTER TABLE t RENAME INDEX a TO b", IndexChange(False, (RenameIndex("a", "b"),))),
    ("ALTER TABLE t ALTER INDEX a INVISIBLE", IndexChange(adds_unique=False)),
    (
        "ALTER TABLE t ADD CONSTRAINT fk FOREIGN KEY (a) REFERENCES p (id) ON DELETE CASCADE",
        IndexChange(adds_unique=False),
    ),
    ("ALTER TABLE t DROP FOREIGN KEY fk", IndexChange(adds_unique=False)),
    ("ALTER TABLE t ADD CONSTRAINT c CHECK (a > 0)", IndexChange(adds_unique=False)),
    ("ALTER TABLE t ADD PRIMARY KEY (a, b) NONCLUSTERED", PrimaryKeyChange(T, ("a", "b"))),
    ("ALTER TABLE t ADD PRIMARY KEY (a) /*T![clustered_index] NONCLUSTERED */", PrimaryKeyChange(T, ("a",))),
    ("ALTER TABLE t DROP PRIMARY KEY", PrimaryKeyChange(T, None)),
    ("ALTER TABLE t RENAME TO t2", RenameTables(((T, TableId("db", "t2")),))),
    # -- other statements ----------------------------------------------------------------------------
    ("CREATE TABLE t2 LIKE t", CreateTableLike(TableId("db", "t2"), T)),
    (
        "CREATE TABLE IF NOT EXISTS db2.t2 LIKE db1.t",
        CreateTableLike(TableId("db2", "t2"), TableId("db1", "t")),
    ),
    (
        "RENAME TABLE a TO b, c TO d",
        RenameTables(((TableId("db", "a"), TableId("db", "b")), (TableId("db", "c"), TableId("db", "d")))),
    ),
    ("RENAME TABLE db1.a TO `db2`.`a b`", RenameTables(((TableId("db1", "a"), TableId("db2", "a b")),))),
    ("TRUNCATE t", TruncateTable(T)),
    ("TRUNCATE TABLE db2.t", TruncateTable(TableId("db2", "t"))),
    ("truncate table `order`", TruncateTable(TableId("db", "order"))),
    ("DROP TABLE IF EXISTS t", DropTable(T)),
    ("DROP TABLE `db2`.`t`", DropTable(TableId("db2", "t"))),
    ("CREATE DATABASE d", CreateDatabase("d")),
    ("CREATE DATABASE IF NOT EXISTS d DEFAULT CHARACTER SET utf8mb4", CreateDatabase("d")),
    ("CREATE SCHEMA d", CreateDatabase("d")),
    ("CREATE SCHEMA IF NOT EXISTS `my-db`", CreateDatabase("my-db")),
    ("CREATE DATABASE d /*T![placement] PLACEMENT POLICY=`p` */", CreateDatabase("d")),
    ("DROP DATABASE d", DropDatabase("d")),
    ("DROP SCHEMA IF EXISTS d", DropDatabase("d")),
    ("CREATE INDEX i ON t (a)", IndexChange(adds_unique=False)),
    ("CREATE UNIQUE INDEX u ON t (a, b)", IndexChange(True, (AddIndex(IndexDef("u", ("a", "b"))),))),
    ("CREATE INDEX e ON t ((lower(a)))", IndexChange(adds_unique=False)),
    ("DROP INDEX i ON t", IndexChange(False, (DropIndex("i"),))),
]

# (column type as written, its ColumnType, nullable, DEFAULT) in CREATE TABLE t (id INT PRIMARY KEY, c <type>).
COLUMN_TYPES: list[tuple[str, ColumnType, bool, Any]] = [
    ("TINYINT", ty(K.TINYINT), True, _NONE),
    ("tinyint(1)", ty(K.TINYINT, length=1), True, _NONE),
    ("TINYINT UNSIGNED", ty(K.TINYINT, unsigned=True), True, _NONE),
    ("BOOL", ty(K.TINYINT, length=1), True, _NONE),  # BOOL and BOOLEAN are TINYINT(1)
    ("BOOLEAN NOT NULL DEFAULT 0", ty(K.TINYINT, length=1), False, "0"),
    ("SMALLINT(5) UNSIGNED ZEROFILL", ty(K.SMALLINT, unsigned=True, length=5), True, _NONE),
    ("INT(5) ZEROFILL", ty(K.INT, unsigned=True, length=5), True, _NONE),  # ZEROFILL implies UNSIGNED
    ("MEDIUMINT", ty(K.MEDIUMINT), True, _NONE),
    ("MEDIUMINT(8) UNSIGNED", ty(K.MEDIUMINT, unsigned=True, length=8), True, _NONE),
    ("INTEGER", ty(K.INT), True, _NONE),
    ("INTEGER(11) UNSIGNED", ty(K.INT, unsigned=True, length=11), True, _NONE),
    ("BIGINT(20) UNSIGNED NOT NULL", ty(K.BIGINT, unsigned=True, length=20), False, _NONE),
    ("DECIMAL", ty(K.DECIMAL, precision=10, scale=0), True, _NONE),  # DECIMAL is DECIMAL(10,0)
    ("DECIMAL(5)", ty(K.DECIMAL, precision=5, scale=0), True, _NONE),
    ("DECIMAL(10,2) UNSIGNED", ty(K.DECIMAL, unsigned=True, precision=10, scale=2), True, _NONE),
    ("NUMERIC(5)", ty(K.DECIMAL, precision=5, scale=0), True, _NONE),
    ("NUMERIC(12,4) DEFAULT '0.0000'", ty(K.DECIMAL, precision=12, scale=4), True, "'0.0000'"),
    ("FIXED(6,2)", ty(K.DECIMAL, precision=6, scale=2), True, _NONE),
    ("DEC(4,1)", ty(K.DECIMAL, precision=4, scale=1), True, _NONE),
    ("FLOAT", ty(K.FLOAT), True, _NONE),
    ("FLOAT(53)", ty(K.DOUBLE), True, _NONE),  # FLOAT(p) with p > 24 is DOUBLE
    ("DOUBLE", ty(K.DOUBLE), True, _NONE),
    ("DOUBLE PRECISION", ty(K.DOUBLE), True, _NONE),
    ("REAL", ty(K.DOUBLE), True, _NONE),
    ("CHAR(8)", ty(K.CHAR, length=8), True, _NONE),
    ("CHAR", ty(K.CHAR, length=1), True, _NONE),  # CHAR is CHAR(1)
    ("NCHAR(10)", ty(K.CHAR, length=10), True, _NONE),
    ("CHAR(3) BINARY", ty(K.CHAR, length=3), True, _NONE),
    ("VARCHAR(255) BINARY NOT NULL", ty(K.VARCHAR, length=255), False, _NONE),
    ("NVARCHAR(10)", ty(K.VARCHAR, length=10), True, _NONE),
    (
        "VARCHAR(20) CHARACTER SET latin1 COLLATE latin1_bin DEFAULT 'it''s'",
        ty(K.VARCHAR, length=20),
        True,
        "'it''s'",
    ),
    (
        "VARCHAR(10) COLLATE utf8mb4_unicode_ci DEFAULT 'x' COMMENT '注释'",
        ty(K.VARCHAR, length=10),
        True,
        "'x'",
    ),
    ("TINYTEXT", ty(K.TEXT), True, _NONE),
    ("TEXT", ty(K.TEXT), True, _NONE),
    ("MEDIUMTEXT", ty(K.TEXT), True, _NONE),
    ("LONGTEXT", ty(K.TEXT), True, _NONE),
    ("BINARY(16)", ty(K.BINARY, length=16), True, _NONE),
    ("VARBINARY(64)", ty(K.VARBINARY, length=64), True, _NONE),
    ("TINYBLOB", ty(K.BLOB), True, _NONE),
    ("BLOB", ty(K.BLOB), True, _NONE),
    ("MEDIUMBLOB", ty(K.BLOB), True, _NONE),
    ("LONGBLOB", ty(K.BLOB), True, _NONE),
    ("DATE", ty(K.DATE), True, _NONE),
    ("DATETIME", ty(K.DATETIME), True, _NONE),
    ("DATETIME(6)", ty(K.DATETIME, length=6), True, _NONE),
    (
        "DATETIME DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP",
        ty(K.DATETIME),
        True,
        "CURRENT_TIMESTAMP",
    ),
    (
        "TIMESTAMP(3) DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3)",
        ty(K.TIMESTAMP, length=3),
        True,
        "CURRENT_TIMESTAMP(3)",
    ),
    ("TIME", ty(K.TIME), True, _NONE),
    ("TIME(3)", ty(K.TIME, length=3), True, _NONE),
    ("YEAR", ty(K.YEAR), True, _NONE),
    ("YEAR(4)", ty(K.YEAR, length=4), True, _NONE),
    ("ENUM('a','b''c','d,e')", ty(K.ENUM, elements=("a", "b'c", "d,e")), True, _NONE),
    ("ENUM('it\\'s', \"dq\") NOT NULL DEFAULT 'dq'", ty(K.ENUM, elements=("it's", "dq")), False, "'dq'"),
    ("SET('x','y') DEFAULT 'x,y'", ty(K.SET, elements=("x", "y")), True, "'x,y'"),
    ("BIT(1)", ty(K.BIT, length=1), True, _NONE),
    ("BIT", ty(K.BIT, length=1), True, _NONE),  # BIT is BIT(1)
    ("BIT(64)", ty(K.BIT, length=64), True, _NONE),
    ("BIT(3) DEFAULT b'101'", ty(K.BIT, length=3), True, "b'101'"),
    ("JSON", ty(K.JSON), True, _NONE),
    ("VECTOR(3)", ty(K.VECTOR, length=3), True, _NONE),
    ("INT DEFAULT -1", ty(K.INT), True, "-1"),
    ("INT NULL DEFAULT NULL", ty(K.INT), True, None),
    ("INT NOT NULL DEFAULT 0 COMMENT 'x'", ty(K.INT), False, "0"),
]


@pytest.mark.parametrize(("sql", "expected"), STATEMENTS, ids=[s[:60] for s, _ in STATEMENTS])
def test_tidb_statement(sql: str, expected: Any) -> None:
    assert shape(parse_ddl(sql, "db")) == expected


@pytest.mark.parametrize(
    ("text", "column_type", "nullable", "default"), COLUMN_TYPES, ids=[c[0] for c in COLUMN_TYPES]
)
def test_column_type_in_create_table(
    text: str, column_type: ColumnType, nullable: bool, default: Any
) -> None:
    statement = parse_ddl(f"CREATE TABLE t (id INT PRIMARY KEY, c {text})", "db")
    assert shape(statement) == create(T, [ID, col("c", column_type, nullable, default)], ("id",))


@pytest.mark.parametrize(
    ("text", "column_type", "nullable", "default"), COLUMN_TYPES, ids=[c[0] for c in COLUMN_TYPES]
)
def test_column_type_in_add_column(text: str, column_type: ColumnType, nullable: bool, default: Any) -> None:
    statement = parse_ddl(f"ALTER TABLE t ADD COLUMN c {text}", "db")
    assert shape(statement) == alter(T, AddColumn(col("c", column_type, nullable, default)))


def test_there_are_at_least_a_hundred_statements() -> None:
    assert len(STATEMENTS) + len(COLUMN_TYPES) >= 100


def test_a_statement_that_cannot_be_understood_says_so() -> None:
    statement = parse_ddl("ALTER TABLE t ALTER CHECK chk NOT ENFORCED", "db")
    assert isinstance(statement, OtherDdl)
    assert statement.reason.startswith("cannot parse")
