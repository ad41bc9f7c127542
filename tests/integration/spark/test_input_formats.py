"""The files source's other inputs on real Spark and Delta: `kcat -J` envelopes and TiCDC's storage sink."""

from __future__ import annotations

from decimal import Decimal

import pytest
from mirror import delta_rows, expected_rows

from ingest.config import IngestConfig
from ingest.errors import ConfigError
from ingest.model import TableId
from ingest.pipeline import run_files
from ingest.state.progress import load_progress
from testkit.sample import ADD_POINTS, CUSTOMERS, StorageSinkWriter, Stream, build_sample

TABLES = [
    TableId("shop", "customers"),
    TableId("shop", "orders"),
    TableId("shop", "order_items"),
    TableId("inventory", "stock"),
]


def mirror(spark, input_dir, lake, **params):
    config = IngestConfig.from_params({"input": str(input_dir), "target-path": str(lake), **params})
    return run_files(spark, config)


def test_kcat_envelopes_mirror_upstream_exactly_at_g(spark, tmp_path):
    stream = build_sample()
    stream.write_kcat(tmp_path / "in")
    result = mirror(spark, tmp_path / "in", tmp_path / "lake")
    assert result.quarantined == 0
    assert result.global_watermark == stream.complete_watermark()
    for table in TABLES:
        assert delta_rows(spark, str(tmp_path / "lake"), table) == expected_rows(
            stream, table, stream.complete_watermark()
        ), table


def test_a_folder_mixing_captured_records_and_kcat_lines_is_read_line_by_line(spark, tmp_path):
    stream = build_sample()
    stream.write(tmp_path / "in", files=1)
    stream.write_kcat(tmp_path / "in", files=1)
    result = mirror(spark, tmp_path / "in", tmp_path / "lake")
    # Both spellings of each record decode to the same record, read once.
    assert result.quarantined == 0
    assert result.records == len(stream.records)
    table = TableId("shop", "orders")
    assert delta_rows(spark, str(tmp_path / "lake"), table) == expected_rows(
        stream, table, stream.complete_watermark()
    )


def test_storage_sink_layout_mirrors_upstream_at_the_checkpoint(spark, tmp_path):
    stream = build_sample()
    StorageSinkWriter(stream, tmp_path / "sink", rows_per_file=4).flush()
    # Layout as TiCDC writes it: table-version folders (one more after ADD COLUMN), date folders, CDC files.
    customers = sorted(p.parent.parent.name for p in (tmp_path / "sink/shop/customers").glob("*/*/CDC*.json"))
    assert len(set(customers)) == 2
    result = mirror(spark, tmp_path / "sink", tmp_path / "lake")
    checkpoint = stream.complete_watermark()
    assert result.global_watermark == checkpoint
    assert result.quarantined == 0
    for table in TABLES:
        assert delta_rows(spark, str(tmp_path / "lake"), table) == expected_rows(stream, table, checkpoint), (
            table
        )
    # Rows written above the checkpoint-ts stay pending.
    assert result.tables[TableId("shop", "customers")].pending == 1


def test_storage_sink_resumes_at_the_next_file_and_applies_nothing_twice(spark, tmp_path):
    s = Stream(topic="unused", partitions=1)
    customers = s.create_table(CUSTOMERS, s.tso(1))
    for i in range(7):
        s.insert(customers, {"id": i, "name": f"n{i}", "balance": Decimal("1.00"), "vip": 0}, s.tso(2 + i))
    s.watermark(s.tso(20))
    sink = StorageSinkWriter(s, tmp_path / "sink", rows_per_file=3)
    sink.flush()
    lake = tmp_path / "lake"
    first = mirror(spark, tmp_path / "sink", lake)
    assert first.global_watermark == s.tso(20)

    s.add_column(customers, ADD_POINTS, s.tso(21), "points", "int", default=100)
    s.update(customers, (3,), {"points": 7}, s.tso(22))
    s.delete(customers, (5,), s.tso(23))
    s.insert(customers, {"id": 9, "name": "n9", "balance": Decimal("2.50"), "vip": 1, "points": 1}, s.tso(24))
    s.watermark(s.tso(30))
    sink.flush()
    second = mirror(spark, tmp_path / "sink", lake)
    assert second.global_watermark == s.tso(30)
    assert delta_rows(spark, str(lake), customers) == expected_rows(s, customers, s.tso(30))
    # Only the new files and the new DDL were read: 3 row lines, 1 DDL, and one watermark per partition.
    progress = load_progress(spark, str(lake / "_ingest"), "default")
    partitions = len(progress.watermarks)
    assert second.records == 3 + 1 + partitions
    assert second.tables[customers].upserted == 2 and second.tables[customers].deleted == 1

    third = mirror(spark, tmp_path / "sink", lake)
    assert third.records == partitions  # watermarks only
    assert delta_rows(spark, str(lake), customers) == expected_rows(s, customers, s.tso(30))


def test_storage_format_without_metadata_file_says_what_to_point_at(spark, tmp_path):
    (tmp_path / "sink").mkdir()
    with pytest.raises(ConfigError, match="no 'metadata' file with a checkpoint-ts"):
        mirror(spark, tmp_path / "sink", tmp_path / "lake", **{"input-format": "storage"})
