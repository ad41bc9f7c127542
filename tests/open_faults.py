"""The kit's Open Protocol records as a real topic delivers them: faults TiCDC's own delivery has."""

from __future__ import annotations

import base64

import orjson

from ingest.decode import open_protocol as op


def events(record: dict) -> list[dict]:
    """The event keys of one captured record, in entry order."""
    key, value = base64.b64decode(record["key"]), base64.b64decode(record["value"] or "")
    return [orjson.loads(k) for k, _ in op.entries(key, value)]


def faulty_partitions(records: list[dict]) -> tuple[list[dict], list[dict]]:
    """Partition 0: every record, then the middle third sent again at new offsets (a restart's replay,
    batches, DDLs and resolved events that go back). Partition 1: what TiCDC broadcasts to a partition no
    table's rows are dispatched to, each DDL and resolved record."""
    replayed = records[len(records) // 3 : 2 * len(records) // 3]
    first = [{**r, "offset": i} for i, r in enumerate([*records, *replayed])]
    broadcast = [r for r in records if {e["t"] for e in events(r)} & {op.DDL, op.RESOLVED}]
    second = [{**r, "partition": 1, "offset": i} for i, r in enumerate(broadcast)]
    return first, second


def last_resolved(records: list[dict]) -> int:
    """The newest resolved TSO the records carry: where G ends once every partition has sent it."""
    return max(e["ts"] for r in records for e in events(r) if e["t"] == op.RESOLVED)
