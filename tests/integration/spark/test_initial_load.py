"""Initial load from a Dumpling export, then the change stream: the mirror equals upstream, no gap, no dup.

The upstream history is the model in ``testkit.sample``; the export is what Dumpling writes for the model's
state at the snapshot TSO S (``tests/dumpling_export.py``); the stream is everything TiCDC sends when started
before S, so it repeats changes the snapshot already holds.
"""

import gzip
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal

import orjson
import pytest
from dumpling_export import Dialect, write_export
from mirror import delta_rows, expected_rows, located
from pyspark.sql import functions as F

from ingest.cli import main
from ingest.commands import changes
from ingest.commands.load import load_dumpling
from ingest.config import IngestConfig
from ingest.errors import ChangesRefused, ConfigError
from ingest.lake import delta_io
from ingest.load_config import LoadConfig
from ingest.model import TableId
from ingest.pipeline import run_files
from ingest.state import progress, table_state
from testkit.sample import CUSTOMERS, ORDERS, SIMPLE_FOR_TESTS, STOCK, Stream

NOTES = """CREATE TABLE `app`.`notes` (
  `id` int(11) NOT NULL,
  `title` varchar(100) DEFAULT NULL,
  `body` text DEFAULT NULL,
  `raw` blob DEFAULT NULL,
  `flags` bit(10) DEFAULT NULL,
  `kind` enum('draft','Final','with space') DEFAULT NULL,
  `amount` decimal(30,10) DEFAULT NULL,
  `at` datetime(3) DEFAULT NULL,
  PRIMARY KEY (`id`)
)"""
ADD_PRIORITY = "ALTER TABLE `app`.`notes` ADD COLUMN `priority` int(11) NOT NULL DEFAULT '5'"
# The table as Dumpling sees it at the snapshot: the column added before S is part of it.
NOTES_AT_S = NOTES.replace("  PRIMARY KEY", "  `priority` int(11) NOT NULL DEFAULT '5',\n  PRIMARY KEY")

AWKWARD = [
    "it's", 'say "hi"', "back\\slash", "ends with \\", "line1\nline2\r\nline3", "\\N", "NULL", "",
    "tab\there", "comma, semi; paren) (", "nul \x00 byte", "ctrl-z \x1a", "ü日本語😀 «guillemets»", "a|+|b",
]  # fmt: skip


def _history():
    """Changes before S, at S and after S, with watermarks all along; returns the stream, S and the
    CREATE TABLE of every table as of S."""
    s = Stream(topic="tidb_cdc", partitions=2, tz_name="Asia/Shanghai")
    customers = s.create_table(CUSTOMERS, s.tso(1))
    orders = s.create_table(ORDERS, s.tso(2))
    stock = s.create_table(STOCK, s.tso(3))
    notes = s.create_table(NOTES, s.tso(4))
    s.watermark(s.tso(4))
    for i in range(5):
        s.insert(customers, {
            "id": 1001 + i, "name": AWKWARD[i], "email": None if i == 2 else f"c{i}@example.com",
            "balance": Decimal(f"{(i + 1) * 137.25:.2f}"), "vip": i % 2,
            "signed_up_at": datetime(2024, 3, 10, 1 + i, 59, 59, 123000, tzinfo=timezone.utc),
            "birthday": date(1970 + i, 1 + i, 10 + i) if i % 3 else None,
        }, s.tso(10 + i * 0.1))  # fmt: skip
    order_ids = [18446744073709551615, 9_000_000_000_000_000_001, 1, 2]
    for n, order_id in enumerate(order_ids):
        s.insert(orders, {
            "order_id": order_id, "customer_id": 1001 + n, "amount": Decimal(f"{19.99 * (n + 1):.2f}"),
            "status": "new", "weight_kg": [0.1, 2.5, 3.14, None][n], "score": [0.1, 1e16, -0.5, None][n],
            "placed_at": datetime(2026, 11, 20, 9, n, 30, 250000 + n), "note": AWKWARD[-1 - n],
            "payload": bytes([n, 0x80 | n, 0x3C, 0x26, 0x0A, 0x22, 0x5C, 0x00, 0x0D]),
        }, s.tso(11 + n * 0.1))  # fmt: skip
    for n in range(3):
        s.insert(stock, {
            "sku": f"SKU-{n:04d}", "on_hand": 4294967295 if n == 0 else 10 * n, "reserved": n,
            "checksum": bytes([0x00, 0x7F, 0x80 + n, 0xFF]),
            "thumbnail": [bytes(range(256)), bytes([0x5C, 0x2C, 0x22, 0x0A, n]), None][n],
            "updated_at": datetime(2026, 3, 29, 0, 59, 0, tzinfo=timezone.utc) + timedelta(hours=n),
        }, s.tso(12 + n * 0.1))  # fmt: skip
    for i, text in enumerate(AWKWARD):
        s.insert(notes, {
            "id": i + 1, "title": text, "body": text * 3 if i % 2 else None,
            "raw": text.encode() + bytes([i, 255]),
            "flags": (1 << (i % 10)) | 1, "kind": ["", "draft", "Final", "with space"][i % 4],
            "amount": Decimal(f"-{i}.0000000123"),
            "at": datetime(2026, 1, 1, 0, 0, i, 123000),
        }, s.tso(13 + i * 0.01))  # fmt: skip
    s.watermark(s.tso(15))
    # A DDL before S with a default back-fill: applied again after the load, it would overwrite priority.
    s.add_column(notes, ADD_PRIORITY, s.tso(16), "priority", "int", default=5)
    s.update(notes, (1,), {"priority": 9, "title": "updated before S"}, s.tso(17))
    s.insert(notes, {"id": 100, "title": "late row", "priority": 1, "kind": "Final"}, s.tso(17))
    s.update(customers, (1002,), {"balance": Decimal("1999.50")}, s.tso(18))
    s.delete(orders, (2,), s.tso(18))
    s.update(stock, ("SKU-0001",), {"on_hand": 0}, s.tso(18))
    s.watermark(s.tso(19))
    snapshot = s.tso(30)
    s.insert(customers, {
        "id": 7777, "name": "inserted just before S", "email": None, "balance": Decimal("1.00"), "vip": 0,
        "signed_up_at": datetime(2026, 11, 20, 9, 0, tzinfo=timezone.utc), "birthday": None,
    }, snapshot - 1)  # fmt: skip
    s.update(orders, (1,), {"status": "paid at S"}, snapshot)
    s.delete(stock, ("SKU-0002",), snapshot)
    s.watermark(s.tso(29))
    # After S: what the stream must add to the snapshot.
    s.delete(customers, (7777,), s.tso(31))
    s.update(notes, (100,), {"body": "changed after S", "priority": 2}, s.tso(31))
    s.insert(notes, {"id": 101, "title": "after S", "raw": bytes(range(256)), "priority": 3}, s.tso(31))
    s.update(customers, (1001,), {"id": 2001}, s.tso(32))  # key change: DELETE + INSERT at one commitTs
    s.watermark(s.tso(32))
    s.truncate(stock, s.tso(33))
    s.insert(stock, {
        "sku": "SKU-9999", "on_hand": 1, "reserved": 0, "checksum": b"\x01\x02\x03\x04", "thumbnail": None,
        "updated_at": datetime(2026, 11, 20, 9, 0, tzinfo=timezone.utc),
    }, s.tso(34))  # fmt: skip
    late = s.create_table(SIMPLE_FOR_TESTS, s.tso(35))
    s.insert(late, {"id": 1, "v": "created after S"}, s.tso(36))
    s.update(orders, (18446744073709551615,), {"amount": Decimal("0.01")}, s.tso(36))
    s.delete(notes, (1,), s.tso(36))
    s.watermark(s.tso(40))
    creates = {customers: CUSTOMERS, orders: ORDERS, stock: STOCK, notes: NOTES_AT_S}
    return s, snapshot, creates, late


def _table_path(lake, table: TableId) -> str:
    return located(lake, table)


def _assert_loaded_at_snapshot(spark, lake, s, snapshot, creates):
    for table in creates:
        path = _table_path(lake, table)
        assert delta_rows(spark, str(lake), table) == expected_rows(s, table, snapshot), table
        assert table_state.read_table_state(spark, path).applied_ts == snapshot
        properties = delta_io.properties(spark, path)
        assert properties["ticdc.appliedTs"] == str(snapshot)
        assert orjson.loads(properties["ticdc.keyColumns"]) == _key(creates[table])
        stamps = spark.read.format("delta").load(path).select(F.collect_set("_tidb_commit_ts")).first()[0]
        assert stamps == [snapshot]


# On Spark Connect the same history is loaded and streamed by name (test_by_name).
def test_sql_snapshot_then_stream_equals_upstream_without_gap_or_duplicate(spark, tmp_path):
    s, snapshot, creates, late = _history()
    export = write_export(s, snapshot, tmp_path / "export", creates, data_format="sql")
    lake = tmp_path / "lake"
    params = {"input": str(export), "target-path": str(lake), "timezone": s.tz_name}
    result = load_dumpling(spark, LoadConfig.from_params(params))

    assert result.snapshot_ts == snapshot
    assert {t.table: t.rows for t in result.tables} == {t: len(s.state_at(snapshot)[t]) for t in creates}
    _assert_loaded_at_snapshot(spark, lake, s, snapshot, creates)
    with pytest.raises(ConfigError, match="already holds a mirror"):
        load_dumpling(spark, LoadConfig.from_params(params))

    # TiCDC started before S: the stream repeats everything up to S (the DDL at 16 included) and goes on.
    stream_dir = tmp_path / "stream"
    s.write(stream_dir)
    run_files(
        spark,
        IngestConfig.from_params({"input": str(stream_dir), "target-path": str(lake), "timezone": s.tz_name}),
    )
    final = s.complete_watermark()
    for table in [*creates, late]:
        assert delta_rows(spark, str(lake), table) == expected_rows(s, table, final), table
    assert TableId("shop", "customers") in progress.load_progress(spark, f"{lake}/_ingest", "default").tables

    # The mirror is now past the snapshot: loading it again, even forced, would lose (S, G].
    with pytest.raises(ConfigError, match="older than what the mirror already applied"):
        load_dumpling(spark, LoadConfig.from_params(params | {"force": "true"}))


def test_csv_with_its_dialect_loads_the_snapshot_and_quarantines_an_unreadable_line(spark, tmp_path):
    s, snapshot, creates, _ = _history()
    dialect = Dialect(separator="|+|", delimiter="'", null_value="NULL", line_terminator="#\n")
    export = write_export(
        s, snapshot, tmp_path / "export", creates, data_format="csv", dialect=dialect, rows_per_file=4
    )
    broken = export / "app.notes.000000001.csv"
    garbage = b"42|+|'never closed"
    broken.write_bytes(broken.read_bytes() + garbage + b"#\n")
    for packed in (export / "shop.customers.000000000.csv", export / "shop.customers-schema.sql"):
        packed.with_name(packed.name + ".gz").write_bytes(gzip.compress(packed.read_bytes()))
        packed.unlink()
    lake = tmp_path / "lake"
    params = {
        "input": str(export), "target-path": str(lake), "timezone": s.tz_name, "csv-separator": "|+|",
        "csv-delimiter": "'", "csv-null-value": "NULL", "csv-line-terminator": "#\\n", "max-bad-ratio": "0.2",
    }  # fmt: skip
    result = load_dumpling(spark, LoadConfig.from_params(params))

    assert {t.table: t.quarantined for t in result.tables}[TableId("app", "notes")] == 1
    _assert_loaded_at_snapshot(spark, lake, s, snapshot, creates)
    (bad,) = spark.read.format("delta").load(f"{lake}/_ingest/quarantine").collect()
    assert (bad["table"], bytes(bad["value"]), bad["error_class"]) == ("app.notes", garbage, "DecodeError")
    assert bad["topic"].endswith("app.notes.000000001.csv") and "not closed" in bad["error"]


def _key(create_sql: str) -> list[str]:
    from ingest.mysql.ddl import parse_ddl

    return list(parse_ddl(create_sql, "x").schema.key)


def test_cli_load_refuses_a_second_load_unless_forced(spark, tmp_path, capsys):
    s = Stream(tz_name="UTC")
    table = s.create_table(SIMPLE_FOR_TESTS, s.tso(1))
    for i in range(3):
        s.insert(table, {"id": i, "v": None if i == 1 else f"row {i}"}, s.tso(2))
    snapshot = s.tso(3)
    export = write_export(s, snapshot, tmp_path / "export", {table: SIMPLE_FOR_TESTS}, data_format="csv")
    lake = tmp_path / "lake"
    argv = ["load", "--input", str(export), "--target-path", str(lake)]

    assert main(argv) == 0
    assert "loaded 1 tables, 3 rows" in capsys.readouterr().out
    assert main(argv) == 2
    assert "already holds a mirror" in capsys.readouterr().err
    s.update(table, (0,), {"v": "changed upstream"}, s.tso(4))
    newer = write_export(s, s.tso(5), tmp_path / "newer", {table: SIMPLE_FOR_TESTS}, data_format="csv")
    assert main(["load", "--input", str(newer), "--target-path", str(lake), "--force"]) == 0
    assert delta_rows(spark, str(lake), table) == expected_rows(s, table, s.tso(5))
    assert table_state.read_table_state(spark, _table_path(lake, table)).applied_ts == s.tso(5)
    # The changes across the forced load are refused for the table: its rows came from the export again.
    config = IngestConfig.from_params({"input": str(newer), "target-path": str(lake)})
    refused = changes.resolve(spark, config, snapshot, s.tso(5), strict=False).refused
    assert list(refused) == [table] and "was rebuilt inside the range (initial load" in refused[table]
    with pytest.raises(ChangesRefused, match=r"app\.\w+: was rebuilt inside the range \(initial load"):
        changes.changes(spark, config, snapshot, s.tso(5))
