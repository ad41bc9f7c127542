"""Runs the JSON decoders (Canal-JSON, Simple JSON) on executors with Spark's native ``from_json``.

Every wire name comes from ``ingest.decode.canal_json`` / ``ingest.decode.simple``. Both decoders give the
same columns: each record's position and raw bytes, its kind (dml / ddl / watermark / bootstrap / bad /
fatal), and DML row images as string maps that stay on the executors; typing happens per target table at
apply time. Canal-JSON names column types in every row (``mysql_type``); Simple names a schema version
(``schema_version``) and sends the schemas in control messages (``table_schema``, ``pre_table_schema``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ingest.decode import canal_json as cj
from ingest.decode import simple as sp
from ingest.decode import ticdc_avro as ta
from ingest.decode.compression import Compression, decompress
from ingest.model import MESSAGE_COLUMNS, TSO_LOGICAL_BITS

KIND_DML = "dml"
KIND_DDL = "ddl"
KIND_WATERMARK = "watermark"
KIND_BAD = "bad"
KIND_FATAL = "fatal"
KIND_BOOTSTRAP = "bootstrap"
CONTROL_KINDS = (KIND_DDL, KIND_WATERMARK, KIND_BOOTSTRAP)

_ROW = T.ArrayType(T.MapType(T.StringType(), T.StringType()))
# from_json in PERMISSIVE mode yields a struct of nulls for malformed input, not a null; the raw text in
# this column is how malformed JSON is told apart from a message that merely lacks fields.
CORRUPT_RECORD = "_corrupt_record"
ENVELOPE = T.StructType(
    [
        T.StructField(CORRUPT_RECORD, T.StringType()),
        T.StructField(cj.FIELD_DATABASE, T.StringType()),
        T.StructField(cj.FIELD_TABLE, T.StringType()),
        T.StructField(cj.FIELD_PK_NAMES, T.ArrayType(T.StringType())),
        T.StructField(cj.FIELD_IS_DDL, T.BooleanType()),
        T.StructField(cj.FIELD_TYPE, T.StringType()),
        T.StructField(cj.FIELD_ES, T.LongType()),
        T.StructField(cj.FIELD_SQL, T.StringType()),
        T.StructField(cj.FIELD_MYSQL_TYPE, T.MapType(T.StringType(), T.StringType())),
        T.StructField(cj.FIELD_DATA, _ROW),
        T.StructField(cj.FIELD_OLD, _ROW),
        T.StructField(
            cj.FIELD_TIDB,
            T.StructType(
                [
                    # TSOs are < 2^63 for the next few centuries; JSON ints above 2^53 stay exact as longs.
                    T.StructField(cj.TIDB_COMMIT_TS, T.LongType()),
                    T.StructField(cj.TIDB_WATERMARK_TS, T.LongType()),
                    T.StructField(cj.TIDB_ONLY_HANDLE_KEY, T.BooleanType()),
                    T.StructField(cj.TIDB_CLAIM_CHECK, T.StringType()),
                ]
            ),
        ),
    ]
)


PAYLOAD = "payload"
PAYLOAD_ERROR = "payload_error"
CLAIM_CHECK = "claim_check"
CLAIM_CHECK_NOT_CONFIGURED = (
    "claim-check reference, but no --claim-check-path: set it to the changefeed's claim-check-storage-uri "
    "(any path Spark can read)"
)
HANDLE_KEY_ONLY = (
    "handle-key-only message: the full row must be read back from the upstream TiDB, which the mirror does "
    "not do; use large-message-handle-option=claim-check (or a larger max-message-bytes) in the changefeed"
)


def prepare_payload(messages: DataFrame, compression: Compression, simple_avro: bool) -> DataFrame:
    """Add the bytes the JSON decoders read (``payload``), or why there are none (``payload_error``).

    ``value`` keeps the wire bytes, so the buffer and the quarantine hold exactly what TiCDC wrote. Only
    TiCDC-compressed values and Simple Avro messages need Python on the executors; plain JSON skips it.
    """
    framed = messages.select(
        "*", F.col("value").alias(PAYLOAD), F.lit(None).cast("string").alias(PAYLOAD_ERROR)
    )
    if compression is Compression.NONE and not simple_avro:
        return framed
    return _transform_payload(framed, compression, simple_avro)


def _transform_payload(frame: DataFrame, compression: Compression, simple_avro: bool) -> DataFrame:
    """Decompress, then (Simple Avro) transcode each payload to the JSON flavour; failures become errors."""

    def transform(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        avro = sp.avro_schema() if simple_avro else None
        for batch in batches:
            payloads: list[bytes | None] = []
            errors = batch.column(PAYLOAD_ERROR).to_pylist()
            for i, value in enumerate(batch.column(PAYLOAD).to_pylist()):
                payload = None
                if value is not None:
                    try:
                        payload = decompress(value, compression)
                        if avro is not None:
                            payload = sp.avro_to_json(payload, avro)
                    except ValueError as exc:
                        payload, errors[i] = None, str(exc)
                payloads.append(payload)
            columns = {name: batch.column(name) for name in batch.schema.names}
            columns[PAYLOAD] = pa.array(payloads, pa.binary())
            columns[PAYLOAD_ERROR] = pa.array(errors, pa.string())
            yield pa.RecordBatch.from_pydict(columns, schema=batch.schema)

    return frame.mapInArrow(transform, frame.schema)


def fetch_claim_checks(
    spark: SparkSession,
    prepared: DataFrame,
    claims: DataFrame,
    root: str,
    raw_value: bool,
    compression: Compression,
    simple_avro: bool,
) -> DataFrame:
    """Replace the payload of claim-check references with the full messages they point to.

    ``claims`` holds the positions and locations of the references. TiCDC names each object by the last
    element of the location; it is read relative to ``root`` (any path Spark reads: local, s3a, abfss, dbfs).
    An object that is missing becomes a payload error, so the record is quarantined, never skipped.
    """
    names = sorted(
        {r[0] for r in claims.select(F.substring_index(CLAIM_CHECK, "/", -1)).distinct().collect()}
    )
    base = root.rstrip("/")
    objects = _read_objects(spark, base, names)
    content = F.col("o.content")
    # Unless raw: {"key": null, "value": "<base64>"}, Go's JSON encoding of the original Kafka value.
    wrapped = F.unbase64(F.get_json_object(content.cast("string"), "$.value"))
    body = content if raw_value else wrapped
    fetched = (
        prepared.alias("m")
        .join(
            claims.select("topic", "partition", "offset", CLAIM_CHECK).alias("c"),
            ["topic", "partition", "offset"],
        )
        .join(
            objects.alias("o"),
            F.substring_index(F.col(f"c.{CLAIM_CHECK}"), "/", -1) == F.col("o.name"),
            "left",
        )
        .select(
            *[F.col(f"m.`{c}`") for c in prepared.columns if c not in (PAYLOAD, PAYLOAD_ERROR)],
            body.alias(PAYLOAD),
            F.when(
                body.isNull(),
                F.concat(F.lit(f"claim-check object not found under {base}: "), F.col(f"c.{CLAIM_CHECK}")),
            ).alias(PAYLOAD_ERROR),
        )
    )
    if compression is not Compression.NONE or simple_avro:
        fetched = _transform_payload(fetched, compression, simple_avro)
    untouched = prepared.join(
        claims.select("topic", "partition", "offset"), ["topic", "partition", "offset"], "left_anti"
    )
    return untouched.unionByName(fetched)


def _read_objects(spark: SparkSession, base: str, names: list[str]) -> DataFrame:
    empty = spark.createDataFrame([], "name string, content binary")
    if not names:
        return empty
    pattern = base + "/{" + ",".join(n.replace(",", "\\,") for n in names) + "}"
    try:
        files = spark.read.format("binaryFile").load(pattern)
    except AnalysisException:  # the glob matched nothing: every object is missing
        return empty
    return files.select(F.substring_index("path", "/", -1).alias("name"), "content")


def decode_canal_json(messages: DataFrame, offset_order: bool = False) -> DataFrame:
    """Prepared rows -> classified Canal-JSON events (one per message), positions and raw bytes kept.

    ``offset_order``: messages without the TiDB extension are accepted, with their commit time in ms
    (``es``) as a stand-in commitTs (``es << 18``), for the best-effort offset-order mode.
    """
    m = F.from_json(
        F.col(PAYLOAD).cast("string"),
        ENVELOPE,
        {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_RECORD},
    ).alias("m")
    parsed = messages.select("*", m)
    env = F.col("m")
    tidb = env[cj.FIELD_TIDB]
    is_ddl = F.coalesce(env[cj.FIELD_IS_DDL], F.lit(False))
    typ = env[cj.FIELD_TYPE]
    is_dml = typ.isin(*cj.DML_TYPES) & ~is_ddl
    data = env[cj.FIELD_DATA]
    commit_ts = tidb[cj.TIDB_COMMIT_TS]
    if offset_order:
        commit_ts = F.coalesce(commit_ts, F.shiftleft(env[cj.FIELD_ES], TSO_LOGICAL_BITS))
    rule, kind, error = _classify(is_ddl, typ, is_dml, tidb, data, env, commit_ts, offset_order)
    return parsed.select("*", rule.alias(_RULE)).select(
        *MESSAGE_COLUMNS,
        kind.alias("kind"),
        error.alias("error"),
        env[cj.FIELD_DATABASE].alias("database"),
        env[cj.FIELD_TABLE].alias("table"),
        typ.alias("type"),
        F.when(typ == cj.TYPE_WATERMARK, tidb[cj.TIDB_WATERMARK_TS]).otherwise(commit_ts).alias("commit_ts"),
        env[cj.FIELD_SQL].alias("sql"),
        env[cj.FIELD_PK_NAMES].alias("pk_names"),
        env[cj.FIELD_MYSQL_TYPE].alias("mysql_type"),
        data[0].alias("data"),
        env[cj.FIELD_OLD][0].alias("old"),
        F.lit(None).cast("long").alias("schema_version"),
        F.lit(None).cast("string").alias("table_schema"),
        F.lit(None).cast("string").alias("pre_table_schema"),
        tidb[cj.TIDB_CLAIM_CHECK].alias(CLAIM_CHECK),
    )


def _framing_rules(env: Column) -> list[tuple[Column, str, str | Column]]:
    """What makes any record bad before its protocol is looked at: no position, no value, no JSON."""
    return [
        (
            F.col("partition").isNull() | F.col("offset").isNull(),
            KIND_BAD,
            "not a captured Kafka record (topic/partition/offset missing)",
        ),
        (F.col("value").isNull(), KIND_BAD, "record has no value"),
        (F.col(PAYLOAD_ERROR).isNotNull(), KIND_BAD, F.col(PAYLOAD_ERROR)),
        (env.isNull() | env[CORRUPT_RECORD].isNotNull(), KIND_BAD, "malformed JSON"),
    ]


def _classify(
    is_ddl: Column,
    typ: Column,
    is_dml: Column,
    tidb: Column,
    data: Column,
    env: Column,
    commit_ts: Column,
    offset_order: bool,
) -> tuple[Column, Column, Column]:
    without_extension: list[tuple[Column, str, str | Column]] = [
        (
            (is_ddl | is_dml) & tidb.isNull(),
            KIND_FATAL,
            "message without _tidb: the changefeed must set enable-tidb-extension=true; nothing can be "
            "ordered or deduplicated without commitTs and watermarks (--missing-extension offset-order "
            "applies such a stream best effort, see the README)",
        ),
    ]
    missing_ts = "neither _tidb.commitTs nor es" if offset_order else "_tidb.commitTs missing"
    rules: list[tuple[Column, str, str | Column]] = [
        *_framing_rules(env),
        *([] if offset_order else without_extension),
        ((is_ddl | is_dml) & commit_ts.isNull(), KIND_BAD, missing_ts),
        (is_ddl, KIND_DDL, ""),
        (
            (typ == cj.TYPE_WATERMARK) & tidb[cj.TIDB_WATERMARK_TS].isNull(),
            KIND_BAD,
            "TIDB_WATERMARK without _tidb.watermarkTs",
        ),
        (typ == cj.TYPE_WATERMARK, KIND_WATERMARK, ""),
        (is_dml & tidb[cj.TIDB_CLAIM_CHECK].isNotNull(), KIND_FATAL, CLAIM_CHECK_NOT_CONFIGURED),
        (is_dml & F.coalesce(tidb[cj.TIDB_ONLY_HANDLE_KEY], F.lit(False)), KIND_FATAL, HANDLE_KEY_ONLY),
        (is_dml & (F.size(data) < 1), KIND_BAD, "DML without a row image in data"),
        (
            is_dml & (env[cj.FIELD_DATABASE].isNull() | env[cj.FIELD_TABLE].isNull()),
            KIND_BAD,
            "DML without database/table",
        ),
        (is_dml, KIND_DML, ""),
    ]
    return _fold_rules(rules, typ)


_MAP = T.MapType(T.StringType(), T.StringType())
# Nested objects (tableSchema, TIMESTAMP values) are read as strings: from_json keeps their JSON text.
SIMPLE_ENVELOPE = T.StructType(
    [
        T.StructField(CORRUPT_RECORD, T.StringType()),
        T.StructField(sp.FIELD_TYPE, T.StringType()),
        T.StructField(sp.FIELD_DATABASE, T.StringType()),
        T.StructField(sp.FIELD_TABLE, T.StringType()),
        # commitTs and schemaVersion are TSOs: exact as longs, never through a double.
        T.StructField(sp.FIELD_COMMIT_TS, T.LongType()),
        T.StructField(sp.FIELD_SCHEMA_VERSION, T.LongType()),
        T.StructField(sp.FIELD_SQL, T.StringType()),
        T.StructField(sp.FIELD_HANDLE_KEY_ONLY, T.BooleanType()),
        T.StructField(sp.FIELD_CLAIM_CHECK, T.StringType()),
        T.StructField(sp.FIELD_DATA, _MAP),
        T.StructField(sp.FIELD_OLD, _MAP),
        T.StructField(sp.FIELD_TABLE_SCHEMA, T.StringType()),
        T.StructField(sp.FIELD_PRE_TABLE_SCHEMA, T.StringType()),
    ]
)


def decode_simple_json(messages: DataFrame) -> DataFrame:
    """Prepared rows -> classified Simple-protocol events, in the same columns as Canal-JSON's."""
    m = F.from_json(
        F.col(PAYLOAD).cast("string"),
        SIMPLE_ENVELOPE,
        {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_RECORD},
    ).alias("m")
    env = F.col("m")
    typ = env[sp.FIELD_TYPE]
    rule, kind, error = _classify_simple(typ, env)
    # Simple puts a DELETE's row in "old"; downstream, every change's row image is in "data" (as Canal).
    data = F.when(typ == sp.TYPE_DELETE, env[sp.FIELD_OLD]).otherwise(env[sp.FIELD_DATA])
    old = F.when(typ == sp.TYPE_UPDATE, env[sp.FIELD_OLD])
    return (
        messages.select("*", m)
        .select("*", rule.alias(_RULE))
        .select(
            *MESSAGE_COLUMNS,
            kind.alias("kind"),
            error.alias("error"),
            # DDL and BOOTSTRAP messages name their table only inside the table schema.
            F.coalesce(env[sp.FIELD_DATABASE], _schema_field(sp.SCHEMA_DATABASE)).alias("database"),
            F.coalesce(env[sp.FIELD_TABLE], _schema_field(sp.SCHEMA_TABLE)).alias("table"),
            typ.alias("type"),
            env[sp.FIELD_COMMIT_TS].alias("commit_ts"),
            env[sp.FIELD_SQL].alias("sql"),
            F.lit(None).cast(T.ArrayType(T.StringType())).alias("pk_names"),
            F.lit(None).cast(_MAP).alias("mysql_type"),
            data.alias("data"),
            old.alias("old"),
            env[sp.FIELD_SCHEMA_VERSION].alias("schema_version"),
            env[sp.FIELD_TABLE_SCHEMA].alias("table_schema"),
            env[sp.FIELD_PRE_TABLE_SCHEMA].alias("pre_table_schema"),
            env[sp.FIELD_CLAIM_CHECK].alias(CLAIM_CHECK),
        )
    )


def _schema_field(name: str) -> Column:
    schema = F.coalesce(F.col("m")[sp.FIELD_TABLE_SCHEMA], F.col("m")[sp.FIELD_PRE_TABLE_SCHEMA])
    return F.get_json_object(schema, f"$.{name}")


def _classify_simple(typ: Column, env: Column) -> tuple[Column, Column, Column]:
    is_dml = typ.isin(*sp.DML_TYPES)
    commit_ts = env[sp.FIELD_COMMIT_TS]
    rules: list[tuple[Column, str, str | Column]] = [
        *_framing_rules(env),
        ((typ == sp.TYPE_WATERMARK) & commit_ts.isNull(), KIND_BAD, "WATERMARK without commitTs"),
        (typ == sp.TYPE_WATERMARK, KIND_WATERMARK, ""),
        (
            (typ == sp.TYPE_BOOTSTRAP) & env[sp.FIELD_TABLE_SCHEMA].isNull(),
            KIND_BAD,
            "BOOTSTRAP without tableSchema",
        ),
        (typ == sp.TYPE_BOOTSTRAP, KIND_BOOTSTRAP, ""),
        (typ.isin(*sp.DDL_TYPES) & commit_ts.isNull(), KIND_BAD, "DDL without commitTs"),
        (typ.isin(*sp.DDL_TYPES), KIND_DDL, ""),
        (is_dml & commit_ts.isNull(), KIND_BAD, "DML without commitTs"),
        (
            is_dml & (env[sp.FIELD_DATABASE].isNull() | env[sp.FIELD_TABLE].isNull()),
            KIND_BAD,
            "DML without database/table",
        ),
        (is_dml & env[sp.FIELD_SCHEMA_VERSION].isNull(), KIND_BAD, "DML without schemaVersion"),
        # Check the claim-check location first: a Simple reference sets both it and handleKeyOnly.
        (is_dml & env[sp.FIELD_CLAIM_CHECK].isNotNull(), KIND_FATAL, CLAIM_CHECK_NOT_CONFIGURED),
        (is_dml & F.coalesce(env[sp.FIELD_HANDLE_KEY_ONLY], F.lit(False)), KIND_FATAL, HANDLE_KEY_ONLY),
        (
            ((typ == sp.TYPE_DELETE) & env[sp.FIELD_OLD].isNull())
            | (typ.isin(sp.TYPE_INSERT, sp.TYPE_UPDATE) & env[sp.FIELD_DATA].isNull())
            | ((typ == sp.TYPE_UPDATE) & env[sp.FIELD_OLD].isNull()),
            KIND_BAD,
            "DML without its row image (data/old)",
        ),
        (is_dml, KIND_DML, ""),
    ]
    return _fold_rules(rules, typ)


_RULE = "__rule"


def _fold_rules(rules: list[tuple[Column, str, str | Column]], typ: Column) -> tuple[Column, Column, Column]:
    """The first matching rule decides; no rule: an unknown ``type`` (quarantined).

    Returns the number of the deciding rule (one flat CASE, to be selected as column ``_RULE``), and the
    kind and error, which read that column. Kind and error as two chains of nested CASEs, each repeating
    every condition, cost more per record than parsing its JSON.
    """
    number: Column = F.when(rules[0][0], F.lit(0))
    for index, (condition, _, _) in enumerate(rules[1:], start=1):
        number = number.when(condition, F.lit(index))
    unknown = len(rules)
    number = number.otherwise(F.lit(unknown))
    by_kind: dict[str, list[int]] = {}
    for index, (_, rule_kind, _) in enumerate(rules):
        by_kind.setdefault(rule_kind, []).append(index)
    chosen = F.col(_RULE)
    kind: Column | None = None
    for rule_kind, indices in by_kind.items():
        matches = chosen.isin(*indices)
        kind = F.when(matches, F.lit(rule_kind)) if kind is None else kind.when(matches, F.lit(rule_kind))
    assert kind is not None
    kind = kind.otherwise(F.lit(KIND_BAD))
    error: Column = F.when(
        chosen == unknown,
        F.concat(F.lit('unknown "type" '), F.coalesce(F.concat(F.lit("'"), typ, F.lit("'")), F.lit("null"))),
    )
    for index, (_, _, message) in enumerate(rules):
        if isinstance(message, Column) or message:
            error = error.when(chosen == index, message if isinstance(message, Column) else F.lit(message))
    return number, kind, error.otherwise(F.lit(None).cast("string"))


KEY_SCHEMA = "key_schema"


def avro_schema_id(column: str) -> Column:
    """The registry schema id of a Confluent-framed binary column (null when not framed so)."""
    data = F.col(column)
    framed = (F.length(data) >= ta.HEADER_BYTES) & (F.hex(F.substring(data, 1, 1)) == "00")
    return F.when(framed, F.conv(F.hex(F.substring(data, 2, 4)), 16, 10).cast("long"))


def avro_schema_ids(messages: DataFrame) -> list[int]:
    """The distinct key and value schema ids a batch names: the only thing the driver reads of it."""
    ids = messages.select(F.explode(F.array(avro_schema_id("key"), avro_schema_id("value"))).alias("id"))
    return sorted(int(r["id"]) for r in ids.where(F.col("id").isNotNull()).distinct().collect())


_AVRO_DECODED = T.StructType(
    [
        T.StructField("kind", T.StringType()),
        T.StructField("error", T.StringType()),
        T.StructField("database", T.StringType()),
        T.StructField("table", T.StringType()),
        T.StructField("type", T.StringType()),
        T.StructField("commit_ts", T.LongType()),
        T.StructField("data", _MAP),
        T.StructField("schema_version", T.LongType()),
        T.StructField(KEY_SCHEMA, T.LongType()),
    ]
)


def decode_ticdc_avro(messages: DataFrame, schemas: dict[int, str | None]) -> DataFrame:
    """Kafka-shaped rows -> classified TiCDC Avro changes, in the JSON decoders' columns (+ ``key_schema``).

    ``schemas``: the writer schema text of every id the batch names (None where the registry has none); it
    travels to the executors with the function, so no executor calls the registry.
    """
    passed = [f for f in messages.schema.fields if f.name in MESSAGE_COLUMNS]
    output = T.StructType([*passed, *_AVRO_DECODED.fields])

    def decode(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        book = ta.schema_book(schemas)
        from pyspark.sql.pandas.types import to_arrow_schema

        # The Arrow side of _AVRO_DECODED, derived so the two cannot drift apart.
        arrow_types = {f.name: f for f in to_arrow_schema(_AVRO_DECODED)}
        for batch in batches:
            columns: dict[str, list[Any]] = {f.name: [] for f in _AVRO_DECODED.fields}
            keys = batch.column("key").to_pylist()
            values = batch.column("value").to_pylist()
            partitions = batch.column("partition").to_pylist()
            for key, value, partition in zip(keys, values, partitions, strict=True):
                row = _decode_avro_row(key, value, partition, book)
                for name, item in zip(columns, row, strict=True):
                    columns[name].append(item)
            arrays = {name: batch.column(name) for name in (f.name for f in passed)}
            for name, items in columns.items():
                arrays[name] = pa.array(items, arrow_types[name].type)
            yield pa.RecordBatch.from_pydict(arrays, schema=pa.schema([*batch.schema, *arrow_types.values()]))

    decoded = messages.select(*[f.name for f in passed]).mapInArrow(decode, output)
    return decoded.select(
        *MESSAGE_COLUMNS,
        "kind",
        "error",
        "database",
        "table",
        "type",
        "commit_ts",
        F.lit(None).cast("string").alias("sql"),
        F.lit(None).cast(T.ArrayType(T.StringType())).alias("pk_names"),
        F.lit(None).cast(_MAP).alias("mysql_type"),
        "data",
        F.lit(None).cast(_MAP).alias("old"),
        "schema_version",
        F.lit(None).cast("string").alias("table_schema"),
        F.lit(None).cast("string").alias("pre_table_schema"),
        F.lit(None).cast("string").alias(CLAIM_CHECK),
        KEY_SCHEMA,
    )


def _decode_avro_row(
    key: bytes | None, value: bytes | None, partition: int | None, book: ta.SchemaBook
) -> tuple[Any, ...]:
    if partition is None:
        return (KIND_BAD, "not a captured Kafka record (topic/partition/offset missing)", *([None] * 7))
    try:
        change = ta.decode_record(key, value, book)
    except ta.NotTicdcAvro as exc:
        return (KIND_BAD, f"TiCDC Avro: {exc}", *([None] * 7))
    return (
        KIND_DML,
        None,
        change.table.schema,
        change.table.table,
        change.type,
        change.commit_ts,
        list(change.data.items()),
        change.value_schema,
        change.key_schema,
    )
