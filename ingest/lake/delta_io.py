"""Delta I/O through Spark SQL and the DataFrame API only: the same on classic Spark and Spark Connect. I/O.

There is no Delta Connect server plugin for every Spark and Delta pair, and ``delta.tables.DeltaTable``
needs either that plugin or the JVM gateway; SQL needs neither. Every read, write, MERGE and ALTER of the
package's Delta tables goes through here: a table is addressed as ``delta.`path``` or, for a catalog table
(a ``catalog_names.TableName``), by its name, created as a managed table and written through ``writeTo``;
commit metadata and idempotent-write ids are session confs (``state.table_state.committing``), and Delta's
errors are told apart by their condition (``DELTA_TABLE_NOT_FOUND``, ``DELTA_CONCURRENT_APPEND``, ...),
which both clients report, rather than by exception class, which differs between them.

Creating tables so that a kill at any instant can be followed by simply creating them again: Delta makes a
table's ``_delta_log/`` directory (and ``_delta_log/_staged_commits/``) before it writes the table's first
commit. A process killed in between leaves a location that is not a table to Delta (reads fail with
DELTA_TABLE_NOT_FOUND) and that Delta also refuses to create a table at (``CREATE TABLE IF NOT EXISTS``
fails with DELTA_TABLE_NOT_FOUND, ``CREATE OR REPLACE`` with DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION).
Every creator calls :func:`prepare_to_create` first:
- the table test reads the table's schema (:func:`is_delta_table`), which Delta answers from the log;
- the log is listed with the ``binaryFile`` source's file index (``inputFiles()``; no file is read). Spark
  skips names starting with ``_`` or ``.``, so the listing shows commits, checkpoints and checksums, and
  not ``_staged_commits/``, ``_last_checkpoint`` or a commit's temporary ``.….tmp`` file;
- the leftover is removed by overwriting the location with an empty, partitioned DataFrame: Spark's static
  overwrite deletes the directory's contents and a partitioned write of no rows creates no file. Python's
  file functions would only see the client's own disk, and over Spark Connect the client may not see the
  storage at all.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from delta.exceptions.base import (
    ConcurrentAppendException,
    ConcurrentDeleteReadException,
    MetadataChangedException,
    ProtocolChangedException,
)
from pyspark.errors import AnalysisException, PySparkException
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ingest.errors import IngestError
from ingest.lake.names import TableName, check_part
from ingest.lake.names import quote as quote  # one of this module's SQL text helpers, defined with names
from ingest.lake.sql_text import (
    column_definition,
    properties_sql,
    sql_string,
    sql_type,
    table_ref,
)

logger = logging.getLogger(__name__)

LOG_DIR = "_delta_log"

# What Delta and Spark say when there is no Delta table at a path: nothing there, a directory without a
# committed log (or without any), or a directory inside a table.
NOT_A_TABLE = frozenset(
    {
        "PATH_NOT_FOUND",
        "DELTA_PATH_DOES_NOT_EXIST",
        "DELTA_TABLE_NOT_FOUND",
        "DELTA_MISSING_DELTA_TABLE",
        "DELTA_INVALID_PARTITION_PATH",
        # by name
        "TABLE_OR_VIEW_NOT_FOUND",
        "SCHEMA_NOT_FOUND",
    }
)
# Commit conflicts a MERGE is retried on (a condition may carry a subclass: DELTA_CONCURRENT_APPEND.WITH_…).
CONFLICTS = frozenset(
    {
        "DELTA_CONCURRENT_APPEND",
        "DELTA_CONCURRENT_DELETE_READ",
        "DELTA_METADATA_CHANGED",
        "DELTA_PROTOCOL_CHANGED",
    }
)
# On classic Spark, importing ``delta.exceptions`` makes these conflicts arrive as Delta's own classes, which
# carry no condition; over Spark Connect they arrive as Spark Connect errors with one.
_CONFLICT_CLASSES = (
    ConcurrentAppendException,
    ConcurrentDeleteReadException,
    MetadataChangedException,
    ProtocolChangedException,
)


# ---------------------------------------------------------------------------------------------------------
# Errors


def condition(exc: BaseException) -> str | None:
    """The error condition of a Spark error (classic or Connect), e.g. ``DELTA_TABLE_NOT_FOUND``."""
    if isinstance(exc, PySparkException):
        return exc.getCondition()
    return None


def is_commit_conflict(exc: BaseException) -> bool:
    """Whether a write lost a race with another commit and may simply be tried again."""
    if isinstance(exc, _CONFLICT_CLASSES):
        return True
    name = condition(exc)
    return name is not None and name.split(".")[0] in CONFLICTS


def is_not_a_table(exc: BaseException) -> bool:
    """Whether an error says there is no Delta table at the path read."""
    name = condition(exc)
    return isinstance(exc, AnalysisException) and name is not None and name.split(".")[0] in NOT_A_TABLE


# ---------------------------------------------------------------------------------------------------------
# Reading


def read(spark: SparkSession, path: str, version: int | None = None) -> DataFrame:
    """The table's rows, as of ``version`` if given (time travel)."""
    if isinstance(path, TableName):
        at = "" if version is None else f" VERSION AS OF {int(version)}"
        return spark.sql(f"SELECT * FROM {path}{at}")
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", int(version))
    return reader.load(path)


def stream_changes(spark: SparkSession, path: str, first: int) -> DataFrame:
    """A streaming read of the table's change data feed from version ``first`` on."""
    reader = spark.readStream.format("delta").option("readChangeFeed", "true")
    reader = reader.option("startingVersion", int(first))
    return reader.table(str(path)) if isinstance(path, TableName) else reader.load(path)


def is_delta_table(spark: SparkSession, path: str) -> bool:
    """Whether a Delta table with at least one commit is at ``path`` (as ``DeltaTable.isDeltaTable``).

    Resolving the table's schema reads the log's newest state only, and says so quietly when there is none.
    A catalog table is asked of the catalog: a failed read of an absent one would be logged by pyspark,
    whose error logging also swaps the process's logger class while it runs (not thread-safe).
    """
    if isinstance(path, TableName):
        return bool(spark.catalog.tableExists(str(path)))
    try:
        read(spark, path).schema  # noqa: B018 - resolving the read is the test
    except AnalysisException as exc:
        if is_not_a_table(exc):
            return False
        raise
    return True


def detail(spark: SparkSession, path: str) -> Row:
    """``DESCRIBE DETAIL``: one row with the table's format, location, properties, tableFeatures, ..."""
    row = spark.sql(f"DESCRIBE DETAIL {table_ref(path)}").first()
    if row is None:  # pragma: no cover - Delta always answers one row
        raise IngestError(f"{path}: DESCRIBE DETAIL returned nothing")
    return row


FEATURE_PREFIX = "delta.feature."
_PROTOCOL_KEYS = ("delta.minReaderVersion", "delta.minWriterVersion")


def _show_properties(spark: SparkSession, path: str, version: int | None = None) -> dict[str, str]:
    # SHOW TBLPROPERTIES reads the newest metadata and protocol only. DESCRIBE DETAIL also counts the
    # table's files, which right after a commit means rebuilding the snapshot's file list: about 20 times
    # the cost on a small table, paid on every DDL. A path ending in @v<n> names version n.
    if isinstance(path, TableName) and version is not None:
        # SHOW TBLPROPERTIES takes no version; a catalog table's storage path does, with @v<n>. A catalog
        # that refuses path access to its managed tables gets the newest properties instead, which differ
        # only where a later DDL changed the key, the partitioning or the indexes.
        location = detail(spark, path)["location"]
        try:
            return _show_properties(spark, location, version)
        except PySparkException as exc:  # a refusal may be an analysis error or a permission error
            logger.warning(
                "%s: version %d's properties are not readable by path (%s); using the newest",
                path.plain(),
                version,
                str(exc).splitlines()[0],
            )
            return _show_properties(spark, path)
    at = path if version is None else f"{path}@v{int(version)}"
    rows = spark.sql(f"SHOW TBLPROPERTIES {table_ref(at)}").collect()
    return {r["key"]: r["value"] for r in rows}


def properties(spark: SparkSession, path: str, version: int | None = None) -> dict[str, str]:
    """The table's properties (``TBLPROPERTIES``, as DESCRIBE DETAIL lists them: no protocol entries), as of
    ``version`` if given."""
    return properties_and_features(spark, path, version)[0]


def properties_and_features(
    spark: SparkSession, path: str, version: int | None = None
) -> tuple[dict[str, str], set[str]]:
    """The table's properties, and the table features its protocol names (DESCRIBE DETAIL's
    ``tableFeatures`` for a table on the table-features protocol), from one read."""
    shown = _show_properties(spark, path, version)
    features = {k[len(FEATURE_PREFIX) :] for k in shown if k.startswith(FEATURE_PREFIX)}
    kept = {k: v for k, v in shown.items() if not k.startswith(FEATURE_PREFIX) and k not in _PROTOCOL_KEYS}
    return kept, features


def history(spark: SparkSession, path: str, limit: int | None = None) -> DataFrame:
    """``DESCRIBE HISTORY``, newest first; ``limit``: only that many of the newest commits."""
    return spark.sql(f"DESCRIBE HISTORY {table_ref(path)}" + (f" LIMIT {int(limit)}" if limit else ""))


def list_files(spark: SparkSession, path: str) -> list[str] | None:
    """The files Spark sees under ``path`` (or ``path`` itself, a file), sorted; None when nothing is there.

    No file is read. Names starting with ``_`` or ``.`` are skipped, as Spark's file sources skip them.
    """
    try:
        # Two paths, not one: for a single path Spark first probes it for a streaming sink's metadata and
        # logs a stack trace when it does not exist.
        return sorted(set(spark.read.format("binaryFile").load([path, path]).inputFiles()))
    except AnalysisException as exc:
        if condition(exc) == "PATH_NOT_FOUND":
            return None
        raise


# ---------------------------------------------------------------------------------------------------------
# Creating and altering


def create_table(
    spark: SparkSession,
    path: str,
    schema: T.StructType,
    *,
    properties: Mapping[str, str] | None = None,
    partition_by: Sequence[str] = (),
    replace: bool = False,
) -> None:
    """CREATE TABLE IF NOT EXISTS (``replace``: REPLACE TABLE, which needs one there) at ``path``.

    Column comments come from each field's ``comment`` metadata. Callers run :func:`prepare_to_create` first.
    """
    verb = "REPLACE TABLE" if replace else "CREATE TABLE IF NOT EXISTS"
    ensure_schema(spark, path)
    columns = ", ".join(column_definition(f) for f in schema.fields)
    text = f"{verb} {table_ref(path)} ({columns}) USING DELTA"
    if partition_by:
        text += f" PARTITIONED BY ({', '.join(quote(c) for c in partition_by)})"
    if properties:
        text += f" TBLPROPERTIES ({properties_sql(properties)})"
    with catalog_naming(path):
        spark.sql(text)


class CatalogNameRefused(IngestError):
    """The catalog cannot hold a table's (or its schema's) name."""


NAME_FIX = (
    "leave the table out of the changefeed (its filter rules), set --target-schema to a template the "
    "catalog accepts, or mirror by path (--target-path), where any name is a directory"
)


def check_name(path: str) -> None:
    """Refuse, before anything is written, a catalog table name that no catalog holds.

    Raises:
        CatalogNameRefused: a part holds a character a catalog name may not hold, or is too long.
    """
    if not isinstance(path, TableName):
        return
    for part, what in zip(path.parts[-2:], ("schema", "table"), strict=True):
        why = check_part(part, what)
        if why:
            raise CatalogNameRefused(f"{path.plain()}: {why}; {NAME_FIX}")


@contextmanager
def catalog_naming(path: str) -> Iterator[None]:
    """Around a statement that creates a catalog table: the catalog's own refusal of its name, said plainly
    (Spark's session catalog takes only letters, digits and underscores)."""
    check_name(path)
    try:
        yield
    except AnalysisException as exc:
        if isinstance(path, TableName) and condition(exc) == "INVALID_SCHEMA_OR_RELATION_NAME":
            raise CatalogNameRefused(
                f"{path.plain()}: the catalog refuses this name ({str(exc).splitlines()[0]}); {NAME_FIX}"
            ) from exc
        raise


def ensure_schema(spark: SparkSession, path: str) -> None:
    """A catalog table's schema, created when absent (nothing for a path)."""
    if isinstance(path, TableName):
        with catalog_naming(path):
            spark.sql(f"CREATE SCHEMA IF NOT EXISTS {path.schema}")


def alter_table(spark: SparkSession, path: str, action: str) -> None:
    """``ALTER TABLE delta.`path` <action>``."""
    spark.sql(f"ALTER TABLE {table_ref(path)} {action}")


def set_properties(spark: SparkSession, path: str, properties: Mapping[str, str]) -> None:
    """ALTER TABLE SET TBLPROPERTIES: one commit for all of them."""
    if properties:
        alter_table(spark, path, f"SET TBLPROPERTIES ({properties_sql(properties)})")


def add_column(spark: SparkSession, path: str, field: T.StructField, position: str = "") -> None:
    """ALTER TABLE ADD COLUMNS; ``position``: "" (last), "FIRST" or "AFTER `c`" (see :func:`after`)."""
    alter_table(spark, path, f"ADD COLUMNS ({column_definition(field)}{' ' + position if position else ''})")


def after(name: str) -> str:
    return f"AFTER {quote(name)}"


def drop_column(spark: SparkSession, path: str, name: str) -> None:
    alter_table(spark, path, f"DROP COLUMN {quote(name)}")


def rename_column(spark: SparkSession, path: str, old: str, new: str) -> None:
    alter_table(spark, path, f"RENAME COLUMN {quote(old)} TO {quote(new)}")


def change_column_type(spark: SparkSession, path: str, name: str, data_type: T.DataType) -> None:
    alter_table(spark, path, f"ALTER COLUMN {quote(name)} TYPE {sql_type(data_type)}")


def comment_column(spark: SparkSession, path: str, name: str, comment: str) -> None:
    alter_table(spark, path, f"ALTER COLUMN {quote(name)} COMMENT {sql_string(comment)}")


# ---------------------------------------------------------------------------------------------------------
# Writing rows


@contextmanager
def temp_view(spark: SparkSession, frame: DataFrame, prefix: str = "ingest_source") -> Iterator[str]:
    """A session temp view of ``frame`` under a name no other caller uses; dropped afterwards."""
    name = f"{prefix}_{uuid.uuid4().hex}"
    frame.createOrReplaceTempView(name)
    try:
        yield name
    finally:
        spark.catalog.dropTempView(name)


def merge(
    spark: SparkSession,
    path: str,
    source: DataFrame,
    on: str,
    *clauses: str,
    target: str = "t",
    alias: str = "s",
) -> dict[str, Any]:
    """``MERGE INTO delta.`path` <target> USING <source> <alias> ON <on> <clauses>``; returns Delta's metrics.

    ``clauses`` are SQL text, in order: ``WHEN MATCHED AND … THEN UPDATE SET …``, ``WHEN NOT MATCHED THEN
    INSERT *``, ... The metrics are ``num_affected_rows``, ``num_updated_rows``, ``num_deleted_rows`` and
    ``num_inserted_rows`` (empty when Delta reports none).
    """
    with temp_view(spark, source, "ingest_merge") as view:
        text = f"MERGE INTO {table_ref(path)} AS {target} USING {quote(view)} AS {alias} ON {on}"
        metrics = spark.sql(" ".join([text, *clauses])).first()
    return metrics.asDict() if metrics is not None else {}


def update(spark: SparkSession, path: str, values: Mapping[str, str], where: str | None = None) -> None:
    """``UPDATE … SET <column> = <SQL expression>, … [WHERE <where>]``."""
    assignments = ", ".join(f"{quote(name)} = {value}" for name, value in values.items())
    spark.sql(f"UPDATE {table_ref(path)} SET {assignments}" + (f" WHERE {where}" if where else ""))


def delete(spark: SparkSession, path: str, where: str | None = None) -> None:
    """``DELETE FROM … [WHERE <where>]``; every row without a predicate."""
    spark.sql(f"DELETE FROM {table_ref(path)}" + (f" WHERE {where}" if where else ""))


def optimize(spark: SparkSession, path: str) -> None:
    """Compact the table's small files (``OPTIMIZE``)."""
    spark.sql(f"OPTIMIZE {table_ref(path)}")


def write(frame: DataFrame, path: str, mode: str = "append", **options: str) -> None:
    """Append (or overwrite, with ``replaceWhere``, ``overwriteSchema``, ... as options) rows to the table.

    A catalog table is written through its name (``writeTo``), which keeps its properties on overwrite."""
    if isinstance(path, TableName):
        if mode == "append" and not prepare_to_create(frame.sparkSession, path):
            ensure_schema(frame.sparkSession, path)
            with catalog_naming(path):
                frame.writeTo(str(path)).using("delta").options(**options).create()
            return
        where = options.pop("replaceWhere", None)
        if mode == "overwrite" and where:
            # writeTo's overwrite(condition) needs a condition Delta can take as data source filters, and
            # refuses others (coalesce, a cast of the column): replaceWhere takes any, and by name too.
            selective = frame.write.format("delta").mode("overwrite").options(replaceWhere=where, **options)
            selective.saveAsTable(str(path))
            return
        writer = frame.writeTo(str(path)).options(**options)
        if mode == "append":
            writer.append()
        elif mode == "overwrite":
            writer.overwrite(F.lit(True))
        else:  # pragma: no cover - callers append or overwrite
            raise ValueError(f"write mode {mode!r}")
        return
    frame.write.format("delta").mode(mode).options(**options).save(path)


# ---------------------------------------------------------------------------------------------------------
# Creating again after a kill


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
    if is_delta_table(spark, path):
        return True
    if isinstance(path, TableName):
        location = managed_location(spark, path)
        if location is not None and list_files(spark, location) is not None:
            # Delta commits a managed table's first version before the catalog lists it: a kill in between
            # leaves files no catalog entry points to, and Spark refuses to create a table over them.
            logger.warning(
                "%s: a table creation was cut short (files at %s, no catalog entry); creating it again",
                path.plain(),
                location,
            )
            _empty_directory(spark, location)
        return False
    log = f"{path.rstrip('/')}/{LOG_DIR}"
    files = list_files(spark, log)
    if files is None:  # the common case: a table never created
        return False
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


def managed_location(spark: SparkSession, path: TableName) -> str | None:
    """Where the catalog would put the managed table ``path`` (its schema's location, then the table's
    name, as Spark's session catalog lays it out); None when the schema is not there or has no location
    Spark can list (a governed catalog places managed tables itself, and creates them in one step)."""
    if not spark.catalog.databaseExists(str(path.schema)):
        return None
    rows = spark.sql(f"DESCRIBE SCHEMA EXTENDED {path.schema}").collect()
    location = next((str(r[1]) for r in rows if str(r[0]).lower() == "location"), "")
    if not location.startswith(("file:", "/")):
        return None
    return "/".join((location.rstrip("/"), path.table.lower()))  # Spark's own layout of a managed table


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
