"""The benchmark suite: ``make bench`` (or ``python -m bench.run``) writes BENCHMARKS.md from one run.

Everything is measured through the product's own code paths on ``local[2]``: decode is each protocol's
decoder in ``ingest.source.decoding``, apply is ``ingest.pipeline.run_files`` (read, decode, order, plan,
MERGE, progress). Streams come from ``testkit.workload``. Sizes come from environment variables
(see ``bench.sizes.Sizes``); ``--smoke`` makes every size tiny, for the test that checks the report's shape.

This module is the command line and the order of the steps; each step is a module of ``bench`` named after it
(``bench.decode``, ``bench.apply``, ...), given the run's shared state (``bench.context.Bench``), and
``bench.report`` writes the report around their sections.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

from pyspark.sql import SparkSession

from bench import apply, change_feed, checksums, decode, ingester, scaling, small_files, tables
from bench.context import Bench
from bench.machine import MemorySampler, machine
from bench.report import render
from bench.sizes import Sizes
from ingest.spark import local_session

logger = logging.getLogger("bench")


STEPS = ("decode", "checksums", "apply", "ingester", "change_feed", "tables", "small_files", "scaling")
# Each step's measurement, in a module of its own named after it.
MEASURE: dict[str, Callable[[Bench], None]] = {
    "decode": decode.decode,
    "checksums": checksums.checksums,
    "apply": apply.apply,
    "ingester": ingester.ingester,
    "change_feed": change_feed.change_feed,
    "tables": tables.tables,
    "small_files": small_files.small_files,
    "scaling": scaling.scaling,
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
        run_facts = {
            "started": started.isoformat(timespec="seconds"),
            "minutes": round(seconds / 60, 1),
            "smoke": smoke,
            "load_average_at_start": [round(x, 2) for x in load],
        }
        ratios = {key: round(value, 4) for key, value in bench.results.items()}
        previous = json.loads(results.read_text()) if results.exists() and set(steps) != set(STEPS) else {}
        document = merged_results(previous, run_facts, ratios, [n for n in STEPS if n in steps])
        results.write_text(json.dumps(document, indent=2) + "\n")
    return text


def merged_results(
    previous: dict[str, object], run_facts: dict[str, object], ratios: dict[str, float], steps: list[str]
) -> dict[str, object]:
    """The results file after a run of ``steps``: its ratios over the previous file's, and for every step
    the facts of the run that measured it (``steps``), so a partial run keeps what it did not measure and
    says which numbers came from when."""
    runs = dict(previous.get("steps") or {}) if isinstance(previous.get("steps"), dict) else {}
    if previous and not runs:  # a file written by a whole run before steps were recorded
        facts = {
            k: previous[k] for k in ("started", "minutes", "smoke", "load_average_at_start") if k in previous
        }
        runs = dict.fromkeys(STEPS, facts)
    runs.update(dict.fromkeys(steps, run_facts))
    kept = {k: v for k, v in previous.items() if k not in ("steps", *run_facts)}
    return {**run_facts, "steps": runs, **kept, **ratios}


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
