"""A Kafka stream through the same ``pipeline.process_batch`` as the files source, one micro-batch at a time.

Spark's checkpoint only caches positions; our progress owns them:
- a new checkpoint starts at our progress (``startingOffsets``), so deleting it loses nothing;
- records below our resume offsets (applied, quarantined or buffered already) are dropped from a batch;
- a batch that starts above a resume offset means records were skipped: the stream stops.

Every batch logs its metrics as one JSON line and records its result in ``<state>/metrics`` (see
``state.metrics``), which is how the driver learns what batches did: the batch function is a module-level
function of the config, the batch and its id, and shares nothing with the driver, as Spark Connect requires.
The query's progress carries the batch's record count, bytes and newest Kafka timestamp as observed metrics
(``query.lastProgress["observedMetrics"]``).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass

import orjson
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from ingest.config import IngestConfig, Trigger
from ingest.errors import ConfigError, IngestError, TablesStopped
from ingest.pipeline import BatchResult, process_batch
from ingest.source import at_or_after, registry
from ingest.source import kafka as kafka_source
from ingest.spark import cached, on_serverless
from ingest.state import metrics, progress

logger = logging.getLogger(__name__)

OBSERVED = "ticdc_ingest"  # name of the observed metrics in the query progress


# Spark's own words when specific startingOffsets do not name every partition it is assigned.
_PARTIAL_OFFSETS = "you must specify all TopicPartitions"


@dataclass
class KafkaMirror:
    """A running (or finished) Kafka mirror: its query, and what its batches did (from our Delta state).

    Nothing is shared with the batch function: on Spark Connect it runs in another process. What each
    batch did is read back from the metrics table (:meth:`results`), and a batch's :class:`IngestError`
    is rebuilt from what it recorded there.
    """

    query: StreamingQuery
    spark: SparkSession
    config: IngestConfig
    started_after_run: int  # the stream's last committed run when the mirror started
    _from_earliest: Callable[[], StreamingQuery] | None = None

    def await_termination(self, timeout: int | None = None) -> bool:
        """Wait for the query to end (AvailableNow: when caught up); re-raises the batch's own error.

        Returns:
            True if the query ended, False if ``timeout`` passed first.
        """
        while True:
            try:
                ended = (
                    self.query.awaitTermination(timeout)
                    if timeout is not None
                    else self.query.awaitTermination()
                )
            except StreamingQueryException as exc:
                failure = metrics.load_failure(
                    self.spark,
                    self.config.state_path,
                    self.config.stream_id,
                    self.started_after_run,
                    str(exc),
                )
                if failure is not None:
                    raise failure from exc
                if self._from_earliest is not None and _PARTIAL_OFFSETS in str(exc):
                    # The topics have partitions our progress never saw, and Spark wants a position for
                    # every one. Start from the earliest offsets instead: batches drop what our progress
                    # already holds, so the result is the same, only slower to reach.
                    logger.warning(
                        "the subscribed topics have partitions our progress does not know; a new checkpoint "
                        "starts from the earliest offsets, and records our progress holds are skipped"
                    )
                    self.query, self._from_earliest = self._from_earliest(), None
                    continue
                # A password changed or a certificate expired while the stream ran.
                refused = kafka_source.refusal(self.config.kafka, str(exc)) if self.config.kafka else None
                if refused is not None:
                    raise refused from None
                raise
            return True if ended is None else bool(ended)

    def stop(self) -> None:
        """Stop after the running batch; progress stays at the last committed batch."""
        self.query.stop()

    def results(self) -> list[BatchResult]:
        """What each batch of this mirror that committed a run did, in run order (from the metrics table)."""
        recorded = metrics.load_results(
            self.spark, self.config.state_path, self.config.stream_id, self.started_after_run
        )
        return [BatchResult.from_json(text) for text in recorded]


def start_kafka(spark: SparkSession, config: IngestConfig) -> KafkaMirror:
    """Start the streaming query; use :func:`run_kafka` to start and wait.

    Raises:
        ConfigError: not a Kafka source, or a processing-time trigger on Databricks serverless, which runs
            ``availableNow`` only.
        KafkaRefused, RegistryRefused: the broker or the registry refused the credentials or the TLS
            handshake; nothing was written.
    """
    source = config.kafka
    if source is None:
        raise ConfigError("source: start_kafka needs --source kafka")
    if source.trigger is not Trigger.AVAILABLE_NOW and on_serverless():
        raise ConfigError(
            f"trigger: {source.trigger.value!r} does not run on Databricks serverless, whose streams support "
            "only availableNow; use --trigger available-now and schedule the job (e.g. a periodic "
            "trigger), or run it on a cluster"
        )
    kafka_source.check_access(spark, source)
    registry.check_access(config)
    committed = progress.load_progress(spark, config.state_path, config.stream_id)
    start = kafka_source.starting_offsets(source, committed.resume)
    # A module-level function and the config: all the batch needs, and nothing it could change for us.
    each_batch = functools.partial(process_kafka_batch, config)

    def launch(position: str) -> StreamingQuery:
        stream = kafka_source.read_stream(spark, source, position).observe(
            OBSERVED,
            F.count(F.lit(1)).alias("records"),
            F.coalesce(F.sum(F.length("value")), F.lit(0)).alias("bytes"),
            F.max("timestamp").alias("max_kafka_timestamp"),
        )
        writer = (
            stream.writeStream.queryName(f"ticdc-ingest-{config.stream_id}")
            .option("checkpointLocation", config.checkpoint_location)
            .foreachBatch(each_batch)
        )
        if source.trigger is Trigger.AVAILABLE_NOW:
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=source.trigger_interval)
        logger.info(
            "stream %s: reading %s from %s, starting at %s when %s has no offsets yet",
            config.stream_id,
            ",".join(source.topics) or f"pattern {source.topic_pattern}",
            source.bootstrap_servers,
            position,
            config.checkpoint_location,
        )
        return writer.start()

    mirror = KafkaMirror(launch(start), spark, config, committed.run_id)
    if start != kafka_source.EARLIEST:
        mirror._from_earliest = lambda: launch(kafka_source.EARLIEST)
    return mirror


def run_kafka(spark: SparkSession, config: IngestConfig) -> list[BatchResult]:
    """Mirror from Kafka: AvailableNow returns once caught up, processing-time runs until stopped."""
    mirror = start_kafka(spark, config)
    mirror.await_termination()
    return mirror.results()


def process_kafka_batch(config: IngestConfig, batch: DataFrame, batch_id: int) -> None:
    """The ``foreachBatch`` function: one micro-batch through the pipeline, its outcome recorded in Delta.

    It holds no state of its own and returns nothing: it reads our progress, applies, commits progress,
    then records the batch's result in the metrics table; a batch that fails with an IngestError records
    the error there before raising it, so the driver can raise the same error.
    """
    spark = batch.sparkSession
    try:
        result = _process_kafka_batch(batch, batch_id, config)
    except IngestError as exc:
        committed = progress.load_progress(spark, config.state_path, config.stream_id)
        metrics.record_failure(
            spark, config.state_path, config.stream_id, committed.run_id + 1, batch_id, exc
        )
        raise
    if result is not None:
        metrics.record_result(
            spark, config.state_path, config.stream_id, result.run_id, batch_id, result.to_json()
        )


def _process_kafka_batch(batch: DataFrame, batch_id: int, config: IngestConfig) -> BatchResult | None:
    spark = batch.sparkSession
    messages = cached(kafka_source.as_messages(batch))
    try:
        committed = progress.load_progress(spark, config.state_path, config.stream_id)
        spans = kafka_source.partition_spans(messages)
        if config.kafka is None or config.kafka.fail_on_data_loss:
            kafka_source.check_no_gap(spans, committed.resume)
        else:
            for pid, resume, first in kafka_source.find_gaps(spans, committed.resume):
                logger.warning(
                    "batch %d: %s resumes at %d but the batch starts at %d; fail-on-data-loss is false, so "
                    "offsets %d..%d are skipped and the mirror may miss changes",
                    batch_id, pid, resume, first, resume, first - 1,
                )  # fmt: skip
        fresh = {p: s for p, s in spans.items() if s.last >= committed.resume.get(p, 0)}
        if not fresh:
            # Spark replays a batch whose foreachBatch ended but whose commit did not reach the checkpoint.
            logger.info("batch %d: every record was applied by an earlier run; nothing to do", batch_id)
            return None
        try:
            result = process_batch(spark, messages.where(at_or_after(committed.resume)), config, committed)
        except TablesStopped as exc:
            # Everything else of the batch was applied and its progress committed; a long-running mirror
            # keeps the other tables current, and says in every batch which tables wait.
            logger.error("batch %d: %s", batch_id, exc)
            assert isinstance(exc.result, BatchResult)
            result = exc.result
    finally:
        messages.unpersist()
    result.batch_id = batch_id
    logger.info("batch metrics %s", orjson.dumps(result.metrics()).decode())
    return result
