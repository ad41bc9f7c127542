"""What each Kafka micro-batch did, for the driver that started the stream. I/O.

``foreachBatch`` runs our batch function wherever Spark chooses: in the driver's JVM callback on classic
Spark, in a Python process beside the server on Spark Connect (Databricks serverless, standard access mode).
Nothing it records in memory reaches the client, so it records in Delta: ``<state>/metrics`` gets one row
per batch, written after the batch's progress commit, with its ``BatchResult`` as JSON, or, for a
batch that failed with an :class:`IngestError`, the error's class and message. The driver reads them back
(:func:`load_results`, :func:`load_failure`).

Like the progress table it is append-only and pruned by ``progress.prune_runs``: every ``COMPACT_EVERY``
runs it keeps each stream's newest ``KEEP_RUNS`` runs and is compacted, so it does not grow without bound.
"""

from __future__ import annotations

import logging
from datetime import datetime, timezone

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ingest import errors
from ingest.errors import IngestError
from ingest.lake import delta_io
from ingest.lake import names as catalog_names
from ingest.state import progress

logger = logging.getLogger(__name__)

METRICS_DIR = "metrics"

SCHEMA = T.StructType(
    [
        T.StructField("stream_id", T.StringType()),
        T.StructField("run_id", T.LongType()),
        T.StructField("batch_id", T.LongType()),
        T.StructField("recorded_at", T.TimestampType()),
        T.StructField("result", T.StringType()),  # BatchResult.to_json(); None for a failed batch
        T.StructField("error_class", T.StringType()),  # an ingest.errors class name, for a failed batch
        T.StructField("error", T.StringType()),  # its message
    ]
)


def metrics_path(state_path: str) -> str:
    return catalog_names.child(state_path, METRICS_DIR)


def record_result(
    spark: SparkSession, state_path: str, stream_id: str, run_id: int, batch_id: int, result: str
) -> None:
    """Append a finished batch's result (``BatchResult.to_json()``, after its progress commit), and prune
    the table as the progress table is pruned."""
    row = (stream_id, run_id, batch_id, datetime.now(timezone.utc), result, None, None)
    _append(spark, state_path, row)
    progress.prune_runs(spark, metrics_path(state_path), stream_id, run_id)


def record_failure(
    spark: SparkSession, state_path: str, stream_id: str, run_id: int, batch_id: int, error: IngestError
) -> None:
    """Append a failed batch's error: the run it would have been, its class and message."""
    row = (stream_id, run_id, batch_id, datetime.now(timezone.utc), None, type(error).__name__, str(error))
    _append(spark, state_path, row)


def load_results(spark: SparkSession, state_path: str, stream_id: str, after_run: int) -> list[str]:
    """The results (as recorded) of the stream's batches that committed runs after ``after_run``, in order."""
    rows = (
        _table(spark, state_path, stream_id)
        .where((F.col("run_id") > after_run) & F.col("result").isNotNull())
        .select("run_id", "result")
        .orderBy("run_id")
        .collect()
    )
    return [str(row["result"]) for row in rows]


def load_failure(
    spark: SparkSession, state_path: str, stream_id: str, after_run: int, text: str
) -> IngestError | None:
    """The IngestError a batch of the stream recorded after ``after_run`` whose message is in ``text``.

    ``text`` is what the failed query said (its StreamingQueryException), which quotes the batch's error:
    that tells this query's failure from an older one recorded for the same runs.
    """
    rows = (
        _table(spark, state_path, stream_id)
        .where((F.col("run_id") > after_run) & F.col("error").isNotNull())
        .select("error_class", "error")
        .orderBy(F.col("recorded_at").desc())
        .collect()
    )
    for row in rows:
        message = str(row["error"])
        first_line = message.splitlines()[0] if message else ""
        if first_line and first_line in text:
            return _rebuild(str(row["error_class"]), message)
    return None


def _append(spark: SparkSession, state_path: str, row: tuple[object, ...]) -> None:
    delta_io.write(spark.createDataFrame([row], SCHEMA), metrics_path(state_path), "append")


def _table(spark: SparkSession, state_path: str, stream_id: str) -> DataFrame:
    path = metrics_path(state_path)
    if not delta_io.is_delta_table(spark, path):
        return spark.createDataFrame([], SCHEMA)
    return delta_io.read(spark, path).where(F.col("stream_id") == stream_id)


def _rebuild(class_name: str, message: str) -> IngestError:
    """The error as the batch raised it: its class from ``ingest.errors``, its message."""
    cls = getattr(errors, class_name, None)
    if not (isinstance(cls, type) and issubclass(cls, IngestError)):
        return IngestError(message)
    try:
        return cls(message)
    except TypeError:  # a class whose constructor builds the message from parts (DecodeError)
        error = cls.__new__(cls)
        Exception.__init__(error, message)
        return error
