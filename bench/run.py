"""The benchmark suite: ``make bench`` (or ``python -m bench.run``) writes BENCHMARKS.md from one run.

Everything is measured through the product's own code paths on ``local[2]``: decode is each protocol's
decoder in ``ingest.source.decoding``, apply is ``ingest.pipeline.run_files`` (read, decode, order, plan,
MERGE, progress). Streams come from ``testkit.workload``. Sizes come from environment variables
(see ``bench.sizes.Sizes``); ``--smoke`` makes every size tiny, for the test that checks the report's shape.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from bench import apply, decode, ingester
from bench.context import (
    Bench,
    MergeTimer,
    fmt_ratio,
    ingest_config,
    job_sites,
    located,
    preloaded_rows,
    sql_value,
    stopwatch,
)
from bench.machine import MemorySampler, machine
from bench.report import render
from bench.sizes import Sizes
from bench.targets import (
    JOBS_MISSED,
    SCALING_MISSED,
    TABLES_MISSED,
    TARGET_BARE_MERGE,
    TARGET_IDLE_TABLES,
    TARGET_JOBS_PER_TABLE,
    TARGET_SCALING,
    TARGET_TABLES_MANY,
    TARGET_TABLES_SOME,
)
from ingest.apply import schema as apply_schema
from ingest.apply.merge import RANK_COLUMN, apply_merge, slot
from ingest.apply.table import AUTO_COMPACT
from ingest.config import IngestConfig
from ingest.lake import delta_io
from ingest.model import ColumnKind, TableId, TableState
from ingest.mysql.types import parse_mysql_type
from ingest.order import RANK_UPSERT
from ingest.pipeline import run_files
from ingest.plan.changes import ChangeType
from ingest.spark import local_session
from ingest.state.progress import commit_progress, load_progress
from ingest.state.table_state import state_to_metadata
from testkit.workload import Mix, TableDef, Workload, table_def, write_records

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
    rows = [
        f"| {count:,} | {bench.sizes.tables_rows // count:,} | {run.seconds:.1f} s | {run.merge:.1f} s "
        f"| {run.job_count} | {fmt_ratio(run.seconds / base)} |"
        for count, run in runs.items()
    ]
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
    listed = {"1 table": runs[1].jobs, f"{some} tables, one after another": serial.jobs}
    sites_seen: set[str] = set().union(*listed.values())
    sites = sorted(sites_seen, key=lambda site: (-serial.jobs[site], site))
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


@dataclass(frozen=True)
class SmallFiles:
    batches: int
    merge_seconds: float
    files: int
    bytes: int
    compactions: int
    read_seconds: float
    files_compared: int  # data files after the batch both arms are compared at


def small_files(bench: Bench) -> None:
    size, off_batches = (
        bench.sizes.small_batch_rows,
        min(bench.sizes.small_batches_off, bench.sizes.small_batches),
    )
    on = _small_files_run(bench, True, bench.sizes.small_batches, off_batches)
    off = _small_files_run(bench, False, off_batches, off_batches)
    bench.results["small_files_after_1000_batches"] = on.files
    bench.results["small_files_compared_at_batch"] = off_batches
    bench.results["small_files_compaction_on_at_that_batch"] = on.files_compared
    bench.results["small_files_compaction_off_at_that_batch"] = off.files
    rows = [
        f"| {label} | {r.batches:,} | {r.merge_seconds / r.batches:.2f} s | {r.files_compared:,} "
        f"| {r.files:,} | {r.bytes / 1024:,.0f} KiB | {r.compactions:,} | {r.read_seconds:.2f} s |"
        for label, r in (("on (default)", on), ("off", off))
    ]
    bench.out(
        "## Small files",
        "",
        f"{bench.sizes.small_batches:,} small MERGE batches into one table, as a mirror that MERGEs every "
        f"few seconds makes: each batch {size:,} rows, half of them updates of existing keys spread over "
        "the whole table, half inserts (the table stays below the product's copy-on-write limit, so each "
        "MERGE rewrites the file its updates hit; a larger table gets a deletion vector instead). The "
        "table is "
        "created by the product (`apply.schema.create_table`, every mirrored table's properties) and "
        "each batch is the product's MERGE (`apply.merge.apply_merge`, the commitTs guard and "
        "userMetadata), without the rest of the pipeline: a full pipeline batch is measured in the "
        "tables above. "
        "Compaction on: the mirror's default (`delta.autoOptimize.autoCompact`: after a write, Delta "
        "decides whether small files are worth combining); off: the same table with the property set "
        f"to false, run for the first {off_batches:,} batches only (without compaction each batch adds "
        "at least one file, so its count only grows; both arms are compared at that batch). Files: "
        "`numFiles` of DESCRIBE DETAIL. Full read: every column of every row after the arm's last batch "
        "(the largest hash of a row), best of two.",
        "",
        f"| Compaction | Batches | MERGE per batch | Data files after {off_batches:,} "
        "| Data files at the end | Size | Compaction commits | Full read |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
    )


def _small_files_run(bench: Bench, compaction: bool, batches: int, count_at: int) -> SmallFiles:
    size = bench.sizes.small_batch_rows
    definition = table_def("bench", "small", bench.sizes.width)
    path = bench.dir(f"small-files-{compaction}") / "t"
    bench.mirror_table(path, definition)
    if not compaction:
        delta_io.set_properties(bench.spark, str(path), {AUTO_COMPACT: "false"})
    first = size * 10
    bench.write(preloaded_rows(bench.spark, definition, first, 1), str(path))
    next_key, seconds = first, 0.0
    files_compared = 0
    key = F.col("id")
    for batch in range(1, batches + 1):
        inserts = size // 2
        keys = bench.spark.range(size).select(
            F.when(key < inserts, key + next_key)
            .otherwise((key * 7_919 + batch * 104_729) % next_key)
            .alias("id")
        )
        source = keys.dropDuplicates(["id"]).select(
            *[
                (sql_value(kind, index + batch, key) if index else key).alias(slot(index))
                for index, kind in enumerate(definition.kinds)
            ],
            F.lit(batch + 1).cast("long").alias("commit_ts"),
            F.lit(RANK_UPSERT).alias(RANK_COLUMN),
        )
        metadata = state_to_metadata(TableState(applied_ts=batch + 1), run_id=batch, step="bench")
        with stopwatch() as took:
            apply_merge(bench.spark, str(path), source, ("id",), list(definition.names), metadata)
        seconds += took[0]
        next_key += inserts
        if batch == count_at:
            files_compared = int(delta_io.detail(bench.spark, str(path))["numFiles"])
        if batch % 100 == 0:
            logger.warning("bench: small files, compaction %s: %d batches", compaction, batch)
    detail = delta_io.detail(bench.spark, str(path))
    compactions = delta_io.history(bench.spark, str(path)).where(F.col("operation") == "OPTIMIZE").count()
    read = _best_read(bench, str(path))
    shutil.rmtree(path, ignore_errors=True)
    return SmallFiles(
        batches,
        seconds,
        int(detail["numFiles"]),
        int(detail["sizeInBytes"]),
        compactions,
        read,
        files_compared,
    )


def _best_read(bench: Bench, path: str) -> float:
    """Best of two reads of every column of every row (the largest row hash: the noop sink refuses a table
    with deletion vectors)."""
    walls = []
    for _ in range(2):
        frame = bench.spark.read.format("delta").load(path)
        with stopwatch() as took:
            frame.select(F.max(F.xxhash64(*frame.columns))).collect()
        walls.append(took[0])
    return min(walls)


_INTEGERS = (ColumnKind.TINYINT, ColumnKind.SMALLINT, ColumnKind.MEDIUMINT, ColumnKind.INT, ColumnKind.BIGINT)


def scaling(bench: Bench) -> None:
    small, large, changes = bench.sizes.scale_small, bench.sizes.scale_large, bench.sizes.scale_changes
    workload = Workload(bench.spec(Mix.UPDATE_HEAVY))
    # The small table holds keys large-small..large-1, the large one 0..large-1: the batch touches the
    # newest keys of both (recent rows are the hot ones in OLTP) and inserts above both, so it means the
    # same thing to both tables.
    workload.create_tables(preloaded=small, preload_from=large - small, first_new_key=large)
    # The preloaded rows carry the CREATE's commitTs: older than every change of the batch.
    created_ts = workload.last_ts
    create = workload.take()
    workload.changes(changes)
    batch = workload.take()
    create_dir, changes_dir = bench.dir("scale-create"), bench.dir("scale-changes")
    write_records(create, create_dir, topic=workload.spec.topic)
    write_records(batch, changes_dir, topic=workload.spec.topic)
    definition = workload.tables[0].definition
    rows: list[str] = []
    totals: dict[tuple[int, bool], float] = {}
    created = bench.dir("scale-created")
    run_files(bench.spark, ingest_config(create_dir, created))
    for size in (small, large):
        built_lake = bench.dir(f"scale-{size}")
        shutil.copytree(created, built_lake)
        with stopwatch() as built:
            bench.write(
                preloaded_rows(bench.spark, definition, size, created_ts, first_key=large - size),
                located(built_lake, TableId("bench", "t0")),
            )
        for bounded in (False, True):
            target = bench.dir(f"scale-{size}-{bounded}")
            shutil.copytree(built_lake, target)
            path = located(target, TableId("bench", "t0"))
            timer = MergeTimer()
            with timer.installed(bounded=bounded), stopwatch() as took:
                run_files(bench.spark, ingest_config(changes_dir, target))
            totals[size, bounded] = took[0]
            # Keys below the batch's range exist only in the large table and are untouched.
            expected = workload.live_rows(0) + (size - small)
            actual = bench.spark.read.format("delta").load(path).count()
            if actual != expected:
                raise SystemExit(f"scaling {size:,}: the mirror holds {actual} rows, upstream {expected}")
            logger.warning(
                "bench: scaling %d rows (bounds %s) built in %.1fs, applied in %.1fs",
                size,
                bounded,
                built[0],
                took[0],
            )
            rows.append(
                f"| {size:,} | {'key bounds' if bounded else 'key equality only'} | {built[0]:.1f} s "
                f"| {took[0]:.1f} s | {sum(timer.seconds):.1f} s |"
            )
            if size == large and bounded:
                rewrite = _type_change_rewrite(bench, path, definition)
            shutil.rmtree(target, ignore_errors=True)
        shutil.rmtree(built_lake, ignore_errors=True)
    ratio = totals[large, True] / totals[small, True]
    before = totals[large, False] / totals[small, False]
    bench.headline["scaling"] = fmt_ratio(ratio)
    bench.results["merge_10m_vs_1m"] = ratio
    rewrite_ratio = rewrite / totals[small, True]
    bench.results["type_change_rewrite_10m_vs_merge_1m"] = rewrite_ratio
    bench.target(
        f"apply into {large:,} rows ≤ {TARGET_SCALING}x the time into {small:,} rows",
        ratio,
        ratio <= TARGET_SCALING,
        SCALING_MISSED,
    )
    bench.out(
        "## MERGE scaling",
        "",
        f"The same batch of {changes:,} update-heavy changes (uniform over the newest {small:,} keys, "
        f"which both tables hold; inserts take keys above both) applied by `run_files` to a table of "
        f"{small:,} rows and to one of {large:,} rows. The tables were built with `spark.range` after "
        f"the pipeline created them (files in key order, at most {bench.sizes.rows_per_file:,} rows per "
        "file, as a table filled in key order or clustered on its key has). Each table is applied to "
        "twice, from the same copy: with the MERGE condition on key equality only (the product before "
        "this benchmark), and with the batch's key bounds added (the product now).",
        "",
        "| Table rows | MERGE condition | Build | Apply (run_files) | of which MERGE |",
        "|---:|---|---:|---:|---:|",
        *rows,
        "",
        f"Apply time ratio, {large:,} ÷ {small:,} rows: {fmt_ratio(ratio)} with key bounds, "
        f"{fmt_ratio(before)} with key equality only.",
        "",
        "### A type change that rewrites the table",
        "",
        f"After the batch, a MODIFY COLUMN of an integer column to VARCHAR(32) on the {large:,}-row "
        "table: "
        "TiDB converts every stored value and sends no row events, so the mirror rewrites the table with "
        f"the converted values, in one commit. It took {rewrite:.1f} s, {fmt_ratio(rewrite_ratio)} the "
        f"time of applying the batch to the {small:,}-row table (`type_change_rewrite_10m_vs_merge_1m`).",
        "",
    )


def _type_change_rewrite(bench: Bench, path: str, definition: TableDef) -> float:
    """Seconds the mirror takes to follow MODIFY COLUMN <integer> -> VARCHAR(32) on the table at ``path``
    (the values change, so the table is rewritten), as the pipeline applies it."""
    name = next(n for n, k in zip(definition.names[1:], definition.kinds[1:], strict=True) if k in _INTEGERS)
    change = ChangeType(definition.table, name, parse_mysql_type("varchar(32)"))
    metadata = state_to_metadata(TableState(), run_id=0, step="bench type change", consistent=False)
    with stopwatch() as took:
        refused = apply_schema.change_type(bench.spark, path, change, metadata, timezone="UTC", rewrite=True)
    if refused is not None:
        raise SystemExit(f"type change rewrite refused: {refused}")
    logger.warning("bench: type change rewrite of %s took %.1fs", path, took[0])
    return took[0]


STEPS = ("decode", "apply", "ingester", "tables", "small_files", "scaling")
# Each step's measurement.
MEASURE: dict[str, Callable[[Bench], None]] = {
    "decode": decode.decode,
    "apply": apply.apply,
    "ingester": ingester.ingester,
    "tables": tables,
    "small_files": small_files,
    "scaling": scaling,
}


def run(
    spark: SparkSession,
    sizes: Sizes,
    output: Path,
    workdir: Path,
    *,
    smoke: bool = False,
    results: Path | None = None,
    steps: tuple[str, ...] = STEPS,
) -> str:
    """Run the measurements (``steps``, in the order of :data:`STEPS`) and write the report to ``output``
    and the ratios to ``results`` (JSON, one key each); returns the report's text.

    ``ingester`` reports the append-only ingester measured during ``apply``; without ``apply`` it is empty.
    """
    unknown = set(steps) - set(STEPS)
    if unknown:
        raise SystemExit(f"--only: unknown step(s) {', '.join(sorted(unknown))}; known: {', '.join(STEPS)}")
    started = datetime.now(timezone.utc)
    load = os.getloadavg()
    clock = time.perf_counter()
    bench = Bench(spark, sizes, workdir, smoke=smoke)
    with MemorySampler() as memory:
        machine_rows = machine(spark)
        for name in STEPS:
            if name in steps:
                logger.warning("bench: %s", name)
                MEASURE[name](bench)
        memory.sample()
    seconds = time.perf_counter() - clock
    text = render(bench, machine_rows, memory, started, seconds, smoke)
    output.write_text(text)
    if results is not None:
        document = {
            "started": started.isoformat(timespec="seconds"),
            "minutes": round(seconds / 60, 1),
            "smoke": smoke,
            "load_average_at_start": [round(x, 2) for x in load],
            **{key: round(value, 4) for key, value in bench.results.items()},
        }
        results.write_text(json.dumps(document, indent=2) + "\n")
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default="BENCHMARKS.md", type=Path)
    parser.add_argument("--results", default=None, type=Path, help="also write the ratios here, as JSON")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes: checks the suite, not the speed")
    parser.add_argument(
        "--only", default=",".join(STEPS), help=f"comma-separated steps to run, of: {', '.join(STEPS)}"
    )
    parser.add_argument("--driver-memory", default=os.environ.get("BENCH_DRIVER_MEMORY", "4g"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    sizes = Sizes.from_env(smoke=args.smoke)
    workdir = Path(tempfile.mkdtemp(prefix="ticdc-ingest-bench-"))
    # Spark's status store keeps the newest 1,000 jobs and stages; a batch over 100 tables starts more.
    os.environ.setdefault(
        "PYSPARK_SUBMIT_ARGS",
        "--conf spark.ui.retainedJobs=1000000 --conf spark.ui.retainedStages=1000000 pyspark-shell",
    )
    try:
        spark = local_session(
            app_name="ticdc-ingest-bench",
            warehouse_dir=str(workdir / "warehouse"),
            driver_memory=args.driver_memory,
        )
        try:
            steps = tuple(s.strip() for s in args.only.split(",") if s.strip())
            run(spark, sizes, args.output, workdir, smoke=args.smoke, results=args.results, steps=steps)
        finally:
            spark.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
