"""The batch skeleton both ordering modes share: read each position once, count what each partition gave,
stop on fatal records, quarantine what does not decode, and hold the share of bad records to its limit.
I/O (Spark), no Delta tables of the mirror."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from ingest.config import IngestConfig
from ingest.decode.codec import Codec
from ingest.errors import ConfigError, DecodeError, TooManyBadRecords
from ingest.model import PartitionId, Position, TableId, TableState
from ingest.source import POSITION
from ingest.source.decoding import KIND_BAD, KIND_DML, KIND_FATAL
from ingest.spark import cached as spark_cached
from ingest.state import progress, quarantine, table_state

logger = logging.getLogger(__name__)

NO_PARTITION = PartitionId("", -1)


def cache_once_per_position(decoded: DataFrame) -> tuple[DataFrame, dict[PartitionId, PartitionRead]]:
    """The decoded batch, cached, each Kafka position once, and what was read from each partition.

    De-duplicating shuffles every record's bytes (at 500,000 captured records, 2.3 s of a 3.1 s read), and
    duplicates are rare: overlapping captures, or a buffer left by a run that crashed after writing it and
    before committing its progress. So the pass that reads the partition ranges also counts distinct
    offsets, and only a batch that has duplicates is de-duplicated (and cached again). The caller
    unpersists the frame.
    """
    frames = [spark_cached(decoded)]
    try:
        ranges = partition_ranges(frames[0])
        if any(r.duplicates for r in ranges.values()):
            # Lines without a position are not copies of each other: each is counted and quarantined.
            positioned = (
                F.col("topic").isNotNull() & F.col("partition").isNotNull() & F.col("offset").isNotNull()
            )
            cached = frames[0]
            # The entry tells apart the events of one Open Protocol record, which share its position.
            once = cached.where(positioned).withColumn("__entry", _entry(cached))
            once = once.dropDuplicates([*POSITION, "__entry"]).drop("__entry")
            unique = once.unionByName(cached.where(~positioned))
            frames.append(spark_cached(unique))
            ranges = partition_ranges(frames[-1])  # also fills its cache before its parent's goes
    except BaseException:
        for frame in frames:
            frame.unpersist()
        raise
    for frame in frames[:-1]:
        frame.unpersist()
    return frames[-1], ranges


def quarantine_undecodable(
    spark: SparkSession, config: IngestConfig, decoded: DataFrame, bad: int, run_id: int
) -> None:
    """Keep every record the decoder rejected, with its bytes and position, before anything is applied."""
    if not bad:
        return
    quarantine.write(
        spark,
        config.state_path,
        decoded.where(F.col("kind") == KIND_BAD),
        error_class=DecodeError.__name__,
        run_id=run_id,
    )
    logger.warning("run %d: quarantined %d undecodable records", run_id, bad)


def stop_on_fatal(ranges: dict[PartitionId, PartitionRead], codec: Codec) -> None:
    """A fatal record (one the changefeed must be changed for) stops the batch before anything applies."""
    fatal = sorted(((p, r.fatal) for p, r in ranges.items() if r.fatal is not None), key=lambda x: x[0])
    if fatal:
        partition, (offset, error) = fatal[0]
        position = Position(partition.topic, partition.partition, offset)
        raise ConfigError(f"{codec.name}: {error} (first seen at {position}); nothing was applied")


@dataclass(frozen=True)
class PartitionRead:
    """What one batch read from one partition."""

    last_offset: int
    records: int
    bad: int
    min_dml_ts: int | None
    bytes: int = 0
    fatal: tuple[int, str] | None = None  # the first record that stops the stream: offset, why
    duplicates: int = 0  # records whose offset was read more than once in this batch


def _entry(frame: DataFrame) -> Column:
    """The event's index in its record (0 for protocols whose records hold one event)."""
    return F.coalesce(F.col("entry"), F.lit(0)) if "entry" in frame.columns else F.lit(0)


def partition_ranges(decoded: DataFrame) -> dict[PartitionId, PartitionRead]:
    """Per partition: last offset read, records read, bad (quarantined) records, smallest DML commit_ts,
    and the first fatal record; one pass over the decoded batch."""
    rows = (
        decoded.groupBy("topic", "partition")
        .agg(
            F.max("offset").alias("last"),
            F.count("*").alias("n"),
            # Every event of an Open Protocol record has the record's offset: a copy repeats its entry too.
            (F.count("offset") - F.count_distinct("offset", _entry(decoded))).alias("duplicates"),
            F.sum(F.when(F.col("kind") == KIND_BAD, 1).otherwise(0)).alias("bad"),
            F.min(F.when(F.col("kind") == KIND_DML, F.col("commit_ts"))).alias("min_ts"),
            F.sum(F.when(_entry(decoded) == 0, F.length("value"))).alias("bytes"),  # each record once
            F.min(F.when(F.col("kind") == KIND_FATAL, F.struct("offset", "error"))).alias("fatal"),
        )
        .collect()
    )
    result: dict[PartitionId, PartitionRead] = {}
    for row in rows:
        if row["topic"] is None or row["partition"] is None:
            # Lines that were not Kafka records at all: counted and quarantined, but they have no partition.
            result[NO_PARTITION] = PartitionRead(
                -1, int(row["n"]), int(row["bad"]), None, int(row["bytes"] or 0)
            )
            continue
        min_ts = None if row["min_ts"] is None else int(row["min_ts"])
        pid = PartitionId(row["topic"], int(row["partition"]))
        fatal = None if row["fatal"] is None else (int(row["fatal"]["offset"]), str(row["fatal"]["error"]))
        result[pid] = PartitionRead(
            int(row["last"]),
            int(row["n"]),
            int(row["bad"]),
            min_ts,
            int(row["bytes"] or 0),
            fatal,
            int(row["duplicates"]),
        )
    return result


def check_partitions(
    config: IngestConfig,
    ranges: dict[PartitionId, PartitionRead],
    committed: progress.Progress,
    check_late: bool = True,
) -> None:
    seen = {p for p in ranges if p != NO_PARTITION}
    if config.partitions is not None:
        unexpected = sorted(str(p) for p in seen if p not in config.partitions)
        if unexpected:
            raise ConfigError(
                f"partitions: records found in {', '.join(unexpected)}, which --partitions does not list; "
                "list every partition TiCDC writes to, or G cannot be computed"
            )
        return
    if not check_late:
        return  # offset order places late rows by the MERGE guard, not by G
    # Discovered partition set: a partition seen for the first time after rows were applied up to G
    # without it may hold changes at or below that G, which A_T would now drop. Never let that pass.
    known = set(committed.resume) | set(committed.watermarks)
    late = sorted(
        str(p)
        for p in seen - known
        if (first := ranges[p].min_dml_ts) is not None and first <= committed.global_watermark
    )
    if late:
        raise ConfigError(
            f"partitions: {', '.join(late)} appeared only now but holds changes at or below the G already "
            f"applied ({committed.global_watermark}) without it, so the mirror may be missing them. Mirror "
            "again into a new target with --partitions listing every partition TiCDC writes"
        )


def over_bad_ratio(config: IngestConfig, bad: int, records: int) -> bool:
    return bool(records) and bad / records > config.max_bad_ratio


def check_bad_ratio(config: IngestConfig, bad: int, records: int) -> None:
    if over_bad_ratio(config, bad, records):
        raise TooManyBadRecords(
            f"{bad} of {records} records were quarantined ({bad / records:.2%}), above max-bad-ratio "
            f"{config.max_bad_ratio}; progress not moved. Inspect the quarantine table under "
            f"{quarantine.quarantine_path(config.state_path)} and fix the input, or raise --max-bad-ratio"
        )


def held_states(
    spark: SparkSession, config: IngestConfig, committed: progress.Progress, touched: Iterable[TableId]
) -> dict[TableId, TableState]:
    """What every table holds as the batch starts: its state in the committed progress, which each table's
    own commits equal, except for the tables a run begun since may have written before it stopped short of
    its progress (``Progress.unfinished``), whose state comes from their own newest commits. So the mirror
    reads its own state once per batch, and a table's history only after a crash or a re-sync. Without any
    committed progress (a new mirror, or its progress table lost), each table the batch ``touched`` that
    already exists holds what its own commits say, so a lost progress table costs a re-read, not a replay."""
    states = dict(committed.tables)
    own_states = set(committed.unfinished) | (set(touched) if committed.run_id == 0 else set())
    for table in sorted(own_states):
        path = config.mirror.address(table)
        own = table_state.read_table_state(spark, path)
        if own is not None:
            states[table] = own
        if table in committed.unfinished or own is not None:
            logger.info("%s: state from its own commits (no committed progress says it): %s", table, own)
    return states
