"""What a batch did, per table and overall: the reports every batch logs and returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone

from ingest.model import TableId, tso_to_datetime


@dataclass
class TableReport:
    """What one run did to one table."""

    table: TableId
    upserted: int = 0
    deleted: int = 0
    ddls: list[str] = field(default_factory=list)
    quarantined: int = 0
    pending: int = 0
    applied_ts: int = 0
    # Set when the table stopped just below rows that do not convert, until the batch knows it will not
    # fail on max-bad-ratio: the commit_ts up to which its unconvertible rows are already quarantined.
    held_through: int | None = None

    def absorb(self, later: TableReport) -> None:
        """Add what a second pass over the same table did."""
        self.upserted += later.upserted
        self.deleted += later.deleted
        self.ddls.extend(later.ddls)
        self.quarantined += later.quarantined
        self.applied_ts = later.applied_ts
        self.held_through = later.held_through

    def describe(self) -> str:
        applied = (
            f"applied up to TSO {self.applied_ts} ({tso_to_datetime(self.applied_ts).isoformat()})"
            if self.applied_ts
            else "nothing applied yet"
        )
        return (
            f"{self.table}: {self.upserted} upserted, {self.deleted} deleted, {len(self.ddls)} DDL applied, "
            f"{self.quarantined} quarantined, {self.pending} pending above G; {applied}"
        )


@dataclass
class BatchResult:
    """What one run did, per table and overall; :meth:`metrics` is what every batch logs."""

    run_id: int
    records: int
    global_watermark: int
    quarantined: int
    tables: dict[TableId, TableReport]
    seconds: float
    bytes: int = 0
    decoded: dict[TableId, int] = field(default_factory=dict)  # DML rows and DDLs read, per table
    lag_seconds: float | None = None  # now minus G's physical time, when the batch finished
    batch_id: int | None = None  # Spark's micro-batch id, for a Kafka stream
    offset_order: bool = False  # TiCDC Avro: applied in offset order, there is no G

    def describe(self) -> str:
        g = (
            f"G = {self.global_watermark} ({tso_to_datetime(self.global_watermark).isoformat()})"
            if self.global_watermark
            else "G = 0 (some partition has no watermark yet)"
        )
        if self.offset_order:
            g = "applied in offset order (no watermarks)"
        lag = f", lag {self.lag_seconds:.1f}s" if self.lag_seconds is not None else ""
        return (
            f"run {self.run_id}: {self.records} records ({self.bytes} bytes), {g}{lag}, "
            f"{self.quarantined} quarantined, {len(self.tables)} tables, {self.seconds:.1f}s"
        )

    def metrics(self) -> dict[str, object]:
        """One JSON-able record per batch: events decoded and applied per table, bytes, duration, lag."""
        tables = sorted(set(self.decoded) | set(self.tables))
        return {
            "run_id": self.run_id,
            "batch_id": self.batch_id,
            "records": self.records,
            "bytes": self.bytes,
            "quarantined": self.quarantined,
            "duration_seconds": round(self.seconds, 3),
            "global_watermark": self.global_watermark,
            "lag_seconds": None if self.lag_seconds is None else round(self.lag_seconds, 3),
            "tables": {
                str(t): {
                    "decoded": self.decoded.get(t, 0),
                    "applied": _applied(self.tables.get(t)),
                    "pending": self.tables[t].pending if t in self.tables else 0,
                }
                for t in tables
            },
        }


def _applied(report: TableReport | None) -> int:
    return 0 if report is None else report.upserted + report.deleted + len(report.ddls)


def lag_seconds(global_watermark: int, now: datetime | None = None) -> float | None:
    """How far the mirror is behind: now against the physical time of G (None before the first G)."""
    if not global_watermark:
        return None
    moment = now or datetime.now(timezone.utc)
    return (moment - tso_to_datetime(global_watermark)).total_seconds()
