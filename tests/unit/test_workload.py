"""The benchmark generator writes exactly what the upstream model (testkit.sample.Stream) writes."""

import base64
from collections import Counter
from datetime import datetime, timedelta, timezone
from decimal import Decimal

import orjson
import pytest

from ingest.decode import canal_json as cj
from ingest.decode import simple as sp
from ingest.decode import ticdc_avro as ta
from ingest.model import ColumnKind, TableId
from testkit.sample import Stream
from testkit.workload import (
    DATETIME_BASE_MICROS,
    START_MS,
    TICDC_AVRO,
    InProcessRegistry,
    KeyDistribution,
    Mix,
    Workload,
    WorkloadSpec,
    preloaded_value,
    write_records,
)

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _python_value(kind, value):
    """The value as the upstream model takes it (it renders wire text itself)."""
    if value is None or kind in (ColumnKind.BIGINT, ColumnKind.INT, ColumnKind.VARCHAR):
        return value
    if kind is ColumnKind.DECIMAL:
        return Decimal(value).scaleb(-2)
    return (EPOCH + timedelta(microseconds=value)).replace(tzinfo=None)


def _replay(workload: Workload, protocol: str = "canal-json", encoding: str = "json") -> Stream:
    stream = Stream(
        topic=workload.spec.topic,
        partitions=workload.spec.partitions,
        protocol=protocol,
        encoding=encoding,
        # A fresh registry: equal ids mean the generator registers in the model's order, too.
        register=InProcessRegistry().register if protocol == TICDC_AVRO else None,
    )
    ids: dict[int, TableId] = {}
    for entry in workload.trace:
        if entry.action == "create":
            ids[entry.table] = stream.create_table(
                workload.tables[entry.table].definition.create_sql, entry.ts
            )
            continue
        if entry.action == "watermark":
            stream.watermark(entry.ts)
            continue
        definition = workload.tables[entry.table].definition
        row = {
            n: _python_value(k, v)
            for n, k, v in zip(definition.names, definition.kinds, entry.values, strict=True)
        }
        table = ids[entry.table]
        if entry.action == "insert":
            stream.insert(table, row, entry.ts, entry.partition)
        elif entry.action == "update":
            stream.update(table, (entry.key,), row, entry.ts, entry.partition)
        else:
            stream.delete(table, (entry.key,), entry.ts, entry.partition)
    return stream


@pytest.mark.parametrize("keys", list(KeyDistribution))
@pytest.mark.parametrize("mix", list(Mix))
def test_workload_bytes_equal_the_upstream_model(mix, keys):
    spec = WorkloadSpec(tables=2, width=6, mix=mix, keys=keys, partitions=3, watermark_every=50)
    workload = Workload(spec, trace=True)
    workload.create_tables()
    workload.insert_rows(20)
    workload.changes(300)
    records = workload.take()
    stream = _replay(workload)

    ours = {(r.partition, r.offset): orjson.loads(r.value) for r in records}
    theirs = {
        (r["partition"], r["offset"]): orjson.loads(__import__("base64").b64decode(r["value"]))
        for r in stream.records
    }
    assert ours == theirs
    # Byte for byte, too: same key order, same number rendering.
    model_bytes = {(r["partition"], r["offset"]): r["value"] for r in stream.records}
    for r in records:
        assert __import__("base64").b64encode(r.value).decode() == model_bytes[(r.partition, r.offset)]

    final = stream.state_at(workload.last_ts)
    for index, state in enumerate(workload.tables):
        table = TableId("bench", f"t{index}")
        assert len(final[table]) == workload.live_rows(index)
        for (key,), row in final[table].items():
            expected = workload.row(index, key)
            kinds = state.definition.kinds
            assert row == {
                n: _python_value(k, v)
                for n, k, v in zip(state.definition.names, kinds, expected, strict=True)
            }


def test_operation_mix_follows_the_shares():
    workload = Workload(WorkloadSpec(mix=Mix.UPDATE_HEAVY), trace=True)
    workload.create_tables()
    workload.insert_rows(100)
    workload.trace.clear()
    workload.changes(10_000)
    counts = Counter(e.action for e in workload.trace if e.action != "watermark")
    assert 7_600 < counts["update"] < 8_400
    assert 1_300 < counts["insert"] < 1_700
    assert 350 < counts["delete"] < 650


def test_zipf_concentrates_changes_on_few_keys():
    def distinct_keys(keys):
        workload = Workload(WorkloadSpec(mix=Mix.UPDATE_HEAVY, keys=keys), trace=True)
        workload.create_tables(preloaded=10_000)
        workload.changes(5_000)
        return len({e.key for e in workload.trace if e.action == "update"})

    # Uniform over 10k keys: ~3.3k distinct of 4k updates; Zipf(1.1): far fewer.
    assert distinct_keys(KeyDistribution.UNIFORM) > 3_000
    assert distinct_keys(KeyDistribution.ZIPF) < 1_500


def test_preloaded_rows_are_old_images_of_their_first_update():
    workload = Workload(WorkloadSpec(mix=Mix.UPDATE_HEAVY, width=5), trace=True)
    workload.create_tables(preloaded=50, preload_from=100, first_new_key=1_000)
    workload.changes(200)
    records = [orjson.loads(r.value) for r in workload.take()]
    updates = [m for m in records if m["type"] == "UPDATE"]
    first = {}
    for message in updates:
        first.setdefault(int(message["data"][0]["id"]), message)
    key, message = next((k, m) for k, m in first.items() if 100 <= k < 150)
    assert message["old"][0] == {
        "id": str(key),
        "c1": str((key * 31 + 1) % 1_000_000),
        "c2": f"v2-{key}",
        "c3": f"{(key * 7 + 3) % 10_000_000 / 100:.2f}",
        "c4": (datetime(2026, 1, 1) + timedelta(seconds=key)).strftime("%Y-%m-%d %H:%M:%S.000000"),
    }
    assert preloaded_value(ColumnKind.DATETIME, 4, key) == DATETIME_BASE_MICROS + key * 1_000_000
    inserted = [int(m["data"][0]["id"]) for m in records if m["type"] == "INSERT"]
    assert inserted and min(inserted) >= 1_000
    assert {k for k in first if k < 1_000} <= set(range(100, 150))


def test_ddl_on_partition_zero_and_watermarks_on_every_partition():
    workload = Workload(WorkloadSpec(tables=3, partitions=4, watermark_every=10))
    workload.create_tables()
    workload.changes(25, Mix.INSERT_ONLY)
    records = workload.take()
    messages = [(r.partition, orjson.loads(r.value)) for r in records]
    assert {p for p, m in messages if m["isDdl"]} == {0}
    watermarks = Counter(p for p, m in messages if m["type"] == "TIDB_WATERMARK")
    # one after CREATE, two after 10 and 20 events, one at the end of the phase
    assert watermarks == dict.fromkeys(range(4), 4)
    assert workload.last_ts > START_MS << 18


def test_unknown_protocol_names_the_implemented_ones():
    with pytest.raises(
        ValueError,
        match="protocol 'debezium' has no encoder yet; implemented: avro, canal-json, csv, open-protocol, "
        "simple, simple-avro",
    ):
        WorkloadSpec(protocol="debezium")


@pytest.mark.parametrize(("protocol", "encoding"), [("simple", "json"), ("simple-avro", "avro")])
def test_simple_bytes_equal_the_upstream_model(protocol, encoding):
    spec = WorkloadSpec(
        tables=2, width=6, mix=Mix.UPDATE_HEAVY, partitions=3, watermark_every=50, protocol=protocol
    )
    workload = Workload(spec, trace=True)
    workload.create_tables()
    workload.insert_rows(20)
    workload.changes(300)
    workload.changes(100, Mix.DELETE_HEAVY)
    records = workload.take()
    replayed = _replay(workload, "simple", encoding)

    def per_partition(values):
        result = {}
        for partition, value in values:
            result.setdefault(partition, []).append(value)
        return result

    ours = per_partition((r.partition, r.value) for r in records)
    # The model queues a BOOTSTRAP ahead of each table's first row; the generator announces tables by
    # their CREATE TABLE only (same schema), so those are left out of the comparison.
    theirs = per_partition(
        (r["partition"], __import__("base64").b64decode(r["value"]))
        for r in replayed.records
        if _type_of(__import__("base64").b64decode(r["value"]), encoding) != sp.TYPE_BOOTSTRAP
    )
    assert ours == theirs
    assert sum(len(v) for v in ours.values()) > 400
    types = Counter(_type_of(r.value, encoding) for r in records)
    assert types[sp.TYPE_DELETE] > 0 and types[sp.TYPE_UPDATE] > 0 and types["CREATE"] == 2 * 3


def _type_of(value: bytes, encoding: str) -> str:
    text = sp.avro_to_json(value, sp.avro_schema()) if encoding == "avro" else value
    return orjson.loads(text)["type"]


def _ticdc_avro_workload(mix=Mix.UPDATE_HEAVY, keys=KeyDistribution.UNIFORM):
    spec = WorkloadSpec(
        tables=2, width=6, mix=mix, keys=keys, partitions=3, watermark_every=50, protocol=TICDC_AVRO
    )
    workload = Workload(spec, trace=True)
    workload.create_tables()
    workload.insert_rows(20)
    workload.changes(300)
    workload.changes(100, Mix.DELETE_HEAVY)
    return workload


@pytest.mark.parametrize("keys", list(KeyDistribution))
@pytest.mark.parametrize("mix", list(Mix))
def test_ticdc_avro_bytes_equal_the_upstream_model(mix, keys):
    workload = _ticdc_avro_workload(mix, keys)
    records = workload.take()
    replayed = _replay(workload, TICDC_AVRO)

    def decoded(text):
        return None if text is None else base64.b64decode(text)

    ours = {(r.topic, r.partition, r.offset): (r.key, r.value) for r in records}
    theirs = {
        (r["topic"], r["partition"], r["offset"]): (decoded(r["key"]), decoded(r["value"]))
        for r in replayed.records
    }
    assert ours == theirs
    # No DDL, no watermarks: one record per DML event, in a topic per table.
    dml = [e for e in workload.trace if e.action not in ("create", "watermark")]
    assert len(records) == len(dml) == 20 * 2 + 400
    assert {r.topic for r in records} == {"tidb_cdc_bench_t0", "tidb_cdc_bench_t1"}
    tombstones = sum(r.value is None for r in records)
    assert tombstones == sum(e.action == "delete" for e in dml) > 0
    # The schemas the bench hands the decoder are those the model registered, under the same ids.
    assert workload.writer_schemas == {i: text for (_, text), i in replayed._registered.items()}


def _wire_text(kind, value):
    if kind is ColumnKind.DECIMAL:
        return format(Decimal(value).scaleb(-2), "f")
    if kind is ColumnKind.DATETIME:
        return (EPOCH + timedelta(microseconds=value)).strftime("%Y-%m-%d %H:%M:%S.%f")
    return str(value)


def test_ticdc_avro_records_decode_to_the_rows_the_workload_wrote():
    workload = _ticdc_avro_workload()
    records = workload.take()
    book = ta.schema_book(workload.writer_schemas)
    assert not book.problems
    # Two tables, a key and a value schema each.
    assert len(book.schemas) == 4

    dml = [e for e in workload.trace if e.action not in ("create", "watermark")]
    assert len(records) == len(dml)
    for record, entry in zip(records, dml, strict=True):
        change = ta.decode_record(record.key, record.value, book)
        definition = workload.tables[entry.table].definition
        assert change.table == TableId("bench", f"t{entry.table}")
        assert record.partition == entry.partition
        if entry.action == "delete":
            # A tombstone: the key only, and no commitTs (§4.1).
            assert (change.type, change.commit_ts, record.value) == (ta.TYPE_DELETE, None, None)
            assert change.data == {"id": str(entry.key)}
            continue
        assert change.type == (ta.TYPE_UPDATE if entry.action == "update" else ta.TYPE_INSERT)
        assert change.commit_ts == entry.ts
        assert change.data == {
            n: _wire_text(k, v)
            for n, k, v in zip(definition.names, definition.kinds, entry.values, strict=True)
        }
    for index in range(len(workload.tables)):
        assert workload.live_rows(index) > 0


def test_ticdc_avro_records_are_written_with_their_topic_key_and_tombstones(tmp_path):
    workload = _ticdc_avro_workload()
    records = workload.take()
    write_records(records, tmp_path, topic="ignored", files=1)
    lines = [orjson.loads(line) for line in (tmp_path / "records-000.jsonl").read_bytes().splitlines()]
    assert [(line["topic"], line["partition"], line["offset"]) for line in lines] == [
        (r.topic, r.partition, r.offset) for r in records
    ]
    assert all(base64.b64decode(line["key"]) == r.key for line, r in zip(lines, records, strict=True))
    assert [line["value"] is None for line in lines] == [r.value is None for r in records]
    # Offsets count per topic and partition, from 0, as Kafka's do.
    seen = Counter()
    for r in records:
        assert r.offset == seen[r.topic, r.partition]
        seen[r.topic, r.partition] += 1


def test_open_protocol_records_say_what_the_canal_json_records_of_the_same_workload_say():
    """The bench's Open Protocol input: each event, split from TiCDC's batch framing, is the Canal-JSON
    message of the same change (same rows, images, commitTs), 16 events to a row record at most."""
    from ingest.decode import open_protocol
    from ingest.decode.compression import Compression
    from testkit.workload import OPEN_PROTOCOL, open_protocol_batches

    def stream(protocol: str) -> list:
        workload = Workload(WorkloadSpec(protocol=protocol, tables=2, partitions=2, mix=Mix.UPDATE_HEAVY))
        workload.create_tables(preloaded=20)
        workload.changes(200)
        return workload.take()

    def said(message: dict) -> tuple:
        return (message["type"], message["database"], message["table"], message["_tidb"],
                message["data"], message["old"] if message["type"] == "UPDATE" else None)  # fmt: skip

    canal = [orjson.loads(r.value) for r in stream(cj.PROTOCOL)]
    batches = open_protocol_batches(stream(OPEN_PROTOCOL))
    events = [
        orjson.loads(message)
        for record in batches
        for message, error in open_protocol.split(record.key, record.value, Compression.NONE)
        if error is None or pytest.fail(error)
    ]
    assert max(len(open_protocol.entries(r.key, r.value)) for r in batches) == 16
    rows = [said(m) for m in events if not m["isDdl"] and m["type"] in ("INSERT", "UPDATE", "DELETE")]
    assert sorted(rows, key=repr) == sorted(
        (said(m) for m in canal if not m["isDdl"] and m["type"] in ("INSERT", "UPDATE", "DELETE")), key=repr
    )


def test_storage_csv_records_say_what_the_canal_json_records_of_the_same_workload_say(tmp_path):
    """The bench's storage-sink CSV input: laid out as TiCDC's sink lays it out, each record read with its
    table version's layout is the Canal-JSON message of the same change."""
    from ingest.decode import storage_csv
    from ingest.decode.storage_csv import CsvOptions
    from ingest.source.storage_layout import layouts
    from testkit.workload import STORAGE_CSV, write_storage_sink

    def workload(protocol: str) -> Workload:
        made = Workload(WorkloadSpec(protocol=protocol, tables=2, partitions=2, mix=Mix.UPDATE_HEAVY))
        made.create_tables(preloaded=20)
        made.changes(200)
        return made

    csv = workload(STORAGE_CSV)
    write_storage_sink(csv.take(), tmp_path, csv.last_ts, rows_per_file=40)
    schema_files = [orjson.loads(p.read_bytes()) for p in tmp_path.glob("*/*/meta/schema_*.json")]
    found = layouts(schema_files, CsvOptions())
    assert len(found) == 2 and orjson.loads((tmp_path / "metadata").read_bytes()) == {
        "checkpoint-ts": csv.last_ts
    }
    read = []
    for path in sorted(tmp_path.glob("*/*/*/*/CDC*.csv")):
        (layout,) = [v for k, v in found.items() if k[:2] == tuple(path.parts[-5:-3])]
        read += [storage_csv.message(layout, r.decode()) for r in storage_csv.records(path.read_bytes(), '"')]
    assert len(list(tmp_path.glob("*/*/*/*/CDC*.csv"))) > 2

    def said(m: dict) -> tuple:
        return (m["type"], m["database"], m["table"], m["_tidb"]["commitTs"], m["data"])

    canal = [orjson.loads(r.value) for r in workload(cj.PROTOCOL).take()]
    expected = [said(m) for m in canal if not m["isDdl"] and m["type"] in ("INSERT", "UPDATE", "DELETE")]
    assert sorted(map(said, read), key=repr) == sorted(expected, key=repr)
