"""Creating Delta tables so that a kill at any instant can be followed by simply creating them again. I/O.

Delta makes a table's ``_delta_log/`` directory (and ``_delta_log/_staged_commits/``) before it writes the
table's first commit. A process killed in between leaves a location that is not a table to Delta
(``DeltaTable.isDeltaTable`` is false, reads fail with DELTA_TABLE_NOT_FOUND) and that Delta also refuses
to create a table at (``createIfNotExists`` fails with DELTA_TABLE_NOT_FOUND, ``createOrReplace`` with
DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION). Every creator calls :func:`prepare_to_create` first.

Only client-side Spark and Delta APIs are used (no JVM gateway, no SparkContext), so this also runs over
Spark Connect, where the client may not see the storage at all, and on any storage Spark can write to:
- the table test is Delta's own (``DeltaTable.isDeltaTable``);
- the log is listed with the ``binaryFile`` source's file index (``inputFiles()``; no file is read). Spark
  skips names starting with ``_`` or ``.``, so the listing shows commits, checkpoints and checksums, and
  not ``_staged_commits/``, ``_last_checkpoint`` or a commit's temporary ``.….tmp`` file;
- the leftover is removed by overwriting the location with an empty, partitioned DataFrame: Spark's static
  overwrite deletes the directory's contents and a partitioned write of no rows creates no file. Python's
  file functions would only see the client's own disk.
"""

from __future__ import annotations

import logging

from delta.tables import DeltaTable
from pyspark.errors import AnalysisException
from pyspark.sql import SparkSession

from ingest.errors import IngestError

logger = logging.getLogger(__name__)

LOG_DIR = "_delta_log"


class NotADeltaTable(IngestError):
    """A location holds a Delta log with files in it that Delta does not read as a table: left as is."""


def prepare_to_create(spark: SparkSession, path: str) -> bool:
    """Whether a Delta table exists at ``path``; when a creation was cut short there, clear it first.

    A location whose ``_delta_log/`` holds no file at all (at most empty directories such as
    ``_staged_commits/``, or hidden temporary files) was never committed to: nothing can reference the
    files under it, so it is emptied and False returned, and the caller creates the table as if it had
    never been tried. A log that holds any file is never touched.

    Raises:
        NotADeltaTable: the log holds files, yet Delta reads no table there.
    """
    if DeltaTable.isDeltaTable(spark, path):
        return True
    log = f"{path.rstrip('/')}/{LOG_DIR}"
    try:
        # Two paths, not one: for a single path Spark first probes it for a streaming sink's metadata and
        # logs a stack trace when it does not exist, which is the common case (a table never created).
        files = sorted(set(spark.read.format("binaryFile").load([log, log]).inputFiles()))
    except AnalysisException as exc:
        if exc.getCondition() == "PATH_NOT_FOUND":
            return False
        raise
    if files:
        raise NotADeltaTable(
            f"{path}: {LOG_DIR} holds {len(files)} file(s) (e.g. {files[0]}) but Delta reads no table "
            "there; it was left as is"
        )
    logger.warning(
        "%s: a table creation was cut short here (no commit in %s); creating it again", path, LOG_DIR
    )
    _empty_directory(spark, path)
    return False


def _empty_directory(spark: SparkSession, path: str) -> None:
    """Delete everything under ``path`` (the directory itself stays, empty)."""
    (
        spark.createDataFrame([], "value STRING, part INT")
        .write.format("json")
        .mode("overwrite")
        .partitionBy("part")
        .option("partitionOverwriteMode", "static")
        .option("mapreduce.fileoutputcommitter.marksuccessfuljobs", "false")
        .save(path)
    )
