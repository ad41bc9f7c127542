"""Every JSON protocol lands the same upstream state: Canal-JSON and the Simple protocol (JSON flavour).

Expected tables come from the upstream model in ``testkit.sample`` (or from the protocol reference, by hand),
never from our own output.
"""

from __future__ import annotations

import pytest
from delta.tables import DeltaTable
from mirror import delta_rows, expected_rows, located

from ingest.decode.compression import Compression
from ingest.errors import ConfigError, TooManyBadRecords
from ingest.model import TableId
from ingest.state.progress import load_progress
from testkit.sample import SIMPLE_FOR_TESTS, Stream, build_sample

TABLES = [
    TableId("shop", "customers"),
    TableId("shop", "orders"),
    TableId("shop", "order_items"),
    TableId("inventory", "stock"),
]
T = TableId("app", "t")


def schema_of(spark, lake, table: TableId) -> list[tuple[str, str]]:
    df = DeltaTable.forPath(spark, located(lake, table)).toDF()
    return [(f.name, f.dataType.simpleString()) for f in df.schema.fields]


def test_simple_json_sample_mirrors_upstream_exactly_at_g(spark, run, lake):
    stream = build_sample(protocol="simple")
    result = run(stream, protocol="simple")
    g = result.global_watermark
    assert g == stream.complete_watermark() > 0
    for table in TABLES:
        assert delta_rows(spark, str(lake), table) == expected_rows(stream, table, g), table
    assert result.tables[TableId("shop", "customers")].pending == 1


def test_canal_json_and_simple_json_land_identical_tables(spark, run, lake, tmp_path):
    canal = run(build_sample())
    other = tmp_path / "simple-lake"
    simple_stream = build_sample(protocol="simple")
    simple_stream.write(tmp_path / "simple-input")
    from ingest.config import IngestConfig
    from ingest.pipeline import run_files

    simple = run_files(
        spark,
        IngestConfig.from_params(
            {"input": str(tmp_path / "simple-input"), "target-path": str(other), "protocol": "simple"}
        ),
    )
    assert canal.global_watermark == simple.global_watermark
    for table in TABLES:
        assert schema_of(spark, lake, table) == schema_of(spark, other, table), table
        assert delta_rows(spark, str(lake), table) == delta_rows(spark, str(other), table), table


def _drop_records(stream: Stream, kinds: tuple[str, ...]) -> None:
    import base64

    import orjson

    def kind(record: dict) -> str:
        return orjson.loads(base64.b64decode(record["value"])).get("type", "")

    stream.records[:] = [r for r in stream.records if kind(r) not in kinds]


def test_simple_rows_wait_for_their_schema_then_apply(spark, run, lake):
    """Joining mid-stream: rows whose schema version nobody announced wait, and nothing is lost."""
    s = Stream(topic="cdc", partitions=1, protocol="simple")
    s.create_table(SIMPLE_FOR_TESTS, s.tso(1))
    s.insert(T, {"id": 1, "v": "a"}, s.tso(10))
    s.watermark(s.tso(11))
    _drop_records(s, ("CREATE", "BOOTSTRAP"))  # the consumer joined after them
    first = run(s, protocol="simple")
    assert first.global_watermark == s.tso(11)
    assert first.tables[T].pending == 1
    assert not DeltaTable.isDeltaTable(spark, located(lake, TableId("app", "t")))
    # TiCDC re-sends a BOOTSTRAP (periodically, or before the next row after a restart).
    s._bootstrapped.discard(T)
    s.insert(T, {"id": 2, "v": "b"}, s.tso(12))
    s.watermark(s.tso(13))
    second = run(s, protocol="simple")
    assert second.tables[T].applied_ts == s.tso(13)
    assert delta_rows(spark, str(lake), T) == expected_rows(s, T, s.tso(13))


def test_the_schema_cache_survives_a_restart(spark, run, lake):
    """A BOOTSTRAP read in one run still decodes rows in the next, although it is never read again."""
    s = Stream(topic="cdc", partitions=1, protocol="simple")
    s.create_table(SIMPLE_FOR_TESTS, s.tso(1))
    _drop_records(s, ("CREATE",))
    s.insert(T, {"id": 1, "v": "a"}, s.tso(10))  # BOOTSTRAP, then the row: both above G in run 1
    s.watermark(s.tso(5))
    first = run(s, protocol="simple")
    assert first.tables[T].pending == 1
    s.watermark(s.tso(11))
    second = run(s, protocol="simple")
    assert second.tables[T].applied_ts == s.tso(11)
    assert delta_rows(spark, str(lake), T) == expected_rows(s, T, s.tso(11))


@pytest.mark.parametrize(
    ("protocol", "encoding", "compression", "raw"),
    [
        ("canal-json", "json", Compression.NONE, False),
        ("simple", "json", Compression.LZ4, True),
        ("simple", "avro", Compression.SNAPPY, False),
    ],
)
def test_claim_check_messages_are_read_from_their_objects(
    spark, run, lake, tmp_path, protocol, encoding, compression, raw
):
    claims = tmp_path / "claims"
    s = Stream(topic="cdc", partitions=2, protocol=protocol, encoding=encoding, compression=compression)
    s.claim_check_dir, s.claim_check_raw = claims, raw
    s.create_table(SIMPLE_FOR_TESTS, s.tso(1))
    s.insert(T, {"id": 1, "v": "small"}, s.tso(10))
    s.insert(T, {"id": 2, "v": "x" * 5000}, s.tso(11), large=True)
    s.watermark(s.tso(12))
    params = {"protocol": protocol, "compression": compression.value, "claim-check-path": str(claims)}
    if protocol == "simple":
        params["simple-encoding"] = encoding
    if raw:
        params["claim-check-raw-value"] = "true"
    result = run(s, **params)
    assert result.quarantined == 0
    assert delta_rows(spark, str(lake), T) == expected_rows(s, T, s.tso(12))


def test_a_missing_claim_check_object_is_quarantined_and_stops_progress(spark, run, lake, tmp_path):
    claims = tmp_path / "claims"
    s = Stream(topic="cdc", partitions=1)
    s.claim_check_dir = claims
    s.create_table(SIMPLE_FOR_TESTS, s.tso(1))
    s.insert(T, {"id": 2, "v": "x" * 5000}, s.tso(11), large=True)
    s.watermark(s.tso(12))
    for obj in claims.iterdir():
        obj.unlink()
    with pytest.raises(TooManyBadRecords):
        run(s, **{"claim-check-path": str(claims)})
    assert load_progress(spark, f"{lake}/_ingest", "default").run_id == 0
    rejected = spark.read.format("delta").load(f"{lake}/_ingest/quarantine").collect()
    assert [(r["offset"], r["error"].startswith("claim-check object not found")) for r in rejected] == [
        (1, True)
    ]


def test_claim_check_without_a_path_stops_with_a_clear_error(spark, run, lake, tmp_path):
    s = Stream(topic="cdc", partitions=1)
    s.claim_check_dir = tmp_path / "claims"
    s.create_table(SIMPLE_FOR_TESTS, s.tso(1))
    s.insert(T, {"id": 2, "v": "x"}, s.tso(11), large=True)
    s.watermark(s.tso(12))
    with pytest.raises(ConfigError, match="claim-check-path"):
        run(s)


@pytest.mark.parametrize(("protocol", "encoding"), [("simple", "json"), ("simple", "avro")])
def test_simple_ddl_add_column_and_truncate_follow_upstream(spark, run, lake, protocol, encoding):
    """The DDL path per protocol: Simple broadcasts each DDL to every partition; it is applied once."""
    s = Stream(topic="cdc", partitions=3, protocol=protocol, encoding=encoding)
    s.create_table(SIMPLE_FOR_TESTS, s.tso(1))
    for k in range(1, 7):
        s.insert(T, {"id": k, "v": f"v{k}"}, s.tso(10 + k))
    s.add_column(
        T, "ALTER TABLE `app`.`t` ADD COLUMN `n` int(11) NOT NULL DEFAULT '7'", s.tso(20), "n", "int", 7
    )
    s.insert(T, {"id": 9, "v": "after", "n": 1}, s.tso(21))
    s.watermark(s.tso(22))
    first = run(s, protocol=protocol, **{"simple-encoding": encoding})
    assert delta_rows(spark, str(lake), T) == expected_rows(s, T, s.tso(22))
    assert len(first.tables[T].ddls) == 2  # CREATE and ALTER: three copies each, one application each
    s.truncate(T, s.tso(30))
    s.insert(T, {"id": 10, "v": "fresh", "n": 2}, s.tso(31))
    s.watermark(s.tso(32))
    run(s, protocol=protocol, **{"simple-encoding": encoding})
    assert delta_rows(spark, str(lake), T) == expected_rows(s, T, s.tso(32))


def without_extension(stream: Stream, partition: int | None = None) -> Stream:
    """The same changefeed with enable-tidb-extension=false: no _tidb, no watermark messages.

    ``partition``: keep only that partition's records (a consumer that has read one partition so far).
    """
    import base64

    import orjson

    copy = Stream(topic=stream.topic, partitions=stream.partitions, tz_name=stream.tz_name)
    for record in stream.records:
        message = orjson.loads(base64.b64decode(record["value"]))
        if message["type"] == "TIDB_WATERMARK" or partition not in (None, record["partition"]):
            continue
        message.pop("_tidb")
        copy.records.append({**record, "value": base64.b64encode(orjson.dumps(message)).decode()})
    return copy


def test_canal_json_without_the_extension_converges_in_offset_order_when_opted_into(spark, run, lake):
    stream = build_sample()
    end = stream.tso(100_000)  # after every change: offset order applies all it reads
    params = {"missing-extension": "offset-order"}
    with pytest.raises(ConfigError, match=r"missing-extension offset-order"):
        run(without_extension(stream))

    # Partition 0 first: its rows are applied without waiting for partition 1 (there are no watermarks).
    first = run(without_extension(stream, partition=0), **params)
    assert first.quarantined == 0 and sum(r.upserted for r in first.tables.values()) > 0
    # Then everything: partition 1's rows are older than what the tables already hold, and still land.
    run(without_extension(stream), **params)
    for table in TABLES:
        assert delta_rows(spark, str(lake), table) == expected_rows(stream, table, end), table
