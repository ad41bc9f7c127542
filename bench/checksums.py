"""Step ``checksums``: what checking TiDB's row checksums adds to decoding, on records TiCDC v8.3.0 wrote
with checksums (tests/fixtures/corpora/checksums, Simple JSON): the rows of its table of every type, repeated
to the decode step's size, decoded as the pipeline decodes them, with and without the verdict the apply step
computes before it converts anything."""

from __future__ import annotations

import base64
import logging
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
TABLE = "t_types"


def _corpus() -> tuple[list[dict[str, Any]], dict[int, checksum.Layout]]:
    """The table's DML records, and the checksum layout of each schema version the corpus announces."""
    rows, layouts = [], {}
    for line in (CORPUS / "records.jsonl").read_text().splitlines():
        record = orjson.loads(line)
        message = orjson.loads(base64.b64decode(record["value"]))
        schema = message.get("tableSchema")
        if schema and schema["table"] == TABLE:
            announced = parse_table_schema(schema)
            layouts[announced.version] = checksum.Layout.of(announced.schema.columns)
        elif message.get("table") == TABLE and message.get("type") in ("INSERT", "UPDATE", "DELETE"):
            rows.append(record)
    return rows, layouts


def checksums(bench: Bench) -> None:
    n = bench.sizes.decode_events
    rows, layouts = _corpus()
    input_dir = bench.dir("checksums")
    input_dir.mkdir(parents=True)
    with (input_dir / "records.jsonl").open("wb") as out:
        for offset in range(n):
            record = dict(rows[offset % len(rows)], offset=offset)
            out.write(orjson.dumps(record) + b"\n")
    messages = files.read_messages(bench.spark, str(input_dir), {}).cache()
    messages.count()
    codec = sp.codec()
    decoded = decode_json(prepare_payload(messages, Compression.NONE, codec), codec)
    judged = checksum.checked(decoded, layouts, "UTC", require=False, deletes_carry_none=False)
    states = {r[0]: r[1] for r in judged.groupBy(checksum.STATE_COLUMN).count().collect()}
    if states.get(checksum.STATE_MISMATCH) or sum(states.values()) != n:
        raise SystemExit(f"checksums: {states} over {n} records, expected no mismatch")
    logger.warning("bench: checksum input of %d records ready: %s", n, states)
    without_wall, without_cpu = _best_noop(bench, decoded)
    with_wall, with_cpu = _best_noop(bench, judged)
    messages.unpersist()
    ratio = with_cpu / without_cpu
    bench.results["decode_with_checksums_vs_without"] = ratio
    bench.headline["checksums"] = fmt_ratio(ratio)
    verified = states.get(checksum.STATE_VERIFIED, 0)
    none = states.get(checksum.STATE_NONE, 0)
    bench.out(
        "## Row checksums",
        "",
        f"{n:,} Simple JSON records TiCDC v8.3.0 wrote with row checksums "
        f"(`tests/fixtures/corpora/checksums`): the {len(rows)} DML records of `acc.{TABLE}`, "
        f"a table of every TiDB type ({len(layouts)} schema versions), repeated, so every row "
        "is as wide and typed as the type matrix. Decoded as the pipeline decodes them, to the "
        "`noop` sink, without and with the checksum verdict the apply step computes from the "
        f"wire text before converting anything ({verified:,} records verified, {none:,} carry "
        f"only the zeros of a split update). Best of {bench.sizes.repeats} after a warm-up.",
        "",
        "| | Wall s | CPU-s | Events per CPU-s |",
        "|---|---:|---:|---:|",
        f"| decode | {without_wall:.2f} | {without_cpu:.2f} | {rate(n, without_cpu):,.0f} |",
        f"| decode + checksums | {with_wall:.2f} | {with_cpu:.2f} | {rate(n, with_cpu):,.0f} |",
        "",
    )
    bench.target(
        f"Decode with row checksums checked ≤ {TARGET_CHECKSUMS}x the CPU of decode alone",
        ratio,
        ratio <= TARGET_CHECKSUMS,
        CHECKSUMS_MISSED,
    )
