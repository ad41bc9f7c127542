"""Wiring: one batch of Kafka-shaped records through decode -> order -> plan -> apply -> progress.

Row data stays in Spark. The driver sees control events (DDL, watermarks), per-partition offset ranges and
per-table type signatures, decides with the pure ``order`` and ``plan`` modules, and drives one guarded
MERGE per table segment. Two ordering modes share one batch skeleton (``batch``), one report
(``report``) and one schema-change path (``schema_change``): ``watermarked`` (Canal-JSON, Simple) and
``offset_order`` (TiCDC Avro).
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame, SparkSession

from ingest.config import IngestConfig
from ingest.decode.codec import TypesFrom
from ingest.pipeline import offset_order, watermarked
from ingest.pipeline.report import BatchResult, TableReport, lag_seconds
from ingest.source import files, registry
from ingest.state import progress

__all__ = ["BatchResult", "TableReport", "lag_seconds", "process_batch", "run_files"]


def run_files(
    spark: SparkSession, config: IngestConfig, report: Callable[[str], None] | None = None
) -> BatchResult:
    """Mirror a directory of captured Kafka records, continuing from the last committed progress.

    ``report`` receives progress lines (records, bytes, share of offsets done per partition) for a
    terminal; counting them costs one extra pass over the input, so it is off unless asked for.
    """
    registry.check_access(config)
    committed = progress.load_progress(spark, config.state_path, config.stream_id)
    messages = files.read_messages(
        spark, config.input_path, committed.resume, config.input_format, config.csv
    )
    if report is None:
        return process_batch(spark, messages, config, committed)
    stats = files.input_stats(messages)
    for line in files.describe_stats(stats, committed.resume, before=True):
        report(line)
    result = process_batch(spark, messages, config, committed)
    after = progress.load_progress(spark, config.state_path, config.stream_id)
    for line in files.describe_stats(stats, after.resume, before=False):
        report(line)
    return result


def process_batch(
    spark: SparkSession, messages: DataFrame, config: IngestConfig, committed: progress.Progress
) -> BatchResult:
    """Decode, order, plan and apply one batch, then commit progress. Raises before progress moves."""
    # Tables that follow registry writer schemas have their own pipeline: no DDL, no watermarks.
    if config.codec.types_from is TypesFrom.WRITER_SCHEMA:
        return offset_order.process_batch(spark, messages, config, committed)
    return watermarked.process_batch(spark, messages, config, committed)
