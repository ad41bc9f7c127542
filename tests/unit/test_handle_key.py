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


@pytest.mark.parametrize(
    ("ddl", "key"),
    [
        # An expression part is a hidden VIRTUAL column: e1 never qualifies, whatever columns it reads.
        (
            "CREATE TABLE d.e (a INT NOT NULL, c INT NOT NULL, UNIQUE e1((a + 10)), UNIQUE u2(c, a))",
            ("c", "a"),
        ),
        # A prefix index qualifies (IsIndexUnique reads no prefix length), keyed by the whole column.
        (
            "CREATE TABLE d.p (s VARCHAR(20) NOT NULL, c INT NOT NULL, d INT NOT NULL, UNIQUE p(s(3)), "
            "UNIQUE u2(c, d))",
            ("s",),
        ),
        # So does an invisible one: TiDB still enforces it.
        (
            "CREATE TABLE d.i (a INT NOT NULL, c INT NOT NULL, UNIQUE i1(a DESC, c) INVISIBLE, "
            "UNIQUE u2(c, a))",
            ("a", "c"),
        ),
        # Fewest columns wins, then the lower index id (the one defined first).
        (
            "CREATE TABLE d.f (a INT NOT NULL, c INT NOT NULL, d INT NOT NULL, UNIQUE u1(c, d), "
            "UNIQUE u2(a, d), UNIQUE u3(d))",
            ("d",),
        ),
    ],
)
def test_each_unique_index_shape_is_taken_or_passed_over_as_ticdc_does(ddl, key):
    created = parse_ddl(ddl, "d")
    assert isinstance(created, CreateTable)
    assert created.schema.key == key
    assert unique_keys_of(created).handle() == key


def test_an_expression_index_added_later_never_becomes_the_handle():
    created = parse_ddl("CREATE TABLE d.t4 (a INT NOT NULL, c INT NOT NULL, UNIQUE u(c, a))", "d")
    assert isinstance(created, CreateTable)
    for ddl in ("ALTER TABLE d.t4 ADD UNIQUE INDEX e((a * 2))", "CREATE UNIQUE INDEX e ON d.t4 ((a * 2))"):
        added = parse_ddl(ddl, "d")
        assert evolve_unique_keys(unique_keys_of(created), added).handle() == ("c", "a")
