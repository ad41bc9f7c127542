"""Step ``change_feed``: what Delta's change data feed (``change-feed on``, the default) costs a batch.

The same update-heavy batch is applied to the same prepared table with the feed off and on, twice each in
turn; the faster of each pair counts."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from bench.context import Bench, MergeTimer, fmt_ratio, ingest_config, preloaded_rows, stopwatch
from ingest.pipeline import run_files
from testkit.workload import KeyDistribution, Mix, Workload, write_records

logger = logging.getLogger("bench")

ROUNDS = 2


def change_feed(bench: Bench) -> None:
    n, preload = bench.sizes.apply_events, bench.sizes.preload_rows
    batch: dict[str, list[float]] = {"off": [], "on": []}
    merge: dict[str, list[float]] = {"off": [], "on": []}
    rounds = 1 if bench.smoke else ROUNDS  # the smoke run checks the report's shape, not the spread
    for round_ in range(rounds):
        for feed in ("off", "on"):
            took, merged = _one_batch(bench, f"feed-{feed}-{round_}", feed, n, preload)
            batch[feed].append(took)
            merge[feed].append(merged)
    ratio = min(merge["on"]) / min(merge["off"])
    bench.results["merge_with_change_feed_vs_without"] = ratio
    bench.results["batch_with_change_feed_vs_without"] = min(batch["on"]) / min(batch["off"])
    bench.out(
        "## Change data feed",
        "",
        f"The update-heavy batch of {n:,} events into {preload:,} rows, with `change-feed off` and `on` "
        f"(each {rounds} times in turn, the faster counts). With the feed on, a MERGE that updates or "
        "deletes rows also writes their before-images beside its data files. Ratio = on ÷ off (above 1: "
        "its cost).",
        "",
        "| | Feed off | Feed on | Ratio |",
        "|---|---:|---:|---:|",
        f"| MERGE alone | {min(merge['off']):.1f} s | {min(merge['on']):.1f} s | {fmt_ratio(ratio)} |",
        f"| Whole batch | {min(batch['off']):.1f} s | {min(batch['on']):.1f} s | "
        f"{fmt_ratio(min(batch['on']) / min(batch['off']))} |",
        "",
    )


def _one_batch(bench: Bench, name: str, feed: str, n: int, preload: int) -> tuple[float, float]:
    """One prepared table and one measured batch: the batch's seconds and its MERGE's."""
    workload = Workload(bench.spec(Mix.UPDATE_HEAVY, KeyDistribution.UNIFORM))
    workload.create_tables(preloaded=preload)
    target = _prepare(bench, name, workload, preload, feed)
    workload.changes(n)
    changes_dir = bench.dir(f"{name}-changes")
    write_records(workload.take(), changes_dir, topic=workload.spec.topic)
    timer = MergeTimer()
    with timer.installed(), stopwatch() as took:
        run_files(bench.spark, ingest_config(changes_dir, target, **{"change-feed": feed}))
    logger.warning("bench: change feed %s: batch %.1fs, MERGE %.1fs", feed, took[0], sum(timer.seconds))
    return took[0], sum(timer.seconds)


def _prepare(bench: Bench, name: str, workload: Workload, preload: int, feed: str) -> Path:
    started = time.perf_counter()
    target, create_dir = bench.dir(f"{name}-lake"), bench.dir(f"{name}-create")
    write_records(workload.take(), create_dir, topic=workload.spec.topic)
    run_files(bench.spark, ingest_config(create_dir, target, **{"change-feed": feed}))
    definition = workload.tables[0].definition
    table_path = str(target / definition.table.schema / definition.table.table)
    bench.write(preloaded_rows(bench.spark, definition, preload, workload.last_ts), table_path)
    logger.warning("bench: %s prepared in %.1fs", name, time.perf_counter() - started)
    return target
