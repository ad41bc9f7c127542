"""Every drawn spelling of a statement parses to that statement, and the draws reach TiDB's forms."""

from __future__ import annotations

import random

from testkit.ddl_spelling import respell
from testkit.sample import ADD_POINTS, CUSTOMERS, ORDER_ITEMS, ORDERS, STOCK

STATEMENTS = (
    CUSTOMERS,
    ORDERS,
    ORDER_ITEMS,
    STOCK,
    ADD_POINTS,
    "CREATE TABLE `a`.`order` (`key` bigint unsigned NOT NULL, `date` datetime(3), v bit(3) DEFAULT b'101', "
    "e enum('x','it''s') DEFAULT 'x', PRIMARY KEY (`key`))",
    "ALTER TABLE t ADD COLUMN `status` set('a','b,c') NOT NULL DEFAULT 'a' FIRST",
    "ALTER TABLE t ADD COLUMN c decimal(10,2) DEFAULT '0.00'",
)


def test_each_spelling_parses_to_the_same_statement_and_the_forms_all_occur():
    rng = random.Random(7)
    spelt = [respell(sql, "shop", rng) for _ in range(150) for sql in STATEMENTS]  # asserts the parse
    text = "\n".join(spelt)
    for form in (
        ") NONCLUSTERED",
        ") CLUSTERED",
        "/*T![clustered_index] CLUSTERED */",
        "AUTO_RANDOM(5, 54)",
        "/*T![auto_rand] AUTO_RANDOM(5) */",
        "CHARACTER SET utf8mb4",
        "'it''s'",
        "😀",
        "/*T! SHARD_ROW_ID_BITS=4 */",
        "PLACEMENT POLICY=p1",
        "ADD COLUMN IF NOT EXISTS",
        "ADD COLUMN (",
        "ADD INDEX",
    ):
        assert form.lower() in text.lower(), form
    assert "create table" in text and "Alter Table" in text and "ALTER TABLE" in text


def test_the_same_seed_spells_the_same_way():
    first = [respell(ORDERS, "", random.Random(3)) for _ in range(2)]
    assert first[0] == first[1] != ORDERS
