"""TiCDC Canal-JSON (with ``enable-tidb-extension=true``): wire names, the codec and pure decoding.

The codec (:func:`codec`) says how a message's envelope is read, how each message is classified and
what the protocol carries; ``ingest.source.decoding`` runs it on executors. Only control messages (DDL,
watermarks) are turned into model objects on the driver, from their decoded columns.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from ingest.decode import codec as c
from ingest.decode.codec import (
    KIND_BAD,
    KIND_DDL,
    KIND_DML,
    KIND_FATAL,
    KIND_WATERMARK,
    BinaryText,
    Codec,
    Control,
    Decoded,
    Rule,
    TypesFrom,
    Wire,
    WireType,
    field,
    present,
)
from ingest.errors import DecodeError
from ingest.model import DdlEvent, Position, TableId, Watermark
from ingest.mysql.ddl import ddl_event

PROTOCOL = "canal-json"

FIELD_DATABASE = "database"
FIELD_TABLE = "table"
FIELD_PK_NAMES = "pkNames"
FIELD_IS_DDL = "isDdl"
FIELD_TYPE = "type"
FIELD_ES = "es"
FIELD_TS = "ts"
FIELD_SQL = "sql"
FIELD_SQL_TYPE = "sqlType"
FIELD_MYSQL_TYPE = "mysqlType"
FIELD_DATA = "data"
FIELD_OLD = "old"
FIELD_TIDB = "_tidb"
TIDB_COMMIT_TS = "commitTs"
TIDB_WATERMARK_TS = "watermarkTs"
TIDB_ONLY_HANDLE_KEY = "onlyHandleKey"
TIDB_CLAIM_CHECK = "claimCheckLocation"

# Canal-JSON's DML types are the decoded frame's own (ingest.model.Op).
TYPE_INSERT = c.TYPE_INSERT
TYPE_UPDATE = c.TYPE_UPDATE
TYPE_DELETE = c.TYPE_DELETE
TYPE_WATERMARK = "TIDB_WATERMARK"
DML_TYPES = (TYPE_INSERT, TYPE_UPDATE, TYPE_DELETE)

# A column is binary (ISO-8859-1 text on the wire) iff its mysqlType says so; TiCDC's own decoder uses
# exactly this rule.
BINARY_MARKERS = ("binary", "blob")


def is_binary_mysql_type(mysql_type: str) -> bool:
    """True when the wire text of this column is bytes mapped to code points (latin-1)."""
    lowered = mysql_type.lower()
    return any(marker in lowered for marker in BINARY_MARKERS)


def binary_from_wire(text: str) -> bytes:
    """Restore the exact bytes of a BINARY/VARBINARY/BLOB value. Never UTF-8."""
    return text.encode("latin-1")


def binary_to_wire(value: bytes) -> str:
    """The inverse of :func:`binary_from_wire`, as TiCDC encodes it before JSON escaping."""
    return value.decode("latin-1")


# -- the codec ---------------------------------------------------------------------------------------------

ENVELOPE = (
    Wire(FIELD_DATABASE, WireType.TEXT),
    Wire(FIELD_TABLE, WireType.TEXT),
    Wire(FIELD_PK_NAMES, WireType.TEXTS),
    Wire(FIELD_IS_DDL, WireType.BOOLEAN),
    Wire(FIELD_TYPE, WireType.TEXT),
    Wire(FIELD_ES, WireType.LONG),
    Wire(FIELD_SQL, WireType.TEXT),
    Wire(FIELD_MYSQL_TYPE, WireType.ROW),
    Wire(FIELD_DATA, WireType.ROWS),
    Wire(FIELD_OLD, WireType.ROWS),
    Wire(
        FIELD_TIDB,
        (
            Wire(TIDB_COMMIT_TS, WireType.LONG),
            Wire(TIDB_WATERMARK_TS, WireType.LONG),
            Wire(TIDB_ONLY_HANDLE_KEY, WireType.BOOLEAN),
            Wire(TIDB_CLAIM_CHECK, WireType.TEXT),
        ),
    ),
)

_TYPE = field(FIELD_TYPE)
_TIDB = field(FIELD_TIDB)
_COMMIT_TS = field(FIELD_TIDB, TIDB_COMMIT_TS)
_WATERMARK_TS = field(FIELD_TIDB, TIDB_WATERMARK_TS)
_IS_DDL = c.IsTrue(field(FIELD_IS_DDL))
_IS_DML = c.In(_TYPE, DML_TYPES) & ~_IS_DDL
_IS_WATERMARK = c.Eq(_TYPE, TYPE_WATERMARK)
# Best effort without the extension: the commit time in ms (es) stands in for commitTs.
_COMMIT_TS_OR_ES = c.Coalesce((_COMMIT_TS, c.TsoFromMillis(field(FIELD_ES))))

EXTENSION_REQUIRED = (
    "the changefeed must set enable-tidb-extension=true; nothing can be ordered or deduplicated without "
    "commitTs and watermarks (--missing-extension offset-order applies such a stream best effort, see the "
    "README)"
)
# Without the extension a DDL has no commitTs: it cannot be placed among the rows.
DDL_WITHOUT_EXTENSION = f"DDL without _tidb.commitTs: {EXTENSION_REQUIRED}"
DML_WITHOUT_EXTENSION = f"message without _tidb: {EXTENSION_REQUIRED}"


def _rules(best_effort: bool) -> tuple[Rule, ...]:
    commit_ts = _COMMIT_TS_OR_ES if best_effort else _COMMIT_TS
    without_extension = (
        ()
        if best_effort
        else (
            Rule(_IS_DDL & c.IsNull(_TIDB), KIND_FATAL, DDL_WITHOUT_EXTENSION),
            Rule(_IS_DML & c.IsNull(_TIDB), KIND_FATAL, DML_WITHOUT_EXTENSION),
        )
    )
    return (
        *without_extension,
        Rule(
            (_IS_DDL | _IS_DML) & c.IsNull(commit_ts),
            KIND_BAD,
            "neither _tidb.commitTs nor es" if best_effort else "_tidb.commitTs missing",
        ),
        Rule(_IS_DDL, KIND_DDL),
        Rule(_IS_WATERMARK & c.IsNull(_WATERMARK_TS), KIND_BAD, "TIDB_WATERMARK without _tidb.watermarkTs"),
        Rule(_IS_WATERMARK, KIND_WATERMARK),
        Rule(
            _IS_DML & present(field(FIELD_TIDB, TIDB_CLAIM_CHECK)), KIND_FATAL, c.CLAIM_CHECK_NOT_CONFIGURED
        ),
        Rule(_IS_DML & c.IsTrue(field(FIELD_TIDB, TIDB_ONLY_HANDLE_KEY)), KIND_FATAL, c.HANDLE_KEY_ONLY),
        Rule(_IS_DML & c.Empty(field(FIELD_DATA)), KIND_BAD, "DML without a row image in data"),
        Rule(
            _IS_DML & (c.IsNull(field(FIELD_DATABASE)) | c.IsNull(field(FIELD_TABLE))),
            KIND_BAD,
            "DML without database/table",
        ),
        Rule(_IS_DML, KIND_DML),
    )


def _columns(best_effort: bool) -> tuple[tuple[str, c.Expr], ...]:
    commit_ts = _COMMIT_TS_OR_ES if best_effort else _COMMIT_TS
    return (
        ("database", field(FIELD_DATABASE)),
        ("table", field(FIELD_TABLE)),
        ("type", _TYPE),
        # A watermark's TSO is its commit_ts column, the one every ordering decision reads.
        ("commit_ts", c.When(_IS_WATERMARK, _WATERMARK_TS, commit_ts)),
        ("sql", field(FIELD_SQL)),
        ("pk_names", field(FIELD_PK_NAMES)),
        ("mysql_type", field(FIELD_MYSQL_TYPE)),
        ("data", c.First(field(FIELD_DATA))),
        ("old", c.First(field(FIELD_OLD))),
        ("claim_check", field(FIELD_TIDB, TIDB_CLAIM_CHECK)),
    )


def control(record: Decoded) -> Control:
    """The model object of a classified DDL or watermark record."""
    assert record.commit_ts is not None  # the rules classify a control record without it as bad
    if record.kind == KIND_DDL:
        table = TableId(record.database or "", record.table or "")
        return Control(
            ddl_event(table, record.commit_ts, record.sql or "", record.type or "", record.position)
        )
    return Control(Watermark(record.commit_ts, record.position))


@cache
def codec(best_effort: bool = False) -> Codec:
    """Canal-JSON; ``best_effort``: messages without the TiDB extension are accepted, with their commit
    time in ms (``es``) as a stand-in commitTs (``es << 18``), and applied in offset order."""
    return Codec(
        name=PROTOCOL,
        types_from=TypesFrom.ROWS,
        has_watermarks=not best_effort,
        has_ddl=True,
        has_old_image=True,
        commit_ts_on_delete=True,
        binary_text=BinaryText.LATIN1,
        envelope=ENVELOPE,
        columns=_columns(best_effort),
        rules=_rules(best_effort),
        control=control,
    )


CODEC = codec()


def control_event(fields: Mapping[str, Any], position: Position) -> DdlEvent | Watermark:
    """The model object of a DDL or watermark message from its parsed envelope fields.

    Raises:
        DecodeError: the message is not a well-formed control message (the rule's message says why).
    """
    record = c.read(CODEC, fields, position)
    if record.kind in (KIND_BAD, KIND_FATAL):
        raise DecodeError(record.error or "", protocol=PROTOCOL, position=position)
    if record.kind not in (KIND_DDL, KIND_WATERMARK):
        raise DecodeError(
            f"not a control message: type {fields.get(FIELD_TYPE)!r}", protocol=PROTOCOL, position=position
        )
    event = control(record).event
    assert event is not None
    return event
