"""A TiDB Dumpling export on any Spark-readable path: its files, snapshot TSO, tables, and rows. I/O.

The driver reads only the small files (``metadata``, the schema files) and the listing; data files are read
by Spark's line reader, so a big file is split across tasks, and each line is decoded on the executors by
``ingest.mysql.dumpling`` inside ``mapInArrow``. Row data never reaches the driver.
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ingest.errors import ConfigError
from ingest.model import Column, ColumnType, TableId
from ingest.mysql import dumpling as dd
from ingest.mysql import dumpling_lines
from ingest.mysql.ddl import CreateTable, parse_ddl

logger = logging.getLogger(__name__)

DECODED_SCHEMA = "file string, offset long, line binary, values array<string>, error string"


@dataclass(frozen=True)
class ExportTable:
    """One table of the export: its CREATE TABLE (parsed and as text) and its data files."""

    table: TableId
    create: CreateTable
    sql: str
    schema_file: str
    data_files: tuple[str, ...]
    data_bytes: int
    data_format: dd.DataFormat | None


@dataclass(frozen=True)
class DumplingExport:
    """A Dumpling export directory: the snapshot TSO its data was read at, and its tables."""

    path: str
    snapshot_ts: int
    tables: tuple[ExportTable, ...]


def read_export(spark: SparkSession, path: str) -> DumplingExport:
    """List an export, read its ``metadata`` and schema files, and match data files to tables.

    Raises:
        ConfigError: not a Dumpling export, no snapshot TSO, a table without CREATE TABLE, or a CREATE TABLE
            the mirror cannot read.
    """
    try:
        listing = (
            spark.read.format("binaryFile").load(path.rstrip("/") + "/*").select("path", "length").collect()
        )
    except AnalysisException as exc:  # a missing or empty path
        raise ConfigError(f"input: cannot list a Dumpling export at {path}: {exc}") from exc
    files = {posixpath.basename(str(r["path"])): (str(r["path"]), int(r["length"])) for r in listing}
    if dd.METADATA_FILE not in files:
        raise ConfigError(
            f"input: {path} has no '{dd.METADATA_FILE}' file, so it is not a (complete) Dumpling export; the "
            "load needs the snapshot TSO Dumpling writes there"
        )
    schema_names = [n for n in files if dd.table_schema_prefix(n) is not None]
    texts = _read_small(spark, [files[dd.METADATA_FILE][0]] + [files[n][0] for n in schema_names])
    try:
        snapshot_ts = dd.parse_metadata(texts[files[dd.METADATA_FILE][0]])
    except dd.DumplingFormatError as exc:
        raise ConfigError(f"input: {exc}") from exc
    databases = sorted(
        (
            dd.uncompressed_name(n)[: -len(dd.SCHEMA_CREATE_SUFFIX)]
            for n in files
            if dd.uncompressed_name(n).endswith(dd.SCHEMA_CREATE_SUFFIX)
        ),
        key=len,
        reverse=True,
    )
    tables: dict[str, tuple[TableId, CreateTable, str, str]] = {}
    for name in schema_names:
        prefix = dd.table_schema_prefix(name) or ""
        database = next((d for d in databases if prefix.startswith(d + ".")), prefix.partition(".")[0])
        sql = dd.create_table_statement(texts[files[name][0]])
        statement = parse_ddl(sql, database)
        if not isinstance(statement, CreateTable):
            raise ConfigError(f"input: {name} does not hold a CREATE TABLE the mirror can read: {statement}")
        tables[prefix] = (statement.table, statement, sql, files[name][0])
    data: dict[str, list[tuple[str, int, dd.DataFormat]]] = {prefix: [] for prefix in tables}
    for name, (file_path, length) in sorted(files.items()):
        found = dd.data_file(name)
        if found is None:
            continue
        if found.prefix not in data:
            raise ConfigError(
                f"input: data file {name} has no {found.prefix}{dd.TABLE_SCHEMA_SUFFIX}; export with schemas "
                "(without --no-schemas), the mirror creates each table from its CREATE TABLE"
            )
        data[found.prefix].append((file_path, length, found.format))
    result = []
    for prefix, (table, statement, sql, schema_file) in sorted(tables.items(), key=lambda kv: kv[1][0]):
        formats = {f for _, _, f in data[prefix]}
        if len(formats) > 1:
            raise ConfigError(f"input: {table} has both SQL and CSV data files; export it in one format")
        result.append(
            ExportTable(
                table=table,
                create=statement,
                sql=sql,
                schema_file=schema_file,
                data_files=tuple(p for p, _, _ in data[prefix]),
                data_bytes=sum(n for _, n, _ in data[prefix]),
                data_format=formats.pop() if formats else None,
            )
        )
    return DumplingExport(path, snapshot_ts, tuple(result))


def _read_small(spark: SparkSession, paths: Sequence[str]) -> dict[str, str]:
    rows = (
        spark.read.text(list(paths), wholetext=True)
        .select(F.col("_metadata.file_path").alias("file"), "value")
        .collect()
    )
    by_path = {str(r["file"]): str(r["value"]) for r in rows}
    # Spark reports file:/x for a local path listed as file:///x; match on the path part.
    return {p: next(v for k, v in by_path.items() if _same(k, p)) for p in paths}


def _same(a: str, b: str) -> bool:
    return a.split(":", 1)[-1].lstrip("/") == b.split(":", 1)[-1].lstrip("/")


def data_columns(table: ExportTable) -> list[Column]:
    """The columns an export's data files hold: Dumpling writes no generated column's values (TiDB computes
    a VIRTUAL one on read)."""
    return [c for c in table.create.schema.columns if not c.virtual]


def read_rows(
    spark: SparkSession, table: ExportTable, dialect: dd.CsvDialect, line_separator: str | None
) -> DataFrame:
    """The table's data lines, decoded on executors: file, offset, line, values (Canal-JSON text) or error.

    ``offset`` is the byte offset of the Spark split the line was read in plus the line's index in it: unique
    per file and stable for the same input, so quarantined rows can be found again.
    """
    if table.data_format is None:
        raise ValueError(f"{table.table} has no data files")
    reader = spark.read
    if line_separator and table.data_format is dd.DataFormat.CSV:
        reader = reader.option("lineSep", line_separator)
    lines = reader.text(list(table.data_files)).select(
        F.col("_metadata.file_path").alias("file"),
        F.col("_metadata.file_block_start").alias("block_start"),
        # String -> binary keeps the file's bytes as they were; nothing is decoded as UTF-8 yet.
        F.col("value").cast("binary").alias("line"),
    )
    columns = data_columns(table)
    decode = partial(
        _decode_batches,
        data_format=table.data_format,
        dialect=dialect,
        names=tuple(c.name for c in columns),
        types=tuple(c.type for c in columns),
    )
    return lines.mapInArrow(decode, DECODED_SCHEMA)


def _decode_batches(
    batches: Iterator[Any],
    *,
    data_format: dd.DataFormat,
    dialect: dd.CsvDialect,
    names: tuple[str, ...],
    types: tuple[ColumnType, ...],
) -> Iterator[Any]:
    """Runs on executors: Arrow batches of lines -> Arrow batches of decoded rows."""
    import pyarrow as pa

    schema = pa.schema(
        [
            ("file", pa.string()),
            ("offset", pa.int64()),
            ("line", pa.binary()),
            ("values", pa.list_(pa.string())),
            ("error", pa.string()),
        ]
    )
    split: tuple[str, int] | None = None
    index = 0
    for batch in batches:
        columns = batch.to_pydict()
        out: dict[str, list[Any]] = {name: [] for name in schema.names}
        for file, start, line in zip(columns["file"], columns["block_start"], columns["line"], strict=True):
            # Lines of one split arrive in order and together; the first line of a split at byte 0 is the
            # file's first line (a CSV header, when the export has one).
            if (file, start) != split:
                split, index = (file, start), 0
            else:
                index += 1
            for values, error in dumpling_lines.decode_data_line(
                line,
                starts_file=start == 0 and index == 0,
                data_format=data_format,
                dialect=dialect,
                names=names,
                types=types,
            ):
                out["file"].append(file)
                out["offset"].append(start + index)
                out["line"].append(line)
                out["values"].append(values)
                out["error"].append(error)
        yield pa.RecordBatch.from_pydict(out, schema=schema)
