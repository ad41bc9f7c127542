"""Runs a protocol's codec on executors: JSON envelopes with Spark's native ``from_json``, TiCDC Avro
record by record.

Every protocol gives the same columns (``DECODED``): each record's position and raw bytes, its kind
(dml / ddl / watermark / bootstrap / bad / fatal) and why, and DML row images as string maps that stay
on the executors; typing happens per target table at apply time. What a protocol's messages look like,
which columns they fill and how they are classified is the codec's (``ingest.decode.codec``); this module
compiles that into Spark columns and knows no protocol of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import orjson
from pyspark.errors import AnalysisException
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ingest.decode import codec as c
from ingest.decode import debezium
from ingest.decode import ticdc_avro as ta
from ingest.decode.codec import CONTROL_KINDS as CONTROL_KINDS
from ingest.decode.codec import KIND_BAD as KIND_BAD
from ingest.decode.codec import KIND_BOOTSTRAP as KIND_BOOTSTRAP
from ingest.decode.codec import KIND_DDL as KIND_DDL
from ingest.decode.codec import KIND_DML as KIND_DML
from ingest.decode.codec import KIND_FATAL as KIND_FATAL
from ingest.decode.codec import KIND_WATERMARK as KIND_WATERMARK
from ingest.decode.codec import Codec, Splitter
from ingest.decode.compression import Compression, decompress
from ingest.model import MESSAGE_COLUMNS, TSO_LOGICAL_BITS

_MAP = T.MapType(T.StringType(), T.StringType())
# The decoded columns after MESSAGE_COLUMNS, kind and error; a protocol fills those its codec names.
DECODED = T.StructType(
    [
        T.StructField("database", T.StringType()),
        T.StructField("table", T.StringType()),
        T.StructField("type", T.StringType()),
        T.StructField("commit_ts", T.LongType()),
        T.StructField("sql", T.StringType()),
        T.StructField("pk_names", T.ArrayType(T.StringType())),
        T.StructField("mysql_type", _MAP),
        T.StructField("data", _MAP),
        T.StructField("old", _MAP),
        T.StructField("schema_version", T.LongType()),
        T.StructField("table_schema", T.StringType()),
        T.StructField("pre_table_schema", T.StringType()),
        T.StructField("claim_check", T.StringType()),
        # A record's event index, for protocols whose records hold several events (null: one event).
        T.StructField("entry", T.LongType()),
        # TiDB's row checksums as the record carries them (ingest.apply.checksum): of the new image, of the
        # old one (0: no image, or none to check), and TiCDC's own verdict. Null: the record carries none.
        T.StructField("checksum_current", T.LongType()),
        T.StructField("checksum_previous", T.LongType()),
        T.StructField("checksum_corrupted", T.BooleanType()),
    ]
)
_WIRE_TYPES: dict[c.WireType, T.DataType] = {
    c.WireType.TEXT: T.StringType(),
    c.WireType.LONG: T.LongType(),
    c.WireType.BOOLEAN: T.BooleanType(),
    c.WireType.TEXTS: T.ArrayType(T.StringType()),
    c.WireType.ROW: _MAP,
    c.WireType.ROWS: T.ArrayType(_MAP),
}
# from_json in PERMISSIVE mode yields a struct of nulls for malformed input, not a null; the raw text in
# this column is how malformed JSON is told apart from a message that merely lacks fields.
CORRUPT_RECORD = "_corrupt_record"


def _struct(fields: tuple[c.Wire, ...]) -> T.StructType:
    return T.StructType(
        [
            T.StructField(f.name, _struct(f.type) if isinstance(f.type, tuple) else _WIRE_TYPES[f.type])
            for f in fields
        ]
    )


def envelope(codec: Codec) -> T.StructType:
    """The Spark schema ``from_json`` reads a codec's messages with (plus the corrupt-record column)."""
    return T.StructType([T.StructField(CORRUPT_RECORD, T.StringType()), *_struct(codec.envelope).fields])


PAYLOAD = "payload"
PAYLOAD_ERROR = "payload_error"
CLAIM_CHECK = "claim_check"


Transcoder = Callable[[], Callable[[bytes], bytes]] | None


def prepare_payload(messages: DataFrame, compression: Compression, codec: Codec) -> DataFrame:
    """Add the bytes the JSON decoding reads (``payload``), or why there are none (``payload_error``).

    ``value`` keeps the wire bytes, so the buffer and the quarantine hold exactly what TiCDC wrote. Only
    TiCDC-compressed values and codecs that transcode (Simple Avro) need Python on the executors; plain
    JSON skips it.
    """
    framed = messages.select(
        "*", F.col("value").alias(PAYLOAD), F.lit(None).cast("string").alias(PAYLOAD_ERROR)
    )
    if codec.split is not None:
        return _split_payload(framed, codec.split(compression))
    if compression is Compression.NONE and codec.transcode is None:
        return framed
    return _transform_payload(framed, compression, codec.transcode)


def _transform_payload(frame: DataFrame, compression: Compression, transcoder: Transcoder) -> DataFrame:
    """Decompress, then transcode each payload to the JSON the envelope reads; failures become errors."""

    def transform(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        transcode = transcoder() if transcoder is not None else None
        for batch in batches:
            payloads: list[bytes | None] = []
            errors = batch.column(PAYLOAD_ERROR).to_pylist()
            for i, value in enumerate(batch.column(PAYLOAD).to_pylist()):
                payload = None
                if value is not None:
                    try:
                        payload = decompress(value, compression)
                        if transcode is not None:
                            payload = transcode(payload)
                    except ValueError as exc:
                        payload, errors[i] = None, str(exc)
                payloads.append(payload)
            columns = {name: batch.column(name) for name in batch.schema.names}
            columns[PAYLOAD] = pa.array(payloads, pa.binary())
            columns[PAYLOAD_ERROR] = pa.array(errors, pa.string())
            yield pa.RecordBatch.from_pydict(columns, schema=batch.schema)

    return frame.mapInArrow(transform, frame.schema)


def _split_payload(frame: DataFrame, split: Splitter) -> DataFrame:
    """One row per event of each record, the record's position and bytes kept on every one; a record whose
    framing is broken stays one row, with the reason as its payload error."""
    schema = frame.schema

    def explode(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        for batch in batches:
            names = batch.schema.names
            columns = {name: batch.column(name).to_pylist() for name in names}
            rows: dict[str, list[Any]] = {name: [] for name in names}
            for i, (key, value) in enumerate(zip(columns["key"], columns["value"], strict=True)):
                events = [(None, None)] if value is None else split(key, value)
                for payload, error in events:
                    for name in names:
                        rows[name].append(columns[name][i])
                    rows[PAYLOAD][-1], rows[PAYLOAD_ERROR][-1] = payload, error
            yield pa.RecordBatch.from_pydict(rows, schema=batch.schema)

    return frame.mapInArrow(explode, schema)


def fetch_claim_checks(
    spark: SparkSession,
    prepared: DataFrame,
    claims: DataFrame,
    root: str,
    raw_value: bool,
    compression: Compression,
    codec: Codec,
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
    if compression is not Compression.NONE or codec.transcode is not None:
        fetched = _transform_payload(fetched, compression, codec.transcode)
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


def decode_json(messages: DataFrame, codec: Codec) -> DataFrame:
    """Prepared rows -> classified events (one per message) in the ``DECODED`` columns, positions and raw
    bytes kept; the codec's rules decide each message's kind, after the framing rules every record obeys."""
    m = F.from_json(
        F.col(PAYLOAD).cast("string"),
        envelope(codec),
        {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_RECORD},
    ).alias("m")
    env = F.col("m")
    rules = [*_framing_rules(env), *((compile_pred(r.when, env), r.kind, r.message) for r in codec.rules)]
    typ = codec.column("type")
    rule, kind, error = _fold_rules(rules, F.lit(None) if typ is None else compile_expr(typ, env))
    columns = []
    for decoded in DECODED.fields:
        expr = codec.column(decoded.name)
        value = F.lit(None).cast(decoded.dataType) if expr is None else compile_expr(expr, env)
        columns.append(value.alias(decoded.name))
    return (
        messages.select("*", m)
        .select("*", rule.alias(_RULE))
        .select(*MESSAGE_COLUMNS, kind.alias("kind"), error.alias("error"), *columns)
    )


def compile_expr(expr: c.Expr, env: Column) -> Column:
    """A codec expression as a Spark column over the parsed envelope ``env``."""
    if isinstance(expr, c.Field):
        column = env
        for name in expr.path:
            column = column[name]
        return column
    if isinstance(expr, c.Coalesce):
        return F.coalesce(*(compile_expr(e, env) for e in expr.values))
    if isinstance(expr, c.When):
        chosen = F.when(compile_pred(expr.condition, env), compile_expr(expr.then, env))
        return chosen if expr.otherwise is None else chosen.otherwise(compile_expr(expr.otherwise, env))
    if isinstance(expr, c.TsoFromMillis):
        return F.shiftleft(compile_expr(expr.millis, env), TSO_LOGICAL_BITS)
    if isinstance(expr, c.JsonField):
        return F.get_json_object(compile_expr(expr.json, env), f"$.{expr.name}")
    if isinstance(expr, c.First):
        # get, not [0]: under ANSI an index past the end fails the whole job instead of giving null, and a
        # message with an empty array is the rules' to quarantine.
        return F.get(compile_expr(expr.array, env), 0)
    raise TypeError(f"not an expression: {expr!r}")


def compile_pred(pred: c.Pred, env: Column) -> Column:
    """A codec predicate as a Spark condition (SQL's three-valued logic, as the codec defines it)."""
    if isinstance(pred, c.IsNull):
        return compile_expr(pred.value, env).isNull()
    if isinstance(pred, c.Eq):
        return compile_expr(pred.value, env) == F.lit(pred.constant)
    if isinstance(pred, c.In):
        return compile_expr(pred.value, env).isin(*pred.constants)
    if isinstance(pred, c.IsTrue):
        return F.coalesce(compile_expr(pred.value, env), F.lit(False))
    if isinstance(pred, c.Empty):
        return F.size(compile_expr(pred.array, env)) < 1
    if isinstance(pred, c.And):
        return compile_pred(pred.left, env) & compile_pred(pred.right, env)
    if isinstance(pred, c.Or):
        return compile_pred(pred.left, env) | compile_pred(pred.right, env)
    if isinstance(pred, c.Not):
        return ~compile_pred(pred.operand, env)
    raise TypeError(f"not a predicate: {pred!r}")


def _framing_rules(env: Column) -> list[tuple[Column, str, str | Column]]:
    """What makes any record bad before its protocol is looked at: no position, no value, no JSON."""
    return [
        (F.col("partition").isNull() | F.col("offset").isNull(), KIND_BAD, c.NOT_A_RECORD),
        (F.col("value").isNull(), KIND_BAD, "record has no value"),
        (F.col(PAYLOAD_ERROR).isNotNull(), KIND_BAD, F.col(PAYLOAD_ERROR)),
        (env.isNull() | env[CORRUPT_RECORD].isNotNull(), KIND_BAD, "malformed JSON"),
    ]


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
    # The same text as codec.unknown_type gives.
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
    # ta.schema_id's rule, on executors.
    framed = (F.length(data) >= ta.HEADER_BYTES) & (F.hex(F.substring(data, 1, 1)) == f"{ta.MAGIC:02X}")
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
        T.StructField("checksum_current", T.LongType()),
        T.StructField("checksum_corrupted", T.BooleanType()),
        T.StructField(KEY_SCHEMA, T.LongType()),
    ]
)


def decode_ticdc_avro(messages: DataFrame, schemas: dict[int, str | None]) -> DataFrame:
    """Kafka-shaped rows -> classified TiCDC Avro changes, in the JSON decoders' columns (+ ``key_schema``).

    ``schemas``: the writer schema text of every id the batch names (None where the registry has none); it
    travels to the executors with the function, so no executor calls the registry.
    """

    def reader() -> Callable[..., tuple[Any, ...]]:
        book = ta.schema_book(schemas)
        return lambda key, value, partition: _change_row(*ta.classify(key, value, partition, book))

    return _decode_changes(messages, reader, ("key", "value"))


def decode_debezium(prepared: DataFrame, reader: debezium.Reader) -> DataFrame:
    """:func:`prepare_payload`'s rows of TiCDC Debezium records -> classified changes, in the columns of
    :func:`decode_ticdc_avro`; ``reader`` travels to the executors with the function."""

    def read() -> Callable[..., tuple[Any, ...]]:
        def one(payload: bytes | None, payload_error: str | None, partition: int | None) -> tuple[Any, ...]:
            if payload_error is not None:
                return _change_row(c.KIND_BAD, payload_error, None)
            return _change_row(*debezium.classify(payload, partition, reader))

        return one

    return _decode_changes(prepared, read, (PAYLOAD, PAYLOAD_ERROR))


def debezium_schemas(prepared: DataFrame) -> list[debezium.RowSchema]:
    """The distinct row schemas of a batch of TiCDC Debezium records (:func:`prepare_payload`'s rows): the
    only thing the driver reads of it, found by the JVM's JSON reader without a Python worker."""
    text = F.col(PAYLOAD).cast("string")
    found = (
        prepared.where(F.col(PAYLOAD).isNotNull())
        .select(
            F.get_json_object(text, "$.schema").alias("schema"),
            F.get_json_object(text, "$.payload.source.db").alias("db"),
            F.get_json_object(text, "$.payload.source.table").alias("tbl"),
        )
        .where(F.col("schema").isNotNull())
        .groupBy(F.xxhash64("schema", "db", "tbl").alias("h"))
        .agg(F.first("schema").alias("schema"), F.first("db").alias("db"), F.first("tbl").alias("tbl"))
        .collect()
    )
    rows: dict[str, debezium.RowSchema] = {}
    for row in found:
        message = {
            "schema": orjson.loads(row["schema"]),
            "payload": {"source": {"db": row["db"], "table": row["tbl"]}},
        }
        try:
            schema = debezium.row_schema(message)
        except debezium.NotDebezium:
            continue  # its records say why, in the quarantine
        rows[schema.text] = schema
    return list(rows.values())


def _decode_changes(
    messages: DataFrame, reader: Callable[[], Callable[..., tuple[Any, ...]]], inputs: tuple[str, ...]
) -> DataFrame:
    """Each record's ``inputs`` and partition through ``reader()`` (made once per task), into the changes'
    columns."""
    passed = [f for f in messages.schema.fields if f.name in MESSAGE_COLUMNS]
    extra = [name for name in inputs if name not in MESSAGE_COLUMNS]
    output = T.StructType([*passed, *_AVRO_DECODED.fields])

    def decode(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_schema

        one = reader()
        # The Arrow side of _AVRO_DECODED, derived so the two cannot drift apart.
        arrow_types = {f.name: f for f in to_arrow_schema(_AVRO_DECODED)}
        for batch in batches:
            columns: dict[str, list[Any]] = {f.name: [] for f in _AVRO_DECODED.fields}
            values = [batch.column(name).to_pylist() for name in (*inputs, "partition")]
            for record in zip(*values, strict=True):
                for name, item in zip(columns, one(*record), strict=True):
                    columns[name].append(item)
            arrays = {f.name: batch.column(f.name) for f in passed}
            for name, items in columns.items():
                arrays[name] = pa.array(items, arrow_types[name].type)
            schema = pa.schema([*(batch.schema.field(f.name) for f in passed), *arrow_types.values()])
            yield pa.RecordBatch.from_pydict(arrays, schema=schema)

    decoded = messages.select(*[f.name for f in passed], *extra).mapInArrow(decode, output)
    filled = {f.name for f in _AVRO_DECODED.fields}
    return decoded.select(
        *MESSAGE_COLUMNS,
        "kind",
        "error",
        *[
            F.col(f.name) if f.name in filled else F.lit(None).cast(f.dataType).alias(f.name)
            for f in DECODED.fields
        ],
        KEY_SCHEMA,
    )


def _change_row(kind: str, error: str | None, change: ta.Change | None) -> tuple[Any, ...]:
    if change is None:
        return (kind, error, *([None] * 9))
    return (
        kind,
        error,
        change.table.schema,
        change.table.table,
        change.type,
        change.commit_ts,
        list(change.data.items()),
        change.value_schema,
        change.checksum,
        change.corrupted,
        change.key_schema,
    )
