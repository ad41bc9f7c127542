"""Step ``decode``: each protocol's decoder against a Python loop that only parses the same bytes (orjson for
JSON, fastavro for Avro), per core of wall time and per CPU-second."""

from __future__ import annotations

import gc
import io
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import orjson
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from bench.context import Bench, fmt_rate, fmt_ratio, rate, stopwatch
from bench.machine import SPARK_THREADS, spark_cpu_seconds
from bench.targets import DECODE_MISSED, FROM_JSON_MISSED, TARGET_DECODE, TARGET_FROM_JSON
from ingest.decode import canal_json as cj
from ingest.decode import open_protocol, storage_csv
from ingest.decode import simple as sp
from ingest.decode import ticdc_avro as ta
from ingest.decode.compression import Compression
from ingest.source import files, storage_sink
from ingest.source.decoding import (
    KIND_DDL,
    KIND_DML,
    KIND_WATERMARK,
    decode_json,
    decode_ticdc_avro,
    envelope,
    prepare_payload,
)
from testkit.workload import (
    OPEN_PROTOCOL,
    SIMPLE_AVRO,
    STORAGE_CSV,
    TICDC_AVRO,
    Mix,
    Record,
    Workload,
    open_protocol_batches,
    write_records,
    write_storage_sink,
)

logger = logging.getLogger("bench")


DECODE_PROTOCOLS = (cj.PROTOCOL, sp.PROTOCOL, SIMPLE_AVRO, TICDC_AVRO, OPEN_PROTOCOL, STORAGE_CSV)
DECODE_LABELS = {
    cj.PROTOCOL: "canal-json",
    OPEN_PROTOCOL: "open-protocol (16 events a record)",
    STORAGE_CSV: "csv (storage sink)",
    sp.PROTOCOL: "simple (JSON)",
    SIMPLE_AVRO: "simple (Avro)",
    TICDC_AVRO: "avro (TiCDC Avro)",
}


@dataclass(frozen=True)
class DecodeResult:
    label: str
    limit: str
    value_bytes: float
    wall_rate: float  # events/s per task thread
    cpu: float  # CPU-seconds of the best run
    cpu_rate: float  # events per CPU-second
    limit_wall_rate: float
    limit_cpu_rate: float
    parse_cpu: float
    parse_cpu_rate: float

    @property
    def ratio(self) -> float:
        return self.cpu_rate / self.limit_cpu_rate

    @property
    def wall_ratio(self) -> float:
        return self.wall_rate / self.limit_wall_rate


def _limit_loop(
    protocol: str, records: list[Record], schemas: Mapping[int, str | None]
) -> tuple[Callable[[], None], str]:
    """The limit's loop for a protocol, and the parser it uses: it only parses the records' bytes."""
    if protocol == OPEN_PROTOCOL:
        return _open_protocol_limit(records), "orjson"
    if protocol == STORAGE_CSV:
        return _csv_limit(records), "csv.reader"
    if protocol not in (SIMPLE_AVRO, TICDC_AVRO):
        values = [r.value for r in records if r.value is not None]
        loads = orjson.loads

        def parse_json() -> None:
            for value in values:
                loads(value)

        return parse_json, "orjson"

    import fastavro

    reader = fastavro.schemaless_reader
    if protocol == SIMPLE_AVRO:
        values = [r.value for r in records if r.value is not None]
        schema = fastavro.parse_schema(sp.avro_schema())

        def parse_simple() -> None:
            for value in values:
                reader(io.BytesIO(value), schema, None)

        return parse_simple, "fastavro"

    parsed = {i: fastavro.parse_schema(orjson.loads(t)) for i, t in schemas.items() if t is not None}
    bodies: list[bytes] = []
    for record in records:
        # A tombstone has no value; its key body is the least a decoder must parse to learn the deleted row.
        body = record.value if record.value is not None else record.key
        assert body is not None, f"TiCDC Avro record without key or value: {record}"
        bodies.append(body)
    header = ta.HEADER_BYTES

    def parse_ticdc() -> None:
        for body in bodies:
            reader(io.BytesIO(body[header:]), parsed[int.from_bytes(body[1:header], "big")], None)

    return parse_ticdc, "fastavro"


def _open_protocol_limit(records: list[Record]) -> Callable[[], None]:
    """Walk each record's batch framing and parse every key and value entry, nothing more."""
    pairs = [(r.key, r.value) for r in records if r.key is not None and r.value is not None]
    width, loads = open_protocol.LENGTH_BYTES, orjson.loads

    def entries(data: bytes, at: int) -> None:
        while at < len(data):
            size = int.from_bytes(data[at : at + width], "big")
            if size:
                loads(data[at + width : at + width + size])
            at += width + size

    def parse_open() -> None:
        for key, value in pairs:
            entries(key, width)
            entries(value, 0)

    return parse_open


def _csv_limit(records: list[Record]) -> Callable[[], None]:
    """Python's own CSV parser (C) splitting every record's line into its fields, nothing more."""
    import csv

    text = b"".join(r.value for r in records if r.key == b"row" and r.value is not None).decode()

    def parse_csv() -> None:
        for _ in csv.reader(io.StringIO(text, newline="")):
            pass

    return parse_csv


def _parse_limit(parse: Callable[[], None], repeats: int) -> tuple[float, float]:
    """Best wall and CPU seconds of one Python loop that only parses the values."""
    parse()  # warm-up, as for ours
    walls, cpus = [], []
    for _ in range(repeats):
        gc.collect()
        started, cpu = time.perf_counter(), time.process_time()
        parse()
        walls.append(time.perf_counter() - started)
        cpus.append(time.process_time() - cpu)
    return min(walls), min(cpus)


def decode(bench: Bench) -> None:
    n = bench.sizes.decode_events
    results = [_decode_one(bench, protocol, n) for protocol in DECODE_PROTOCOLS]
    canal = results[0]
    ratio = canal.ratio
    bench.headline["decode"] = fmt_ratio(ratio)
    bench.results["decode_canal_json_vs_orjson"] = ratio
    by_protocol = dict(zip(DECODE_PROTOCOLS, results, strict=True))
    bench.results["decode_open_protocol_vs_orjson"] = by_protocol[OPEN_PROTOCOL].ratio
    bench.results["decode_csv_vs_csv_reader"] = by_protocol[STORAGE_CSV].ratio
    rows = [
        f"| {r.label} | {fmt_rate(r.wall_rate)} | {fmt_rate(r.cpu_rate)} "
        f"| {fmt_rate(r.limit_wall_rate)} / {fmt_rate(r.limit_cpu_rate)} ({r.limit}) "
        f"| {fmt_ratio(r.wall_ratio)} | {fmt_ratio(r.ratio)} |"
        for r in results
    ]
    bench.out(
        "## Decode",
        "",
        f"{n:,} DML events per protocol plus their watermarks and CREATE TABLE (update-heavy mix, so "
        "UPDATEs carry the old image; TiCDC Avro has no DDL, no watermarks and no old image, a topic "
        "per table, and sends a DELETE as a tombstone: a key and no value). Average value size: "
        + ", ".join(f"{r.label} {r.value_bytes:,.0f} bytes" for r in results)
        + " (TiCDC Avro: over the records with a value; keys are separate). Ours: the product's "
        "decoder over a cached DataFrame of the captured records, exactly as the pipeline calls it "
        "(Simple Avro: `prepare_payload` transcodes each message in a Python worker, then the JSON "
        "decoder runs; TiCDC Avro: `decode_ticdc_avro` reads each record with fastavro in a Python "
        "worker, given the writer schemas by id), written to the `noop` sink on "
        f"{SPARK_THREADS} task threads. The pipeline's driver fetches those writer schemas from the "
        "registry once per batch; that fetch is not measured here (the workload's ids come from an "
        "in-process dict, and no registry runs). Limit: one Python loop over the same bytes on one "
        "core: `orjson.loads` for JSON, `fastavro.schemaless_reader` for Avro (TiCDC Avro: each value "
        "after its 5-byte header, with the parsed writer schema its id names; a tombstone has no "
        "value, so the loop parses its key instead, the least any decoder reads to learn the deleted "
        "row; tombstones count as events on both sides). Every timing is the best of "
        f"{bench.sizes.repeats} after one untimed warm-up pass (the JVM compiles the generated code "
        "during the first).",
        "",
        "Two normalisations. *Wall*: events/s ÷ the task threads for ours, events/s for the loop. *CPU*: "
        "events per CPU-second actually used, ours summed over the JVM (task threads, JIT, GC, driver) "
        "and its Python workers, the loop's from its own process. On a machine shared with other work "
        "(see the load average) the wall figures say how much CPU each side happened to get; the CPU "
        "figures do not depend on it, so the ratio to the target is taken from them.",
        "",
        "| Protocol | Ours, events/s per core (wall) | Ours, events per CPU-s | Limit, wall / CPU "
        "| Ratio (wall) | Ratio (CPU) |",
        "|---|---:|---:|---:|---:|---:|",
        *rows,
        "",
        f"Of the Canal-JSON decode, Spark's `from_json` with the envelope schema alone (no "
        f"classification, no output columns): {fmt_rate(canal.parse_cpu_rate)} events per CPU-s "
        f"({canal.parse_cpu:.2f} CPU-s against {canal.cpu:.2f} CPU-s for the whole decode; "
        f"{fmt_ratio(canal.parse_cpu_rate / canal.limit_cpu_rate)} the limit).",
        "",
    )
    bench.target(
        f"Canal-JSON decode ≥ {TARGET_DECODE}x the orjson parse limit (CPU)",
        ratio,
        ratio >= TARGET_DECODE,
        DECODE_MISSED,
    )
    parser_floor = canal.cpu_rate / canal.parse_cpu_rate
    bench.results["decode_vs_from_json"] = parser_floor
    bench.target(
        f"Canal-JSON decode ≥ {TARGET_FROM_JSON}x Spark's `from_json` of the envelope alone (CPU)",
        parser_floor,
        parser_floor >= TARGET_FROM_JSON,
        FROM_JSON_MISSED,
    )


def _decode_one(bench: Bench, protocol: str, n: int) -> DecodeResult:
    workload = Workload(replace(bench.spec(Mix.UPDATE_HEAVY), protocol=protocol))
    workload.create_tables(preloaded=max(n // 4, 1))
    workload.changes(n)
    records = workload.take()
    events = len(records)
    values = [r.value for r in records if r.value is not None]
    tombstones = events - len(values)
    if protocol == OPEN_PROTOCOL:
        records = open_protocol_batches(records)
    schemas = workload.writer_schemas
    input_dir = bench.dir(f"decode-{protocol}")
    if protocol == STORAGE_CSV:
        write_storage_sink(records, input_dir, workload.last_ts)
    else:
        write_records(records, input_dir, topic=workload.spec.topic)
    parse, limit = _limit_loop(protocol, records, schemas)
    del records
    messages = _read(bench, protocol, input_dir).cache()
    count = messages.count()
    ticdc_avro = protocol == TICDC_AVRO
    if ticdc_avro:
        decoded = decode_ticdc_avro(messages, schemas)
    else:
        codec = _codec(protocol)
        decoded = decode_json(prepare_payload(messages, Compression.NONE, codec), codec)
    logger.warning("bench: decode input of %d %s records ready", count, protocol)
    wall, cpu = _best_noop(bench, decoded)
    parse_cpu = float("nan")
    if protocol == cj.PROTOCOL:
        parse_only = messages.select(
            F.from_json(F.col("value").cast("string"), envelope(cj.CODEC), {"mode": "PERMISSIVE"}).alias("m")
        )
        parse_cpu = _best_noop(bench, parse_only)[1]
    counts = decoded.groupBy("kind", "type").count().collect()
    messages.unpersist()
    kinds: dict[str, int] = {}
    for row in counts:
        kinds[row["kind"]] = kinds.get(row["kind"], 0) + row["count"]
    # TiCDC Avro has no control events, and its tombstones decode as DML deletes.
    allowed = {KIND_DML} if ticdc_avro else {KIND_DML, KIND_DDL, KIND_WATERMARK}
    if set(kinds) - allowed or kinds.get(KIND_DML) != n:
        others = "nothing else" if ticdc_avro else "control events only"
        raise SystemExit(f"decode {protocol}: {kinds}, expected {n} DML events and {others}")
    if ticdc_avro:
        deletes = sum(r["count"] for r in counts if (r["kind"], r["type"]) == (KIND_DML, ta.TYPE_DELETE))
        if deletes != tombstones:
            raise SystemExit(f"decode {protocol}: {deletes} DELETEs from {tombstones} tombstones")
    limit_wall, limit_cpu = _parse_limit(parse, bench.sizes.repeats)
    size = sum(len(v) for v in values) / max(len(values), 1)
    return DecodeResult(
        label=DECODE_LABELS[protocol],
        limit=limit,
        value_bytes=size,
        wall_rate=rate(events, wall) / SPARK_THREADS,
        cpu=cpu,
        cpu_rate=rate(events, cpu),
        limit_wall_rate=rate(events, limit_wall),
        limit_cpu_rate=rate(events, limit_cpu),
        parse_cpu=parse_cpu,
        parse_cpu_rate=rate(count, parse_cpu),
    )


def _read(bench: Bench, protocol: str, input_dir: Path) -> DataFrame:
    if protocol == STORAGE_CSV:
        return storage_sink.read_messages(bench.spark, str(input_dir), {}, storage_csv.CsvOptions())
    return files.read_messages(bench.spark, str(input_dir), {})


def _codec(protocol: str):  # type: ignore[no-untyped-def]
    if protocol == OPEN_PROTOCOL:
        return open_protocol.codec()
    if protocol == STORAGE_CSV:
        return storage_csv.codec()
    return cj.CODEC if protocol == cj.PROTOCOL else sp.codec(avro=protocol == SIMPLE_AVRO)


def _best_noop(bench: Bench, frame: DataFrame) -> tuple[float, float]:
    """Best wall time and best CPU time of the noop write, after one untimed warm-up pass."""
    _time_noop(frame)
    walls, cpus = [], []
    for _ in range(bench.sizes.repeats):
        before = spark_cpu_seconds()
        walls.append(_time_noop(frame))
        cpus.append(spark_cpu_seconds() - before)
    return min(walls), min(cpus)


def _time_noop(frame: DataFrame) -> float:
    with stopwatch() as took:
        frame.write.format("noop").mode("overwrite").save()
    return took[0]
