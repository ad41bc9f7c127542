"""Executor-side decoders (Canal-JSON, Simple JSON and Avro): each event kind classified, positions kept."""

from __future__ import annotations

import base64

import pytest

from ingest.decode import canal_json as cj
from ingest.decode import simple as sp
from ingest.decode.compression import Compression
from ingest.model import TableId
from ingest.source.decoding import (
    KIND_BAD,
    KIND_BOOTSTRAP,
    KIND_DDL,
    KIND_DML,
    KIND_FATAL,
    KIND_WATERMARK,
    decode_json,
    prepare_payload,
)
from ingest.source.files import read_messages
from testkit.sample import SIMPLE_FOR_TESTS, Stream

T = TableId("app", "t")


def test_every_event_kind_is_decoded_on_executors(spark, tmp_path):
    s = Stream(topic="cdc", partitions=1)
    s.create_table(SIMPLE_FOR_TESTS, s.tso(1))
    s.insert(T, {"id": 1, "v": "a"}, s.tso(2))
    s.update(T, (1,), {"v": "b"}, s.tso(3))
    s.delete(T, (1,), s.tso(4))
    s.watermark(s.tso(5))
    s.append_raw(0, b"[1, 2")
    s.append_message(
        0, {"isDdl": False, "type": "INSERT", "database": "app", "table": "t", "data": [{"id": "2"}]}
    )
    s.write(tmp_path)
    prepared = prepare_payload(read_messages(spark, str(tmp_path), {}), Compression.NONE, cj.CODEC)
    decoded = {r["offset"]: r for r in decode_json(prepared, cj.CODEC).collect()}
    kinds = [decoded[o]["kind"] for o in range(7)]
    assert kinds == [KIND_DDL, KIND_DML, KIND_DML, KIND_DML, KIND_WATERMARK, KIND_BAD, KIND_FATAL]
    assert decoded[0]["sql"] == SIMPLE_FOR_TESTS and decoded[0]["commit_ts"] == s.tso(1)
    insert, update, delete = decoded[1], decoded[2], decoded[3]
    assert (insert["type"], insert["database"], insert["table"]) == ("INSERT", "app", "t")
    assert insert["data"] == {"id": "1", "v": "a"} and insert["old"] is None
    assert insert["pk_names"] == ["id"] and insert["mysql_type"] == {"id": "int", "v": "varchar"}
    assert update["old"] == {"id": "1", "v": "a"} and update["data"] == {"id": "1", "v": "b"}
    assert delete["type"] == "DELETE" and delete["commit_ts"] == s.tso(4)
    assert decoded[4]["commit_ts"] == s.tso(5)  # the watermark's TSO, exact above 2^53
    assert decoded[5]["error"] == "malformed JSON"
    assert bytes(decoded[5]["value"]) == b"[1, 2"
    assert "enable-tidb-extension=true" in decoded[6]["error"]
    assert base64.b64decode(s.records[1]["value"]) == bytes(insert["value"])


@pytest.mark.parametrize(("encoding", "compression"), [("json", Compression.NONE), ("avro", Compression.LZ4)])
def test_every_simple_event_kind_is_decoded_on_executors(spark, tmp_path, encoding, compression):
    s = Stream(topic="cdc", partitions=1, protocol="simple", encoding=encoding, compression=compression)
    s.create_table(SIMPLE_FOR_TESTS, s.tso(1))  # CREATE (DDL)
    s.insert(T, {"id": 1, "v": "a"}, s.tso(2))  # BOOTSTRAP, INSERT
    s.update(T, (1,), {"v": "b"}, s.tso(3))
    s.delete(T, (1,), s.tso(4))
    s.watermark(s.tso(5))
    s.append_raw(0, b"\x16\x06garbage")  # not a message in either encoding, nor compressed
    s.write(tmp_path)
    codec = sp.codec(avro=encoding == "avro")
    prepared = prepare_payload(read_messages(spark, str(tmp_path), {}), compression, codec)
    decoded = {r["offset"]: r for r in decode_json(prepared, codec).collect()}
    kinds = [decoded[o]["kind"] for o in range(7)]
    assert kinds == [KIND_DDL, KIND_BOOTSTRAP, KIND_DML, KIND_DML, KIND_DML, KIND_WATERMARK, KIND_BAD]
    ddl, bootstrap = decoded[0], decoded[1]
    assert (ddl["type"], ddl["database"], ddl["table"], ddl["commit_ts"]) == ("CREATE", "app", "t", s.tso(1))
    assert ddl["sql"] == SIMPLE_FOR_TESTS and '"version":' in ddl["table_schema"]
    assert (bootstrap["database"], bootstrap["table"]) == ("app", "t")
    insert, update, delete = decoded[2], decoded[3], decoded[4]
    assert insert["data"] == {"id": "1", "v": "a"} and insert["old"] is None
    assert insert["schema_version"] == s.tso(1)
    assert update["old"] == {"id": "1", "v": "a"} and update["data"] == {"id": "1", "v": "b"}
    # Simple sends a DELETE's row in "old"; downstream, the row image is always in "data".
    assert delete["type"] == "DELETE" and delete["data"] == {"id": "1", "v": "b"}
    assert decoded[5]["commit_ts"] == s.tso(5)
    bad = decoded[6]
    expected_error = "not lz4-compressed" if compression is Compression.LZ4 else "malformed JSON"
    assert bad["error"].startswith(expected_error)
    assert bytes(bad["value"]) == b"\x16\x06garbage"  # quarantine keeps the wire bytes


def test_spark_classifies_every_hand_written_message_as_the_codec_rules_do(spark):
    """The rules are written once: compiled to Spark columns, they give what they give in plain Python."""
    import orjson

    from ingest.decode import codec as c
    from ingest.model import Position
    from ingest.source import MESSAGE_SCHEMA
    from tests.unit.test_codec import CANAL, SIMPLE

    best_effort = cj.codec(best_effort=True)
    for codec, cases in ((cj.CODEC, CANAL), (best_effort, CANAL), (sp.CODEC, SIMPLE)):
        rows = [("cdc", 0, i, None, None, orjson.dumps(m)) for i, (_, m, _, _) in enumerate(cases)]
        messages = spark.createDataFrame(rows, MESSAGE_SCHEMA)
        prepared = prepare_payload(messages, Compression.NONE, codec)
        decoded = {r["offset"]: r for r in decode_json(prepared, codec).collect()}
        for offset, (what, message, _, _) in enumerate(cases):
            got = decoded[offset]
            expected = c.read(codec, message, Position("cdc", 0, offset))
            assert (got["kind"], got["error"]) == (expected.kind, expected.error), what
            assert (got["type"], got["database"], got["table"], got["commit_ts"]) == (
                expected.type,
                expected.database,
                expected.table,
                expected.commit_ts,
            ), what
