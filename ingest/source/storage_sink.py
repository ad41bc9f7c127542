"""TiCDC's storage sink (Canal-JSON or CSV files) as Kafka-shaped rows, so the pipeline needs no second path.
I/O.

Layout::

    <root>/metadata                                         {"checkpoint-ts": <tso>}
    <root>/<db>/<table>/<table-version>/[<partition-id>/][<date>/]CDC<index>.json (or .csv)
    <root>/<db>/<table>/meta/schema_<table-version>_<crc>.json
    <root>/<db>/meta/schema_<version>_<crc>.json

Positions, stable across runs so committed resume offsets stay valid:

- every data directory (``<db>/<table>/<version>[/<pid>][/<date>]``) is one synthetic partition: topic =
  the directory relative to the root, partition 0. TiCDC numbers the files of a directory in the order it
  writes them and never rewrites one, so offset = ``index << 25 | line`` grows with the data (for CSV, the
  record's number in its file: a quoted value may hold line breaks). A CSV record's key is its table
  version's layout (``ingest.source.storage_layout``), which says what its fields are;
- the schema files of a table (or database) form one partition, topic ``<db>/<table>/meta``: a DDL's
  offset is its table version, which is the DDL's commitTs;
- the metadata file's checkpoint-ts is a watermark on every synthetic partition (and on every one an
  earlier run saw, so a directory that retention removed cannot hold G back). Its offset is the last slot
  of the newest file read, so a run resumes at the next file; in a meta partition it is the checkpoint-ts
  itself, below every DDL still to come.

The metadata file is read before the files are listed: every transaction up to the checkpoint is then in
a file that the listing sees.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import orjson
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ingest.decode import canal_json as cj
from ingest.decode import storage_csv
from ingest.decode.storage_csv import CsvOptions
from ingest.errors import ConfigError
from ingest.lake.delta_io import list_files
from ingest.model import MESSAGE_COLUMNS, PartitionId
from ingest.source import MESSAGE_SCHEMA, at_or_after
from ingest.source.storage_layout import layouts

logger = logging.getLogger(__name__)

METADATA_FILE = "metadata"
CHECKPOINT_TS = "checkpoint-ts"
DATA_EXTENSIONS = {"canal-json": ".json", "csv": ".csv"}
SCHEMA_GLOB = "schema_*.json"
META_DIR = "meta"
LINE_BITS = 25  # lines per file: 32M, far above what a 64 MiB (default file-size) file can hold
LAST_SLOT = (1 << LINE_BITS) - 1
SchemaFile = dict[str, Any]  # a schema file as parsed

# TiDB DDL action codes (schema file "Type") -> Canal-JSON "type"; the rest are QUERY or ALTER.
_CANAL_TYPES = {3: "CREATE", 4: "ERASE", 11: "TRUNCATE", 14: "RENAME", 7: "CINDEX", 8: "DINDEX"}
_ALTER_ACTIONS = {5, 6, 12, 13, 15, 16, 17, 19, 20, 22, 23, 32, 33}


@dataclass(frozen=True)
class DataFile:
    """One CDC<index>.json file and the synthetic partition it belongs to."""

    path: str
    partition: PartitionId
    index: int

    @property
    def first_offset(self) -> int:
        return self.index << LINE_BITS

    @property
    def last_slot(self) -> int:
        return self.first_offset | LAST_SLOT


def _exists(spark: SparkSession, path: str) -> bool:
    """Ask first, quietly: reading a missing path logs a long stack trace before Spark says it is missing."""
    return bool(list_files(spark, path))


def read_checkpoint(spark: SparkSession, input_path: str) -> tuple[str, int] | None:
    """The root as Spark spells its paths, and the metadata file's checkpoint-ts; None if there is none."""
    path = f"{input_path.rstrip('/')}/{METADATA_FILE}"
    if not _exists(spark, path):
        return None
    try:
        row = spark.read.format("binaryFile").load(path).select("path", "content").first()
    except AnalysisException:
        return None
    if row is None:
        return None
    try:
        checkpoint = orjson.loads(bytes(row["content"])).get(CHECKPOINT_TS)
    except (orjson.JSONDecodeError, AttributeError):
        return None  # e.g. a Dumpling export's metadata file, which is text
    if not isinstance(checkpoint, int):
        return None
    return str(row["path"])[: -len(METADATA_FILE) - 1], checkpoint


def data_file(root: str, path: str, extension: str = ".json") -> DataFile | None:
    """Where a listed CDC file belongs; None for a file outside the layout (e.g. under a meta/ folder)."""
    relative = path[len(root) :].lstrip("/").split("/")
    *directories, name = relative
    # <db>/<table>/<table-version>/...: a table may be called "meta", but a folder below the version may not.
    if len(directories) < 3 or not directories[2].isdigit() or META_DIR in directories[3:]:
        return None
    if not name.startswith("CDC"):
        return None
    digits = name[3:].removesuffix(extension)
    if not digits.isdigit():
        return None
    return DataFile(path, PartitionId("/".join(directories), 0), int(digits))


def schema_partition(root: str, path: str) -> PartitionId | None:
    """The meta partition of a schema file: ``<db>/<table>/meta`` or ``<db>/meta``."""
    relative = path[len(root) :].lstrip("/").split("/")
    *directories, _ = relative
    if not directories or directories[-1] != META_DIR or len(directories) not in (2, 3):
        return None
    return PartitionId("/".join(directories), 0)


def ddl_message(schema_file: Mapping[str, object]) -> tuple[int, bytes] | None:
    """A schema file as a Canal-JSON DDL message at its table version; None when it carries no DDL.

    A new table-version directory also starts when TiCDC reschedules a table or restarts; its schema
    file has no query, and is no DDL.
    """
    query = schema_file.get("Query")
    version = schema_file.get("TableVersion")
    if not query or not isinstance(version, int):
        return None
    action = schema_file.get("Type")
    code = action if isinstance(action, int) else -1
    canal_type = _CANAL_TYPES.get(code, "ALTER" if code in _ALTER_ACTIONS else "QUERY")
    database, table = schema_file.get("Schema") or "", schema_file.get("Table") or ""
    message = {
        "id": 0, cj.FIELD_DATABASE: database, cj.FIELD_TABLE: table,
        cj.FIELD_PK_NAMES: None, cj.FIELD_IS_DDL: True, cj.FIELD_TYPE: canal_type, cj.FIELD_ES: version >> 18,
        cj.FIELD_TS: version >> 18, cj.FIELD_SQL: query, cj.FIELD_SQL_TYPE: None, cj.FIELD_MYSQL_TYPE: None,
        cj.FIELD_DATA: None, cj.FIELD_OLD: None, cj.FIELD_TIDB: {cj.TIDB_COMMIT_TS: version},
    }  # fmt: skip
    return version, orjson.dumps(message)


def watermark_message(checkpoint_ts: int) -> bytes:
    return orjson.dumps(
        {
            "id": 0,
            cj.FIELD_DATABASE: "",
            cj.FIELD_TABLE: "",
            cj.FIELD_PK_NAMES: None,
            cj.FIELD_IS_DDL: False,
            cj.FIELD_TYPE: cj.TYPE_WATERMARK,
            cj.FIELD_ES: checkpoint_ts >> 18,
            cj.FIELD_TS: checkpoint_ts >> 18,
            cj.FIELD_SQL: "",
            cj.FIELD_SQL_TYPE: None,
            cj.FIELD_MYSQL_TYPE: None,
            cj.FIELD_DATA: None,
            cj.FIELD_OLD: None,
            cj.FIELD_TIDB: {cj.TIDB_WATERMARK_TS: checkpoint_ts},
        }
    )


def read_messages(
    spark: SparkSession, input_path: str, start: Mapping[PartitionId, int], csv: CsvOptions | None = None
) -> DataFrame:
    """A storage-sink directory as Kafka-shaped rows at or after each synthetic partition's start offset.

    ``csv``: the sink writes CSV with these options; each record comes with its table version's layout
    as its key (:mod:`ingest.decode.storage_csv`). Otherwise the sink writes Canal-JSON.

    Raises:
        ConfigError: there is no metadata file with a checkpoint-ts at the root.
    """
    found = read_checkpoint(spark, input_path)
    if found is None:
        raise ConfigError(
            f"input: {input_path} has no '{METADATA_FILE}' file with a {CHECKPOINT_TS}; point --input at the "
            "storage sink's root (the folder the changefeed's sink URI names), or set --input-format"
        )
    root, checkpoint = found
    extension = DATA_EXTENSIONS["csv" if csv is not None else "canal-json"]
    files = _list_data_files(spark, input_path, root, extension)
    fresh = [f for f in files if f.last_slot >= start.get(f.partition, 0)]
    last_slot: dict[PartitionId, int] = {}
    for f in files:
        last_slot[f.partition] = max(last_slot.get(f.partition, 0), f.last_slot)
    schema_files = _schema_files(spark, input_path, root)
    control: list[tuple[str, int, int, None, None, bytes]] = []
    for pid, offset, value in _ddl_messages(schema_files):
        if offset >= start.get(pid, 0):
            control.append((pid.topic, pid.partition, offset, None, None, value))
        last_slot.setdefault(pid, -1)
    watermark = watermark_message(checkpoint)
    for pid in set(last_slot) | set(start):
        if pid.topic.endswith("/" + META_DIR) or pid.topic == META_DIR:
            offset = checkpoint
        else:
            # A partition with no new file gets its watermark just below where it resumes.
            offset = max(last_slot.get(pid, 0), start.get(pid, 0) - 1)
        control.append((pid.topic, pid.partition, offset, None, None, watermark))
    logger.info(
        "storage sink %s: checkpoint-ts %d, %d data files (%d new) in %d directories",
        root,
        checkpoint,
        len(files),
        len(fresh),
        len({f.partition for f in files}),
    )
    rows = spark.createDataFrame(control, MESSAGE_SCHEMA)
    if fresh and csv is not None:
        keys = _layout_keys(fresh, [parsed for _, parsed in schema_files], csv)
        rows = rows.unionByName(_read_csv_records(spark, fresh, start, keys, csv.quote))
    elif fresh:
        rows = rows.unionByName(_read_lines(spark, fresh, start))
    return rows


def _below_tables(input_path: str) -> list[str]:
    """Every ``<db>/<table>`` (and ``<db>/meta``) folder, as a glob. Spark's listing skips names that start
    with ``_`` as hidden, and TiDB tables often do (gh-ost's ``_t_gho``, pt-online-schema-change's
    ``_t_new``): a glob names them, and below them no name starts with ``_``.

    The ``metadata`` file rides along, left out by every file filter here: given one path, Spark first
    looks for a streaming sink's log below it, and on a glob that logs a stack trace each time."""
    root = input_path.rstrip("/")
    return [f"{root}/*/*", f"{root}/{METADATA_FILE}"]


def _list_data_files(spark: SparkSession, input_path: str, root: str, extension: str) -> list[DataFile]:
    try:
        listed = (
            spark.read.format("binaryFile")
            .option("recursiveFileLookup", "true")
            .option("pathGlobFilter", f"CDC*{extension}")
            .load(_below_tables(input_path))
            .select("path")
            .collect()
        )
    except AnalysisException:
        return []  # no data file yet
    found = (data_file(root, str(r["path"]), extension) for r in listed)
    return [f for f in found if f is not None]


def _schema_files(spark: SparkSession, input_path: str, root: str) -> list[tuple[PartitionId, SchemaFile]]:
    """Every schema file of the layout, parsed, with its meta partition."""
    try:
        listed = (
            spark.read.format("binaryFile")
            .option("recursiveFileLookup", "true")
            .option("pathGlobFilter", SCHEMA_GLOB)
            .load(_below_tables(input_path))
            .select("path", "content")
            .collect()
        )
    except AnalysisException:
        return []
    result: list[tuple[PartitionId, SchemaFile]] = []
    for row in listed:
        pid = schema_partition(root, str(row["path"]))
        if pid is None:
            continue
        try:
            parsed = orjson.loads(bytes(row["content"]))
        except orjson.JSONDecodeError as exc:
            raise ConfigError(f"input: schema file {row['path']} is not JSON: {exc}") from exc
        if isinstance(parsed, dict):
            result.append((pid, parsed))
    return result


def _ddl_messages(schema_files: list[tuple[PartitionId, SchemaFile]]) -> list[tuple[PartitionId, int, bytes]]:
    """Every schema file that carries a DDL: its meta partition, offset (the DDL's commitTs) and message."""
    result: list[tuple[PartitionId, int, bytes]] = []
    for pid, parsed in schema_files:
        message = ddl_message(parsed)
        if message is not None:
            result.append((pid, *message))
    return result


def _version_of(partition: PartitionId) -> tuple[str, str, int]:
    database, table, version = partition.topic.split("/")[:3]
    return database, table, int(version)


def _layout_keys(
    files: list[DataFile], schema_files: list[SchemaFile], csv: CsvOptions
) -> dict[PartitionId, bytes]:
    """Each data directory's layout key; empty where no schema file describes its table version (its
    records are then quarantined, saying so)."""
    known = layouts(schema_files, csv)
    keys: dict[PartitionId, bytes] = {}
    for f in files:
        layout = known.get(_version_of(f.partition))
        keys[f.partition] = layout.to_key() if layout is not None else b""
    return keys


def _contents(
    spark: SparkSession, files: list[DataFile], keys: Mapping[PartitionId, bytes] | None = None
) -> DataFrame:
    """Each file's bytes with its synthetic partition, first offset, modification time and key (null without
    ``keys``)."""
    index = spark.createDataFrame(
        [
            (f.path, f.partition.topic, f.partition.partition, f.first_offset, (keys or {}).get(f.partition))
            for f in files
        ],
        "path string, topic string, partition int, first_offset long, key binary",
    )
    content = (
        spark.read.format("binaryFile")
        .load([f.path for f in files])
        .select("path", "content", "modificationTime")
    )
    return content.join(F.broadcast(index), "path").select(
        "topic", "partition", "first_offset", F.col("modificationTime").alias("timestamp"), "key", "content"
    )


def _read_csv_records(
    spark: SparkSession,
    files: list[DataFile],
    start: Mapping[PartitionId, int],
    keys: Mapping[PartitionId, bytes],
    quote: str,
) -> DataFrame:
    """The records of the given CSV files, one row each with its layout key, positioned by file index and
    record. Records are cut on the executors: a quoted value may hold raw line breaks."""
    joined = _contents(spark, files, keys)
    rows = joined.mapInArrow(partial(_cut_records, quote=quote), MESSAGE_SCHEMA)
    return rows.where(at_or_after(start)).select(*MESSAGE_COLUMNS)


def _cut_records(batches: Iterator[Any], quote: str) -> Iterator[Any]:
    """On an executor: each file's records as rows of their own, at the file's first offset plus their
    number in it."""
    import pyarrow as pa

    for batch in batches:
        out: dict[str, list[Any]] = {name: [] for name in MESSAGE_COLUMNS}
        columns = batch.to_pydict()
        for i, content in enumerate(columns["content"]):
            for n, record in enumerate(storage_csv.records(content or b"", quote)):
                for name in ("topic", "partition", "timestamp", "key"):
                    out[name].append(columns[name][i])
                out["offset"].append(columns["first_offset"][i] + n)
                out["value"].append(record)
        schema = pa.schema(
            [
                ("topic", pa.string()),
                ("partition", pa.int32()),
                ("offset", pa.int64()),
                ("timestamp", batch.schema.field("timestamp").type),
                ("key", pa.binary()),
                ("value", pa.binary()),
            ]
        )
        yield pa.RecordBatch.from_pydict(out, schema=schema)


def _read_lines(spark: SparkSession, files: list[DataFile], start: Mapping[PartitionId, int]) -> DataFrame:
    """The lines of the given files, one row per Canal-JSON object, positioned by file index and line."""
    lines = _contents(spark, files).select(
        "topic",
        "partition",
        "first_offset",
        "timestamp",
        F.posexplode(F.split(F.decode("content", "UTF-8"), "\n")).alias("line_no", "line"),
    )
    # The default terminator is CRLF; a trailing terminator leaves one empty last element.
    text = F.regexp_replace("line", "\r$", "")
    rows = lines.where(text != "").select(
        "topic",
        "partition",
        (F.col("first_offset") + F.col("line_no")).alias("offset"),
        "timestamp",
        F.lit(None).cast("binary").alias("key"),
        F.encode(text, "UTF-8").alias("value"),
    )
    return rows.where(at_or_after(start)).select(*MESSAGE_COLUMNS)
