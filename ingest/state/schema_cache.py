"""The Simple protocol's schema cache, kept durably beside the progress. I/O.

Simple rows name a (database, table, schemaVersion) and carry no types; the types come from BOOTSTRAP and
DDL messages. Keeping every schema we have seen in a Delta table means a restart can decode rows at once,
instead of waiting up to a BOOTSTRAP interval (or forever, if bootstrap is disabled). Insert-only, keyed
by (stream, database, table, version): entries never change, TiCDC's decoder does not overwrite either.
"""

from __future__ import annotations

from collections.abc import Iterable

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ingest.decode.simple import VersionedSchema, parse_table_schema
from ingest.lake import delta_io
from ingest.lake import names as catalog_names
from ingest.lake.delta_io import quote
from ingest.model import TableId

CACHE_DIR = "schemas"
SCHEMA = T.StructType(
    [
        T.StructField("stream_id", T.StringType()),
        T.StructField("database", T.StringType()),
        T.StructField("table", T.StringType()),
        T.StructField("version", T.LongType()),
        T.StructField("table_schema", T.StringType()),
    ]
)

SchemaKey = tuple[TableId, int]


def cache_path(state_path: str) -> str:
    return catalog_names.child(state_path, CACHE_DIR)


def load(spark: SparkSession, state_path: str, stream_id: str) -> dict[SchemaKey, VersionedSchema]:
    """Every schema this stream has cached (small: one row per table version)."""
    path = cache_path(state_path)
    if not delta_io.is_delta_table(spark, path):
        return {}
    rows = delta_io.read(spark, path).where(F.col("stream_id") == stream_id).select("table_schema").collect()
    entries = (parse_table_schema(r["table_schema"]) for r in rows)
    return {(e.table, e.version): e for e in entries}


def add(spark: SparkSession, state_path: str, stream_id: str, entries: Iterable[VersionedSchema]) -> None:
    """Insert schemas not cached yet (a crash between this and the progress commit just repeats it)."""
    rows = [(stream_id, e.table.schema, e.table.table, e.version, e.raw) for e in entries]
    if not rows:
        return
    path = cache_path(state_path)
    if not delta_io.prepare_to_create(spark, path):
        delta_io.create_table(spark, path, SCHEMA)
    new = spark.createDataFrame(rows, SCHEMA).dropDuplicates(["database", "table", "version"])
    same = " AND ".join(f"c.{quote(k)} = n.{quote(k)}" for k in ("stream_id", "database", "table", "version"))
    delta_io.merge(spark, path, new, same, "WHEN NOT MATCHED THEN INSERT *", target="c", alias="n")
