"""Runs the JSON decoders (Canal-JSON, Simple JSON) on executors with Spark's native ``from_json``.

Every wire name comes from ``ingest.decode.canal_json`` / ``ingest.decode.simple``. Both decoders give the
same columns: each record's position and raw bytes, its kind (dml / ddl / watermark / bootstrap / bad /
fatal), and DML row images as string maps that stay on the executors; typing happens per target table at
apply time. Canal-JSON names column types in every row (``mysql_type``); Simple names a schema version
(``schema_version``) and sends the schemas in control messages (``table_schema``, ``pre_table_schema``).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ingest.decode import canal_json as cj
from ingest.decode import simple as sp
from ingest.model import MESSAGE_COLUMNS

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


def decode_canal_json(messages: DataFrame) -> DataFrame:
    """Kafka-shaped rows -> classified Canal-JSON events (one per message), positions and raw bytes kept."""
    m = F.from_json(
        F.col("value").cast("string"),
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
    kind, error = _classify(is_ddl, typ, is_dml, tidb, data, env)
    return parsed.select(
        *MESSAGE_COLUMNS,
        kind.alias("kind"),
        error.alias("error"),
        env[cj.FIELD_DATABASE].alias("database"),
        env[cj.FIELD_TABLE].alias("table"),
        typ.alias("type"),
        F.when(typ == cj.TYPE_WATERMARK, tidb[cj.TIDB_WATERMARK_TS])
        .otherwise(tidb[cj.TIDB_COMMIT_TS])
        .alias("commit_ts"),
        env[cj.FIELD_SQL].alias("sql"),
        env[cj.FIELD_PK_NAMES].alias("pk_names"),
        env[cj.FIELD_MYSQL_TYPE].alias("mysql_type"),
        data[0].alias("data"),
        env[cj.FIELD_OLD][0].alias("old"),
        F.lit(None).cast("long").alias("schema_version"),
        F.lit(None).cast("string").alias("table_schema"),
        F.lit(None).cast("string").alias("pre_table_schema"),
    )


def _classify(
    is_ddl: Column, typ: Column, is_dml: Column, tidb: Column, data: Column, env: Column
) -> tuple[Column, Column]:
    rules: list[tuple[Column, str, str]] = [
        (
            F.col("partition").isNull() | F.col("offset").isNull(),
            KIND_BAD,
            "not a captured Kafka record (topic/partition/offset missing)",
        ),
        (F.col("value").isNull(), KIND_BAD, "record has no value"),
        (env.isNull() | env[CORRUPT_RECORD].isNotNull(), KIND_BAD, "malformed JSON"),
        (
            (is_ddl | is_dml) & tidb.isNull(),
            KIND_FATAL,
            "message without _tidb: the changefeed must set enable-tidb-extension=true; nothing can be "
            "ordered or deduplicated without commitTs and watermarks",
        ),
        ((is_ddl | is_dml) & tidb[cj.TIDB_COMMIT_TS].isNull(), KIND_BAD, "_tidb.commitTs missing"),
        (is_ddl, KIND_DDL, ""),
        (
            (typ == cj.TYPE_WATERMARK) & tidb[cj.TIDB_WATERMARK_TS].isNull(),
            KIND_BAD,
            "TIDB_WATERMARK without _tidb.watermarkTs",
        ),
        (typ == cj.TYPE_WATERMARK, KIND_WATERMARK, ""),
        (
            is_dml
            & (
                F.coalesce(tidb[cj.TIDB_ONLY_HANDLE_KEY], F.lit(False))
                | tidb[cj.TIDB_CLAIM_CHECK].isNotNull()
            ),
            KIND_FATAL,
            "large message (handle-key-only or claim-check) needs a lookup that is not configured",
        ),
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
    """Kafka-shaped rows -> classified Simple-protocol events, in the same columns as Canal-JSON's."""
    m = F.from_json(
        F.col("value").cast("string"),
        SIMPLE_ENVELOPE,
        {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_RECORD},
    ).alias("m")
    env = F.col("m")
    typ = env[sp.FIELD_TYPE]
    kind, error = _classify_simple(typ, env)
    # Simple puts a DELETE's row in "old"; downstream, every change's row image is in "data" (as Canal).
    data = F.when(typ == sp.TYPE_DELETE, env[sp.FIELD_OLD]).otherwise(env[sp.FIELD_DATA])
    old = F.when(typ == sp.TYPE_UPDATE, env[sp.FIELD_OLD])
    return messages.select("*", m).select(
        *MESSAGE_COLUMNS,
        kind.alias("kind"),
        error.alias("error"),
        # DDL and BOOTSTRAP messages name their table only inside the table schema (§3.4).
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
    )


def _schema_field(name: str) -> Column:
    schema = F.coalesce(F.col("m")[sp.FIELD_TABLE_SCHEMA], F.col("m")[sp.FIELD_PRE_TABLE_SCHEMA])
    return F.get_json_object(schema, f"$.{name}")


def _classify_simple(typ: Column, env: Column) -> tuple[Column, Column]:
    is_dml = typ.isin(*sp.DML_TYPES)
    commit_ts = env[sp.FIELD_COMMIT_TS]
    rules: list[tuple[Column, str, str]] = [
        (
            F.col("partition").isNull() | F.col("offset").isNull(),
            KIND_BAD,
            "not a captured Kafka record (topic/partition/offset missing)",
        ),
        (F.col("value").isNull(), KIND_BAD, "record has no value"),
        (env.isNull() | env[CORRUPT_RECORD].isNotNull(), KIND_BAD, "malformed JSON"),
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
        (
            is_dml
            & (
                F.coalesce(env[sp.FIELD_HANDLE_KEY_ONLY], F.lit(False))
                | env[sp.FIELD_CLAIM_CHECK].isNotNull()
            ),
            KIND_FATAL,
            "large message (handle-key-only or claim-check) needs a lookup that is not configured",
        ),
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


def _fold_rules(rules: list[tuple[Column, str, str]], typ: Column) -> tuple[Column, Column]:
    """The first matching rule decides; no rule: an unknown ``type`` (quarantined)."""
    kind: Column = F.lit(KIND_BAD)
    error: Column = F.concat(
        F.lit('unknown "type" '), F.coalesce(F.concat(F.lit("'"), typ, F.lit("'")), F.lit("null"))
    )
    for condition, rule_kind, message in reversed(rules):
        kind = F.when(condition, F.lit(rule_kind)).otherwise(kind)
        error = F.when(condition, F.lit(message) if message else F.lit(None).cast("string")).otherwise(error)
    return kind, error
