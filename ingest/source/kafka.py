"""Kafka -> rows of (topic, partition, offset, timestamp, key, value), with Spark Structured Streaming. I/O.

Positions belong to our progress, not to Spark's checkpoint: a new query starts where our progress
says, and every batch is checked against it, so a lost or stale checkpoint cannot skip or repeat data.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import orjson
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ingest.config import KafkaSource
from ingest.errors import KafkaRefused, OrderingError
from ingest.model import PartitionId

MESSAGE_COLUMNS = ("topic", "partition", "offset", "timestamp", "key", "value")
EARLIEST = "earliest"
_NEVER_MS = 253402300799000  # 9999-12-31T23:59:59Z


def subscribed(source: KafkaSource, topic: str) -> bool:
    """Whether the stream reads ``topic`` (Spark's subscribePattern matches the whole name)."""
    if source.topics:
        return topic in source.topics
    return source.topic_pattern is not None and re.fullmatch(source.topic_pattern, topic) is not None


def starting_offsets(source: KafkaSource, resume: Mapping[PartitionId, int]) -> str:
    """Spark's ``startingOffsets`` from our progress: JSON positions, or ``earliest`` for a new stream.

    Spark uses it only when the checkpoint holds no offsets yet, so passing it every time is what makes a
    deleted checkpoint harmless. Partitions our progress does not know start at the earliest offset (-2).
    """
    positions: dict[str, dict[str, int]] = {}
    for pid, offset in sorted(resume.items()):
        if subscribed(source, pid.topic):
            positions.setdefault(pid.topic, {})[str(pid.partition)] = offset
    return orjson.dumps(positions).decode() if positions else EARLIEST


def _options(source: KafkaSource) -> dict[str, str]:
    """The Kafka client's options and the subscription, the same for the stream and its access check."""
    options = {"kafka.bootstrap.servers": source.bootstrap_servers}
    if source.topics:
        options["subscribe"] = ",".join(source.topics)
    else:
        options["subscribePattern"] = source.topic_pattern or ""
    return options | dict(source.options)


def read_stream(spark: SparkSession, source: KafkaSource, start: str) -> DataFrame:
    """The streaming DataFrame of Kafka records for ``source``, starting at ``start`` on a new checkpoint."""
    reader = (
        spark.readStream.format("kafka")
        .option("startingOffsets", start)
        .option("failOnDataLoss", "true" if source.fail_on_data_loss else "false")
    )
    if source.max_offsets_per_trigger is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(source.max_offsets_per_trigger))
    for key, value in sorted(_options(source).items()):
        reader = reader.option(key, value)
    return reader.load()


def check_access(spark: SparkSession, source: KafkaSource) -> None:
    """Ask the broker for the topics' latest offsets once, as the stream's client would.

    A refused login, an untrusted certificate or a denied topic is then one :class:`KafkaRefused` before
    the stream writes its checkpoint or anything of ours, instead of a streaming failure after Spark's
    retries. Any other failure is left to the stream, which knows how to report it.
    """
    reader = spark.read.format("kafka").options(**_options(source))
    # A batch read may not start at "latest", but a start after every record's timestamp falls back to
    # the latest offsets: an empty range, reached through the same offset lookups the stream makes.
    reader = reader.option("startingTimestamp", str(_NEVER_MS)).option("endingOffsets", "latest")
    reader = reader.option("startingOffsetsByTimestampStrategy", "latest")
    try:
        reader.option("fetchOffset.numRetries", "1").load().count()
    except Exception as exc:  # classic Spark and Spark Connect raise different types for the same failure
        refused = refusal(source, str(exc))
        if refused is None:
            raise
        raise refused from None


_KAFKA_ERROR = re.compile(r"org\.apache\.kafka\.common\.errors\.(\w+Exception): ?([^\n]*)")


def refusal(source: KafkaSource, failure: str) -> KafkaRefused | None:
    """The clear error for a Kafka client failure that retrying cannot mend, or None for any other.

    Kafka's own exception names tell them apart: a SASL login refused, a TLS handshake failed (an unknown
    CA, a wrong protocol), or an authorization denied after the login.
    """
    found = _KAFKA_ERROR.search(failure)
    if found is None:
        return None
    kind, reason = found.group(1), found.group(2).strip()
    where = f"Kafka at {source.bootstrap_servers}"
    if kind == "SaslAuthenticationException":
        return KafkaRefused(
            f"{where} refused the mirror's login: {reason}. Check the user and password in "
            "kafka.sasl.jaas.config and kafka.sasl.mechanism (a secret reference there gives what its "
            "secret holds now)"
        )
    if kind == "SslAuthenticationException":
        return KafkaRefused(
            f"{where}: the TLS handshake failed: {reason}. Check that kafka.ssl.truststore.location (or "
            "kafka.ssl.truststore.certificates) holds the CA that signed the broker's certificate, and that "
            "kafka.security.protocol is what the broker's listener speaks"
        )
    if kind.endswith("AuthorizationException"):
        return KafkaRefused(
            f"{where} accepted the login but denied it: {kind}: {reason}. Grant the mirror's user Describe "
            "and Read on the topics (and on its consumer group if kafka.group.id is set)"
        )
    return None


def as_messages(batch: DataFrame) -> DataFrame:
    """The Kafka-shaped rows the pipeline reads, whatever else the source adds (headers, timestampType)."""
    return batch.select(*MESSAGE_COLUMNS)


@dataclass(frozen=True)
class PartitionSpan:
    """The offsets one batch holds for one partition."""

    first: int
    last: int
    records: int


def partition_spans(batch: DataFrame) -> dict[PartitionId, PartitionSpan]:
    """First and last offset, and record count, per partition of one micro-batch (one small Spark job)."""
    rows = (
        batch.groupBy("topic", "partition")
        .agg(F.min("offset").alias("first"), F.max("offset").alias("last"), F.count("*").alias("n"))
        .collect()
    )
    return {
        PartitionId(r["topic"], int(r["partition"])): PartitionSpan(
            int(r["first"]), int(r["last"]), int(r["n"])
        )
        for r in rows
    }


def find_gaps(
    spans: Mapping[PartitionId, PartitionSpan], resume: Mapping[PartitionId, int]
) -> list[tuple[PartitionId, int, int]]:
    """Partitions where a batch starts above our resume offset: (partition, resume offset, first offset)."""
    return sorted(
        (pid, resume[pid], span.first)
        for pid, span in spans.items()
        if pid in resume and span.first > resume[pid]
    )


def check_no_gap(spans: Mapping[PartitionId, PartitionSpan], resume: Mapping[PartitionId, int]) -> None:
    """Refuse a batch that starts above where our progress resumes a partition (records in between lost).

    That happens when Spark's checkpoint is ahead of our progress: e.g. the progress table was restored
    from an older copy, or a checkpoint of another stream was reused.

    Raises:
        OrderingError: naming the partition, both offsets and the fix.
    """
    gaps = find_gaps(spans, resume)
    if gaps:
        detail = "; ".join(f"{p}: progress resumes at {r}, the batch starts at {f}" for p, r, f in gaps)
        raise OrderingError(
            f"Spark's checkpoint is ahead of our progress ({detail}), so the records in between were never "
            "applied. Nothing was applied from this batch. Delete the checkpoint directory (checkpoint-"
            "location): the next run then starts from our progress"
        )
