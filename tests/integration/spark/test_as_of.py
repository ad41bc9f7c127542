"""Reading the mirror as of a TSO or a time: each run's G gives every table exactly upstream at G; times
between runs resolve to the run at or below; what the mirror cannot answer is refused."""

from __future__ import annotations

import shutil
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from asof_history import CUSTOMERS_T, NOTES_T, ORDERS_T
from kill import child_env
from mirror import expected_rows, located, normalize

from ingest.cli import main
from ingest.commands import asof
from ingest.errors import AsOfRefused
from ingest.model import TableId, tso_to_datetime

TABLES = (CUSTOMERS_T, ORDERS_T, NOTES_T)


def _rows(df, key):
    return {
        tuple(normalize(r[k]) for k in key): {
            k: normalize(v) for k, v in r.asDict().items() if not k.startswith("_tidb_")
        }
        for r in df.collect()
    }


def test_each_runs_g_reads_every_table_as_upstream_at_g(spark, mirrored_history):
    h = mirrored_history
    keys = {CUSTOMERS_T: ["id"], ORDERS_T: ["order_id"], NOTES_T: ["id"]}
    for number, g in enumerate(h.gs, start=1):
        answer, frames = asof.as_of(spark, str(h.lake), tso=g)
        assert (answer.run_id, answer.g) == (number, g)
        existing = set(TABLES) if number > 1 else {CUSTOMERS_T, ORDERS_T}  # app.t is created after G1
        assert set(frames) == existing
        for table in existing:
            assert _rows(frames[table], keys[table]) == expected_rows(h.stream, table, g), (g, table)
    # Run 2 did not touch orders: it is read in the version run 1 committed.
    first, second = (asof.resolve(spark, str(h.lake), g) for g in h.gs[:2])
    assert first.table(ORDERS_T).version == second.table(ORDERS_T).version
    assert first.table(CUSTOMERS_T).version < second.table(CUSTOMERS_T).version


def test_a_time_between_runs_resolves_to_the_run_at_or_below(spark, mirrored_history):
    h = mirrored_history
    between = tso_to_datetime(h.gs[1]) + timedelta(seconds=5)  # after G2, before G3
    answer, frames = asof.as_of(spark, str(h.lake), time=between.isoformat(), tables=["shop.customers"])
    assert (answer.run_id, answer.g, list(frames)) == (2, h.gs[1], [CUSTOMERS_T])
    assert _rows(frames[CUSTOMERS_T], ["id"]) == expected_rows(h.stream, CUSTOMERS_T, h.gs[1])
    # A naive time is UTC; the exact millisecond of G includes G itself.
    answer, _ = asof.as_of(spark, str(h.lake), time=tso_to_datetime(h.gs[0]).replace(tzinfo=None))
    assert answer.g == h.gs[0]
    views = asof.register_views(spark, answer)
    assert spark.table(views[ORDERS_T]).count() == len(expected_rows(h.stream, ORDERS_T, h.gs[0]))


def test_cli_prints_g_and_a_query_per_table_that_reads_upstream_at_g(spark, mirrored_history, capsys):
    h = mirrored_history
    assert main(["as-of", "--target-path", str(h.lake), "--tso", str(h.gs[1] + 99), "--sql"]) == 0
    out = capsys.readouterr().out
    assert f"G = {h.gs[1]} ({tso_to_datetime(h.gs[1]).isoformat()})" in out
    statements = [line for line in out.splitlines() if line.startswith("SELECT")]
    assert len(statements) == 3
    for statement, table in zip(statements, sorted(TABLES), strict=True):
        assert f"delta.`{located(h.lake, table)}`" in statement
        got = _rows(spark.sql(statement), h.stream._tables[table].schema.key)
        assert got == expected_rows(h.stream, table, h.gs[1])


def _fresh_process(*args: str) -> subprocess.CompletedProcess[str]:
    """The command in a process of its own, as a user runs it (a local JVM of its own where it needs one)."""
    env = {k: v for k, v in child_env().items() if k != "SPARK_REMOTE"}
    command = [sys.executable, "-m", "ingest.cli", *args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_the_sql_on_stdout_of_a_fresh_process_runs_unchanged_in_spark_sql(spark, mirrored_history):
    h = mirrored_history
    done = _fresh_process("as-of", "--target-path", str(h.lake), "--tso", str(h.gs[1]), "--sql")
    assert ":: loading settings ::" not in done.stderr  # answered from the logs: no JVM started
    statements = [text for text in done.stdout.split(";\n") if text.strip()]
    assert len(statements) == 3
    for statement, table in zip(statements, sorted(TABLES), strict=True):
        got = _rows(spark.sql(statement), h.stream._tables[table].schema.key)
        assert got == expected_rows(h.stream, table, h.gs[1])


def test_status_answers_without_a_jvm_and_a_command_that_starts_one_keeps_its_output_off_stdout(
    mirrored_history,
):
    h = mirrored_history
    done = _fresh_process("status", "--target-path", str(h.lake))
    assert ":: loading settings ::" not in done.stderr  # answered from the logs
    assert done.stdout.startswith(f"run 3: G = {h.gs[2]} ")

    done = _fresh_process("verify", "--target-path", str(h.lake), "--other-target-path", str(h.lake))
    assert ":: loading settings ::" in done.stderr  # verify reads every row: the JVM did speak, to stderr
    assert done.stdout.startswith(f"as of TSO {h.gs[2]}") and "MATCH: 3 of 3 tables match" in done.stdout
    assert ":: " not in done.stdout and "WARN" not in done.stdout


# The two readers of the same mirror: through Spark, and the Delta logs read directly.
READERS = {
    "spark": lambda spark, *args, **kwargs: asof.resolve(spark, *args, **kwargs),
    "local": lambda _spark, *args, **kwargs: asof.resolve_local(*args, **kwargs),
}


def test_the_direct_log_reader_gives_sparks_answer_at_every_point(spark, mirrored_history):
    h = mirrored_history
    moments = [*(g + d for g in h.gs[:2] for d in (0, 1, 1 << 18)), h.gs[1] - 1, h.gs[2]]
    for tso in moments:
        for tables in (None, [CUSTOMERS_T], [ORDERS_T, CUSTOMERS_T]):
            expected = asof.resolve(spark, str(h.lake), tso, tables)
            assert asof.resolve_local(str(h.lake), tso, tables) == expected, (tso, tables)
    assert asof.resolve_local(str(h.lake), h.gs[2]).run_id == 3


def test_a_mirror_not_on_this_file_system_is_left_to_spark():
    with pytest.raises(asof.delta_log.Unreadable):
        asof.resolve_local("s3://bucket/lake", 1)


@pytest.mark.parametrize("reader", sorted(READERS))
def test_refuses_before_the_first_run_and_after_the_newest_g(spark, mirrored_history, capsys, reader):
    h = mirrored_history
    resolve = READERS[reader]
    with pytest.raises(AsOfRefused, match=f"before the mirror started.*G = {h.gs[0]}"):
        resolve(spark, str(h.lake), h.gs[0] - 1)
    with pytest.raises(AsOfRefused, match=f"after the newest global watermark G = {h.gs[2]}"):
        resolve(spark, str(h.lake), h.gs[2] + (1 << 18))
    # app.t was created after G1: asked for by name, it is refused; by default it is simply not there.
    with pytest.raises(AsOfRefused, match=r"app\.t: had no version equal to upstream"):
        resolve(spark, str(h.lake), h.gs[0], [NOTES_T])
    with pytest.raises(AsOfRefused, match=r"shop\.nope: no Delta table at"):
        resolve(spark, str(h.lake), h.gs[0], [TableId("shop", "nope")])
    assert main(["as-of", "--target-path", str(h.lake), "--tso", str(h.gs[0] - 1)]) == 2
    assert f"TSO {h.gs[0] - 1}" in capsys.readouterr().err


# CI: the direct log reader, the one of our own; Spark's own refusal under the full profile.
@pytest.mark.parametrize(
    "reader", [pytest.param(r, marks=pytest.mark.full) if r == "spark" else r for r in sorted(READERS)]
)
def test_refuses_a_version_whose_files_were_vacuumed_or_whose_log_was_cleaned(
    spark, mirrored_history, tmp_path, reader
):
    h = mirrored_history
    resolve = READERS[reader]
    lake = tmp_path / "lake"
    shutil.copytree(h.lake, lake)
    customers = located(lake, TableId("shop", "customers"))
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:
        spark.sql(f"VACUUM delta.`{customers}` RETAIN 0 HOURS")
    finally:
        spark.conf.unset("spark.databricks.delta.retentionDurationCheck.enabled")
    with pytest.raises(AsOfRefused, match=r"shop\.customers: version .* can no longer be read.*VACUUM"):
        resolve(spark, str(lake), h.gs[0])
    assert resolve(spark, str(lake), h.gs[2]).g == h.gs[2]  # the newest version is intact

    # The log of orders loses its first commits (as Delta's log cleanup does once a checkpoint covers them).
    orders = Path(located(lake, TableId("shop", "orders")))
    spark.sql(f"ALTER TABLE delta.`{orders}` SET TBLPROPERTIES ('delta.checkpointInterval' = '1')")
    newest = max(int(p.stem) for p in (orders / "_delta_log").glob("*.json"))
    assert (orders / "_delta_log" / f"{newest:020d}.checkpoint.parquet").exists()
    for entry in (orders / "_delta_log").glob("*.json"):
        if int(entry.stem) < newest:
            entry.unlink()
    with pytest.raises(AsOfRefused, match=r"shop\.orders: the version that held upstream .* no longer in"):
        resolve(spark, str(lake), h.gs[1], [ORDERS_T])


def test_status_draws_lag_over_time_into_a_png(spark, mirrored_history, tmp_path, capsys):
    from ingest.commands import status
    from ingest.config import IngestConfig

    h = mirrored_history
    chart = tmp_path / "lag.png"
    assert main(["status", "--target-path", str(h.lake), "--lag-chart", str(chart)]) == 0
    assert f"lag chart: 4 lines (G and tables) drawn into {chart}" in capsys.readouterr().out
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    config = IngestConfig.from_params({"input": "-", "target-path": str(h.lake)})
    lag = status.lag_frame(spark, status.lag_history(spark, config))
    g = {r["run_id"]: r["applied_ts"] for r in lag.where("table = 'G'").collect()}
    assert g == {1: h.gs[0], 2: h.gs[1], 3: h.gs[2]}
