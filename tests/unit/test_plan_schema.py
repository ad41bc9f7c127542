from ingest.model import ColumnKind, ColumnType, DdlEvent, Position, TableId
from ingest.mysql.ddl import ddl_event
from ingest.plan.schema import (
    AddColumn,
    ChangeType,
    CopyFrom,
    CreateLike,
    CreateTable,
    CreateTableReplacing,
    DropColumn,
    RecordOnly,
    Reject,
    RenameColumn,
    Retire,
    Truncate,
    affected_tables,
    plan_schema_changes,
)

T = TableId("shop", "c")


def event(sql: str) -> DdlEvent:
    return ddl_event(T, 100, sql, "ALTER", Position("cdc", 0, 7))


def test_add_column_not_null_default_backfills_existing_rows_with_the_default():
    (change,) = plan_schema_changes(event("ALTER TABLE c ADD COLUMN p INT NOT NULL DEFAULT '100'"), ["id"])
    assert isinstance(change, AddColumn)
    assert change.backfill == "100"


def test_add_nullable_column_without_default_leaves_null():
    (change,) = plan_schema_changes(event("ALTER TABLE c ADD COLUMN note VARCHAR(10)"), ["id"])
    assert isinstance(change, AddColumn)
    assert change.backfill is None


def test_add_not_null_column_without_default_gets_the_type_zero_value():
    (change,) = plan_schema_changes(event("ALTER TABLE c ADD COLUMN n INT NOT NULL"), ["id"])
    assert isinstance(change, AddColumn)
    assert change.backfill == "0"


def test_add_column_with_a_non_literal_default_is_rejected_not_silently_null():
    (change,) = plan_schema_changes(
        event("ALTER TABLE c ADD COLUMN t TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP"), ["id"]
    )
    assert isinstance(change, Reject)
    assert "CURRENT_TIMESTAMP" in change.reason


def test_add_column_already_present_is_still_planned_so_an_interrupted_backfill_completes():
    # Replays never get here (D_T filters them); a column that exists means the ALTER committed but the
    # DDL did not, e.g. a crash before the back-fill.
    (change,) = plan_schema_changes(event("ALTER TABLE c ADD COLUMN p INT NOT NULL DEFAULT 3"), ["id", "p"])
    assert isinstance(change, AddColumn)
    assert change.backfill == "3"


def test_create_table_on_an_existing_table_is_recorded_only():
    sql = "CREATE TABLE c (id INT PRIMARY KEY)"
    assert isinstance(plan_schema_changes(event(sql), None)[0], CreateTable)
    assert isinstance(plan_schema_changes(event(sql), ["id"])[0], RecordOnly)


def test_create_table_without_any_key_is_rejected():
    (change,) = plan_schema_changes(event("CREATE TABLE c (a INT, b INT)"), None)
    assert isinstance(change, Reject)
    assert "no primary key" in change.reason


def test_truncate_and_unsupported_ddl():
    assert isinstance(plan_schema_changes(event("TRUNCATE TABLE c"), ["id"])[0], Truncate)
    (change,) = plan_schema_changes(event("ALTER TABLE c TRUNCATE PARTITION p0"), ["id", "p"])
    assert isinstance(change, Reject)
    assert "TRUNCATE PARTITION" in change.reason.upper()
    assert not change.unknown  # a partition DDL is known: --unknown-ddl skip must not let it pass


def test_drop_column_but_never_a_key_column():
    assert plan_schema_changes(event("ALTER TABLE c DROP COLUMN p"), ["id", "p"], key=["id"]) == [
        DropColumn(T, "p")
    ]
    (change,) = plan_schema_changes(event("ALTER TABLE c DROP COLUMN id"), ["id", "p"], key=["id"])
    assert isinstance(change, Reject)
    assert "merge key" in change.reason


def test_rename_retires_the_source_and_copies_into_the_target():
    rename = event("RENAME TABLE `shop`.`c` TO `shop`.`d`")
    d = TableId("shop", "d")
    assert affected_tables(rename, []) == [T, d]
    assert plan_schema_changes(rename, ["id"], table=T) == [Retire(T, "renamed to shop.d", keep_rows=True)]
    # The target copies the source as it was just before the RENAME's commitTs.
    assert plan_schema_changes(rename, None, table=d) == [CopyFrom(d, T, rename.commit_ts)]


def test_drop_table_follows_the_policy_and_drop_database_reaches_every_known_table():
    drop = event("DROP TABLE `shop`.`c`")
    (archive,) = plan_schema_changes(drop, ["id"])
    assert isinstance(archive, Retire) and archive.keep_rows
    (delete,) = plan_schema_changes(drop, ["id"], drop_keeps_rows=False)
    assert isinstance(delete, Retire) and not delete.keep_rows
    other = TableId("other", "x")
    assert affected_tables(event("DROP DATABASE `shop`"), [T, other, TableId("shop", "e")]) == [
        T,
        TableId("shop", "e"),
    ]


def test_create_table_over_a_retired_table_replaces_it():
    (change,) = plan_schema_changes(
        event("CREATE TABLE c (id INT PRIMARY KEY, w INT)"), ["id", "v"], retired=True
    )
    assert isinstance(change, CreateTableReplacing)


def test_index_changes_are_recorded_but_a_new_unique_index_is_refused():
    for sql in (
        "CREATE INDEX `idx` ON `c` (`p`)",
        "DROP INDEX `idx` ON `c`",
        "ALTER TABLE `c` ADD INDEX `i` (`p`)",
        "ALTER TABLE c DROP INDEX i",
    ):
        assert isinstance(plan_schema_changes(event(sql), ["id", "p"])[0], RecordOnly), sql
    for sql in ("CREATE UNIQUE INDEX u ON c (p)", "ALTER TABLE c ADD UNIQUE KEY u (p)"):
        (change,) = plan_schema_changes(event(sql), ["id", "p"])
        assert isinstance(change, Reject) and "unique index" in change.reason, sql


def test_primary_key_changes_move_the_merge_key_when_the_new_key_is_known():
    from dataclasses import replace

    from ingest.plan.schema import ChangeKey

    add = event("ALTER TABLE `c` ADD PRIMARY KEY (`id`, `p`) NONCLUSTERED")
    assert plan_schema_changes(add, ["id", "p"], key=("id",)) == [ChangeKey(add.table, ("id", "p"))]
    (same,) = plan_schema_changes(event("ALTER TABLE c ADD PRIMARY KEY (id)"), ["id", "p"], key=("id",))
    assert isinstance(same, RecordOnly)
    (missing,) = plan_schema_changes(event("ALTER TABLE c ADD PRIMARY KEY (q)"), ["id", "p"], key=("id",))
    assert isinstance(missing, Reject) and "q" in missing.reason
    # Canal-JSON: after DROP PRIMARY KEY the handle is some NOT NULL unique index the SQL does not name.
    drop = event("ALTER TABLE c DROP PRIMARY KEY")
    (refused,) = plan_schema_changes(drop, ["id", "p"], key=("id",))
    assert isinstance(refused, Reject) and "Simple protocol" in refused.reason
    # Simple announces the indexes with every DDL, so the new handle key is known.
    announced = replace(drop, handle_key=("p",))
    assert plan_schema_changes(announced, ["id", "p"], key=("id",)) == [ChangeKey(drop.table, ("p",))]
    unique = replace(event("ALTER TABLE c ADD UNIQUE KEY u (p)"), handle_key=("id",))
    (unchanged,) = plan_schema_changes(unique, ["id", "p"], key=("id",))
    assert isinstance(unchanged, RecordOnly)


def test_rename_change_and_modify_column():
    assert plan_schema_changes(event("ALTER TABLE c RENAME COLUMN p TO q"), ["id", "p"]) == [
        RenameColumn(T, "p", "q")
    ]
    assert plan_schema_changes(event("ALTER TABLE c CHANGE `p` `q` BIGINT NOT NULL"), ["id", "p"]) == [
        RenameColumn(T, "p", "q"),
        ChangeType(T, "q", ColumnType(ColumnKind.BIGINT)),
    ]
    assert plan_schema_changes(event("ALTER TABLE c MODIFY COLUMN p DECIMAL(12,2)"), ["id", "p"]) == [
        ChangeType(T, "p", ColumnType(ColumnKind.DECIMAL, precision=12, scale=2))
    ]
    (change,) = plan_schema_changes(event("ALTER TABLE c ALTER COLUMN p SET DEFAULT 5"), ["id", "p"])
    assert isinstance(change, RecordOnly)


def test_create_table_like_and_unknown_ddl_is_marked_skippable():
    like = event("CREATE TABLE `shop`.`d` LIKE `shop`.`c`")
    d = TableId("shop", "d")
    assert affected_tables(like, []) == [T, d]
    assert plan_schema_changes(like, None, table=d) == [CreateLike(d, T, like.commit_ts)]
    assert isinstance(plan_schema_changes(like, ["id"], table=T)[0], RecordOnly)
    (unknown,) = plan_schema_changes(event("ALTER TABLE c ALTER CHECK chk NOT ENFORCED"), ["id"])
    assert isinstance(unknown, Reject) and unknown.unknown
    (refused,) = plan_schema_changes(event("ALTER TABLE c DROP COLUMN id"), ["id"], key=["id"])
    assert isinstance(refused, Reject) and not refused.unknown  # a known change we refuse is never skipped


def test_tidb_table_options_are_recorded_without_changes():
    for sql in (
        "ALTER TABLE c SET TIFLASH REPLICA 1",
        "ALTER TABLE c /*T![placement] PLACEMENT POLICY=`p1` */",
        "ALTER TABLE c TTL = `created_at` + INTERVAL 1 DAY",
        "ALTER TABLE c COMMENT = 'it''s'",
    ):
        assert affected_tables(event(sql), []) == [T]
        (change,) = plan_schema_changes(event(sql), ["id"])
        assert isinstance(change, RecordOnly), sql


def test_a_unique_index_among_column_actions_is_refused_like_a_lone_one():
    (change,) = plan_schema_changes(event("ALTER TABLE c ADD COLUMN u INT, ADD UNIQUE KEY (u)"), ["id"])
    assert isinstance(change, Reject) and not change.unknown
    (added,) = plan_schema_changes(event("ALTER TABLE c ADD COLUMN n INT, ADD INDEX (n)"), ["id"])
    assert isinstance(added, AddColumn) and added.column.name == "n"


def test_a_statement_the_mirror_cannot_read_is_quoted_with_what_to_do():
    sql = "ALTER TABLE c ALTER CHECK chk NOT ENFORCED"
    (unknown,) = plan_schema_changes(event(sql), ["id"])
    assert isinstance(unknown, Reject) and unknown.unknown
    assert repr(sql) in unknown.reason
    assert "--unknown-ddl skip" in unknown.reason
    assert "ticdc-ingest load --force" in unknown.reason
