"""The walking skeleton end to end on real Spark and Delta: captured Canal-JSON records -> mirrored tables."""

from __future__ import annotations

from datetime import date, datetime, timezone
from decimal import Decimal

import pytest
from delta.tables import DeltaTable
from mirror import delta_rows, expected_rows, located

from ingest.config import IngestConfig
from ingest.errors import ConfigError, TablesStopped, TooManyBadRecords
from ingest.model import TableId
from ingest.pipeline import run_files
from ingest.state import ddl_history
from ingest.state.progress import load_progress
from testkit.sample import CUSTOMERS, ORDERS, STOCK, Stream, build_sample
from testkit.sample import SIMPLE_FOR_TESTS as SIMPLE

T = TableId("app", "t")


def versions(spark, lake, table: TableId) -> int:
    return DeltaTable.forPath(spark, located(lake, table)).history().count()


def rows(spark, lake, table: TableId = T) -> dict:
    return {k[0] if len(k) == 1 else k: v for k, v in delta_rows(spark, str(lake), table).items()}


def rows_at(spark, lake, version: int) -> dict:
    return {k[0]: v for k, v in delta_rows(spark, str(lake), T, version).items()}


def simple_stream(partitions: int = 2) -> tuple[Stream, int]:
    s = Stream(topic="cdc", partitions=partitions)
    s.create_table(SIMPLE, s.tso(1))
    return s, 10


@pytest.mark.both_modes
def test_sample_stream_mirrors_upstream_exactly_at_g(spark, run, lake):
    stream = build_sample()
    result = run(stream)
    g = result.global_watermark
    assert g == stream.complete_watermark() > 0
    for table in [
        TableId("shop", "customers"),
        TableId("shop", "orders"),
        TableId("shop", "order_items"),
        TableId("inventory", "stock"),
    ]:
        assert delta_rows(spark, str(lake), table) == expected_rows(stream, table, g), table
        assert result.tables[table].applied_ts == g
    # Rows committed above G stay pending and are reported, not applied.
    assert result.tables[TableId("shop", "customers")].pending == 1
    assert 1010 not in rows(spark, lake, TableId("shop", "customers"))


def test_running_the_same_input_twice_changes_nothing(spark, run, lake):
    stream = build_sample()
    run(stream)
    tables = [TableId("shop", "customers"), TableId("shop", "orders"), TableId("inventory", "stock")]
    before = {t: (delta_rows(spark, str(lake), t), versions(spark, lake, t)) for t in tables}
    second = run(stream)
    assert second.run_id == 2
    for t in tables:
        assert (delta_rows(spark, str(lake), t), versions(spark, lake, t)) == before[t], t


def test_a_longer_input_continues_where_the_last_run_stopped(spark, run, lake):
    stream, t = simple_stream()
    stream.insert(T, {"id": 1, "v": "a"}, stream.tso(t))
    stream.insert(T, {"id": 2, "v": "b"}, stream.tso(t + 1))
    stream.watermark(stream.tso(t + 2))
    stream.insert(T, {"id": 3, "v": "c"}, stream.tso(t + 3))  # above G: pending after the first run
    first = run(stream)
    assert rows(spark, lake) == {1: {"id": 1, "v": "a"}, 2: {"id": 2, "v": "b"}}
    assert first.tables[T].pending == 1
    stream.update(T, (1,), {"v": "a2"}, stream.tso(t + 4))
    stream.delete(T, (2,), stream.tso(t + 4))
    stream.watermark(stream.tso(t + 5))
    second = run(stream)
    assert rows(spark, lake) == {1: {"id": 1, "v": "a2"}, 3: {"id": 3, "v": "c"}}
    assert second.tables[T].upserted == 2 and second.tables[T].deleted == 1  # nothing applied twice
    progress = load_progress(spark, f"{lake}/_ingest", "default")
    assert progress.global_watermark == stream.tso(t + 5)


def test_nothing_above_g_is_applied_until_the_slowest_partition_catches_up(spark, run, lake):
    # scenario 2: P0 is ahead; P1 (seen in the input) has no watermark yet, then reports a lower one.
    stream, t = simple_stream()
    stream.insert(T, {"id": 1, "v": "a"}, stream.tso(t), partition=0)
    stream.insert(T, {"id": 2, "v": "b"}, stream.tso(t + 1.5), partition=1)
    stream.watermark(stream.tso(t + 2), partitions=[0])
    first = run(stream)
    assert first.global_watermark == 0
    assert not DeltaTable.isDeltaTable(spark, located(lake, TableId("app", "t")))
    assert first.tables[T].pending == 2
    stream.watermark(stream.tso(t + 1), partitions=[1])
    second = run(stream)
    assert second.global_watermark == stream.tso(t + 1)
    assert rows(spark, lake) == {1: {"id": 1, "v": "a"}}
    stream.watermark(stream.tso(t + 2), partitions=[1])
    run(stream)
    assert rows(spark, lake) == {1: {"id": 1, "v": "a"}, 2: {"id": 2, "v": "b"}}


def test_a_configured_partition_that_stays_silent_holds_everything_back(spark, run, lake):
    # scenario 35: never apply with a partition unaccounted for.
    stream, t = simple_stream()
    stream.insert(T, {"id": 1, "v": "a"}, stream.tso(t), partition=0)
    stream.watermark(stream.tso(t + 1), partitions=[0])
    assert run(stream).global_watermark > 0  # discovered set: only P0 is known
    other = Stream(topic="cdc", partitions=2)
    other.create_table(SIMPLE, other.tso(1))
    other.insert(T, {"id": 1, "v": "a"}, other.tso(t), partition=0)
    other.watermark(other.tso(t + 1), partitions=[0])
    result = run(other, partitions="cdc:0-1", **{"stream-id": "configured"})
    assert result.global_watermark == 0


def test_duplicate_records_in_one_batch_apply_once(spark, run, lake):
    stream, t = simple_stream()
    stream.insert(T, {"id": 1, "v": "a"}, stream.tso(t), partition=0)
    stream.replay(0, 1, 1)  # TiCDC re-sends the insert at a new offset
    stream.watermark(stream.tso(t + 1))
    result = run(stream)
    assert rows(spark, lake) == {1: {"id": 1, "v": "a"}}
    assert result.tables[T].upserted == 1


def test_overlapping_captures_count_and_quarantine_each_record_once(spark, lake, tmp_path):
    stream, t = simple_stream()
    stream.insert(T, {"id": 1, "v": "a"}, stream.tso(t), partition=0)
    bad = stream.append_raw(1, b'{"database": "app"')
    stream.watermark(stream.tso(t + 1))
    input_dir = tmp_path / "captures"
    stream.write(input_dir)
    # A second capture of the same partitions, overlapping the first completely.
    stream.write(tmp_path / "again")
    for path in (tmp_path / "again").iterdir():
        path.rename(input_dir / f"again-{path.name}")
    config = IngestConfig.from_params(
        {"input": str(input_dir), "target-path": str(lake), "max-bad-ratio": "0.5"}
    )
    result = run_files(spark, config)
    assert result.records == len(stream.records)
    assert result.quarantined == 1
    quarantined = spark.read.format("delta").load(f"{lake}/_ingest/quarantine").collect()
    assert [r["offset"] for r in quarantined] == [bad]
    assert rows(spark, lake) == {1: {"id": 1, "v": "a"}}


def test_replayed_suffix_after_a_later_update_does_not_regress(spark, run, lake):
    # scenario 4: replays below the applied watermark are dropped, never {1: b} again.
    stream, t = simple_stream()
    stream.insert(T, {"id": 1, "v": "a"}, stream.tso(t), partition=0)
    stream.update(T, (1,), {"v": "b"}, stream.tso(t + 1), partition=0)
    stream.watermark(stream.tso(t + 2))
    run(stream)
    stream.update(T, (1,), {"v": "c"}, stream.tso(t + 3), partition=0)
    stream.watermark(stream.tso(t + 4))
    stream.replay(0, 1, 2)
    stream.watermark(stream.tso(t + 2.5))  # a regressing watermark is ignored
    stream.watermark(stream.tso(t + 5))
    run(stream)
    assert rows(spark, lake) == {1: {"id": 1, "v": "c"}}
    # Never {1: b} again once the update to c is applied, in any Delta version.
    history = (
        DeltaTable.forPath(spark, located(lake, TableId("app", "t"))).history().orderBy("version").collect()
    )
    seen_c = False
    for entry in history:
        got = rows_at(spark, lake, entry["version"])
        seen_c = seen_c or got == {1: {"id": 1, "v": "c"}}
        assert not (seen_c and got == {1: {"id": 1, "v": "b"}}), entry["version"]
    assert seen_c


def test_key_changing_update_split_across_partitions_and_a_key_swap(spark, run, lake):
    stream, t = simple_stream()
    for i, v in [(1, "a"), (2, "b"), (3, "c")]:
        stream.insert(T, {"id": i, "v": v}, stream.tso(t))
    stream.watermark(stream.tso(t + 1))
    run(stream)
    # PK change 3 -> 30: DELETE on one partition, INSERT on the other, INSERT read first.
    ts = stream.tso(t + 2)
    stream.insert(T, {"id": 30, "v": "c"}, ts, partition=1)
    stream.delete(T, (3,), ts, partition=0)
    # PK swap 1 <-> 2 in one transaction, split form, in an order that is not statement order.
    ts2 = stream.tso(t + 3)
    stream.delete(T, (1,), ts2, partition=0)
    stream.insert(T, {"id": 1, "v": "b"}, ts2, partition=1)
    stream.delete(T, (2,), ts2, partition=1)
    stream.insert(T, {"id": 2, "v": "a"}, ts2, partition=0)
    stream.watermark(stream.tso(t + 4))
    run(stream)
    assert rows(spark, lake) == {1: {"id": 1, "v": "b"}, 2: {"id": 2, "v": "a"}, 30: {"id": 30, "v": "c"}}


def test_update_that_changes_the_key_in_one_message_is_split(spark, run, lake):
    # output-raw-change-event=true: one UPDATE with the old key in "old".
    stream, t = simple_stream()
    stream.insert(T, {"id": 1, "v": "a"}, stream.tso(t))
    stream.watermark(stream.tso(t + 1))
    ts = stream.tso(t + 2)
    stream.append_message(0, {
        "id": 0, "database": "app", "table": "t", "pkNames": ["id"], "isDdl": False, "type": "UPDATE",
        "es": ts >> 18, "ts": 0, "sql": "", "sqlType": {"id": 4, "v": 12},
        "mysqlType": {"id": "int", "v": "varchar"}, "old": [{"id": "1"}], "data": [{"id": "5", "v": "a"}],
        "_tidb": {"commitTs": ts},
    })  # fmt: skip
    stream.watermark(stream.tso(t + 3))
    run(stream)
    assert rows(spark, lake) == {5: {"id": 5, "v": "a"}}


def test_add_column_between_rows_applies_at_its_commit_position(spark, run, lake):
    # scenario 12/40: row 1 under the old schema, existing rows get the DEFAULT, row 2 carries its value.
    stream, t = simple_stream()
    stream.insert(T, {"id": 1, "v": "a"}, stream.tso(t), partition=1)
    stream.add_column(
        T,
        "ALTER TABLE `t` ADD COLUMN `c` int(11) NOT NULL DEFAULT '7'",
        stream.tso(t + 1),
        "c",
        "int",
        default=7,
    )
    stream.insert(T, {"id": 2, "v": "b", "c": 5}, stream.tso(t + 2), partition=1)
    stream.watermark(stream.tso(t + 3))
    run(stream)
    assert rows(spark, lake) == {1: {"id": 1, "v": "a", "c": 7}, 2: {"id": 2, "v": "b", "c": 5}}
    operations = [
        r["operation"]
        for r in DeltaTable.forPath(spark, located(lake, TableId("app", "t")))
        .history()
        .orderBy("version")
        .select("operation")
        .collect()
    ]
    assert operations.index("MERGE") < operations.index("ADD COLUMNS") < len(operations) - 1
    assert operations[-1] == "MERGE"


def test_ddl_waits_for_g_and_lagging_partition_rows_wait_with_it(spark, run, lake):
    # scenario 13: P1's row at 110 uses the new column; P0 has not reached the DDL's watermark yet.
    stream, t = simple_stream()
    stream.insert(T, {"id": 1, "v": "a"}, stream.tso(t), partition=1)
    stream.watermark(stream.tso(t + 0.5))
    stream.add_column(T, "ALTER TABLE `t` ADD COLUMN `c` int(11) DEFAULT NULL", stream.tso(t + 1), "c", "int")
    stream.insert(T, {"id": 2, "v": "b", "c": 5}, stream.tso(t + 2), partition=1)
    stream.watermark(stream.tso(t + 3), partitions=[1])
    first = run(stream)
    assert rows(spark, lake) == {1: {"id": 1, "v": "a"}}
    assert first.tables[T].pending == 1
    stream.watermark(stream.tso(t + 3), partitions=[0])
    run(stream)
    assert rows(spark, lake) == {1: {"id": 1, "v": "a", "c": None}, 2: {"id": 2, "v": "b", "c": 5}}


def test_common_types_land_exactly(spark, run, lake):
    stream = Stream(topic="cdc", partitions=1, tz_name="Asia/Shanghai")
    orders = stream.create_table(ORDERS, stream.tso(1))
    stock = stream.create_table(STOCK, stream.tso(1))
    customers = stream.create_table(CUSTOMERS, stream.tso(1))
    stream.insert(orders, {
        "order_id": 18446744073709551615, "customer_id": -9223372036854775808,
        "amount": Decimal("-99999999.99"),
        "status": "日本語 ✓", "weight_kg": 3.4028234663852886e38, "score": 5e-324,
        "placed_at": datetime(1000, 1, 1, 0, 0, 0, 1), "note": "line1\nline2\t\"quoted\" \\ </script>",
        "payload": bytes(range(0x80, 0xC0)),
    }, stream.tso(2))  # fmt: skip
    stream.insert(
        stock,
        {
            "sku": "A",
            "on_hand": 4294967295,
            "reserved": 16777215,
            "checksum": b"\x00\x00\x00\x00",
            "thumbnail": bytes(range(256)),
            "updated_at": datetime(2038, 1, 19, 3, 14, 7, tzinfo=timezone.utc),
        },
        stream.tso(2),
    )
    stream.insert(
        customers,
        {
            "id": 1,
            "name": "x",
            "email": None,
            "balance": Decimal("0.01"),
            "vip": -128,
            "signed_up_at": datetime(1970, 1, 1, 0, 0, 1, 999000, tzinfo=timezone.utc),
            "birthday": date(9999, 12, 31),
        },
        stream.tso(2),
    )
    stream.watermark(stream.tso(3))
    result = run(stream)
    assert result.quarantined == 0
    for table in (orders, stock, customers):
        assert delta_rows(spark, str(lake), table) == expected_rows(stream, table, stream.tso(3)), table
    schema = {
        f.name: f.dataType.simpleString()
        for f in spark.read.format("delta").load(located(lake, TableId("shop", "orders"))).schema
    }
    assert schema["order_id"] == "decimal(20,0)"
    assert schema["payload"] == "binary"
    assert schema["placed_at"] == "timestamp_ntz"
    assert schema["weight_kg"] == "float"


def test_table_never_announced_by_ddl_is_created_from_its_first_dml(spark, run, lake):
    stream, t = simple_stream()
    ts = stream.tso(t)
    stream.append_message(1, {
        "id": 0, "database": "app", "table": "late", "pkNames": ["k"], "isDdl": False, "type": "INSERT",
        "es": ts >> 18, "ts": 0, "sql": "", "sqlType": {"k": -5, "b": 2004, "u": -5},
        "mysqlType": {"k": "bigint", "b": "varbinary", "u": "bigint unsigned"}, "old": None,
        "data": [{"k": "7", "b": "\u00ff\u0000", "u": "18446744073709551615"}], "_tidb": {"commitTs": ts},
    })  # fmt: skip
    stream.watermark(stream.tso(t + 1))
    run(stream)
    assert rows(spark, lake, TableId("app", "late")) == {
        7: {"k": 7, "b": b"\xff\x00", "u": 18446744073709551615}
    }


def test_bad_records_are_quarantined_with_bytes_and_position_and_fail_the_run_by_default(spark, run, lake):
    stream, t = simple_stream()
    stream.insert(T, {"id": 1, "v": "a"}, stream.tso(t), partition=1)
    bad_json = stream.append_raw(1, b'{"database": "app", "table"')
    ts = stream.tso(t + 0.5)
    unknown = stream.append_message(
        1, {"database": "app", "table": "t", "isDdl": False, "type": "UPSERT", "_tidb": {"commitTs": ts}}
    )
    bad_value = stream.append_message(1, {
        "database": "app", "table": "t", "pkNames": ["id"], "isDdl": False, "type": "INSERT",
        "mysqlType": {"id": "int", "v": "varchar"}, "data": [{"id": "not-a-number", "v": "x"}], "old": None,
        "_tidb": {"commitTs": ts},
    })  # fmt: skip
    stream.watermark(stream.tso(t + 1))
    with pytest.raises(TooManyBadRecords, match=r"above max-bad-ratio 0\.0; progress not moved"):
        run(stream)
    assert load_progress(spark, f"{lake}/_ingest", "default").run_id == 0
    quarantined = spark.read.format("delta").load(f"{lake}/_ingest/quarantine")
    # The run stopped at decoding, before any table was touched: only undecodable records so far.
    assert {r["offset"] for r in quarantined.collect()} == {bad_json, unknown}
    assert not DeltaTable.isDeltaTable(spark, located(lake, TableId("app", "t"))) or rows(spark, lake) == {}
    # With a tolerance the run goes on: good rows applied, bad ones stay in quarantine (once each).
    result = run(stream, **{"max-bad-ratio": "0.5"})
    assert rows(spark, lake) == {1: {"id": 1, "v": "a"}}
    assert result.quarantined == 3
    quarantined = spark.read.format("delta").load(
        f"{lake}/_ingest/quarantine"
    )  # a DataFrame pins its version
    found = {r["offset"]: r for r in quarantined.collect()}
    assert set(found) == {bad_json, unknown, bad_value}
    assert bytes(found[bad_json]["value"]) == b'{"database": "app", "table"'
    assert found[bad_json]["error"] == "malformed JSON"
    assert found[unknown]["error"] == "unknown \"type\" 'UPSERT'"
    assert "id: value will not convert to int" in found[bad_value]["error"]
    assert found[bad_value]["table"] == "app.t" and found[bad_value]["partition"] == 1
    assert all(r["ingest_version"] and r["error_class"] for r in found.values())
    run(stream, **{"max-bad-ratio": "0.5"})  # re-reading the same input does not duplicate entries
    assert spark.read.format("delta").load(f"{lake}/_ingest/quarantine").count() == 3


def test_canal_json_without_the_tidb_extension_is_refused(spark, run, lake):
    stream = Stream(topic="cdc", partitions=1)
    stream.append_message(
        0,
        {
            "database": "app",
            "table": "t",
            "pkNames": ["id"],
            "isDdl": False,
            "type": "INSERT",
            "mysqlType": {"id": "int"},
            "data": [{"id": "1"}],
            "old": None,
        },
    )
    with pytest.raises(ConfigError, match=r"enable-tidb-extension=true.*first seen at cdc/0@0"):
        run(stream)
    assert not DeltaTable.isDeltaTable(spark, located(lake, TableId("app", "t")))


def test_an_unsupported_ddl_stops_its_table_just_below_it_and_keeps_what_follows(spark, run, lake):
    stream, t = simple_stream()
    stream.insert(T, {"id": 1, "v": "a"}, stream.tso(t))
    stream.ddl("app", "t", "ALTER TABLE `t` TRUNCATE PARTITION `p0`", stream.tso(t + 1), "ALTER")
    stream.insert(T, {"id": 2, "v": "b"}, stream.tso(t + 2))
    stream.watermark(stream.tso(t + 3))
    with pytest.raises(TablesStopped, match=r"TRUNCATE PARTITION.*the table stopped before cdc/0@\d+"):
        run(stream)
    # The row before the DDL is applied; the DDL and the row after it wait in the buffer, durably.
    assert delta_rows(spark, str(lake), T) == expected_rows(stream, T, stream.tso(t))
    committed = load_progress(spark, f"{lake}/_ingest", "default")
    assert committed.run_id == 1 and committed.buffered == 2


@pytest.mark.parametrize("dropped_later", [False, True])
def test_a_drop_ends_a_stop_the_table_retires_as_it_stood_below_the_refused_ddl(
    spark, run, lake, dropped_later
):
    stream, t = simple_stream()
    stream.insert(T, {"id": 1, "v": "a"}, stream.tso(t))
    stream.ddl("app", "t", "ALTER TABLE `t` TRUNCATE PARTITION `p0`", stream.tso(t + 1), "ALTER")
    stream.insert(T, {"id": 2, "v": "b"}, stream.tso(t + 2))
    stream.watermark(stream.tso(t + 3))
    if dropped_later:  # the stop outlives a run first
        with pytest.raises(TablesStopped, match=r"TRUNCATE PARTITION"):
            run(stream)
    # A CREATE TABLE the mirror refuses (no key TiCDC could use), then dropped too.
    nokey = TableId("app", "nokey")
    stream.ddl("app", "nokey", "CREATE TABLE `app`.`nokey` (`a` int(11))", stream.tso(t + 4), "CREATE")
    stream.drop_table(T, stream.tso(t + 5))
    stream.drop_table(nokey, stream.tso(t + 6))
    stream.watermark(stream.tso(t + 7))
    result = run(stream)  # no table stops: upstream dropped both
    assert result.global_watermark == stream.tso(t + 7)
    detail = DeltaTable.forPath(spark, located(lake, T)).detail().first()
    assert detail["properties"]["ticdc.retired"].startswith("dropped by DROP TABLE")
    # Retired as it stood below the refused DDL (archive keeps the last rows).
    assert delta_rows(spark, str(lake), T) == expected_rows(stream, T, stream.tso(t))
    history: dict[tuple, dict[str, str]] = {}
    for r in ddl_history.read(spark, f"{lake}/_ingest").collect():
        history.setdefault((r["table"], r["commit_ts"]), {})[r["action"]] = r["detail"]
    # The refusal stays listed (appended when it stopped the table), and the skip says why it ended.
    assert "upstream dropped the table" in history[("app.t", stream.tso(t + 1))]["skipped"]
    assert "applied" in history[("app.t", stream.tso(t + 5))]
    assert "skipped" in history[("app.nokey", stream.tso(t + 4))]
    assert run(stream).global_watermark == stream.tso(t + 7)  # and again: nothing stops


def test_recover_and_flashback_table_bring_a_dropped_table_back_with_its_rows(spark, run, lake):
    """TiDB restores the rows a table had at its DROP and TiCDC sends none of them: the mirror revives its own
    copy, under the name the DDL gives, and applies what follows. (The kit's TiDB, on a mock store, loses
    those rows at the DROP; a real TiDB restores them, as here.)"""
    stream, t = simple_stream(partitions=1)
    stream.insert(T, {"id": 1, "v": "a"}, stream.tso(t))
    stream.insert(T, {"id": 2, "v": "b"}, stream.tso(t))
    stream.watermark(stream.tso(t + 1))
    run(stream)
    stream.drop_table(T, stream.tso(t + 2))
    stream.ddl("app", "t", "RECOVER TABLE `app`.`t`", stream.tso(t + 3), "CREATE")
    stream.insert(T, {"id": 3, "v": "c"}, stream.tso(t + 4))
    stream.watermark(stream.tso(t + 5))
    run(stream)
    assert {k[0]: v["v"] for k, v in delta_rows(spark, str(lake), T).items()} == {1: "a", 2: "b", 3: "c"}
    detail = DeltaTable.forPath(spark, located(lake, T)).detail().first()
    assert detail["properties"].get("ticdc.retired", "no") == "no"
    assert run(stream).global_watermark == stream.tso(t + 5)  # again: revived once, nothing added
    assert len(delta_rows(spark, str(lake), T)) == 3
    # Dropped again, then back under another name: the old name stays retired.
    t2 = TableId("app", "t2")
    stream.drop_table(T, stream.tso(t + 6))
    stream.ddl("app", "t2", "FLASHBACK TABLE `app`.`t` TO `t2`", stream.tso(t + 7), "CREATE")
    stream.watermark(stream.tso(t + 8))
    run(stream)
    assert {k[0]: v["v"] for k, v in delta_rows(spark, str(lake), t2).items()} == {1: "a", 2: "b", 3: "c"}
    old = DeltaTable.forPath(spark, located(lake, T)).detail().first()["properties"]["ticdc.retired"]
    assert old.startswith("dropped by DROP TABLE")
    # Onto a name that is live, TiDB refuses it: a DDL that arrives so is not the mirror's to apply.
    stream.ddl("app", "t2", "FLASHBACK TABLE `app`.`t` TO `t2`", stream.tso(t + 9), "CREATE")
    stream.watermark(stream.tso(t + 10))
    with pytest.raises(TablesStopped, match=r"app\.t2 is a live table in the mirror"):
        run(stream)


def test_recover_table_without_the_mirrors_copy_stops_it_and_offers_a_load(spark, run, lake):
    stream, t = simple_stream(partitions=1)
    stream.insert(T, {"id": 1, "v": "a"}, stream.tso(t))
    stream.drop_table(T, stream.tso(t + 1))
    stream.ddl("app", "t", "RECOVER TABLE `app`.`t`", stream.tso(t + 2), "CREATE")
    stream.watermark(stream.tso(t + 3))
    with pytest.raises(TablesStopped, match=r'drop-table is "delete".*ticdc-ingest load --force'):
        run(stream, **{"drop-table": "delete"})


def test_partition_outside_the_configured_set_is_a_configuration_error(spark, run, lake):
    stream, t = simple_stream(partitions=3)
    stream.watermark(stream.tso(t))
    with pytest.raises(ConfigError, match="records found in cdc/2"):
        run(stream, partitions="cdc:0-1")


def test_catalog_tables_follow_the_naming_template(spark, run, lake):
    stream, t = simple_stream()
    stream.insert(T, {"id": 1, "v": "a"}, stream.tso(t))
    stream.watermark(stream.tso(t + 1))
    run(stream, **{"table-name-template": "mirror_{database}.{table}"})
    assert [r["v"] for r in spark.table("mirror_app.t").collect()] == ["a"]


def test_a_partition_first_seen_after_g_moved_past_its_rows_is_refused(spark, run, lake):
    # Discovered partition set: P1 was never seen, so G moved to 120 on P0 alone; P1 then shows a row at
    # 110 that the mirror can no longer place. Stop instead of dropping it as "older than A_T".
    stream, t = simple_stream()
    stream.insert(T, {"id": 1, "v": "a"}, stream.tso(t), partition=0)
    stream.watermark(stream.tso(t + 2), partitions=[0])
    run(stream)
    stream.insert(T, {"id": 2, "v": "b"}, stream.tso(t + 1), partition=1)
    stream.watermark(stream.tso(t + 3))
    with pytest.raises(ConfigError, match=r"cdc/1 appeared only now but holds changes at or below the G"):
        run(stream)


def test_each_line_that_is_not_a_record_is_counted_and_quarantined(spark, run, lake):
    stream, t = simple_stream()
    stream.insert(T, {"id": 1, "v": "a"}, stream.tso(t))
    stream.watermark(stream.tso(t + 1))
    stream.records.extend([{"hello": "world"}, {"hello": "again"}, {"hello": "world"}])
    result = run(stream, **{"max-bad-ratio": "0.9"})
    assert result.quarantined == 3
    assert spark.read.format("delta").load(f"{lake}/_ingest/quarantine").count() == 3
    assert rows(spark, lake) == {1: {"id": 1, "v": "a"}}


def test_lines_that_are_not_records_do_not_count_as_a_partition(spark, run, lake, tmp_path):
    stream, t = simple_stream()
    stream.insert(T, {"id": 1, "v": "a"}, stream.tso(t))
    stream.watermark(stream.tso(t + 1))
    stream.records.append({"hello": "world"})
    result = run(stream, **{"max-bad-ratio": "0.5"})
    assert result.global_watermark == stream.tso(t + 1)
    assert rows(spark, lake) == {1: {"id": 1, "v": "a"}}
    assert result.quarantined == 1
