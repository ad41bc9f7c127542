"""Column names are data: any name MySQL allows works in every operation (MERGE, DDL, load, verify, as-of,
re-sync), by path and by name, on classic Spark and on Spark Connect: the names of the engine's own frame
columns, the change feed's, the mirror's own commit-TSO column, backticks, commas, parentheses, dots,
spaces, ``$``, unicode, and a rename that changes only case."""

from __future__ import annotations

import uuid

import pytest
from dumpling_export import write_export
from mirror import expected_rows, location_rows

from ingest.commands import asof
from ingest.commands.load import load_dumpling
from ingest.commands.resync import resync_table
from ingest.commands.verify import verify_snapshot
from ingest.config import IngestConfig
from ingest.lake import delta_io
from ingest.load_config import LoadConfig
from ingest.model import TableId
from ingest.pipeline import run_files
from ingest.state.table_state import commit_ts_column
from testkit.sample import Stream

KEY = "k`e,y"
CREATE = (
    "CREATE TABLE `nm`.`t` (`k``e,y` int(11) NOT NULL, `offset` bigint(20) DEFAULT NULL, "
    "`commit_ts` varchar(20) DEFAULT NULL, `f(x)` int(11) DEFAULT NULL, `a.b` varchar(10) DEFAULT NULL, "
    "`with space` int(11) DEFAULT NULL, `$d` int(11) DEFAULT NULL, `ünï` varchar(10) DEFAULT NULL, "
    "`_change_type` varchar(10) DEFAULT NULL, `value` int(11) DEFAULT NULL, PRIMARY KEY (`k``e,y`))"
)


def _row(n: int) -> dict:
    return {
        KEY: n, "offset": n * 10, "commit_ts": f"ts{n}", "f(x)": n + 1, "a.b": f"dot{n}", "with space": n,
        "$d": -n, "ünï": f"ü{n}", "_change_type": "insert", "value": n * 100,
    }  # fmt: skip


def _history() -> tuple[Stream, TableId, int]:
    s = Stream(topic="cdc", partitions=1)
    table = s.create_table(CREATE, s.tso(1))
    for n in range(1, 6):
        s.insert(table, _row(n), s.tso(2))
    s.update(table, (2,), {"offset": 2000, "commit_ts": "changed", "_change_type": "update"}, s.tso(3))
    s.delete(table, (3,), s.tso(3))
    s.watermark(s.tso(3))
    return s, table, s.tso(3)


def _after_snapshot(s: Stream, table: TableId) -> None:
    s.update(table, (1,), {"a.b": "after S", "with space": None}, s.tso(4))
    s.add_column(
        table, "ALTER TABLE `nm`.`t` ADD COLUMN `_tidb_commit_ts` bigint(20) DEFAULT 7", s.tso(5),
        "_tidb_commit_ts", "bigint(20)", 7,
    )  # fmt: skip
    s.rename_column(table, "value", "VALUE", s.tso(6))
    s.modify_column(table, "$d", "bigint(20)", s.tso(7))
    s.insert(table, {**_row(9), "_tidb_commit_ts": 99, "VALUE": 9}, s.tso(8))
    s.update(table, (4,), {"_tidb_commit_ts": 44, "f(x)": None}, s.tso(8))
    s.watermark(s.tso(9))


@pytest.mark.parametrize(
    ("spark", "addressing"), [("classic", "path"), ("connect", "by-name")], indirect=["spark"]
)
def test_any_column_name_survives_load_verify_stream_as_of_and_resync(spark, tmp_path, addressing):
    s, table, snapshot = _history()
    export = write_export(s, snapshot, tmp_path / "export", {table: CREATE}, data_format="csv")
    prefix = f"n{uuid.uuid4().hex[:8]}"
    where = (
        {"target-path": str(tmp_path / "lake")}
        if addressing == "path"
        else {
            "target-catalog": "spark_catalog",
            "target-schema": prefix + "_{database}",
            "state-schema": prefix,
        }
    )
    try:
        load = LoadConfig.from_params({"input": str(export), "timezone": s.tz_name, **where})
        load_dumpling(spark, load)
        location = load.stream.mirror.address(table)
        assert location_rows(spark, location) == expected_rows(s, table, snapshot)
        report = verify_snapshot(spark, load)
        assert report.matches, report.render()

        _after_snapshot(s, table)
        s.write(tmp_path / "stream")
        config = IngestConfig.from_params({"input": str(tmp_path / "stream"), "timezone": s.tz_name, **where})
        run_files(spark, config)
        final = s.complete_watermark()
        assert location_rows(spark, location) == expected_rows(s, table, final)
        properties = delta_io.properties(spark, location)
        ours = commit_ts_column(properties)
        assert ours == "_tidb_commit_ts_1"  # upstream took the name; the mirror's own column gave way
        assert delta_io.read(spark, location).columns.count("VALUE") == 1

        (answer,) = asof.resolve(spark, config, snapshot).tables
        at_snapshot = delta_io.read(spark, answer.path, answer.version)
        assert {r[KEY] for r in at_snapshot.collect()} == {k for (k,) in expected_rows(s, table, snapshot)}

        result = resync_table(spark, config, table)
        assert result.after.applied_ts == final
        assert location_rows(spark, location) == expected_rows(s, table, final)
    finally:
        if addressing == "by-name":
            for row in spark.sql(f"SHOW SCHEMAS LIKE '{prefix}*'").collect():
                spark.sql(f"DROP SCHEMA IF EXISTS spark_catalog.`{row[0]}` CASCADE")
