"""Scenarios of consumer-semantics.md §10 (Canal-JSON), each checked against the spec's expected table.

Scenarios of other protocols (15 and 28: Simple; 33 and 34: Avro) are not here; scenarios 1-4, 11-13,
23, 35, 36, 39, 40 are in test_pipeline.py and 24 in test_crash.py. Messages are emitted raw where a
scenario needs an order the upstream model cannot produce.
"""

from __future__ import annotations

import shutil
from typing import Any

import orjson
import pytest
from delta.tables import DeltaTable
from mirror import delta_rows, located

from ingest.config import IngestConfig
from ingest.errors import ConfigError, TablesStopped
from ingest.model import PartitionId, TableId
from ingest.pipeline import run_files
from ingest.state import progress as progress_module
from ingest.state.progress import load_progress
from testkit.sample import SIMPLE_FOR_TESTS, Stream

T = TableId("app", "t")
UK_TABLE = (
    "CREATE TABLE `app`.`k` (`u` varchar(10) NOT NULL, `v` int(11) DEFAULT NULL, UNIQUE KEY `uk` (`u`))"
)
K = TableId("app", "k")
TYPES = {"id": "int", "v": "varchar", "c": "int", "u": "varchar"}


def dml(
    s: Stream,
    typ: str,
    data: dict[str, Any],
    ts: float,
    partition: int,
    *,
    table: TableId = T,
    old: dict[str, Any] | None = None,
    pk: list[str] | None = None,
    types: dict[str, str] | None = None,
) -> int:
    """Append one Canal-JSON DML exactly as given (values as wire text)."""
    tso = s.tso(ts)
    mysql_types = {**TYPES, **(types or {})}
    return s.append_message(partition, {
        "id": 0, "database": table.schema, "table": table.table, "pkNames": ["id"] if pk is None else pk,
        "isDdl": False, "type": typ, "es": tso >> 18, "ts": 0, "sql": "",
        "sqlType": dict.fromkeys(data, 4), "mysqlType": {k: mysql_types[k] for k in data},
        "data": [{k: None if v is None else str(v) for k, v in data.items()}],
        "old": None if old is None else [{k: None if v is None else str(v) for k, v in old.items()}],
        "_tidb": {"commitTs": tso},
    })  # fmt: skip


def stream(partitions: int = 2) -> Stream:
    s = Stream(topic="cdc", partitions=partitions)
    s.create_table(SIMPLE_FOR_TESTS, s.tso(1))
    return s


def mirror(spark, s: Stream, tmp_path, lake, **params: str):
    directory = tmp_path / f"in-{len(list(tmp_path.glob('in-*')))}"
    s.write(directory)
    config = IngestConfig.from_params(
        {
            "input": str(directory),
            "target-path": str(lake),
            "partitions": f"cdc:0-{s.partitions - 1}",
            **params,
        }
    )
    return run_files(spark, config)


def table(spark, lake, t: TableId = T) -> dict:
    return {k[0]: v for k, v in delta_rows(spark, str(lake), t).items()}


def versions(spark, lake, t: TableId = T) -> list[dict[str, Any]]:
    """Every Delta version of a table with its rows and our commit metadata."""
    path = located(lake, t)
    result = []
    for entry in DeltaTable.forPath(spark, path).history().orderBy("version").collect():
        meta = orjson.loads(entry["userMetadata"])["ticdc-ingest"] if entry["userMetadata"] else {}
        result.append(
            {
                "version": entry["version"],
                "meta": meta,
                "rows": {k[0]: v for k, v in delta_rows(spark, str(lake), t, entry["version"]).items()},
            }
        )
    return result


def test_01_basic_in_order_records_commit_ts_and_applied_watermark(spark, tmp_path):
    lake, s = tmp_path / "lake", stream()
    dml(s, "INSERT", {"id": 1, "v": "a"}, 100, 0)
    dml(s, "UPDATE", {"id": 1, "v": "b"}, 110, 0, old={"id": 1, "v": "a"})
    s.watermark(s.tso(120))
    result = mirror(spark, s, tmp_path, lake)
    assert table(spark, lake) == {1: {"id": 1, "v": "b"}}
    assert result.tables[T].applied_ts == s.tso(120)
    stored = (
        spark.read.format("delta")
        .load(located(lake, TableId("app", "t")))
        .select("_tidb_commit_ts")
        .first()[0]
    )
    assert stored == s.tso(110)
    assert versions(spark, lake)[-1]["meta"]["applied_ts"] == s.tso(120)  # visible in DESCRIBE HISTORY


def test_05_replay_must_not_resurrect(spark, tmp_path):
    lake, s = tmp_path / "lake", stream()
    dml(s, "INSERT", {"id": 1, "v": "a"}, 100, 0)
    s.watermark(s.tso(105))
    mirror(spark, s, tmp_path, lake)
    dml(s, "DELETE", {"id": 1, "v": "a"}, 110, 0)
    s.watermark(s.tso(115))
    mirror(spark, s, tmp_path, lake)
    dml(s, "INSERT", {"id": 1, "v": "a"}, 100, 0)
    dml(s, "DELETE", {"id": 1, "v": "a"}, 110, 0)
    s.watermark(s.tso(120))
    mirror(spark, s, tmp_path, lake)
    assert table(spark, lake) == {}
    for v in versions(spark, lake):
        if v["meta"].get("applied_ts", 0) >= s.tso(115):
            assert 1 not in v["rows"], v["version"]


def test_06_earlier_ts_behind_later_ts_is_not_lost(spark, tmp_path):
    lake, s = tmp_path / "lake", stream()
    dml(s, "INSERT", {"id": 3, "v": "y"}, 120, 0)
    dml(s, "INSERT", {"id": 2, "v": "x"}, 110, 0)
    dml(s, "INSERT", {"id": 3, "v": "y"}, 120, 0)
    s.watermark(s.tso(125))
    mirror(spark, s, tmp_path, lake)
    assert table(spark, lake) == {2: {"id": 2, "v": "x"}, 3: {"id": 3, "v": "y"}}


def test_07_late_row_below_its_partition_watermark_but_above_g_is_kept(spark, tmp_path):
    lake, s = tmp_path / "lake", stream()
    s.watermark(s.tso(130), partitions=[0])
    dml(s, "INSERT", {"id": 5, "v": "z"}, 120, 0)
    s.watermark(s.tso(110), partitions=[1])
    mirror(spark, s, tmp_path, lake)
    s.watermark(s.tso(130), partitions=[1])
    mirror(spark, s, tmp_path, lake)
    assert table(spark, lake) == {5: {"id": 5, "v": "z"}}


def test_08_pk_move_across_partitions_is_never_seen_half_done(spark, tmp_path):
    lake, s = tmp_path / "lake", stream()
    dml(s, "INSERT", {"id": 1, "v": "a"}, 100, 0)
    s.watermark(s.tso(105))
    mirror(spark, s, tmp_path, lake)
    dml(s, "INSERT", {"id": 2, "v": "a"}, 110, 1)
    s.watermark(s.tso(115), partitions=[1])
    mirror(spark, s, tmp_path, lake)  # P0 lags: G stays 105
    dml(s, "DELETE", {"id": 1, "v": "a"}, 110, 0)
    s.watermark(s.tso(115), partitions=[0])
    mirror(spark, s, tmp_path, lake)
    assert table(spark, lake) == {2: {"id": 2, "v": "a"}}
    for v in versions(spark, lake):
        assert set(v["rows"]) in ({1}, {2}, set()) and not (
            v["meta"].get("applied_ts") and v["rows"] == {} and v["meta"]["applied_ts"] >= s.tso(105)
        )


def test_09_split_unique_key_change_with_halves_reversed(spark, tmp_path):
    lake, s = tmp_path / "lake", Stream(topic="cdc", partitions=2)
    s.create_table(
        "CREATE TABLE `app`.`t` (`id` int(11) NOT NULL, `u` varchar(10) NOT NULL, "
        "`v` varchar(20) DEFAULT NULL, PRIMARY KEY (`id`), UNIQUE KEY `uk` (`u`))",
        s.tso(1),
    )
    dml(s, "INSERT", {"id": 1, "u": "x", "v": "a"}, 100, 0)
    s.watermark(s.tso(105))
    mirror(spark, s, tmp_path, lake)
    dml(s, "INSERT", {"id": 1, "u": "y", "v": "a"}, 110, 1)  # read first
    dml(s, "DELETE", {"id": 1, "u": "x", "v": "a"}, 110, 0)
    s.watermark(s.tso(115))
    mirror(spark, s, tmp_path, lake)
    assert table(spark, lake) == {1: {"id": 1, "u": "y", "v": "a"}}


def test_10_raw_update_chain(spark, tmp_path):
    lake, s = tmp_path / "lake", stream()
    dml(s, "INSERT", {"id": 1, "v": "p"}, 100, 0)
    dml(s, "INSERT", {"id": 2, "v": "q"}, 100, 0)
    s.watermark(s.tso(105))
    mirror(spark, s, tmp_path, lake)
    dml(s, "UPDATE", {"id": 2, "v": "p"}, 110, 0, old={"id": 1, "v": "p"})
    dml(s, "UPDATE", {"id": 3, "v": "q"}, 110, 0, old={"id": 2, "v": "q"})
    s.watermark(s.tso(115))
    mirror(spark, s, tmp_path, lake)
    assert table(spark, lake) == {2: {"id": 2, "v": "p"}, 3: {"id": 3, "v": "q"}}


def test_11_pk_swap_in_raw_form(spark, tmp_path):
    lake, s = tmp_path / "lake", stream()
    dml(s, "INSERT", {"id": 1, "v": "a"}, 100, 0)
    dml(s, "INSERT", {"id": 2, "v": "b"}, 100, 1)
    s.watermark(s.tso(105))
    mirror(spark, s, tmp_path, lake)
    dml(s, "UPDATE", {"id": 2, "v": "a"}, 110, 1, old={"id": 1, "v": "a"})
    dml(s, "UPDATE", {"id": 1, "v": "b"}, 110, 0, old={"id": 2, "v": "b"})
    s.watermark(s.tso(115))
    mirror(spark, s, tmp_path, lake)
    assert table(spark, lake) == {1: {"id": 1, "v": "b"}, 2: {"id": 2, "v": "a"}}


def test_14_watermark_equal_to_ddl_ts_read_before_the_ddl(spark, tmp_path):
    lake, s = tmp_path / "lake", stream()
    dml(s, "INSERT", {"id": 1, "v": "a"}, 105, 0)
    s.watermark(s.tso(105))
    mirror(spark, s, tmp_path, lake)
    s.ddl("app", "t", "ALTER TABLE `t` ADD COLUMN `c` int(11) DEFAULT NULL", s.tso(105), "ALTER")
    s.watermark(s.tso(110))
    mirror(spark, s, tmp_path, lake)
    assert table(spark, lake) == {1: {"id": 1, "v": "a", "c": None}}


def test_16_ddl_replay_changes_nothing(spark, tmp_path):
    lake, s = tmp_path / "lake", stream()
    dml(s, "INSERT", {"id": 1, "v": "a"}, 100, 1)
    s.ddl("app", "t", "ALTER TABLE `t` ADD COLUMN `c` int(11) DEFAULT NULL", s.tso(105), "ALTER")
    ddl_offset = len([r for r in s.records if r["partition"] == 0]) - 1
    dml(s, "INSERT", {"id": 2, "v": "b", "c": 5}, 110, 1)
    s.watermark(s.tso(115))
    mirror(spark, s, tmp_path, lake)
    before = versions(spark, lake)
    s.replay(0, ddl_offset, ddl_offset)
    dml(s, "INSERT", {"id": 2, "v": "b", "c": 5}, 110, 1)
    s.watermark(s.tso(116))
    mirror(spark, s, tmp_path, lake)
    assert table(spark, lake) == {1: {"id": 1, "v": "a", "c": None}, 2: {"id": 2, "v": "b", "c": 5}}
    after = versions(spark, lake)
    assert [v["rows"] for v in after] == [v["rows"] for v in before] + [
        v["rows"] for v in after[len(before) :]
    ]
    assert all(v["rows"] == before[-1]["rows"] for v in after[len(before) :])


def test_20_truncate_and_a_replay_from_before_it(spark, tmp_path):
    lake, s = tmp_path / "lake", stream()
    dml(s, "INSERT", {"id": 1, "v": "a"}, 100, 0)
    dml(s, "INSERT", {"id": 2, "v": "b"}, 100, 1)
    s.watermark(s.tso(105))
    mirror(spark, s, tmp_path, lake)
    s.ddl("app", "t", "TRUNCATE TABLE `app`.`t`", s.tso(110), "TRUNCATE")
    dml(s, "INSERT", {"id": 3, "v": "c"}, 120, 1)
    s.watermark(s.tso(125))
    dml(s, "INSERT", {"id": 1, "v": "a"}, 100, 0)
    s.watermark(s.tso(126))
    mirror(spark, s, tmp_path, lake)
    assert table(spark, lake) == {3: {"id": 3, "v": "c"}}


def test_25_rows_above_g_are_buffered_durably_and_applied_after_a_restart(spark, tmp_path):
    lake, s = tmp_path / "lake", stream()
    s.watermark(s.tso(100))
    offset = dml(s, "INSERT", {"id": 1, "v": "a"}, 130, 0)
    s.watermark(s.tso(120))
    mirror(spark, s, tmp_path, lake)
    progress = load_progress(spark, f"{lake}/_ingest", "default")
    # The read position moved on (a topic may expire the record); the row waits in the buffer instead.
    assert progress.resume[PartitionId("cdc", 0)] == offset + 2
    buffered = spark.read.format("delta").load(f"{lake}/_ingest/buffer").collect()
    assert [(r["partition"], r["offset"]) for r in buffered] == [(0, offset)]
    s.watermark(s.tso(135))
    newer = Stream(topic="cdc", partitions=2)  # the next input holds only what came after the resume point
    resume = {p.partition: offset for p, offset in progress.resume.items()}
    newer.records = [r for r in s.records if r["offset"] >= resume[r["partition"]]]
    assert not any(r["partition"] == 0 and r["offset"] == offset for r in newer.records)
    mirror(spark, newer, tmp_path, lake)
    assert table(spark, lake) == {1: {"id": 1, "v": "a"}}
    assert spark.read.format("delta").load(f"{lake}/_ingest/buffer").count() == 0


def test_25_an_empty_buffer_costs_no_commit_and_a_crash_after_a_buffer_write_loses_nothing(
    spark, tmp_path, monkeypatch
):
    lake, s = tmp_path / "lake", stream()
    dml(s, "INSERT", {"id": 1, "v": "a"}, 110, 0)
    s.watermark(s.tso(115))
    mirror(spark, s, tmp_path, lake)
    assert load_progress(spark, f"{lake}/_ingest", "default").buffered == 0
    assert not DeltaTable.isDeltaTable(spark, f"{lake}/_ingest/buffer")  # nothing pending, nothing written

    # The next run buffers a row above G, then dies before its progress commit.
    pending = dml(s, "INSERT", {"id": 2, "v": "b"}, 130, 1)
    s.watermark(s.tso(120))

    def killed(*args: object, **kwargs: object) -> None:
        raise RuntimeError("killed before the progress commit")

    monkeypatch.setattr(progress_module, "commit_progress", killed)
    with pytest.raises(RuntimeError, match="killed"):
        mirror(spark, s, tmp_path, lake)
    monkeypatch.undo()
    buffered = spark.read.format("delta").load(f"{lake}/_ingest/buffer").collect()
    assert [(r["partition"], r["offset"]) for r in buffered] == [(1, pending)]

    # The restart reads from the last committed resume offsets, which still hold the row; G passes it.
    s.watermark(s.tso(135))
    mirror(spark, s, tmp_path, lake)
    assert table(spark, lake) == {1: {"id": 1, "v": "a"}, 2: {"id": 2, "v": "b"}}
    after = load_progress(spark, f"{lake}/_ingest", "default")
    assert after.buffered == 0 and after.pending_rows == {}


def test_26_large_transaction_is_applied_whole(spark, tmp_path):
    lake, s = tmp_path / "lake", stream()
    for i in range(1000):
        dml(s, "INSERT", {"id": i, "v": "x"}, 200, i % 2)
        if i == 900:
            s.watermark(s.tso(199))
    mirror(spark, s, tmp_path, lake)
    assert table(spark, lake) == {}
    s.watermark(s.tso(205))
    mirror(spark, s, tmp_path, lake)
    assert len(table(spark, lake)) == 1000
    counts = [len(v["rows"]) for v in versions(spark, lake)]
    assert set(counts) == {0, 1000}


def test_27_same_commit_ts_different_transactions(spark, tmp_path):
    lake, s = tmp_path / "lake", stream()
    s.ddl("app", "t", "CREATE INDEX `iv` ON `t` (`v`)", s.tso(200), "CINDEX")  # recorded, changes nothing
    dml(s, "INSERT", {"id": 1, "v": "a"}, 300, 0)
    dml(s, "INSERT", {"id": 9, "v": "z"}, 300, 1)
    s.watermark(s.tso(305))
    mirror(spark, s, tmp_path, lake)
    assert table(spark, lake) == {1: {"id": 1, "v": "a"}, 9: {"id": 9, "v": "z"}}
    assert versions(spark, lake)[-1]["meta"]["ddl_ts"] == s.tso(200)


def test_29_unique_key_only_table_is_keyed_from_its_ddl(spark, tmp_path):
    lake, s = tmp_path / "lake", stream()
    s.ddl("app", "k", UK_TABLE, s.tso(50), "CREATE")
    dml(s, "INSERT", {"u": "x", "v": 1}, 100, 0, table=K, pk=[])
    dml(s, "DELETE", {"u": "x", "v": 1}, 110, 0, table=K, pk=[])
    dml(s, "INSERT", {"u": "y", "v": 1}, 110, 1, table=K, pk=[])
    s.watermark(s.tso(115))
    mirror(spark, s, tmp_path, lake)
    assert table(spark, lake, K) == {"y": {"u": "y", "v": 1}}


def test_31_only_updated_columns_in_old(spark, tmp_path):
    lake, s = tmp_path / "lake", stream()
    dml(s, "INSERT", {"id": 1, "v": "a"}, 100, 0)
    dml(s, "UPDATE", {"id": 1, "v": "b"}, 110, 0, old={"v": "a"})
    s.watermark(s.tso(115))
    mirror(spark, s, tmp_path, lake)
    assert table(spark, lake) == {1: {"id": 1, "v": "b"}}


def test_32_delete_with_key_columns_only(spark, tmp_path):
    lake, s = tmp_path / "lake", stream()
    dml(s, "INSERT", {"id": 1, "v": "a"}, 100, 0)
    dml(s, "INSERT", {"id": 2, "v": "b"}, 100, 0)
    s.watermark(s.tso(105))
    mirror(spark, s, tmp_path, lake)
    dml(s, "DELETE", {"id": 1}, 110, 0)
    s.watermark(s.tso(115))
    mirror(spark, s, tmp_path, lake)
    assert table(spark, lake) == {2: {"id": 2, "v": "b"}}


def test_38_split_unique_key_change_replayed_across_a_batch_boundary(spark, tmp_path):
    lake, s = tmp_path / "lake", stream()
    dml(s, "INSERT", {"id": 1, "v": "x"}, 100, 0)
    dml(s, "DELETE", {"id": 1, "v": "x"}, 120, 0)
    dml(s, "INSERT", {"id": 1, "v": "y"}, 120, 0)
    s.watermark(s.tso(120))
    mirror(spark, s, tmp_path, lake)
    dml(s, "DELETE", {"id": 1, "v": "x"}, 120, 0)
    s.watermark(s.tso(121))
    mirror(spark, s, tmp_path, lake)
    dml(s, "INSERT", {"id": 1, "v": "y"}, 120, 0)
    s.watermark(s.tso(122))
    mirror(spark, s, tmp_path, lake)
    for v in versions(spark, lake):
        if v["meta"].get("applied_ts", 0) >= s.tso(120):
            assert v["rows"] == {1: {"id": 1, "v": "y"}}, v["version"]


def test_42_reread_after_losing_progress_changes_nothing(spark, tmp_path):
    lake, s = tmp_path / "lake", stream()
    dml(s, "INSERT", {"id": 1, "v": "a"}, 100, 0)
    s.watermark(s.tso(100))
    dml(s, "UPDATE", {"id": 1, "v": "b"}, 110, 0, old={"id": 1, "v": "a"})
    s.watermark(s.tso(120))
    mirror(spark, s, tmp_path, lake)
    head = len(versions(spark, lake))
    shutil.rmtree(f"{lake}/_ingest/progress")  # the checkpoint is gone: everything is read again
    result = mirror(spark, s, tmp_path, lake)
    assert table(spark, lake) == {1: {"id": 1, "v": "b"}}
    assert len(versions(spark, lake)) == head
    assert result.tables[T].upserted == 0


def retired_mark(spark, lake, t: TableId) -> str:
    detail = DeltaTable.forPath(spark, located(lake, t)).detail().first()
    return detail["properties"].get("ticdc.retired", "")


def test_17_replayed_drop_column_after_re_add_changes_nothing(spark, tmp_path):
    lake, s = tmp_path / "lake", stream()
    s.ddl("app", "t", "ALTER TABLE `t` ADD COLUMN `c` int(11) DEFAULT NULL", s.tso(100), "ALTER")
    dml(s, "INSERT", {"id": 1, "v": "a", "c": 3}, 101, 0)
    s.ddl("app", "t", "ALTER TABLE `t` DROP COLUMN `c`", s.tso(105), "ALTER")
    drop_offset = len([r for r in s.records if r["partition"] == 0]) - 1
    s.ddl("app", "t", "ALTER TABLE `t` ADD COLUMN `c` varchar(10) DEFAULT NULL", s.tso(120), "ALTER")
    dml(s, "INSERT", {"id": 2, "v": "b", "c": "x"}, 121, 1, types={"c": "varchar"})
    s.watermark(s.tso(125))
    mirror(spark, s, tmp_path, lake)
    s.replay(0, drop_offset, drop_offset)
    s.watermark(s.tso(126))
    mirror(spark, s, tmp_path, lake)
    schema = {
        f.name: f.dataType.simpleString()
        for f in spark.read.format("delta").load(located(lake, TableId("app", "t"))).schema
    }
    assert schema["c"] == "string"
    assert table(spark, lake) == {1: {"id": 1, "v": "a", "c": None}, 2: {"id": 2, "v": "b", "c": "x"}}


def test_18_same_ts_multi_table_rename_applied_once_and_replays_ignored(spark, tmp_path):
    lake, s = tmp_path / "lake", stream()
    s.ddl("app", "a", SIMPLE_FOR_TESTS.replace("`t`", "`a`"), s.tso(10), "CREATE")
    s.ddl("app", "b", SIMPLE_FOR_TESTS.replace("`t`", "`b`"), s.tso(10), "CREATE")
    dml(s, "INSERT", {"id": 1, "v": "a"}, 100, 0, table=TableId("app", "a"))
    dml(s, "INSERT", {"id": 2, "v": "b"}, 100, 1, table=TableId("app", "b"))
    s.ddl("app", "a2", "RENAME TABLE `app`.`a` TO `app`.`a2`", s.tso(200), "RENAME")
    s.ddl("app", "b2", "RENAME TABLE `app`.`b` TO `app`.`b2`", s.tso(200), "RENAME")
    s.watermark(s.tso(205))
    mirror(spark, s, tmp_path, lake)
    first = {t: len(versions(spark, lake, TableId("app", t))) for t in ("a2", "b2")}
    p0 = len([r for r in s.records if r["partition"] == 0])
    s.replay(0, p0 - 3, p0 - 2)  # both RENAME messages again
    s.watermark(s.tso(206))
    mirror(spark, s, tmp_path, lake)
    assert table(spark, lake, TableId("app", "a2")) == {1: {"id": 1, "v": "a"}}
    assert table(spark, lake, TableId("app", "b2")) == {2: {"id": 2, "v": "b"}}
    assert {t: len(versions(spark, lake, TableId("app", t))) for t in ("a2", "b2")} == first
    assert retired_mark(spark, lake, TableId("app", "a")) == "renamed to app.a2"


def test_19_ddls_of_different_tables_out_of_ts_order(spark, tmp_path):
    lake, s = tmp_path / "lake", stream()
    s.ddl("app", "u", SIMPLE_FOR_TESTS.replace("`t`", "`u`"), s.tso(10), "CREATE")
    s.ddl("app", "u", "ALTER TABLE `u` ADD COLUMN `c` int(11) DEFAULT NULL", s.tso(210), "ALTER")
    s.ddl("app", "t", "ALTER TABLE `t` ADD COLUMN `c` int(11) DEFAULT NULL", s.tso(205), "ALTER")
    dml(s, "INSERT", {"id": 1, "v": "t", "c": 7}, 207, 1)
    dml(s, "INSERT", {"id": 2, "v": "u", "c": 8}, 212, 1, table=TableId("app", "u"))
    s.watermark(s.tso(215))
    mirror(spark, s, tmp_path, lake)
    assert table(spark, lake) == {1: {"id": 1, "v": "t", "c": 7}}
    assert table(spark, lake, TableId("app", "u")) == {2: {"id": 2, "v": "u", "c": 8}}


def test_21_drop_and_create_of_the_same_name(spark, tmp_path):
    lake, s = tmp_path / "lake", stream()
    dml(s, "INSERT", {"id": 1, "v": "a"}, 100, 0)
    s.ddl("app", "t", "DROP TABLE `app`.`t`", s.tso(110), "ERASE")
    s.ddl(
        "app",
        "t",
        "CREATE TABLE `app`.`t` (`id` int(11) NOT NULL, `w` varchar(20) DEFAULT NULL, PRIMARY KEY (`id`))",
        s.tso(115),
        "CREATE",
    )
    dml(s, "INSERT", {"id": 2, "w": "z"}, 120, 1, types={"w": "varchar"})
    s.watermark(s.tso(125))
    mirror(spark, s, tmp_path, lake)
    dml(s, "INSERT", {"id": 1, "v": "a"}, 100, 0)  # a replay from before the DROP
    s.watermark(s.tso(126))
    mirror(spark, s, tmp_path, lake)
    assert table(spark, lake) == {2: {"id": 2, "w": "z"}}
    assert retired_mark(spark, lake, T) == "no"


def test_22_rename_moves_rows_and_replays_to_the_old_name_are_dropped(spark, tmp_path):
    lake, s = tmp_path / "lake", stream()
    dml(s, "INSERT", {"id": 1, "v": "a"}, 100, 0)
    s.ddl("app", "u", "RENAME TABLE `app`.`t` TO `app`.`u`", s.tso(110), "RENAME")
    dml(s, "INSERT", {"id": 2, "v": "b"}, 120, 1, table=TableId("app", "u"))
    s.watermark(s.tso(125))
    mirror(spark, s, tmp_path, lake)
    dml(s, "INSERT", {"id": 1, "v": "a"}, 100, 0)  # replay addressed to the old name
    s.watermark(s.tso(126))
    mirror(spark, s, tmp_path, lake)
    assert table(spark, lake, TableId("app", "u")) == {1: {"id": 1, "v": "a"}, 2: {"id": 2, "v": "b"}}
    assert retired_mark(spark, lake, T) == "renamed to app.u"


def test_30_table_without_any_key_is_refused_with_a_clear_error(spark, tmp_path):
    lake, s = tmp_path / "lake", stream()
    s.ddl("app", "nokey", "CREATE TABLE `app`.`nokey` (`a` int(11), `b` int(11))", s.tso(50), "CREATE")
    s.watermark(s.tso(60))
    with pytest.raises(TablesStopped, match=r"app.nokey has no primary key and no NOT NULL unique key"):
        mirror(spark, s, tmp_path, lake)


def test_37_drop_database_retires_every_table_of_it_after_their_rows(spark, tmp_path):
    lake, s = tmp_path / "lake", stream()
    s.ddl("app", "u", SIMPLE_FOR_TESTS.replace("`t`", "`u`"), s.tso(10), "CREATE")
    dml(s, "INSERT", {"id": 1, "v": "a"}, 100, 0)
    dml(s, "INSERT", {"id": 2, "v": "b"}, 400, 1, table=TableId("app", "u"))
    s.ddl("app", "", "DROP DATABASE `app`", s.tso(500), "QUERY")
    s.watermark(s.tso(505))
    mirror(spark, s, tmp_path, lake, **{"drop-table": "delete"})
    for t in (T, TableId("app", "u")):
        assert retired_mark(spark, lake, t).startswith("dropped by DROP DATABASE")
        assert table(spark, lake, t) == {}
        before = s.tso(500) - 1
        consistent = [v for v in versions(spark, lake, t) if v["meta"].get("consistent")]
        rows_before_drop = [v["rows"] for v in consistent if v["meta"]["applied_ts"] == before]
        assert rows_before_drop and rows_before_drop[-1] != {}  # every row applied, then dropped


def test_41_handle_key_only_message_stops_the_run(spark, tmp_path):
    lake, s = tmp_path / "lake", stream()
    tso = s.tso(110)
    s.append_message(
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
            "_tidb": {"commitTs": tso, "onlyHandleKey": True},
        },
    )
    s.watermark(s.tso(115))
    with pytest.raises(ConfigError, match="handle-key-only message: the full row must be read back"):
        mirror(spark, s, tmp_path, lake)
