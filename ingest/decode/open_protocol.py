"""TiCDC Open Protocol (``protocol=default``, TiCDC's own default): framing, events and the codec. Pure.

A record holds up to ``max-batch-size`` events (rows of several tables and transactions), or one DDL, or
one resolved event. Keys and values are framed separately: an 8-byte version header on the key, then an
8-byte big-endian length before each key entry and each value entry; the i-th key belongs to the i-th
value, and TiCDC-level compression applies to each value entry alone.

Each event is rewritten, on the executors, into the Canal-JSON message with the TiDB extension that says
the same thing (``commitTs``, the row images, the handle key, the DDL text, the watermark), and from there
the mirror reads it as Canal-JSON: one decoding and one set of rules for both. What Open Protocol does not
say (precision, ENUM labels, column order) comes, as for Canal-JSON, from the table's DDLs. Values are
turned into Canal-JSON's text forms: TEXT and BLOB from base64, BINARY from Go's quoting, bytes as latin-1.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator, Mapping
from dataclasses import replace
from functools import cache, partial
from typing import Any

import orjson

from ingest.decode import canal_json as cj
from ingest.decode import codec as c
from ingest.decode.compression import Compression, decompress

PROTOCOL = "open-protocol"
BATCH_VERSION = 1
LENGTH_BYTES = 8

# The key's `t`: what the event is (cdc/model/sink.go MessageType).
ROW, DDL, RESOLVED = 1, 2, 3

# Column flag bits (cdc/model/sink.go ColumnFlagType).
BINARY_FLAG = 0x01
HANDLE_KEY_FLAG = 0x02
UNSIGNED_FLAG = 0x80

# MySQL type codes (TiDB's mysql.Type*) -> the Canal-JSON mysqlType word; (text, binary) for string codes.
_NUMERIC = {1: "tinyint", 2: "smallint", 9: "mediumint", 3: "int", 8: "bigint", 4: "float", 5: "double",
            246: "decimal"}  # fmt: skip
_OTHER = {10: "date", 12: "datetime", 7: "timestamp", 11: "time", 13: "year", 16: "bit", 247: "enum",
          248: "set", 245: "json", 225: "vector"}  # fmt: skip
_STRINGS = {254: ("char", "binary"), 15: ("varchar", "varbinary"), 253: ("varchar", "varbinary")}
_LOBS = {249: ("tinytext", "tinyblob"), 252: ("text", "blob"), 250: ("mediumtext", "mediumblob"),
         251: ("longtext", "longblob")}  # fmt: skip

# The entry's index in its record, in the message it becomes: records are deduplicated by position and
# entry, since every event of a record shares the record's position.
FIELD_ENTRY = "_entry"

CLAIM_CHECK_UNSUPPORTED = (
    "Open Protocol claim-check reference: the mirror does not read Open Protocol claim-check files; set "
    "large-message-handle-option to none with a larger max-message-bytes, or use --protocol canal-json"
)


class OpenProtocolError(ValueError):
    """A record or event that is not Open Protocol as TiCDC writes it."""


def mysql_type(code: int, flags: int) -> str:
    """The Canal-JSON mysqlType word for a column's type code and flags (``int unsigned``, ``blob``).

    Raises:
        OpenProtocolError: a type code TiDB does not send.
    """
    binary = bool(flags & BINARY_FLAG)
    if code in _NUMERIC:
        return _NUMERIC[code] + (" unsigned" if flags & UNSIGNED_FLAG else "")
    if code in _OTHER:
        return _OTHER[code]
    pair = _STRINGS.get(code) or _LOBS.get(code)
    if pair is None:
        raise OpenProtocolError(f"unknown column type code {code}")
    return pair[binary]


def is_bytes(code: int, flags: int) -> bool:
    """Whether the value is bytes: the binary flag counts on string and blob codes only (TiDB sets it on
    every numeric, temporal and JSON column too)."""
    return bool(flags & BINARY_FLAG) and (code in _STRINGS or code in _LOBS)


_SIMPLE_ESCAPES = {"a": 0x07, "b": 0x08, "f": 0x0C, "n": 0x0A, "r": 0x0D, "t": 0x09, "v": 0x0B,
                   "\\": 0x5C, '"': 0x22}  # fmt: skip
_HEX_DIGITS = {"x": 2, "u": 4, "U": 8}


def go_unquote(text: str) -> bytes:
    """The bytes Go's ``strconv.Quote`` turned into ``text`` (without its outer quotes).

    Raises:
        OpenProtocolError: an escape Quote never writes.
    """
    out = bytearray()
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char != "\\":
            out += char.encode("utf-8")
            i += 1
            continue
        escape = text[i + 1] if i + 1 < n else ""
        if escape in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[escape])
            i += 2
            continue
        digits = _HEX_DIGITS.get(escape)
        number = text[i + 2 : i + 2 + digits] if digits else ""
        if not digits or len(number) != digits or any(d not in "0123456789abcdefABCDEF" for d in number):
            raise OpenProtocolError(f"not Go-quoted bytes: bad escape at {i} in {text[i : i + 10]!r}")
        out += bytes([int(number, 16)]) if escape == "x" else chr(int(number, 16)).encode("utf-8")
        i += 2 + digits
    return bytes(out)


def wire_text(code: int, flags: int, value: Any) -> str | None:
    """A column's value as Canal-JSON's text form (bytes as latin-1 code points), or None for NULL.

    Raises:
        OpenProtocolError: the value is not what its type code is sent as.
    """
    if value is None:
        return None
    if code in _LOBS:
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, TypeError) as exc:
            raise OpenProtocolError(f"type {code}: not base64: {value!r:.40}") from exc
        if is_bytes(code, flags):
            return cj.binary_to_wire(raw)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise OpenProtocolError(f"type {code}: text that is not UTF-8") from exc
    if isinstance(value, str):
        return cj.binary_to_wire(go_unquote(value)) if is_bytes(code, flags) else value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise OpenProtocolError(f"type {code}: unexpected value {value!r:.40}")
    return str(value)


def _frames(data: bytes, start: int, what: str) -> Iterator[bytes]:
    """The length-prefixed entries of a key or value."""
    at = start
    while at < len(data):
        if at + LENGTH_BYTES > len(data):
            raise OpenProtocolError(f"{what}: truncated length at byte {at}")
        length = int.from_bytes(data[at : at + LENGTH_BYTES], "big")
        at += LENGTH_BYTES
        if at + length > len(data):
            raise OpenProtocolError(f"{what}: entry of {length} bytes at byte {at} runs past the end")
        yield data[at : at + length]
        at += length


def entries(key: bytes | None, value: bytes | None) -> list[tuple[bytes, bytes]]:
    """The record's (key entry, value entry) pairs, in order; value entries still compressed.

    Raises:
        OpenProtocolError: the framing is not Open Protocol's batch version 1.
    """
    if not key or len(key) < LENGTH_BYTES:
        raise OpenProtocolError("record key is not an Open Protocol batch key (no 8-byte version)")
    version = int.from_bytes(key[:LENGTH_BYTES], "big")
    if version != BATCH_VERSION:
        raise OpenProtocolError(f"unsupported Open Protocol batch version {version} (TiCDC writes 1)")
    keys = list(_frames(key, LENGTH_BYTES, "key"))
    values = list(_frames(value or b"", 0, "value"))
    if len(keys) != len(values):
        raise OpenProtocolError(f"record holds {len(keys)} key entries but {len(values)} value entries")
    return list(zip(keys, values, strict=True))


def _image(columns: Mapping[str, Any]) -> tuple[dict[str, str | None], dict[str, str], list[str]]:
    """A row image's values as text, the mysqlType of each column, and its handle-key columns."""
    data: dict[str, str | None] = {}
    types: dict[str, str] = {}
    handle: list[str] = []
    for name, column in columns.items():
        if not isinstance(column, Mapping) or not isinstance(column.get("t"), int):
            raise OpenProtocolError(f"column {name!r}: not a {{t, f, v}} object")
        code, flags = column["t"], int(column.get("f") or 0)
        types[name] = mysql_type(code, flags)
        data[name] = wire_text(code, flags, column.get("v"))
        if flags & HANDLE_KEY_FLAG:
            handle.append(name)
    return data, types, handle


def _row_message(key: Mapping[str, Any], body: Mapping[str, Any], ts: int) -> dict[str, Any]:
    new, old, deleted = body.get("u"), body.get("p"), body.get("d")
    if deleted:
        op, images = cj.TYPE_DELETE, [deleted]
    elif new and old:
        op, images = cj.TYPE_UPDATE, [new, old]
    elif new:
        op, images = cj.TYPE_INSERT, [new]
    else:
        raise OpenProtocolError("row event without a row image (u, p or d)")
    data, types, handle = _image(images[0])
    message: dict[str, Any] = {
        cj.FIELD_DATABASE: key.get("scm"),
        cj.FIELD_TABLE: key.get("tbl"),
        cj.FIELD_PK_NAMES: sorted(handle),
        cj.FIELD_IS_DDL: False,
        cj.FIELD_TYPE: op,
        cj.FIELD_MYSQL_TYPE: types,
        cj.FIELD_DATA: [data],
        cj.FIELD_OLD: [_image(images[1])[0]] if len(images) > 1 else None,
    }
    extension: dict[str, Any] = {cj.TIDB_COMMIT_TS: ts}
    if key.get("ohk"):
        extension[cj.TIDB_ONLY_HANDLE_KEY] = True
    message[cj.FIELD_TIDB] = extension
    return message


def _event_message(key_entry: bytes, value_entry: bytes, compression: Compression) -> dict[str, Any]:
    try:
        key = orjson.loads(key_entry)
    except orjson.JSONDecodeError as exc:
        raise OpenProtocolError(f"event key is not JSON: {exc}") from exc
    if not isinstance(key, dict):
        raise OpenProtocolError(f"event key is not a JSON object: {key_entry!r:.80}")
    kind, ts = key.get("t"), key.get("ts")
    if not isinstance(ts, int) or kind not in (ROW, DDL, RESOLVED):
        raise OpenProtocolError(f"event key without an integer ts and a t of 1, 2 or 3: {key_entry!r:.80}")
    if kind == RESOLVED:
        watermark = {cj.TIDB_WATERMARK_TS: ts}
        return {cj.FIELD_TYPE: cj.TYPE_WATERMARK, cj.FIELD_IS_DDL: False, cj.FIELD_TIDB: watermark}
    if kind == ROW and key.get("ccl"):  # the event is in a claim-check file; the record holds no row
        return {
            cj.FIELD_DATABASE: key.get("scm"),
            cj.FIELD_TABLE: key.get("tbl"),
            cj.FIELD_IS_DDL: False,
            cj.FIELD_TYPE: cj.TYPE_INSERT,
            cj.FIELD_TIDB: {cj.TIDB_COMMIT_TS: ts, cj.TIDB_CLAIM_CHECK: key["ccl"]},
        }
    try:
        body = orjson.loads(decompress(value_entry, compression))
    except (orjson.JSONDecodeError, ValueError) as exc:
        raise OpenProtocolError(f"event value is not JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise OpenProtocolError("event value is not a JSON object")
    if kind == ROW:
        return _row_message(key, body, ts)
    if not isinstance(body.get("q"), str):
        raise OpenProtocolError("DDL event without its statement (q)")
    return {
        cj.FIELD_DATABASE: key.get("scm") or "",
        cj.FIELD_TABLE: key.get("tbl") or "",
        cj.FIELD_IS_DDL: True,
        cj.FIELD_TYPE: f"action {body.get('t')}",
        cj.FIELD_SQL: body["q"],
        cj.FIELD_TIDB: {cj.TIDB_COMMIT_TS: ts},
    }


def split(key: bytes | None, value: bytes | None, compression: Compression) -> list[c.SplitEvent]:
    """Each event of a record as a Canal-JSON message (or the reason it is bad), in entry order; a record
    whose framing is broken is one bad event."""
    try:
        pairs = entries(key, value)
    except OpenProtocolError as exc:
        return [(None, f"{PROTOCOL}: {exc}")]
    events: list[c.SplitEvent] = []
    for index, (key_entry, value_entry) in enumerate(pairs):
        try:
            message = _event_message(key_entry, value_entry, compression)
        except OpenProtocolError as exc:
            events.append((None, f"{PROTOCOL} event {index}: {exc}"))
            continue
        message[FIELD_ENTRY] = index
        events.append((orjson.dumps(message), None))
    return events


def _rules() -> tuple[c.Rule, ...]:
    """Canal-JSON's rules, but a claim-check reference names what Open Protocol cannot do."""
    return tuple(
        c.Rule(rule.when, rule.kind, CLAIM_CHECK_UNSUPPORTED)
        if rule.message == c.CLAIM_CHECK_NOT_CONFIGURED
        else rule
        for rule in cj.codec().rules
    )


@cache
def codec() -> c.Codec:
    """Open Protocol: Canal-JSON's envelope, rules and control events over the messages :func:`split`
    makes, plus each event's entry index."""
    canal = cj.codec()
    return replace(
        canal,
        name=PROTOCOL,
        envelope=(*canal.envelope, c.Wire(FIELD_ENTRY, c.WireType.LONG)),
        columns=(*canal.columns, ("entry", c.field(FIELD_ENTRY))),
        rules=_rules(),
        split=lambda compression: partial(split, compression=compression),
    )
