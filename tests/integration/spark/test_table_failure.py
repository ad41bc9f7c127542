"""One table that fails inside a batch (any error, not only a refused DDL) stops only itself: the other
tables are applied and progress moves, `status` shows it STOPPED with its error, its later changes wait in
the buffer, and a later run that can apply it again lands it exactly."""

from __future__ import annotations

from pathlib import Path

import pytest
from mirror import delta_rows, expected_rows, located

from ingest.cli import main
from ingest.config import IngestConfig
from ingest.errors import TableFailed, TablesStopped
from ingest.model import TableId
from ingest.pipeline import run_files
from ingest.state.progress import load_progress
from testkit.sample import Stream

TABLES = [TableId("shop", name) for name in ("a", "b", "c")]
CREATE = "CREATE TABLE `shop`.`{}` (`id` int(11) NOT NULL, `qty` int(11) DEFAULT NULL, PRIMARY KEY (`id`))"


def test_a_table_whose_delta_log_breaks_stops_alone_and_lands_once_it_is_repaired(
    spark, tmp_path: Path, capsys
):
    s = Stream(topic="cdc", partitions=1)
    for table in TABLES:
        s.create_table(CREATE.format(table.table), s.tso(1))
        s.insert(table, {"id": 1, "qty": 1}, s.tso(2))
    s.watermark(s.tso(2))
    lake = tmp_path / "lake"
    config = IngestConfig.from_params({"input": str(tmp_path / "in"), "target-path": str(lake)})
    s.write(tmp_path / "in")
    run_files(spark, config)

    for table in TABLES:
        s.update(table, (1,), {"qty": 2}, s.tso(3))
        s.insert(table, {"id": 2, "qty": 2}, s.tso(4))
    s.watermark(s.tso(5))
    s.write(tmp_path / "in")
    # A commit file nobody can read: every read of shop.b fails, as a damaged object store would make it.
    broken = Path(located(lake, TableId("shop", "b"))) / "_delta_log" / f"{99:020d}.json"
    broken.write_text("{not json")

    with pytest.raises(TablesStopped) as stopped:
        run_files(spark, config)
    assert set(stopped.value.stopped) == {TABLES[1]}
    failure = stopped.value.stopped[TABLES[1]]
    assert isinstance(failure, TableFailed) and failure.applied_ts == s.tso(2)
    g = s.tso(5)
    committed = load_progress(spark, config.state_path, config.stream_id)
    assert committed.global_watermark == g
    assert committed.pending_rows == {TABLES[1]: 2}
    assert str(TABLES[1]) in committed.failed[TABLES[1]]
    for table in (TABLES[0], TABLES[2]):
        assert delta_rows(spark, str(lake), table) == expected_rows(s, table, g), table

    assert main(["status", f"--target-path={lake}"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("STOPPED "))
    assert line.startswith("STOPPED shop.b: shop.b: ") and "later changes wait" in line
    assert "An error occurred while" not in line and "Exception" in line

    broken.unlink()
    result = run_files(spark, config)
    assert result.global_watermark == g
    for table in TABLES:
        assert delta_rows(spark, str(lake), table) == expected_rows(s, table, g), table
    assert load_progress(spark, config.state_path, config.stream_id).failed == {}
    assert main(["status", f"--target-path={lake}"]) == 0
    assert "STOPPED" not in capsys.readouterr().out
