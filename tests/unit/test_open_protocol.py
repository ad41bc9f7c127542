"""Open Protocol records -> the Canal-JSON messages each of their events becomes: framing, value forms, and
TiCDC's own output for the same history in both protocols."""

from __future__ import annotations

import base64
import json
from collections import defaultdict
from pathlib import Path

import orjson
import pytest

from ingest.config import IngestConfig
from ingest.decode import canal_json as cj
from ingest.decode import codec as c
from ingest.decode import open_protocol as op
from ingest.decode.compression import Compression, compress
from ingest.errors import ConfigError
from ingest.model import Position
from ingest.settings import Protocol

CORPORA = Path(__file__).resolve().parents[1] / "fixtures" / "corpora"


def frame(*parts: bytes) -> bytes:
    return b"".join(len(p).to_bytes(8, "big") + p for p in parts)


def record(*events: tuple[dict, dict | None]) -> tuple[bytes, bytes]:
    key = (1).to_bytes(8, "big") + frame(*(orjson.dumps(k) for k, _ in events))
    value = frame(*(b"" if v is None else orjson.dumps(v) for _, v in events))
    return key, value


def messages(key: bytes, value: bytes, compression: Compression = Compression.NONE) -> list[dict]:
    out = []
    for payload, error in op.split(key, value, compression):
        assert error is None, error
        assert payload is not None
        out.append(orjson.loads(payload))
    return out


def test_go_quoted_bytes_come_back_exactly():
    # The reference's example: bytes 00 FF 41 3C 0A C3 A9 22 5C 7F as Go's strconv.Quote writes them.
    assert op.go_unquote('\\x00\\xffA<\\né\\"\\\\\\x7f') == bytes.fromhex("00FF413C0AC3A9225C7F")
    assert op.go_unquote("\\u00a0\\U0001f600\\a\\b\\f\\r\\t\\v") == (
        "\u00a0\U0001f600".encode() + bytes([7, 8, 12, 13, 9, 11])
    )
    with pytest.raises(op.OpenProtocolError, match="bad escape"):
        op.go_unquote("\\q")
    with pytest.raises(op.OpenProtocolError, match="bad escape"):
        op.go_unquote("\\x4")


@pytest.mark.parametrize(
    ("code", "flags", "expected"),
    [
        (3, 0, "int"), (3, 0x80, "int unsigned"), (8, 0x8B, "bigint unsigned"), (4, 0x81, "float unsigned"),
        (246, 0x41, "decimal"), (246, 0xC1, "decimal unsigned"), (16, 0xC1, "bit"), (13, 0xC1, "year"),
        (15, 64, "varchar"), (15, 65, "varbinary"), (254, 1, "binary"), (252, 64, "text"), (252, 65, "blob"),
        (249, 1, "tinyblob"), (251, 0, "longtext"), (247, 64, "enum"), (248, 64, "set"), (245, 65, "json"),
    ],
)  # fmt: skip
def test_the_mysql_type_of_a_code_and_its_flags(code, flags, expected):
    assert op.mysql_type(code, flags) == expected


def test_values_become_canal_json_text():
    assert op.wire_text(252, 64, base64.b64encode("测试text".encode()).decode()) == "测试text"
    assert op.wire_text(252, 65, "AAH/") == "\x00\x01\xff"  # bytes as latin-1, as Canal-JSON writes them
    assert op.wire_text(15, 65, "\\x89PNG\\r\\n") == "\x89PNG\r\n"
    assert op.wire_text(15, 64, "\\x89") == "\\x89"  # a VARCHAR is text as it is
    assert op.wire_text(8, 0xC1, 18446744073709551615) == "18446744073709551615"
    assert op.wire_text(5, 65, 5e-324) == "5e-324"
    assert op.wire_text(4, 65, 2) == "2"
    assert op.wire_text(247, 64, 2) == "2"  # an ENUM index: its label comes from the table's DDL
    assert op.wire_text(12, 65, None) is None
    with pytest.raises(op.OpenProtocolError, match="not base64"):
        op.wire_text(252, 64, "not base64!")
    with pytest.raises(op.OpenProtocolError, match="not UTF-8"):
        op.wire_text(252, 64, base64.b64encode(b"\xff").decode())
    with pytest.raises(op.OpenProtocolError, match="unexpected value"):
        op.wire_text(3, 0, True)


ROW_KEY = {"ts": 452413046183362561, "scm": "shop", "tbl": "orders", "rid": 7, "t": 1}
ID = {"t": 8, "h": True, "f": 11, "v": 7}


def test_a_record_of_several_events_is_each_event_in_order():
    def note(v: str | None) -> dict:
        return {"t": 15, "f": 64, "v": v}

    key, value = record(
        (ROW_KEY, {"u": {"id": ID, "note": note("rush")}}),
        (ROW_KEY, {"u": {"id": ID, "note": note("b")}, "p": {"id": ID, "note": note(None)}}),
        (ROW_KEY, {"d": {"id": ID, "note": note("b")}}),
    )
    first, update, delete = messages(key, value)
    assert [m[cj.FIELD_TYPE] for m in (first, update, delete)] == ["INSERT", "UPDATE", "DELETE"]
    assert [m[op.FIELD_ENTRY] for m in (first, update, delete)] == [0, 1, 2]
    assert first[cj.FIELD_DATA] == [{"id": "7", "note": "rush"}] and first[cj.FIELD_OLD] is None
    assert update[cj.FIELD_OLD] == [{"id": "7", "note": None}]
    assert delete[cj.FIELD_DATA] == [{"id": "7", "note": "b"}]
    assert first[cj.FIELD_PK_NAMES] == ["id"]
    assert first[cj.FIELD_MYSQL_TYPE] == {"id": "bigint", "note": "varchar"}
    assert first[cj.FIELD_TIDB] == {cj.TIDB_COMMIT_TS: ROW_KEY["ts"]}
    # Read as Canal-JSON, each is a DML of its table at its commitTs.
    read = c.read(op.codec(), first, Position("t", 0, 5))
    assert (read.kind, read.database, read.table, read.commit_ts) == (
        c.KIND_DML,
        "shop",
        "orders",
        ROW_KEY["ts"],
    )


def test_ddl_and_resolved_events_become_control_messages():
    alter = "ALTER TABLE `shop`.`orders` ADD COLUMN `n` INT"
    ddl_key, ddl_value = record(({"ts": 9, "scm": "shop", "tbl": "orders", "t": 2}, {"q": alter, "t": 5}))
    (ddl,) = messages(ddl_key, ddl_value)
    control = op.codec().control(c.read(op.codec(), ddl, Position("t", 0, 1)))
    assert control.event is not None and control.event.commit_ts == 9
    assert control.event.sql == alter
    # A resolved record: its value is one entry of length 0, eight zero bytes.
    key = (1).to_bytes(8, "big") + frame(orjson.dumps({"ts": 11, "t": 3}))
    (resolved,) = messages(key, bytes(8))
    read = c.read(op.codec(), resolved, Position("t", 0, 2))
    assert (read.kind, read.commit_ts) == (c.KIND_WATERMARK, 11)


def test_each_value_entry_is_decompressed_alone():
    body = {"u": {"id": ID}}
    key = (1).to_bytes(8, "big") + frame(orjson.dumps(ROW_KEY), orjson.dumps(ROW_KEY))
    for compression in (Compression.LZ4, Compression.SNAPPY):
        value = frame(*(compress(orjson.dumps(body), compression),) * 2)
        assert [m[cj.FIELD_DATA] for m in messages(key, value, compression)] == [[{"id": "7"}]] * 2


def test_broken_framing_is_one_bad_event_and_a_bad_event_leaves_the_others():
    key, value = record((ROW_KEY, {"u": {"id": ID}}), (ROW_KEY, {"u": {"id": ID}}))
    assert op.split(b"\x00" * 7, value, Compression.NONE) == [
        (None, "open-protocol: record key is not an Open Protocol batch key (no 8-byte version)")
    ]
    (only,) = op.split((2).to_bytes(8, "big") + key[8:], value, Compression.NONE)
    assert only[1] is not None and "batch version 2" in only[1]
    (short,) = op.split(key, value[:-3], Compression.NONE)
    assert short[1] is not None and "runs past the end" in short[1]
    (missing,) = op.split(key, value[: len(value) // 2], Compression.NONE)
    assert missing[1] is not None and "2 key entries but 1 value entries" in missing[1]
    mixed_key, mixed_value = record(
        (ROW_KEY, {"u": {"id": {"t": 99, "f": 0, "v": 1}}}), (ROW_KEY, {"u": {"id": ID}})
    )
    bad, good = op.split(mixed_key, mixed_value, Compression.NONE)
    assert bad == (None, "open-protocol event 0: unknown column type code 99")
    assert good[0] is not None and good[1] is None


def test_large_message_references_are_refused_with_what_to_change():
    handle_only = record(({**ROW_KEY, "ohk": True}, {"u": {"id": ID}}))
    claim = record(({**ROW_KEY, "ccl": "s3://bucket/claims/x.json"}, None))  # the row is in the file
    for (key, value), message in ((handle_only, c.HANDLE_KEY_ONLY), (claim, op.CLAIM_CHECK_UNSUPPORTED)):
        ((payload, error),) = op.split(key, value, Compression.NONE)
        assert payload is not None, error
        kind, why = c.classify(op.codec(), orjson.loads(payload))
        assert (kind, why) == (c.KIND_FATAL, message)


def test_default_is_tidb_s_name_for_open_protocol_and_claim_check_is_refused_at_start(tmp_path):
    config = IngestConfig.from_params({"input": "x", "target-path": str(tmp_path), "protocol": "default"})
    assert config.protocol is Protocol.OPEN_PROTOCOL and config.codec.name == op.PROTOCOL
    with pytest.raises(ConfigError, match="Open Protocol claim-check"):
        IngestConfig.from_params(
            {
                "input": "x",
                "target-path": str(tmp_path),
                "protocol": "open-protocol",
                "claim-check-path": "/c",
            }
        )


def _rows(path: Path, decode) -> dict[tuple, list[str]]:
    """Every row image of a kit corpus's records, by (table, commitTs, type), as sorted normalized JSON."""
    found: dict[tuple, list[str]] = defaultdict(list)
    for line in path.read_text().splitlines():
        captured = json.loads(line)
        for message in decode(captured):
            if message.get(cj.FIELD_IS_DDL) or message.get(cj.FIELD_TYPE) == cj.TYPE_WATERMARK:
                continue
            types = message[cj.FIELD_MYSQL_TYPE]
            # Canal-JSON writes floats in fixed notation, Open Protocol in Go's shortest form: equal numbers.
            images = [
                {k: float(v) if v is not None and types[k].split()[0] in ("float", "double") else v
                 for k, v in image.items()}
                for image in (message[cj.FIELD_DATA][0], (message.get(cj.FIELD_OLD) or [None])[0]) if image
            ]  # fmt: skip
            key = (message[cj.FIELD_TABLE], message[cj.FIELD_TIDB][cj.TIDB_COMMIT_TS], message[cj.FIELD_TYPE])
            found[key].append(json.dumps(images, sort_keys=True))
    return {k: sorted(v) for k, v in found.items()}


def _canal(captured: dict) -> list[dict]:
    return [json.loads(base64.b64decode(captured["value"]))]


def _open(captured: dict) -> list[dict]:
    value = base64.b64decode(captured["value"]) if captured["value"] else b""
    return messages(base64.b64decode(captured["key"]), value)


@pytest.mark.parametrize("corpus", ["tidb-tests", "recover"])
def test_tidb_s_open_protocol_records_say_what_its_canal_json_records_say(corpus):
    """The same history, written by TiCDC v8.3.0 in both protocols: every row image of every event agrees
    value for value with the Canal-JSON one (UNSIGNED edges, binary bytes, multi-byte text, NULLs)."""
    canal = _rows(CORPORA / corpus / "canal-json" / "records.jsonl", _canal)
    open_ = _rows(CORPORA / corpus / "open-protocol" / "records.jsonl", _open)
    assert canal and open_ == canal
