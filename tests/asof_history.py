"""Test helper: a small multi-table upstream history mirrored over several runs, shared by the as-of and
verify tests (built once per test session: mirroring it is the slow part)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timezone
from decimal import Decimal
from pathlib import Path

from ingest.config import IngestConfig
from ingest.model import TableId
from ingest.pipeline import run_files
from testkit.sample import ADD_POINTS, CUSTOMERS, ORDERS, SIMPLE_FOR_TESTS, Stream

CUSTOMERS_T = TableId("shop", "customers")
ORDERS_T = TableId("shop", "orders")
NOTES_T = TableId("app", "t")


@dataclass(frozen=True)
class MirroredHistory:
    """The upstream model, the mirror's root, each run's G, and the CREATE TABLE of each table at G2."""

    stream: Stream
    lake: Path
    gs: tuple[int, ...]
    creates_at_g2: dict[TableId, str]


def _customer(i: int) -> dict[str, object]:
    return {
        "id": i, "name": f"customer {i}", "email": None if i % 3 == 0 else f"c{i}@example.com",
        "balance": Decimal(f"{i * 10}.25"), "vip": i % 2,
        "signed_up_at": datetime(2026, 1, 1, 8, i, 0, 125000, tzinfo=timezone.utc),
        "birthday": date(1980 + i, 1 + i % 12, 1) if i % 2 else None,
    }  # fmt: skip


def _order(i: int) -> dict[str, object]:
    return {
        "order_id": 100 + i, "customer_id": i, "amount": Decimal(f"{i}.99"), "status": "new",
        "weight_kg": 0.5 * i if i % 2 else None, "score": 1.5 * i, "placed_at": datetime(2026, 2, 1, 10, i),
        "note": f"note {i}, with 'quotes'" if i % 2 else None, "payload": bytes([i, 0x00, 0xFF, 0x0A]),
    }  # fmt: skip


def build(spark, root: Path) -> MirroredHistory:
    """Three runs: (1) customers and orders created and filled; (2) only customers and a new table app.t
    change, orders is untouched; (3) customers gets a column (a DDL: non-consistent steps), orders loses a
    row and app.t changes."""
    s = Stream(tz_name="UTC")
    lake = root / "lake"
    customers = s.create_table(CUSTOMERS, s.tso(1))
    orders = s.create_table(ORDERS, s.tso(1))
    for i in range(1, 7):
        s.insert(customers, _customer(i), s.tso(2 + i * 0.1))
        s.insert(orders, _order(i), s.tso(2 + i * 0.1))
    s.watermark(s.tso(10))
    gs = [_run(spark, s, root, lake, 1)]
    s.update(customers, (2,), {"balance": Decimal("999.99"), "email": None}, s.tso(11))
    s.delete(customers, (3,), s.tso(12))
    notes = s.create_table(SIMPLE_FOR_TESTS, s.tso(12))
    for i in range(1, 4):
        s.insert(notes, {"id": i, "v": f"v{i}" if i != 2 else None}, s.tso(13))
    s.watermark(s.tso(20))
    gs.append(_run(spark, s, root, lake, 2))
    s.add_column(customers, ADD_POINTS, s.tso(21), "points", "int", default=100)
    s.update(customers, (1,), {"points": 7}, s.tso(22))
    s.delete(orders, (104,), s.tso(22))
    s.update(notes, (2,), {"v": "set later"}, s.tso(23))
    s.watermark(s.tso(30))
    gs.append(_run(spark, s, root, lake, 3))
    creates = {customers: CUSTOMERS, orders: ORDERS, notes: SIMPLE_FOR_TESTS}
    return MirroredHistory(s, lake, tuple(gs), creates)


def _run(spark, s: Stream, root: Path, lake: Path, n: int) -> int:
    input_dir = root / f"input-{n}"
    s.write(input_dir)
    config = IngestConfig.from_params({"input": str(input_dir), "target-path": str(lake), "timezone": "UTC"})
    result = run_files(spark, config)
    assert result.global_watermark == s.complete_watermark()
    return result.global_watermark
