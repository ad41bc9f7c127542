"""Step ``checksums``: what checking TiDB's row checksums adds to decoding, on records TiCDC v8.3.0 wrote
with checksums (tests/fixtures/corpora/checksums, Simple JSON): the rows of its table of every type, repeated
to the decode step's size, decoded as the pipeline decodes them, with and without the verdict the apply step
computes before it converts anything."""

from __future__ import annotations

import base64
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from bench.context import Bench, fmt_ratio, rate
from bench.decode import _best_noop
from bench.targets import CHECKSUMS_MISSED, TARGET_CHECKSUMS
from ingest.apply import checksum
from ingest.decode import simple as sp
from ingest.decode.compression import Compression
from ingest.decode.simple_schema import parse_table_schema
from ingest.source import files
from ingest.source.decoding import decode_json, prepare_payload

logger = logging.getLogger("bench")

CORPUS = Path(__file__).parent.parent / "tests" / "fixtures" / "corpora" / "checksums" / "simple-json"
TABLE = "t_types"  # every TiDB type: 37 columns, long texts and blobs
NARROW = "t_cpk"  # eight columns: a composite key, DECIMAL, DATETIME, TIMESTAMP, VARBINARY, TEXT


def _corpus(table: str = TABLE) -> tuple[list[dict[str, Any]], dict[int, checksum.Layout]]:
    """The table's DML records, and the checksum layout of each schema version the corpus announces."""
    rows, layouts = [], {}
    for line in (CORPUS / "records.jsonl").read_text().splitlines():
        record = orjson.loads(line)
        message = orjson.loads(base64.b64decode(record["value"]))
        schema = message.get("tableSchema")
        if schema and schema["table"] == table:
            announced = parse_table_schema(schema)
            layouts[announced.version] = checksum.Layout.of(announced.schema.columns)
        elif message.get("table") == table and message.get("type") in ("INSERT", "UPDATE", "DELETE"):
            rows.append(record)
    return rows, layouts


@dataclass(frozen=True)
class _Measured:
    table: str
    records: int
    versions: int
    states: dict[str, int]
    without: tuple[float, float]  # wall, CPU
    with_: tuple[float, float]

    @property
    def ratio(self) -> float:
        return self.with_[1] / self.without[1]


def _measure(bench: Bench, table: str, n: int) -> _Measured:
    rows, layouts = _corpus(table)
    input_dir = bench.dir(f"checksums-{table}")
    input_dir.mkdir(parents=True)
    with (input_dir / "records.jsonl").open("wb") as out:
        for offset in range(n):
            out.write(orjson.dumps(dict(rows[offset % len(rows)], offset=offset)) + b"\n")
    messages = files.read_messages(bench.spark, str(input_dir), {}).cache()
    messages.count()
    codec = sp.codec()
    decoded = decode_json(prepare_payload(messages, Compression.NONE, codec), codec)
    judged = checksum.checked(decoded, layouts, "UTC", require=False, deletes_carry_none=False)
    states = {r[0]: r[1] for r in judged.groupBy(checksum.STATE_COLUMN).count().collect()}
    if states.get(checksum.STATE_MISMATCH) or sum(states.values()) != n:
        raise SystemExit(f"checksums of {table}: {states} over {n} records, expected no mismatch")
    logger.warning("bench: checksum input of %d %s records ready: %s", n, table, states)
    without, with_ = _best_noop(bench, decoded), _best_noop(bench, judged)
    messages.unpersist()
    return _Measured(table, len(rows), len(layouts), states, without, with_)


def checksums(bench: Bench) -> None:
    n = bench.sizes.decode_events
    wide, narrow = _measure(bench, TABLE, n), _measure(bench, NARROW, n)
    bench.results["decode_with_checksums_vs_without"] = wide.ratio
    bench.results["decode_with_checksums_vs_without_narrow"] = narrow.ratio
    bench.headline["checksums"] = fmt_ratio(wide.ratio)
    lines = []
    for m in (wide, narrow):
        for label, (wall, cpu) in (("decode", m.without), ("decode + checksums", m.with_)):
            lines.append(f"| `acc.{m.table}` | {label} | {wall:.2f} | {cpu:.2f} | {rate(n, cpu):,.0f} |")
        lines.append(f"| `acc.{m.table}` | ratio (CPU) | | {fmt_ratio(m.ratio)} | |")
    bench.out(
        "## Row checksums",
        "",
        f"{n:,} Simple JSON records TiCDC v8.3.0 wrote with row checksums "
        "(`tests/fixtures/corpora/checksums`), per table the DML records of one table repeated: "
        f"`acc.{TABLE}`, every TiDB type in 37 columns with long texts and blobs ({wide.records} records), "
        f"and `acc.{NARROW}`, eight columns ({narrow.records} records). Decoded as the pipeline decodes "
        "them, to the `noop` sink, without and with the checksum verdict the apply step computes from "
        "the wire text before converting anything (every record verified or, a split update's half, "
        f"carrying none). Best of {bench.sizes.repeats} after a warm-up.",
        "",
        "| Table | | Wall s | CPU-s | Events per CPU-s |",
        "|---|---|---:|---:|---:|",
        *lines,
        "",
    )
    bench.target(
        f"Decode with row checksums checked ≤ {TARGET_CHECKSUMS}x the CPU of decode alone (every type)",
        wide.ratio,
        wide.ratio <= TARGET_CHECKSUMS,
        CHECKSUMS_MISSED,
    )
