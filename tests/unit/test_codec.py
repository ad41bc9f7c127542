"""Each protocol's codec: every classification rule, from hand-written wire messages, and what it carries."""

from __future__ import annotations

import pytest

from ingest.config import IngestConfig
from ingest.decode import canal_json as cj
from ingest.decode import codec as c
from ingest.decode import simple as sp
from ingest.decode import ticdc_avro as ta
from ingest.model import Position

HERE = Position("cdc", 0, 3)
TSO = 447984084414103554
SCHEMA = {"schema": "app", "table": "t", "version": 5, "columns": [], "indexes": []}


def _canal(**fields):
    message = {"database": "app", "table": "t", "isDdl": False, "type": "INSERT", "es": 1700000000000,
               "pkNames": ["id"], "data": [{"id": "1"}], "_tidb": {"commitTs": TSO}}  # fmt: skip
    message.update(fields)
    return {k: v for k, v in message.items() if v is not None}


CANAL = [
    ("a DML", _canal(), c.KIND_DML, None),
    ("a DDL", _canal(isDdl=True, type="ALTER", sql="ALTER TABLE t ADD c int", data=None), c.KIND_DDL, None),
    ("a watermark", _canal(type="TIDB_WATERMARK", _tidb={"watermarkTs": TSO}), c.KIND_WATERMARK, None),
    ("DML without _tidb", _canal(_tidb=None), c.KIND_FATAL, cj.DML_WITHOUT_EXTENSION),
    ("DDL without _tidb", _canal(isDdl=True, type="CREATE", _tidb=None), c.KIND_FATAL,
     cj.DDL_WITHOUT_EXTENSION),
    ("DML with _tidb but no commitTs", _canal(_tidb={"onlyHandleKey": False}), c.KIND_BAD,
     "_tidb.commitTs missing"),
    ("watermark without watermarkTs", _canal(type="TIDB_WATERMARK", _tidb={}), c.KIND_BAD,
     "TIDB_WATERMARK without _tidb.watermarkTs"),
    ("claim-check reference", _canal(_tidb={"commitTs": TSO, "claimCheckLocation": "s3://b/x"}), c.KIND_FATAL,
     c.CLAIM_CHECK_NOT_CONFIGURED),
    ("handle-key-only", _canal(_tidb={"commitTs": TSO, "onlyHandleKey": True}), c.KIND_FATAL,
     c.HANDLE_KEY_ONLY),
    ("DML with an empty data array", _canal(data=[]), c.KIND_BAD, "DML without a row image in data"),
    ("DML without a table", _canal(table=None), c.KIND_BAD, "DML without database/table"),
    ("an unknown type", _canal(type="UPSERT"), c.KIND_BAD, "unknown \"type\" 'UPSERT'"),
    ("no type at all", _canal(type=None), c.KIND_BAD, 'unknown "type" null'),
]  # fmt: skip


@pytest.mark.parametrize(("what", "message", "kind", "error"), CANAL, ids=[case[0] for case in CANAL])
def test_canal_json_rules(what, message, kind, error):
    assert c.classify(cj.CODEC, message) == (kind, error)


def test_canal_json_best_effort_accepts_messages_without_the_extension_with_es_as_commit_time():
    best_effort = cj.codec(best_effort=True)
    record = c.read(best_effort, _canal(_tidb=None), HERE)
    assert (record.kind, record.commit_ts) == (c.KIND_DML, 1700000000000 << 18)
    assert c.classify(best_effort, _canal(_tidb=None, es=None)) == (
        c.KIND_BAD,
        "neither _tidb.commitTs nor es",
    )
    assert best_effort.offset_order and not cj.CODEC.offset_order


def test_canal_json_columns_a_watermark_carries_its_ts_as_commit_ts():
    record = c.read(cj.CODEC, _canal(type="TIDB_WATERMARK", _tidb={"watermarkTs": 7}), HERE)
    assert (record.kind, record.commit_ts, record.position) == (c.KIND_WATERMARK, 7, HERE)


def _simple(**fields):
    message = {"type": "INSERT", "database": "app", "table": "t", "commitTs": TSO, "schemaVersion": 5,
               "data": {"id": "1"}}  # fmt: skip
    message.update(fields)
    return {k: v for k, v in message.items() if v is not None}


SIMPLE = [
    ("an insert", _simple(), c.KIND_DML, None),
    ("an update", _simple(type="UPDATE", old={"id": "1"}), c.KIND_DML, None),
    ("a delete", _simple(type="DELETE", data=None, old={"id": "1"}), c.KIND_DML, None),
    ("a watermark", {"type": "WATERMARK", "commitTs": TSO}, c.KIND_WATERMARK, None),
    ("watermark without commitTs", {"type": "WATERMARK"}, c.KIND_BAD, "WATERMARK without commitTs"),
    ("a bootstrap", {"type": "BOOTSTRAP", "tableSchema": SCHEMA}, c.KIND_BOOTSTRAP, None),
    ("bootstrap without tableSchema", {"type": "BOOTSTRAP"}, c.KIND_BAD, "BOOTSTRAP without tableSchema"),
    ("a DDL", {"type": "ALTER", "commitTs": TSO, "sql": "x", "tableSchema": SCHEMA}, c.KIND_DDL, None),
    ("DDL without commitTs", {"type": "CREATE", "sql": "x"}, c.KIND_BAD, "DDL without commitTs"),
    ("DML without commitTs", _simple(commitTs=None), c.KIND_BAD, "DML without commitTs"),
    ("DML without a database", _simple(database=None), c.KIND_BAD, "DML without database/table"),
    ("DML without schemaVersion", _simple(schemaVersion=None), c.KIND_BAD, "DML without schemaVersion"),
    ("claim-check reference", _simple(claimCheckLocation="s3://b/x", handleKeyOnly=True), c.KIND_FATAL,
     c.CLAIM_CHECK_NOT_CONFIGURED),
    ("handle-key-only", _simple(handleKeyOnly=True), c.KIND_FATAL, c.HANDLE_KEY_ONLY),
    ("delete without old", _simple(type="DELETE"), c.KIND_BAD, "DML without its row image (data/old)"),
    ("insert without data", _simple(data=None), c.KIND_BAD, "DML without its row image (data/old)"),
    ("update without old", _simple(type="UPDATE"), c.KIND_BAD, "DML without its row image (data/old)"),
    ("an unknown type", _simple(type="UPSERT"), c.KIND_BAD, "unknown \"type\" 'UPSERT'"),
]  # fmt: skip


@pytest.mark.parametrize(("what", "message", "kind", "error"), SIMPLE, ids=[case[0] for case in SIMPLE])
def test_simple_rules(what, message, kind, error):
    assert c.classify(sp.CODEC, message) == (kind, error)


def test_simple_columns_a_delete_row_is_in_data_and_ddl_names_its_table_in_the_schema():
    delete = c.read(sp.CODEC, _simple(type="DELETE", data=None, old={"id": "9"}), HERE)
    assert delete.type == c.TYPE_DELETE
    data = sp.CODEC.column("data")
    assert data is not None and c.value(data, _simple(type="DELETE", old={"id": "9"})) == {"id": "9"}
    ddl = c.read(sp.CODEC, {"type": "CREATE", "commitTs": TSO, "sql": "x", "tableSchema": SCHEMA}, HERE)
    assert (ddl.database, ddl.table) == ("app", "t")


def test_a_simple_control_record_announces_its_schemas():
    bootstrap = sp.control(c.read(sp.CODEC, {"type": "BOOTSTRAP", "tableSchema": SCHEMA}, HERE))
    assert bootstrap.event is None and [s.version for s in bootstrap.schemas] == [5]
    watermark = sp.control(c.read(sp.CODEC, {"type": "WATERMARK", "commitTs": 7}, HERE))
    assert watermark.schemas == () and watermark.event is not None and watermark.event.ts == 7


def test_ticdc_avro_records_are_classified_record_by_record():
    book = ta.schema_book({})
    assert ta.classify(b"\x00\x00\x00\x00\x01", None, None, book) == (c.KIND_BAD, c.NOT_A_RECORD, None)
    kind, error, change = ta.classify(b"\x01xxxx", None, 0, book)
    assert (kind, change) == (c.KIND_BAD, None)
    assert error == "TiCDC Avro: key is not in the Confluent wire format (magic byte 0, 4-byte schema id)"


@pytest.mark.parametrize(
    ("params", "name", "watermarks", "binary", "types_from"),
    [
        ({}, "canal-json", True, c.BinaryText.LATIN1, c.TypesFrom.ROWS),
        ({"missing-extension": "offset-order"}, "canal-json", False, c.BinaryText.LATIN1, c.TypesFrom.ROWS),
        ({"protocol": "simple"}, "simple", True, c.BinaryText.BASE64, c.TypesFrom.ANNOUNCED),
        ({"protocol": "avro", "schema-registry": "http://r"}, "avro", False, c.BinaryText.BASE64,
         c.TypesFrom.WRITER_SCHEMA),
    ],
)  # fmt: skip
def test_the_codec_is_chosen_once_from_the_configuration(params, name, watermarks, binary, types_from):
    codec = IngestConfig.from_params({"input": "in", "target-path": "out", **params}).codec
    assert (codec.name, codec.has_watermarks, codec.binary_text, codec.types_from) == (
        name,
        watermarks,
        binary,
        types_from,
    )


def test_simple_avro_transcodes_payloads_and_the_json_flavour_does_not():
    assert sp.codec(avro=True).transcode is not None and sp.codec().transcode is None


def test_predicates_follow_three_valued_logic():
    unknown = c.Eq(c.field("type"), "INSERT")
    assert c.test(unknown, {}) is None
    assert c.test(unknown & c.IsNull(c.field("x")), {}) is None
    assert c.test(unknown & ~c.IsNull(c.field("x")), {}) is False
    assert c.test(unknown | c.IsNull(c.field("x")), {}) is True
    assert c.test(~unknown, {}) is None and not c.holds(~unknown, {})
    assert c.test(c.Empty(c.field("data")), {}) is None
    assert c.test(c.IsTrue(c.field("flag")), {}) is False
