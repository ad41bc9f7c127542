"""A batch that fails on max-bad-ratio leaves no table past its bad rows: a re-run after the input is fixed
reaches upstream at G, instead of finding the fixed rows below the tables' applied TSO."""

from __future__ import annotations

import base64
import copy
from pathlib import Path

import pytest
from mirror import delta_rows, expected_rows, located

from ingest.config import IngestConfig
from ingest.errors import SchemaChangeRejected, TablesStopped, TooManyBadRecords
from ingest.model import TableId
from ingest.pipeline import run_files
from ingest.state.progress import load_progress
from ingest.state.quarantine import read as read_quarantine
from testkit.sample import Stream

TABLES = [TableId("shop", name) for name in ("a", "b", "c")]
CREATE = "CREATE TABLE `shop`.`{}` (`id` int(11) NOT NULL, `qty` int(11) DEFAULT NULL, PRIMARY KEY (`id`))"


def corrupted(stream: Stream, offset: int, old: bytes, new: bytes) -> Stream:
    """The same stream with one record's value edited, as a broken producer or a bad copy would leave it."""
    broken = copy.copy(stream)
    broken.records = [dict(r) for r in stream.records]
    record = next(r for r in broken.records if r["offset"] == offset)
    value = base64.b64decode(record["value"])
    assert old in value
    record["value"] = base64.b64encode(value.replace(old, new)).decode()
    return broken


@pytest.mark.parametrize("max_bad_ratio", ["0", "0.01"])
def test_a_failed_batch_leaves_each_table_below_its_bad_row_and_the_rerun_after_the_fix_is_exact(
    spark, tmp_path: Path, max_bad_ratio: str
):
    s = Stream(topic="cdc", partitions=1)
    for table in TABLES:
        s.create_table(CREATE.format(table.table), s.tso(1))
        s.insert(table, {"id": 1, "qty": 1}, s.tso(2))
    s.watermark(s.tso(2))
    lake = tmp_path / "lake"

    def run(stream: Stream, name: str):
        stream.write(tmp_path / name)
        params = {"input": str(tmp_path / name), "target-path": str(lake), "max-bad-ratio": max_bad_ratio}
        return run_files(spark, IngestConfig.from_params(params))

    run(s, "first")
    before = {t: delta_rows(spark, str(lake), t) for t in TABLES}
    for table in TABLES:
        s.update(table, (1,), {"qty": 2}, s.tso(3))
    s.insert(TABLES[1], {"id": 2, "qty": 7777}, s.tso(4))  # the record that arrives broken
    bad_offset = len(s.records) - 1
    for table in TABLES:
        s.update(table, (1,), {"qty": 3}, s.tso(5))
        s.insert(table, {"id": 3, "qty": 3}, s.tso(5))
    s.watermark(s.tso(6))

    with pytest.raises(TooManyBadRecords, match="max-bad-ratio"):
        run(corrupted(s, bad_offset, b'"7777"', b'"77x77"'), "broken")

    assert load_progress(spark, str(lake / "_ingest"), "default").global_watermark == s.tso(2)
    quarantined = read_quarantine(spark, str(lake / "_ingest"))
    assert quarantined is not None and quarantined.count() == 1
    # No table is past the broken row: b is upstream just below it, the others before the batch or at G.
    assert delta_rows(spark, str(lake), TABLES[1]) == expected_rows(s, TABLES[1], s.tso(4) - 1)
    for table in (TABLES[0], TABLES[2]):
        assert delta_rows(spark, str(lake), table) in (before[table], expected_rows(s, table, s.tso(6)))

    result = run(s, "fixed")
    g = s.complete_watermark()
    assert result.global_watermark == g and result.quarantined == 0
    for table in TABLES:
        assert delta_rows(spark, str(lake), table) == expected_rows(s, table, g), table


def test_every_table_stopped_in_a_parallel_batch_is_reported_and_the_rest_goes_on(spark, tmp_path: Path):
    s = Stream(topic="cdc", partitions=1)
    for table in TABLES:
        s.create_table(CREATE.format(table.table), s.tso(1))
        s.insert(table, {"id": 1, "qty": 1}, s.tso(2))
    s.watermark(s.tso(3))
    s.write(tmp_path / "first")
    lake = tmp_path / "lake"
    # type-change fail: a change Delta cannot widen stops each of the first two tables
    params = {"target-path": str(lake), "table-parallelism": "3", "type-change": "fail"}
    run_files(spark, IngestConfig.from_params({"input": str(tmp_path / "first"), **params}))
    for table in TABLES[:2]:
        sql = f"ALTER TABLE `{table.table}` MODIFY COLUMN `qty` varchar(5) DEFAULT NULL"
        s.ddl(table.schema, table.table, sql, s.tso(4), "ALTER")
    s.insert(TABLES[2], {"id": 2, "qty": 2}, s.tso(5))
    s.watermark(s.tso(6))
    s.write(tmp_path / "second")

    with pytest.raises(TablesStopped) as stopped:
        run_files(spark, IngestConfig.from_params({"input": str(tmp_path / "second"), **params}))

    assert sorted(stopped.value.stopped) == TABLES[:2]
    assert all(isinstance(exc, SchemaChangeRejected) for exc in stopped.value.stopped.values())
    assert "shop.a" in str(stopped.value) and "shop.b" in str(stopped.value)
    # The third table went on; progress moved past everything, the two tables' DDLs wait in the buffer.
    committed = load_progress(spark, f"{lake}/_ingest", "default")
    assert committed.run_id == 2 and committed.buffered == 2
    assert sorted(
        r["id"] for r in spark.read.format("delta").load(located(lake, TableId("shop", "c"))).collect()
    ) == [1, 2]
