"""The handle key TiCDC identifies a table's rows by, by its own rule (tiflow v8.3.0
``IsIndexUniqueAndNotNull`` and ``findHandleIndex``): a unique index qualifies only when every column is NOT
NULL and none is a VIRTUAL generated column. Pure."""

from __future__ import annotations

import pytest

from ingest.model import Position, TableId
from ingest.mysql.ddl import AlterTable, CreateTable, ddl_event, parse_ddl
from ingest.plan.schema import evolve_unique_keys, unique_keys_of

# TiCDC's own integration workload: the first unique index is over a VIRTUAL column, so TiCDC keys by c.
VIRTUAL_FIRST = (
    "CREATE TABLE d.t1 (a INT, b INT AS (a + 1) {kind} NOT NULL, c INT NOT NULL, "
    "UNIQUE idx1(b), UNIQUE idx2(c))"
)


@pytest.mark.parametrize(("kind", "key"), [("VIRTUAL", ("c",)), ("STORED", ("b",))])
def test_a_unique_index_over_a_virtual_column_is_never_the_handle_a_stored_one_is(kind, key):
    created = parse_ddl(VIRTUAL_FIRST.format(kind=kind), "d")
    assert isinstance(created, CreateTable)
    assert created.schema.key == key
    assert unique_keys_of(created).handle() == key


def test_a_virtual_column_added_later_with_a_unique_index_does_not_become_the_handle():
    created = parse_ddl("CREATE TABLE d.t2 (a INT NOT NULL, c INT NOT NULL, UNIQUE idx2(c, a))", "d")
    assert isinstance(created, CreateTable)
    keys = unique_keys_of(created)
    assert keys.handle() == ("c", "a")
    added = parse_ddl(
        "ALTER TABLE d.t2 ADD COLUMN b INT AS (a + 1) VIRTUAL NOT NULL, ADD UNIQUE idx1(b)", "d"
    )
    assert isinstance(added, AlterTable)
    assert evolve_unique_keys(keys, added).handle() == ("c", "a")
    stored = parse_ddl(
        "ALTER TABLE d.t2 ADD COLUMN s INT AS (a + 2) STORED NOT NULL, ADD UNIQUE idx3(s)", "d"
    )
    assert isinstance(stored, AlterTable)
    assert evolve_unique_keys(keys, stored).handle() == ("s",)


def test_a_column_made_virtual_leaves_the_handle():
    created = parse_ddl(
        "CREATE TABLE d.t3 (a INT NOT NULL, b INT NOT NULL, c INT NOT NULL, UNIQUE u(b), UNIQUE w(c))", "d"
    )
    assert isinstance(created, CreateTable)
    keys = unique_keys_of(created)
    assert keys.handle() == ("b",)
    modified = parse_ddl("ALTER TABLE d.t3 MODIFY COLUMN b INT AS (a + 1) VIRTUAL NOT NULL", "d")
    assert isinstance(modified, AlterTable)
    assert evolve_unique_keys(keys, modified).handle() == ("c",)


def test_a_key_announced_over_a_virtual_column_gives_way_to_ticdcs_rule():
    # TiCDC's Simple encoder marks idx1 NOT NULL (b is declared NOT NULL), so the schema it sends names b.
    event = ddl_event(
        TableId("d", "t1"), 1, VIRTUAL_FIRST.format(kind="VIRTUAL"), "CREATE", Position("t", 0, 0), ("b",)
    )
    assert event.handle_key == ("c",)
    stored = ddl_event(
        TableId("d", "t1"), 1, VIRTUAL_FIRST.format(kind="STORED"), "CREATE", Position("t", 0, 0), ("b",)
    )
    assert stored.handle_key == ("b",)
