"""Runs the Canal-JSON decoder on executors with Spark's native ``from_json``.

Every wire name comes from ``ingest.decode.canal_json``. The output keeps each record's position and raw
bytes, classifies it (dml / ddl / watermark / bad / fatal) and leaves DML row images as string maps on the
executors; typing happens per target table at apply time.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ingest.decode import canal_json as cj
from ingest.model import MESSAGE_COLUMNS

KIND_DML = "dml"
KIND_DDL = "ddl"
KIND_WATERMARK = "watermark"
KIND_BAD = "bad"
KIND_FATAL = "fatal"

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
    kind: Column = F.lit(KIND_BAD)
    error: Column = F.concat(
        F.lit('unknown "type" '), F.coalesce(F.concat(F.lit("'"), typ, F.lit("'")), F.lit("null"))
    )
    for condition, rule_kind, message in reversed(rules):
        kind = F.when(condition, F.lit(rule_kind)).otherwise(kind)
        error = F.when(condition, F.lit(message) if message else F.lit(None).cast("string")).otherwise(error)
    return kind, error
