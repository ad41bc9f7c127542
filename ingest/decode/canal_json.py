"""TiCDC Canal-JSON (with ``enable-tidb-extension=true``): wire names and pure decoding.

The row data of DML messages is decoded on Spark executors by
``ingest.spark_decode``, which takes every wire name from here; only control messages (DDL, watermarks)
are turned into model objects on the driver, by :func:`control_event`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ingest.errors import DecodeError
from ingest.model import DdlEvent, Position, TableId, Watermark

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

TYPE_INSERT = "INSERT"
TYPE_UPDATE = "UPDATE"
TYPE_DELETE = "DELETE"
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


def control_event(fields: Mapping[str, Any], position: Position) -> DdlEvent | Watermark:
    """Build the model object of a DDL or watermark message from its already-parsed envelope fields.

    Raises:
        DecodeError: a required field is missing.
    """
    tidb = fields.get(FIELD_TIDB) or {}
    if fields.get(FIELD_IS_DDL):
        commit_ts = tidb.get(TIDB_COMMIT_TS)
        if commit_ts is None:
            raise DecodeError(
                "DDL without _tidb.commitTs; the changefeed must set enable-tidb-extension=true",
                protocol=PROTOCOL,
                position=position,
            )
        return DdlEvent(
            table=TableId(fields.get(FIELD_DATABASE) or "", fields.get(FIELD_TABLE) or ""),
            commit_ts=int(commit_ts),
            sql=fields.get(FIELD_SQL) or "",
            ddl_type=fields.get(FIELD_TYPE) or "",
            position=position,
        )
    if fields.get(FIELD_TYPE) == TYPE_WATERMARK:
        watermark_ts = tidb.get(TIDB_WATERMARK_TS)
        if watermark_ts is None:
            raise DecodeError(
                "TIDB_WATERMARK without _tidb.watermarkTs", protocol=PROTOCOL, position=position
            )
        return Watermark(int(watermark_ts), position)
    raise DecodeError(
        f"not a control message: type {fields.get(FIELD_TYPE)!r}", protocol=PROTOCOL, position=position
    )
