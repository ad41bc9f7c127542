"""TiCDC Avro (Confluent wire format) against a real schema registry, on real Spark + Delta.

Streams come from the upstream model in ``testkit.sample``, which registers its writer schemas with the
registry as TiCDC does; expected tables come from that model, never from our own output. Avro carries no
watermarks, so "expected" is upstream after its last change: per-key convergence.
"""

from __future__ import annotations

import base64
import json
import sys
from decimal import Decimal
from pathlib import Path

import pytest
from delta.tables import DeltaTable
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mirror import delta_rows, expected_rows, located
from mutations import BYTE_MUTATION, mutate_bytes

from ingest.cli import main
from ingest.config import IngestConfig
from ingest.errors import IngestError, RegistryUnavailable, SchemaChangeRejected, TooManyBadRecords
from ingest.model import TableId
from ingest.pipeline import BatchResult, run_files
from ingest.source.registry import SchemaRegistry
from ingest.state.ddl_history import history_path
from ingest.state.progress import load_progress
from ingest.state.quarantine import read as read_quarantine
from testkit.sample import Stream

sys.path.insert(0, str(Path(__file__).parents[1] / "spark"))
import test_types

T = TableId("shop", "orders")
U = TableId("shop", "users")
CREATE_T = """CREATE TABLE `shop`.`orders` (
  `id` bigint(20) NOT NULL, `amount` decimal(12,2) DEFAULT NULL, `note` varchar(40) DEFAULT NULL,
  `qty` int(11) DEFAULT NULL, `flags` bit(3) DEFAULT NULL, `status` enum('1','2,x','new') DEFAULT NULL,
  `tags` set('a','b','d') DEFAULT NULL, `raw` varbinary(64) DEFAULT NULL,
  PRIMARY KEY (`id`)
)"""
CREATE_U = """CREATE TABLE `shop`.`users` (
  `uid` int(11) NOT NULL, `name` varchar(20) DEFAULT NULL, PRIMARY KEY (`uid`)
)"""


def avro_stream(registry_url: str, topic: str, partitions: int = 2) -> Stream:
    registry = SchemaRegistry(registry_url)
    return Stream(topic=topic, partitions=partitions, protocol="avro", register=registry.register)


def mirror(spark, stream: Stream, input_dir: Path, lake: Path, **params: str) -> BatchResult:
    stream.write(input_dir)
    config = IngestConfig.from_params(
        {"input": str(input_dir), "target-path": str(lake), "timezone": stream.tz_name, **params}
    )
    return run_files(spark, config)


def fields(spark, lake: Path, table: TableId) -> list[tuple[str, str]]:
    schema = DeltaTable.forPath(spark, located(lake, table)).toDF().schema
    return [(f.name, f.dataType.simpleString()) for f in schema.fields]


def scenario(stream: Stream) -> None:
    """Inserts, updates, a key change, deletes, ADD COLUMN with a DEFAULT, DROP COLUMN, a widening."""
    s = stream
    s.create_table(CREATE_T, s.tso(1))
    s.create_table(CREATE_U, s.tso(1.5))
    for i in range(1, 9):
        s.insert(
            T,
            {"id": i, "amount": Decimal(f"{i}.25"), "note": f"n{i}", "qty": i, "flags": i % 8,
             "status": ["1", "2,x", "new"][i % 3], "tags": ["", "a", "b", "a,d"][i % 4],
             "raw": bytes([i, 0x80, 0xFF])},
            s.tso(2 + i),
        )  # fmt: skip
    s.insert(U, {"uid": 1, "name": "ann"}, s.tso(3))
    s.insert(U, {"uid": 2, "name": "bob"}, s.tso(3.5))
    s.update(T, (2,), {"note": "two", "amount": Decimal("-2.50")}, s.tso(20))
    s.update(T, (3,), {"id": 30}, s.tso(21))  # key change: DELETE + INSERT in every protocol
    s.delete(T, (4,), s.tso(22))
    s.add_column(T, "ALTER TABLE `shop`.`orders` ADD COLUMN `pri` int(11) DEFAULT 7", s.tso(30), "pri",
                 "int(11)", default=7)  # fmt: skip
    s.insert(T, {"id": 9, "note": "after add", "pri": 1}, s.tso(31))
    s.update(T, (5,), {"pri": 2}, s.tso(32))
    s.drop_column(T, "note", s.tso(40))
    s.update(T, (6,), {"qty": 60}, s.tso(41))
    s.modify_column(T, "qty", "bigint(20)", s.tso(50))
    s.update(T, (7,), {"qty": 9_000_000_000}, s.tso(51))
    s.delete(T, (8,), s.tso(52))
    s.delete(U, (2,), s.tso(53))
    s.insert(U, {"uid": 2, "name": "bob again"}, s.tso(54))
    s.watermark(s.tso(60))


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    return tmp_path / "lake"


def test_every_type_lands_exactly(spark, schema_registry, tmp_path, lake):
    s = avro_stream(schema_registry, "types", partitions=1)
    s.tz_name = test_types.ZONE
    # Avro cannot carry ENUM index 0 (TiCDC fails the changefeed on it, ticdc-protocols.md §4.5).
    rows = [dict(r, e="b") if r.get("e") == "" else r for r in test_types.ROWS]
    s.create_table(test_types.CREATE, s.tso(1))
    for n, row in enumerate(rows):
        s.insert(test_types.TYPES, row, s.tso(10 + n))
    s.update(test_types.TYPES, (6,), {"e": "b", "vb": b"\x00\x80\xff"}, s.tso(20))
    s.delete(test_types.TYPES, (1,), s.tso(21))
    s.insert(test_types.TYPES, rows[0], s.tso(22))
    s.watermark(s.tso(30))

    result = mirror(spark, s, tmp_path / "in", lake, protocol="avro", **{"schema-registry": schema_registry})

    assert result.quarantined == 0
    got, want = delta_rows(spark, str(lake), test_types.TYPES), test_types.expected(s)
    assert set(got) == set(want)
    differing = {(k, c): (got[k][c], v) for k, row in want.items() for c, v in row.items() if got[k][c] != v}
    assert differing == {}
    types = dict(fields(spark, lake, test_types.TYPES))
    assert types["biu"] == "decimal(20,0)" and types["bt"] == "decimal(20,0)" and types["d65"] == "string"
    assert types["dtm"] == "timestamp_ntz" and types["ts"] == "timestamp" and types["vb"] == "binary"
    # Avro folds TINYINT..INT into one "INT" (an Avro int): those columns mirror as int (documented).
    assert types["ti"] == types["si"] == types["mi"] == types["i"] == "int" and types["iu"] == "bigint"


@pytest.mark.full  # CI compares Canal-JSON with Simple on files (test_protocols)
@pytest.mark.long
def test_the_same_stream_lands_identically_in_every_protocol(spark, schema_registry, tmp_path):
    avro = avro_stream(schema_registry, "equivalence")
    scenario(avro)
    avro_lake = tmp_path / "avro-lake"
    avro_result = mirror(
        spark, avro, tmp_path / "avro-in", avro_lake, protocol="avro", **{"schema-registry": schema_registry}
    )
    assert avro_result.quarantined == 0
    # Simple JSON is left out: it lands as Canal-JSON does (test_protocols), and Simple Avro, here, is read
    # into its form before anything else.
    for protocol, encoding in [("canal-json", "json"), ("simple", "avro")]:
        other = Stream(topic="cdc", partitions=2, protocol=protocol, encoding=encoding)
        scenario(other)
        params = {"protocol": protocol} | ({"simple-encoding": encoding} if protocol == "simple" else {})
        lake = tmp_path / f"{protocol}-{encoding}-lake"
        result = mirror(spark, other, tmp_path / f"{protocol}-{encoding}-in", lake, **params)
        final = other.complete_watermark()
        assert result.global_watermark == final and result.quarantined == 0
        for table in (T, U):
            upstream = expected_rows(other, table, final)
            assert delta_rows(spark, str(lake), table) == upstream, (protocol, encoding, table)
            # Avro: at convergence (its last change applied), the same rows, columns and Delta types. (A
            # column ADDed to an existing table goes last; a table created with it has it before ours.)
            assert delta_rows(spark, str(avro_lake), table) == upstream, table
            avro_fields, json_fields = dict(fields(spark, avro_lake, table)), dict(fields(spark, lake, table))
            assert avro_fields == json_fields, (protocol, encoding, table)


def test_replays_restarts_and_the_commit_ts_guard(spark, schema_registry, tmp_path, lake):
    s = avro_stream(schema_registry, "replays", partitions=1)
    scenario(s)
    topic = s.avro_topic(T)
    params = {"protocol": "avro", "schema-registry": schema_registry}
    first = mirror(spark, s, tmp_path / "in", lake, **params)
    assert first.tables[T].upserted > 0

    # A second run over the same input reads nothing new and changes nothing.
    again = mirror(spark, s, tmp_path / "in", lake, **params)
    assert again.records == 0

    # TiCDC replays its whole topic from offset 0: every key passes through older states again, and the
    # batch that ends with the replay's tail leaves each key as upstream has it.
    last = max(r["offset"] for r in s.records if r["topic"] == topic)
    s.replay(0, 0, last, topic=topic)
    replayed = mirror(spark, s, tmp_path / "in2", lake, **params)
    assert replayed.records == last + 1
    final = s.state_at(s.tso(60))
    assert delta_rows(spark, str(lake), T) == expected_rows(s, T, s.tso(60))
    assert set(delta_rows(spark, str(lake), T)) == {(k[0],) for k in final[T]}

    # Half a replay: the old images of updated rows arrive, but their commitTs is older than the rows'
    # (the guard keeps the newer values); a replayed tombstone deletes (it has no commitTs to compare).
    s.replay(0, 0, 12, topic=topic)
    mirror(spark, s, tmp_path / "in3", lake, **params)
    rows = delta_rows(spark, str(lake), T)
    assert rows[(2,)]["amount"] == expected_rows(s, T, s.tso(60))[(2,)]["amount"]
    assert load_progress(spark, f"{lake}/_ingest", "default").resume


def test_bad_records_are_quarantined_with_their_bytes_and_position(spark, schema_registry, tmp_path, lake):
    s = avro_stream(schema_registry, "bad", partitions=1)
    scenario(s)
    topic = s.avro_topic(U)
    foreign = s.append_raw(0, b'{"not": "avro"}', b"\x00\x00\x00\x00\x01", topic)  # in no wire format
    unknown = s.append_raw(0, b"\x00\x7f\xff\xff\xf0\x02", b"\x00\x7f\xff\xff\xf0\x02", topic)
    params = {"protocol": "avro", "schema-registry": schema_registry}

    with pytest.raises(TooManyBadRecords):
        mirror(spark, s, tmp_path / "in", lake, **params)
    assert not load_progress(spark, f"{lake}/_ingest", "default").resume  # progress did not move

    result = mirror(spark, s, tmp_path / "in", lake, **params, **{"max-bad-ratio": "0.5"})
    assert result.quarantined == 2
    quarantined = {r["offset"]: r for r in read_quarantine(spark, f"{lake}/_ingest").collect()}
    assert set(quarantined) == {foreign, unknown}
    assert (
        bytes(quarantined[foreign]["value"]) == b'{"not": "avro"}' and quarantined[foreign]["topic"] == topic
    )
    assert "Confluent wire format" in quarantined[foreign]["error"]
    assert "2147483632" in quarantined[unknown]["error"]
    assert delta_rows(spark, str(lake), U) == expected_rows(s, U, s.tso(60))


def test_a_registry_that_stays_down_stops_the_run_before_progress_moves(spark, tmp_path, lake):
    from testkit.local_services import free_port

    s = Stream(topic="down", partitions=1, protocol="avro", register=lambda subject, text: 1)
    scenario(s)
    dead = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(RegistryUnavailable, match=r"did not answer .* check --schema-registry"):
        mirror(
            spark, s, tmp_path / "in", lake, protocol="avro",
            **{"schema-registry": dead, "schema-registry-timeout": "2"},
        )  # fmt: skip
    assert not load_progress(spark, f"{lake}/_ingest", "default").resume


def test_a_type_change_that_rewrites_values_stops_under_fail_and_lands_by_default(
    spark, schema_registry, tmp_path, lake
):
    s = avro_stream(schema_registry, "retype", partitions=1)
    s.create_table(CREATE_U, s.tso(1))
    s.insert(U, {"uid": 1, "name": "17"}, s.tso(2))
    params = {"protocol": "avro", "schema-registry": schema_registry}
    mirror(spark, s, tmp_path / "in", lake, **params)
    s.modify_column(U, "name", "int(11)", s.tso(3))  # VARCHAR -> INT: no Delta widening
    s.insert(U, {"uid": 2, "name": 5}, s.tso(4))
    before = load_progress(spark, f"{lake}/_ingest", "default").resume
    with pytest.raises(SchemaChangeRejected, match=r"shop.users: writer schema \d+ .*column name"):
        mirror(spark, s, tmp_path / "in", lake, **params, **{"type-change": "fail"})
    assert load_progress(spark, f"{lake}/_ingest", "default").resume == before

    result = mirror(spark, s, tmp_path / "in", lake, **params)  # the default follows upstream
    assert result.quarantined == 0
    assert fields(spark, lake, U) == [("uid", "int"), ("name", "int"), ("_tidb_commit_ts", "bigint")]
    assert delta_rows(spark, str(lake), U) == {(1,): {"uid": 1, "name": 17}, (2,): {"uid": 2, "name": 5}}
    history = spark.read.format("delta").load(history_path(f"{lake}/_ingest")).collect()
    assert any("writer schema" in r["sql"] and r["action"] == "applied" for r in history)


def test_the_cli_runs_protocol_avro(spark, schema_registry, tmp_path, lake, capsys):
    s = avro_stream(schema_registry, "cli", partitions=2)
    scenario(s)
    s.write(tmp_path / "in")
    args = ["run", f"--input={tmp_path / 'in'}", f"--target-path={lake}", "--protocol=avro",
            f"--schema-registry={schema_registry}"]  # fmt: skip
    assert main(args) == 0
    assert delta_rows(spark, str(lake), T) == expected_rows(s, T, s.tso(60))
    assert main(["run", f"--input={tmp_path / 'in'}", f"--target-path={lake}", "--protocol=avro"]) == 2
    assert "schema-registry" in capsys.readouterr().err


def test_writer_schemas_are_registered_under_ticdcs_subjects(schema_registry):
    s = avro_stream(schema_registry, "tidb.subjects", partitions=1)
    s.create_table(CREATE_U, s.tso(1))
    s.insert(U, {"uid": 1, "name": "x"}, s.tso(2))
    record = s.records[-1]
    key, value = base64.b64decode(record["key"]), base64.b64decode(record["value"])
    assert key[0] == value[0] == 0
    registry = SchemaRegistry(schema_registry)
    key_schema = json.loads(
        registry.schemas([int.from_bytes(key[1:5], "big")])[int.from_bytes(key[1:5], "big")]
    )
    assert key_schema["namespace"] == "default.shop" and [f["name"] for f in key_schema["fields"]] == ["uid"]
    subjects = json.loads(
        __import__("urllib.request").request.urlopen(f"{schema_registry}/subjects", timeout=10).read()
    )
    assert {"tidb_subjects_shop_users-key", "tidb_subjects_shop_users-value"} <= set(subjects)


@settings(max_examples=3, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(
    mutations=st.lists(
        st.tuples(st.integers(0, 200), st.sampled_from(["key", "value"]), BYTE_MUTATION),
        min_size=3,
        max_size=15,
    )
)
@pytest.mark.full  # CI mutates Canal-JSON messages (test_fuzz); Avro mutations in the full profile
def test_mutated_avro_records_are_quarantined_never_crash(
    spark, schema_registry, tmp_path_factory, mutations
):
    work = tmp_path_factory.mktemp("avro-fuzz")
    s = avro_stream(schema_registry, f"fuzz{work.name.replace('-', '_')}")
    scenario(s)
    mutated: dict[tuple[str, int, int], tuple[bytes | None, bytes | None]] = {}
    for index, part, op in mutations:
        record = s.records[index % len(s.records)]
        if record[part] is None:
            continue  # a tombstone's value: nothing to mutate
        record[part] = base64.b64encode(mutate_bytes(base64.b64decode(record[part]), op)).decode()
        raw = {k: base64.b64decode(record[k]) if record[k] is not None else None for k in ("key", "value")}
        mutated[(record["topic"], record["partition"], record["offset"])] = (raw["key"], raw["value"])
    s.write(work / "input")
    config = IngestConfig.from_params(
        {
            "input": str(work / "input"),
            "target-path": str(work / "lake"),
            "protocol": "avro",
            "schema-registry": schema_registry,
            "max-bad-ratio": "1",
        }
    )
    try:
        result = run_files(spark, config)
    except IngestError:
        # A clear stop (say, a mutated schema id whose schema changes a type Delta cannot widen).
        assert load_progress(spark, config.state_path, config.stream_id).run_id == 0
        return
    quarantined = {}
    if DeltaTable.isDeltaTable(spark, f"{work}/lake/_ingest/quarantine"):
        quarantined = {
            (r["topic"], r["partition"], r["offset"]): (
                bytes(r["key"]) if r["key"] is not None else None,
                bytes(r["value"]) if r["value"] is not None else None,
            )
            for r in read_quarantine(spark, config.state_path).collect()
        }
    # Everything quarantined is a record we mutated, with its position and exactly its wire bytes.
    for position, wire in quarantined.items():
        assert mutated.get(position) == wire, position
    # Every record the decoder calls bad is among them: nothing is dropped silently.
    from ingest.source.decoding import KIND_BAD, avro_schema_ids, decode_ticdc_avro
    from ingest.source.files import read_messages

    messages = read_messages(spark, config.input_path, {})
    texts = SchemaRegistry(schema_registry).schemas(avro_schema_ids(messages))
    decoded = decode_ticdc_avro(messages, texts).where(f"kind = '{KIND_BAD}'").collect()
    assert {(r["topic"], r["partition"], r["offset"]) for r in decoded} <= set(quarantined)
    assert result.quarantined >= len(decoded)


def test_a_kafka_stream_of_ticdc_avro_topics_converges(spark, schema_registry, kafka_broker, lake, tmp_path):
    from ingest.commands.stream import run_kafka
    from testkit.local_services import create_topic, produce_records

    s = avro_stream(schema_registry, "kafka_avro")
    scenario(s)
    for table in (T, U):
        create_topic(kafka_broker, s.avro_topic(table), s.partitions)
    produce_records(kafka_broker, s.records)
    config = IngestConfig.from_params(
        {
            "source": "kafka",
            **kafka_broker.mirror_params(),
            "topic-pattern": "kafka_avro_shop_.*",
            "target-path": str(lake),
            "protocol": "avro",
            "schema-registry": schema_registry,
            "checkpoint-location": str(tmp_path / "checkpoint"),
        }
    )
    run_kafka(spark, config)
    for table in (T, U):
        assert delta_rows(spark, str(lake), table) == expected_rows(s, table, s.tso(60)), table
    resume = load_progress(spark, config.state_path, config.stream_id).resume
    assert sum(resume.values()) == len(s.records)
