"""How a batch orders changes, chosen once from the protocol: by TiCDC's watermarks, or by Kafka offsets
(Canal-JSON without the TiDB extension, applied best effort). Wiring, no I/O of its own.

Everything that differs between the two is here, so the batch, the tables and the segments read the
choice instead of a protocol flag: where the batch's global point G comes from, whether a late partition
is an error, where a table starts, how each key's changes reduce to one, and how the MERGE guards a row.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from ingest import order
from ingest.apply.merge import converge_effect, net_effect, with_defaults
from ingest.decode.codec import Codec
from ingest.model import PartitionId, TableState


@dataclass(frozen=True)
class Ordering:
    """One ordering mode; see :func:`ordering_of`."""

    by_offset: bool

    @property
    def name(self) -> str:
        return "offset order" if self.by_offset else "watermarks"

    @property
    def checks_late_partitions(self) -> bool:
        """Watermarks place every row below G; a partition seen only after G passed its rows would lose
        them. Offset order places late rows by the MERGE guard instead."""
        return not self.by_offset

    def point(
        self,
        committed_g: int,
        watermarks: Mapping[PartitionId, int],
        partitions: Iterable[PartitionId],
        commit_times: Iterable[int],
    ) -> int:
        """The batch's G: the smallest watermark over every partition; in offset order, with no watermarks,
        the newest commit time read (never back)."""
        if self.by_offset:
            return max([committed_g, *commit_times])
        return order.global_watermark(dict(watermarks), set(partitions))

    def start(self, state: TableState) -> TableState:
        """Where a table's rows start. In offset order a row older than what the table holds may be new (its
        partition lagged): every row is admitted and the MERGE guard keeps newer rows; DDLs are still
        admitted once, by D_T."""
        return replace(state, applied_ts=0) if self.by_offset else state

    def fill(self, rows: DataFrame, defaults: Mapping[str, str]) -> DataFrame:
        """Rows with the DEFAULT of each column added since they were written (in offset order a row from
        before an ADD COLUMN can arrive after it)."""
        return with_defaults(rows, dict(defaults)) if self.by_offset else rows

    def effect(self, changes: DataFrame, key: tuple[str, ...], columns: list[str]) -> DataFrame:
        """One change per key: the last by commit_ts; in offset order (commit times are milliseconds, not
        TSOs) the last read from its partition."""
        return (converge_effect if self.by_offset else net_effect)(changes, key, columns)


def ordering_of(codec: Codec) -> Ordering:
    """The ordering the protocol's records allow: the one place the batch asks the codec."""
    return Ordering(by_offset=codec.offset_order)


def within_commit_ts(rows: DataFrame, after_ts: int, through_ts: int | None) -> DataFrame:
    """Rows of a batch with commitTs in (after_ts, through_ts], in offset order. A TiCDC Avro tombstone has
    no commitTs: it counts with the row before it in its partition (TiCDC sends a partition's changes in
    commit order, and a key's changes to one partition), and with the first window when none is before it."""
    before = (
        Window.partitionBy("topic", "partition").orderBy("offset").rowsBetween(Window.unboundedPreceding, 0)
    )
    # the decoded frame's own column (upstream columns live in its maps, so no name of theirs can meet it)
    placed = F.col("placed_commit_ts")
    kept = F.lit(True)
    if after_ts:
        kept = kept & (placed > after_ts)
    if through_ts is not None:
        kept = kept & (placed <= through_ts)
    ts = F.coalesce(F.col("commit_ts"), F.last("commit_ts", ignorenulls=True).over(before), F.lit(0))
    return rows.withColumn("placed_commit_ts", ts).where(kept).drop("placed_commit_ts")
