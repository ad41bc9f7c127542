"""``run``: apply a change stream to the mirror, continuing from progress, and print what each batch did."""

from __future__ import annotations

import sys

from pyspark.sql import SparkSession

from ingest.commands.stream import run_kafka
from ingest.config import IngestConfig, SourceKind
from ingest.errors import TablesStopped
from ingest.pipeline import BatchResult, run_files
from ingest.spark import get_session

# Some tables stopped before a DDL the mirror does not apply; every other table was applied.
STOPPED_EXIT_CODE = 3


def command(
    config: IngestConfig, show_progress: bool = False, remote: str | None = None, warehouse: str | None = None
) -> int:
    """``run``: captured files once, or the Kafka stream until it stops; prints every batch's tables and
    returns the exit code (:data:`STOPPED_EXIT_CODE` when the last batch left tables stopped)."""
    spark = get_session(remote=remote, catalog_warehouse=warehouse)
    if config.source is SourceKind.KAFKA:
        results = run_kafka(spark, config)
        print(f"{len(results)} batches")
    else:
        results = [_run_files(spark, config, show_progress)]
    for result in results:
        print(result.describe())
        for report in sorted(result.tables.values(), key=lambda r: str(r.table)):
            print("  " + report.describe())
    stopped = [r for r in results[-1].tables.values() if r.stopped] if results else []
    if stopped:
        for report in stopped:
            print(f"error: {report.stopped}", file=sys.stderr)
        return STOPPED_EXIT_CODE
    return 0


def _run_files(spark: SparkSession, config: IngestConfig, show_progress: bool) -> BatchResult:
    def progress_line(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    try:
        return run_files(spark, config, progress_line if show_progress else None)
    except TablesStopped as exc:
        # Every other table was applied and progress moved: the batch is reported like any other, and its
        # stopped tables set the exit code.
        assert isinstance(exc.result, BatchResult)
        return exc.result
