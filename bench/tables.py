"""Step ``tables`` (the Many tables section): one batch spread over 1, some and many tables, at other
``table-parallelism`` settings, one table after another (the Spark job list), and in a mirror of many more
tables than it touches; a bare one-row MERGE and ``ticdc-ingest status`` for scale."""

from __future__ import annotations

import logging
import shutil
import statistics
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

from bench.context import Bench, MergeTimer, fmt_ratio, ingest_config, job_sites, stopwatch
from bench.targets import (
    JOBS_MISSED,
    TABLES_MISSED,
    TARGET_BARE_MERGE,
    TARGET_IDLE_TABLES,
    TARGET_JOBS_PER_TABLE,
    TARGET_TABLES_MANY,
    TARGET_TABLES_SOME,
)
from ingest.config import IngestConfig
from ingest.model import TableId
from ingest.pipeline import run_files
from ingest.state.progress import commit_progress, load_progress
from testkit.workload import Mix, Workload, write_records

logger = logging.getLogger("bench")


DEFAULT_PARALLELISM = IngestConfig.table_parallelism  # `table-parallelism` when not given


BARE_MERGES = 5  # bare one-row MERGEs timed after the many-tables batch; the median is reported


@dataclass
class TablesRun:
    """One measured batch over many tables."""

    seconds: float
    merge: float  # inside the MERGE commands, summed over the tables
    jobs: Counter[str]  # Spark jobs by call site
    bare_merge: float | None = None  # the median bare one-row MERGE INTO one of the tables after it
    status_seconds: float | None = None  # `ticdc-ingest status` on the mirror after it, a fresh process

    @property
    def job_count(self) -> int:
        return sum(self.jobs.values())


def _status_seconds(target: Path) -> float:
    """Wall time of ``ticdc-ingest status`` on a mirror, in a fresh process as a user runs it."""
    command = [sys.executable, "-m", "ingest.cli", "status", "--target-path", str(target)]
    with stopwatch() as took:
        subprocess.run(command, check=True, capture_output=True)
    return took[0]


def tables(bench: Bench) -> None:
    counts = sorted({1, bench.sizes.tables_some, bench.sizes.tables_many})
    some, many, every = bench.sizes.tables_some, bench.sizes.tables_many, bench.sizes.tables_all
    runs = {count: _tables_run(bench, count, bare=count == many) for count in counts}
    base = runs[1].seconds
    ratio_some, ratio_many = runs[some].seconds / base, runs[many].seconds / base
    bench.results["tables_10_vs_1"] = ratio_some
    bench.results["tables_100_vs_1"] = ratio_many
    bench.results["jobs_per_batch_1_table"] = runs[1].job_count
    bench.results["jobs_per_batch_100_tables"] = runs[many].job_count
    per_table = (runs[many].seconds - base) / max(many - 1, 1)
    bare = runs[many].bare_merge
    assert bare is not None
    bench.results["extra_table_vs_bare_merge"] = per_table / bare
    # The same batch at other table-parallelism settings (the default is 4).
    parallel = {
        p: runs[many]
        if bench.smoke and min(p, many) == min(DEFAULT_PARALLELISM, many)
        else _tables_run(bench, many, parallelism=p)
        for p in (1, 8)
    }
    for p, run in parallel.items():
        bench.results[f"tables_100_vs_1_parallelism_{p}"] = run.seconds / base
    # The job list comes from a run one table after another: jobs started from the pool's threads carry
    # the thread's entry point as their call site, not our line.
    serial = parallel[1] if bench.smoke and some == many else _tables_run(bench, some, parallelism=1)
    per_table_jobs = (serial.job_count - runs[1].job_count) / max(some - 1, 1)
    bench.results["jobs_per_extra_table"] = per_table_jobs
    # A mirror of many more tables than the batch touches, against one of only the touched tables.
    alone = runs[many] if bench.smoke else _tables_run(bench, many)
    among = _tables_run(bench, many, idle=every - many)
    idle_ratio = among.seconds / alone.seconds
    bench.results["tables_1000_touch_100_vs_100"] = idle_ratio
    assert among.status_seconds is not None
    bench.results["status_1000_tables_s"] = among.status_seconds
    bench.target(
        f"the batch over {many} tables ≤ {TARGET_TABLES_MANY}x the time over 1 table",
        ratio_many,
        ratio_many <= TARGET_TABLES_MANY,
        TABLES_MISSED,
    )
    bench.target(
        f"the batch over {some} tables ≤ {TARGET_TABLES_SOME}x the time over 1 table",
        ratio_some,
        ratio_some <= TARGET_TABLES_SOME,
        TABLES_MISSED,
    )
    bench.target(
        f"Spark jobs per extra table touched ({per_table_jobs:.1f}) ≤ {TARGET_JOBS_PER_TABLE:.0f}, as a "
        f"share of {TARGET_JOBS_PER_TABLE:.0f}",
        per_table_jobs / TARGET_JOBS_PER_TABLE,
        per_table_jobs <= TARGET_JOBS_PER_TABLE,
        JOBS_MISSED,
    )
    bench.target(
        f"cost per extra table ≤ {TARGET_BARE_MERGE}x a bare one-row MERGE INTO of such a table",
        per_table / bare,
        per_table / bare <= TARGET_BARE_MERGE,
        TABLES_MISSED,
    )
    bench.target(
        f"a batch touching {many} of {every:,} tables ≤ {TARGET_IDLE_TABLES}x the same batch in a "
        f"mirror of those {many} alone",
        idle_ratio,
        idle_ratio <= TARGET_IDLE_TABLES,
        "tables the batch does not touch still cost it: see the lines above",
    )
    _section(
        bench,
        runs=runs,
        parallel=parallel,
        serial=serial,
        alone=alone,
        among=among,
        per_table=per_table,
        per_table_jobs=per_table_jobs,
        bare=bare,
        idle_ratio=idle_ratio,
    )


def _section(
    bench: Bench,
    *,
    runs: dict[int, TablesRun],
    parallel: dict[int, TablesRun],
    serial: TablesRun,
    alone: TablesRun,
    among: TablesRun,
    per_table: float,
    per_table_jobs: float,
    bare: float,
    idle_ratio: float,
) -> None:
    """The Many tables section: ``runs`` by table count at the default ``table-parallelism``, ``parallel``
    the many-table batch by other settings, ``serial`` some tables one after another, ``alone`` and
    ``among`` the many-table batch in a mirror of those tables alone and of every table."""
    some, many, every = bench.sizes.tables_some, bench.sizes.tables_many, bench.sizes.tables_all
    base = runs[1].seconds
    rows = [
        f"| {count:,} | {bench.sizes.tables_rows // count:,} | {run.seconds:.1f} s | {run.merge:.1f} s "
        f"| {run.job_count} | {fmt_ratio(run.seconds / base)} |"
        for count, run in runs.items()
    ]
    listed = {"1 table": runs[1].jobs, f"{some} tables, one after another": serial.jobs}
    sites_seen: set[str] = set().union(*listed.values())
    sites = sorted(sites_seen, key=lambda site: (-serial.jobs[site], site))
    bench.out(
        "## Many tables",
        "",
        f"The same {bench.sizes.tables_events:,} update-heavy events (uniform keys) in one batch, spread "
        f"over 1, {some} and {many} tables of {bench.sizes.width} columns that hold "
        f"{bench.sizes.tables_rows:,} rows in all before it (inserted through the pipeline by an "
        "untimed batch that also creates them). Ours: `run_files`, as in the apply table, with the "
        "default `table-parallelism` (4). Spark jobs: every job the batch started. MERGE: the time "
        "inside the MERGE commands, summed (tables apply in Spark sessions of their own, so the MERGEs "
        "of different tables overlap and their sum can exceed the batch). "
        "Ratio = time ÷ the time over 1 table.",
        "",
        "| Tables | Rows per table | Ours | of which MERGE | Spark jobs | Ratio |",
        "|---|---:|---:|---:|---:|---:|",
        *rows,
        *(
            f"| {many}, `table-parallelism` {p} | {bench.sizes.tables_rows // many:,} "
            f"| {run.seconds:.1f} s | {run.merge:.1f} s | {run.job_count} "
            f"| {fmt_ratio(run.seconds / base)} |"
            for p, run in parallel.items()
        ),
        f"| {some}, one after another (`table-parallelism` 1) | {bench.sizes.tables_rows // some:,} "
        f"| {serial.seconds:.1f} s | {serial.merge:.1f} s | {serial.job_count} "
        f"| {fmt_ratio(serial.seconds / base)} |",
        "",
        f"Cost per extra table, from these runs: {per_table:.2f} s at {many} tables, of which MERGE "
        f"{(runs[many].merge - runs[1].merge) / max(many - 1, 1):.2f} s; one after another "
        f"{(serial.seconds - base) / max(some - 1, 1):.2f} s, of which MERGE "
        f"{(serial.merge - runs[1].merge) / max(some - 1, 1):.2f} s; {per_table_jobs:.1f} Spark jobs. "
        f"A bare one-row `MERGE INTO` of one of the {many} tables right after its batch (one key's "
        "column set to a literal, the table's own settings, no commit settings; the median of "
        f"{BARE_MERGES}): {bare:.2f} s, so a table costs the batch "
        f"{fmt_ratio(per_table / bare)} what a user's own smallest MERGE of it costs.",
        "",
        f"A mirror of {every:,} tables, of which the batch touches {many}: the same {many}-table "
        f"mirror and batch as above (generated again), and {every - many:,} more tables copied from one "
        "of them before the batch, each with the copy's state in the mirror's progress, as a mirror "
        f"that has seen {every:,} tables holds them. The batch took {among.seconds:.1f} s "
        f"({among.job_count} Spark jobs) against {alone.seconds:.1f} s ({alone.job_count}) in a "
        f"mirror of the {many} alone: {fmt_ratio(idle_ratio)}. `ticdc-ingest status` on the "
        f"{every:,}-table mirror after it, in a fresh process: {among.status_seconds:.1f} s.",
        "",
        "The job list: every Spark job of the 1-table batch and of the batch over "
        f"{some} tables one after another, by the call site Spark recorded (for a job our code started: "
        "the action and our file and line; for one Spark or Delta started inside a command: its own). "
        "A line that grows with the tables is a cost per table.",
        "",
        f"| Started at | {' | '.join(listed)} |",
        "|---|" + "---:|" * len(listed),
        *(f"| `{site}` | {' | '.join(str(jobs[site]) for jobs in listed.values())} |" for site in sites),
        "",
    )


def _tables_run(
    bench: Bench, count: int, parallelism: int | None = None, *, bare: bool = False, idle: int = 0
) -> TablesRun:
    """One measured batch over ``count`` tables (Spark jobs by call site). ``bare``: also time a bare
    one-row MERGE of one of them afterwards. ``idle``: that many more tables in the mirror before the
    batch, which the batch does not touch, and ``ticdc-ingest status`` timed after it."""
    events, rows = bench.sizes.tables_events, bench.sizes.tables_rows
    workload = Workload(bench.spec(Mix.UPDATE_HEAVY, tables=count))
    workload.create_tables()
    workload.insert_rows(max(rows // count, 1))
    bench.tables_runs += 1  # a name of its own: Spark lists a job group's jobs across every run
    name = f"tables-{bench.tables_runs}-{count}-{parallelism}-{idle}"
    target, create_dir = bench.dir(f"{name}-lake"), bench.dir(f"{name}-create")
    write_records(workload.take(), create_dir, topic=workload.spec.topic)
    run_files(bench.spark, ingest_config(create_dir, target))
    if idle:
        _add_idle_tables(bench, ingest_config(create_dir, target), workload.tables[0].definition.table, idle)
    workload.changes(events)
    changes_dir = bench.dir(f"{name}-changes")
    write_records(workload.take(), changes_dir, topic=workload.spec.topic)
    timer = MergeTimer()
    group = f"bench-{name}"
    params = {} if parallelism is None else {"table-parallelism": str(parallelism)}
    bench.spark.sparkContext.setJobGroup(group, group)
    with timer.installed(), stopwatch() as took:
        run_files(bench.spark, ingest_config(changes_dir, target, **params))
    jobs = job_sites(bench.spark, group)
    bench.spark.sparkContext.setJobGroup("bench", "bench")
    first = workload.tables[0].definition.table
    first_path = str(target / first.schema / first.table)
    actual = bench.spark.read.format("delta").load(first_path).count()
    if actual != workload.live_rows(0):
        raise SystemExit(f"{count} tables: {first} holds {actual} rows, upstream {workload.live_rows(0)}")
    logger.warning("bench: %d tables applied in %.1fs (%d jobs)", count, took[0], sum(jobs.values()))
    run = TablesRun(took[0], sum(timer.seconds), jobs)
    if bare:
        run.bare_merge = _bare_merge(bench, first_path)
    if idle:
        run.status_seconds = _status_seconds(target)
    shutil.rmtree(target, ignore_errors=True)
    return run


def _add_idle_tables(bench: Bench, config: IngestConfig, model: TableId, idle: int) -> None:
    """``idle`` copies of the table ``model`` (its files and Delta log) under new names, and a progress
    row that holds them: a mirror that has seen that many more tables."""
    progress = load_progress(bench.spark, config.state_path, config.stream_id)
    source = Path(config.target_path) / model.schema / model.table
    added = {}
    for index in range(idle):
        table = TableId(model.schema, f"idle{index:04d}")
        shutil.copytree(source, config.mirror.address(table))
        added[table] = progress.tables[model]
    grown = replace(progress, run_id=progress.run_id + 1, tables={**progress.tables, **added})
    commit_progress(bench.spark, config.state_path, config.stream_id, grown)


def _bare_merge(bench: Bench, path: str) -> float:
    """The median time of a bare one-row MERGE INTO the table: one existing key's first non-key column
    set to a literal, with whatever settings the table and session have."""
    table = bench.spark.read.format("delta").load(path)
    key = table.select("id").first()
    assert key is not None
    field = next(f for f in table.schema if f.name != "id")
    column, kind = field.name, field.dataType.simpleString()
    times = []
    for attempt in range(BARE_MERGES):
        statement = (
            f"MERGE INTO delta.`{path}` AS t USING (SELECT {int(key['id'])} AS id, "
            f"CAST({attempt} AS {kind}) AS v) AS s ON t.id = s.id "
            f"WHEN MATCHED THEN UPDATE SET t.`{column}` = s.v"
        )
        with stopwatch() as took:
            bench.spark.sql(statement).collect()
        times.append(took[0])
    return statistics.median(times)
