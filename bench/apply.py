"""Step ``apply`` (the End-to-end apply and Naive baseline sections): one batch per configured mix through
``run_files``, against a plain append of the same rows and a hand-written raw-event MERGE. The insert-only
batch is also given to an append-only ingester (:func:`_ingester_run`), whose row the ``ingester`` step
reports."""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from bench.context import (
    Bench,
    MergeTimer,
    fmt_rate,
    fmt_ratio,
    ingest_config,
    located,
    preloaded_rows,
    rate,
    stopwatch,
)
from bench.targets import APPEND_MISSED, INGESTER_MISSED, TARGET_APPEND, TARGET_INGESTER
from ingest.apply import convert
from ingest.decode import canal_json as cj
from ingest.decode.compression import Compression
from ingest.lake import delta_io
from ingest.model import TableId
from ingest.pipeline import BatchResult, run_files
from ingest.source import files
from ingest.source.decoding import KIND_DML, decode_json, prepare_payload
from ingest.state.table_state import COMMIT_TS_COLUMN
from testkit.workload import KeyDistribution, Mix, TableDef, Workload, write_records

logger = logging.getLogger("bench")


def _prepare(bench: Bench, name: str, workload: Workload, preload: int) -> tuple[Path, int]:
    """CREATE TABLE through the pipeline, then the preloaded rows appended by Spark."""
    started = time.perf_counter()
    target = bench.dir(f"{name}-lake")
    create_dir = bench.dir(f"{name}-create")
    write_records(workload.take(), create_dir, topic=workload.spec.topic)
    run_files(bench.spark, ingest_config(create_dir, target))
    definition = workload.tables[0].definition
    table_path = str(target / definition.table.schema / definition.table.table)
    if preload:
        bench.write(preloaded_rows(bench.spark, definition, preload, workload.last_ts), table_path)
    logger.warning("bench: %s prepared in %.1fs", name, time.perf_counter() - started)
    return target, preload


def _warm_up(bench: Bench) -> None:
    """One small untimed batch through the whole pipeline: the first measured run must not pay for
    loading classes and compiling Delta's MERGE code (it once made the first mix look 2x slower)."""
    workload = Workload(bench.spec(Mix.UPDATE_HEAVY))
    workload.create_tables(preloaded=1_000)
    target, _ = _prepare(bench, "warm-up", workload, 1_000)
    workload.changes(min(bench.sizes.apply_events, 2_000))
    changes_dir = bench.dir("warm-up-changes")
    write_records(workload.take(), changes_dir, topic=workload.spec.topic)
    run_files(bench.spark, ingest_config(changes_dir, target))


def apply(bench: Bench) -> None:
    runs = [_parse_run(text) for text in bench.sizes.mixes.split(",") if text.strip()]
    n, preload = bench.sizes.apply_events, bench.sizes.preload_rows
    if not bench.smoke:  # only a timing aid, and a smoke run's numbers mean nothing
        _warm_up(bench)
    apply_rows: list[str] = []
    naive_rows: list[str] = []
    for mix, keys in runs:
        row, naive = _apply_run(bench, mix, keys, n, preload, naive=True)
        apply_rows.append(row)
        naive_rows.append(naive)
    if bench.sizes.large_batch:
        row, _ = _apply_run(bench, Mix.INSERT_ONLY, KeyDistribution.UNIFORM, bench.sizes.large_batch, preload)
        apply_rows.append(row)
    bench.out(
        "## End-to-end apply",
        "",
        f"One table of {bench.sizes.width} columns (BIGINT key, then INT, VARCHAR(64), DECIMAL(12,2), "
        f"DATETIME(6) in turn), {preload:,} rows before the batch, {bench.sizes.partitions} partitions, "
        f"one batch of {n:,} DML events (the last row: {bench.sizes.large_batch:,}, insert-only, to see "
        "how the batch size moves the ratio) through `run_files` (read the captured records, decode, "
        "order, plan, one guarded MERGE, progress commit). Final rows: keys the batch changes, i.e. rows "
        "the MERGE writes or deletes; the run checks that the mirror holds exactly the upstream row "
        "count afterwards. Plain append: the same number of typed rows, cached in memory, appended to "
        "an empty table with the same layout (what any MERGE has to write at least). "
        "Ratio = append time ÷ our time.",
        "",
        "| Mix, keys | Events | Final rows | Ours | Events/s | Spark jobs | of which MERGE "
        "| Plain append | Ratio |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        *apply_rows,
        "",
        "## Naive baseline",
        "",
        "What a hand-written `foreachBatch` does with the same batch as one micro-batch: decode, type "
        "the columns, and MERGE every raw event on the key (DELETE events delete, others update or "
        "insert) with no per-key collapse and no ordering. Ratio = naive time ÷ our time.",
        "",
        "| Mix, keys | Naive | Ours | Ratio |",
        "|---|---|---:|---:|",
        *naive_rows,
        "",
        "Where it runs, the naive MERGE is also wrong in general: with no ordering, which of two "
        "changes of one key wins is up to the join, and without the commitTs guard a replayed batch "
        "undoes newer rows.",
        "",
    )


def _apply_run(
    bench: Bench, mix: Mix, keys: KeyDistribution, n: int, preload: int, *, naive: bool = False
) -> tuple[str, str]:
    """One measured batch: its apply-table row and (``naive``) its naive-baseline row."""
    label = f"{mix.value}, {keys.value}"
    name = f"{mix.value}-{keys.value}-{n}"
    workload = Workload(bench.spec(mix, keys))
    workload.create_tables(preloaded=preload)
    target, _ = _prepare(bench, name, workload, preload)
    workload.changes(n)
    final_rows = len(workload.touched)
    changes_dir = bench.dir(f"{name}-changes")
    write_records(workload.take(), changes_dir, topic=workload.spec.topic)
    expected_rows = workload.live_rows(0)

    # The naive baseline starts from a copy of the same prepared table.
    naive_target = bench.dir(f"{name}-naive-lake")
    if naive:
        shutil.copytree(target, naive_target)
    timer = MergeTimer()
    group = f"bench-{name}"
    bench.spark.sparkContext.setJobGroup(group, group)
    with timer.installed(), stopwatch() as took:
        result = run_files(bench.spark, ingest_config(changes_dir, target))
    ours = took[0]
    jobs = len(bench.spark.sparkContext.statusTracker().getJobIdsForGroup(group))
    bench.spark.sparkContext.setJobGroup("bench", "bench")
    table_path = located(target, TableId("bench", "t0"))
    check = bench.spark.read.format("delta").load(table_path).agg(F.count("*"), F.sum("id")).first()
    actual = (int(check[0]), int(check[1] or 0)) if check is not None else (0, 0)
    expected = (expected_rows, sum(workload.tables[0].live))
    if actual != expected:
        raise SystemExit(
            f"{label}: the mirror holds {actual[0]} rows with key sum {actual[1]}, upstream "
            f"{expected[0]} with {expected[1]}; a benchmark of a wrong result is void"
        )
    logger.warning("bench: %s applied in %.1fs (%d upserted/deleted)", label, ours, _written(result))
    append = _plain_append(bench, name, workload.tables[0].definition, final_rows)
    ratio = append / ours
    if mix is Mix.INSERT_ONLY and n == bench.sizes.apply_events:
        bench.headline["append"] = fmt_ratio(ratio)
        bench.results["insert_apply_vs_append"] = ratio
        _ingester_run(bench, name, changes_dir, workload.tables[0].definition, n, ours)
        bench.target(
            f"insert-only apply ≥ {TARGET_APPEND}x a plain append",
            ratio,
            ratio >= TARGET_APPEND,
            APPEND_MISSED,
        )
    row = (
        f"| {label} | {n:,} | {final_rows:,} | {ours:.1f} s | {fmt_rate(rate(n, ours))} | {jobs} | "
        f"{sum(timer.seconds):.1f} s | {append:.1f} s | {fmt_ratio(ratio)} |"
    )
    if not naive:
        return row, ""
    naive_seconds, failure = _naive(bench, changes_dir, naive_target, workload.tables[0].definition)
    if failure:
        return row, f"| {label} | does not run: {failure} | {ours:.1f} s | — |"
    if mix is Mix.INSERT_ONLY:
        bench.headline["naive"] = fmt_ratio(naive_seconds / ours)
        bench.results["naive_vs_ours"] = naive_seconds / ours
    return row, f"| {label} | {naive_seconds:.1f} s | {ours:.1f} s | {fmt_ratio(naive_seconds / ours)} |"


def _plain_append(bench: Bench, name: str, definition: TableDef, rows: int) -> float:
    path = bench.dir(f"{name}-append") / "t"
    bench.mirror_table(path, definition)
    frame = preloaded_rows(bench.spark, definition, rows, 1).cache()
    frame.count()
    with stopwatch() as took:
        frame.write.format("delta").mode("append").save(str(path))
    frame.unpersist()
    logger.warning("bench: %s plain append of %d rows in %.1fs", name, rows, took[0])
    return took[0]


def _naive(bench: Bench, changes_dir: Path, target: Path, definition: TableDef) -> tuple[float, str]:
    from delta.tables import DeltaTable

    path = str(target / definition.table.schema / definition.table.table)
    schema = bench.spark.read.format("delta").load(path).schema
    messages = files.read_messages(bench.spark, str(changes_dir), {})
    dml = decode_json(_framed(messages), cj.CODEC).where(F.col("kind") == KIND_DML)
    typed = dml.select(
        F.col("type").alias("__type"),
        *[
            convert.from_wire(F.col("data")[name], schema[name].dataType, "UTC").alias(name)
            for name in definition.names
        ],
        F.col("commit_ts").alias(COMMIT_TS_COLUMN),
    )
    values = {f"`{c}`": F.col(f"s.`{c}`") for c in [*definition.names, COMMIT_TS_COLUMN]}
    started = time.perf_counter()
    try:
        (
            DeltaTable.forPath(bench.spark, path)
            .alias("t")
            .merge(typed.alias("s"), "t.id = s.id")
            .whenMatchedDelete(condition="s.__type = 'DELETE'")
            .whenMatchedUpdate(set=values)
            .whenNotMatchedInsert(condition="s.__type <> 'DELETE'", values=values)
            .execute()
        )
    except Exception as exc:  # report why it does not run; every other outcome is a number
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return float("nan"), _short_reason(first)
    logger.warning("bench: naive MERGE in %.1fs", time.perf_counter() - started)
    return time.perf_counter() - started, ""


def _ingester_run(
    bench: Bench, name: str, changes_dir: Path, definition: TableDef, n: int, ours: float
) -> None:
    """What kafka-delta-ingest does with the insert-only batch: read, parse, type, append; no order."""
    path = bench.dir(f"{name}-ingester") / "t"
    bench.mirror_table(path, definition)
    schema = bench.spark.read.format("delta").load(str(path)).schema
    envelope_schema = T.StructType(
        [
            T.StructField(cj.FIELD_IS_DDL, T.BooleanType()),
            T.StructField(cj.FIELD_TYPE, T.StringType()),
            T.StructField(cj.FIELD_DATA, T.ArrayType(T.MapType(T.StringType(), T.StringType()))),
            T.StructField(cj.FIELD_TIDB, T.StructType([T.StructField(cj.TIDB_COMMIT_TS, T.LongType())])),
        ]
    )
    with stopwatch() as took:
        messages = files.read_messages(bench.spark, str(changes_dir), {})
        parsed = messages.select(F.from_json(F.col("value").cast("string"), envelope_schema).alias("m"))
        rows = parsed.where(F.col(f"m.{cj.FIELD_TYPE}") == "INSERT").select(
            F.explode(F.col(f"m.{cj.FIELD_DATA}")).alias("d"),
            F.col(f"m.{cj.FIELD_TIDB}.{cj.TIDB_COMMIT_TS}").alias(COMMIT_TS_COLUMN),
        )
        typed = rows.select(
            *[
                convert.from_wire(F.col("d")[column], schema[column].dataType, "UTC").alias(column)
                for column in definition.names
            ],
            COMMIT_TS_COLUMN,
        )
        delta_io.write(typed, str(path))
    ingester = took[0]
    written = bench.spark.read.format("delta").load(str(path)).count()
    if written != n:
        raise SystemExit(f"append-only ingester: {written} rows appended from {n} inserts")
    ratio = ingester / ours
    logger.warning("bench: append-only ingester of %d inserts in %.1fs", n, ingester)
    bench.results["insert_apply_vs_ingest"] = ratio
    bench.ingester_rows.append(
        f"| insert-only, uniform | {n:,} | {ingester:.1f} s | {ours:.1f} s | {fmt_ratio(ratio)} |"
    )
    bench.target(
        f"insert-only apply ≥ {TARGET_INGESTER}x an append-only ingester (its time ÷ ours)",
        ratio,
        ratio >= TARGET_INGESTER,
        INGESTER_MISSED,
    )


def _framed(messages: DataFrame) -> DataFrame:
    """The records as the pipeline hands them to the decoder (plain JSON: ``payload`` is ``value``)."""
    return prepare_payload(messages, Compression.NONE, cj.CODEC)


def _parse_run(text: str) -> tuple[Mix, KeyDistribution]:
    mix, _, keys = text.strip().partition(":")
    try:
        return Mix(mix), KeyDistribution(keys or "uniform")
    except ValueError as exc:
        raise SystemExit(f"BENCH_MIXES: {text!r} is not mix:keys, e.g. update-heavy:zipf") from exc


def _written(result: BatchResult) -> int:
    return sum(report.upserted + report.deleted for report in result.tables.values())


def _short_reason(text: str) -> str:
    text = text.replace("|", "/")
    return text if len(text) <= 600 else text[:597] + "..."
