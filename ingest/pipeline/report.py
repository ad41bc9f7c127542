"""What a batch did, per table and overall: the reports every batch logs and returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone

import orjson

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
    # Set when the table stopped just below a DDL the mirror refuses: why (the DDL history has the rest).
    stopped: str | None = None
    # Row checksums, where they were checked: rows applied whose checksums matched, rows applied that carried
    # none to check (a split update's halves), and mismatches (quarantined).
    verified: int = 0
    unverified: int = 0
    mismatched: int = 0

    def absorb(self, later: TableReport) -> None:
        """Add what a second pass over the same table did."""
        self.upserted += later.upserted
        self.deleted += later.deleted
        self.ddls.extend(later.ddls)
        self.quarantined += later.quarantined
        self.verified += later.verified
        self.unverified += later.unverified
        self.mismatched += later.mismatched
        self.applied_ts = later.applied_ts
        self.held_through = later.held_through
        self.stopped = later.stopped or self.stopped

    @property
    def checked(self) -> bool:
        """Whether any of its rows' checksums were checked."""
        return bool(self.verified or self.unverified or self.mismatched)

    def describe(self) -> str:
        applied = (
            f"applied up to TSO {self.applied_ts} ({tso_to_datetime(self.applied_ts).isoformat()})"
            if self.applied_ts
            else "nothing applied yet"
        )
        stopped = f"; STOPPED: {self.stopped}" if self.stopped else ""
        checked = (
            f"; row checksums: {self.verified} verified, {self.unverified} carried none, "
            f"{self.mismatched} mismatched"
            if self.checked
            else ""
        )
        return (
            f"{self.table}: {self.upserted} upserted, {self.deleted} deleted, {len(self.ddls)} DDL applied, "
            f"{self.quarantined} quarantined, {self.pending} pending above G; {applied}{checked}{stopped}"
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
                    **_checksums(self.tables.get(t)),
                }
                for t in tables
            },
        }

    def to_json(self) -> str:
        """Everything this result holds, as JSON that :meth:`from_json` reads back exactly."""
        payload = {
            "run_id": self.run_id,
            "records": self.records,
            "global_watermark": self.global_watermark,
            "quarantined": self.quarantined,
            "seconds": self.seconds,
            "bytes": self.bytes,
            "lag_seconds": self.lag_seconds,
            "batch_id": self.batch_id,
            "offset_order": self.offset_order,
            "decoded": [[t.schema, t.table, n] for t, n in sorted(self.decoded.items())],
            "tables": [
                {
                    "table": [r.table.schema, r.table.table],
                    "upserted": r.upserted,
                    "deleted": r.deleted,
                    "ddls": list(r.ddls),
                    "quarantined": r.quarantined,
                    "pending": r.pending,
                    "applied_ts": r.applied_ts,
                    "held_through": r.held_through,
                    "stopped": r.stopped,
                    "verified": r.verified,
                    "unverified": r.unverified,
                    "mismatched": r.mismatched,
                }
                for _, r in sorted(self.tables.items())
            ],
        }
        return orjson.dumps(payload).decode()

    @classmethod
    def from_json(cls, text: str) -> BatchResult:
        """The result :meth:`to_json` wrote."""
        payload = orjson.loads(text)
        tables = {}
        for item in payload["tables"]:
            table = TableId(*item["table"])
            tables[table] = TableReport(
                table=table,
                upserted=int(item["upserted"]),
                deleted=int(item["deleted"]),
                ddls=[str(d) for d in item["ddls"]],
                quarantined=int(item["quarantined"]),
                pending=int(item["pending"]),
                applied_ts=int(item["applied_ts"]),
                held_through=None if item["held_through"] is None else int(item["held_through"]),
                stopped=item.get("stopped"),
                verified=int(item.get("verified", 0)),
                unverified=int(item.get("unverified", 0)),
                mismatched=int(item.get("mismatched", 0)),
            )
        return cls(
            run_id=int(payload["run_id"]),
            records=int(payload["records"]),
            global_watermark=int(payload["global_watermark"]),
            quarantined=int(payload["quarantined"]),
            tables=tables,
            seconds=float(payload["seconds"]),
            bytes=int(payload["bytes"]),
            decoded={TableId(schema, table): int(n) for schema, table, n in payload["decoded"]},
            lag_seconds=None if payload["lag_seconds"] is None else float(payload["lag_seconds"]),
            batch_id=None if payload["batch_id"] is None else int(payload["batch_id"]),
            offset_order=bool(payload["offset_order"]),
        )


def _checksums(report: TableReport | None) -> dict[str, int]:
    """A table's row-checksum counts for the metrics, where any row was checked."""
    if report is None or not report.checked:
        return {}
    return {
        "checksums_verified": report.verified,
        "checksums_unverified": report.unverified,
        "checksums_mismatched": report.mismatched,
    }


def _applied(report: TableReport | None) -> int:
    return 0 if report is None else report.upserted + report.deleted + len(report.ddls)


def lag_seconds(global_watermark: int, now: datetime | None = None) -> float | None:
    """How far the mirror is behind: now against the physical time of G (None before the first G)."""
    if not global_watermark:
        return None
    moment = now or datetime.now(timezone.utc)
    return (moment - tso_to_datetime(global_watermark)).total_seconds()
