"""Small data types passed between stages. Pure: no Spark, no Delta."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from enum import Enum

# The columns of a Kafka-shaped message row, whatever the source (captured files or Kafka itself).

MESSAGE_COLUMNS = ("topic", "partition", "offset", "timestamp", "key", "value")
# A normalized change's column naming the values that did not convert ("" when all did).
BAD_COLUMN = "__bad"

# A TiDB TSO is (physical milliseconds << 18) | logical.
TSO_LOGICAL_BITS = 18


def tso_to_datetime(tso: int) -> datetime:
    """Wall-clock (UTC) time of a TiDB TSO."""
    return datetime.fromtimestamp((tso >> TSO_LOGICAL_BITS) / 1000.0, tz=timezone.utc)


def tso_from_datetime(moment: datetime, logical: int = 0) -> int:
    """The TSO of a wall-clock instant (millisecond precision)."""
    return (int(moment.timestamp() * 1000) << TSO_LOGICAL_BITS) | logical


@dataclass(frozen=True, slots=True, order=True)
class PartitionId:
    """One Kafka partition of one topic."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}/{self.partition}"


@dataclass(frozen=True, slots=True)
class Position:
    """A Kafka coordinate: where a record was read."""

    topic: str
    partition: int
    offset: int

    def __str__(self) -> str:
        return f"{self.topic}/{self.partition}@{self.offset}"

    @property
    def partition_id(self) -> PartitionId:
        return PartitionId(self.topic, self.partition)


@dataclass(frozen=True, slots=True, order=True)
class TableId:
    """An upstream table, by database (schema) and table name."""

    schema: str
    table: str

    def __str__(self) -> str:
        return f"{self.schema}.{self.table}"


class ColumnKind(Enum):
    """TiDB column type families, as far as the mirror needs to tell them apart."""

    TINYINT = "tinyint"
    SMALLINT = "smallint"
    MEDIUMINT = "mediumint"
    INT = "int"
    BIGINT = "bigint"
    DECIMAL = "decimal"
    FLOAT = "float"
    DOUBLE = "double"
    CHAR = "char"
    VARCHAR = "varchar"
    TEXT = "text"
    BINARY = "binary"
    VARBINARY = "varbinary"
    BLOB = "blob"
    DATE = "date"
    DATETIME = "datetime"
    TIMESTAMP = "timestamp"
    TIME = "time"
    YEAR = "year"
    ENUM = "enum"
    SET = "set"
    BIT = "bit"
    JSON = "json"
    VECTOR = "vector"


@dataclass(frozen=True, slots=True)
class ColumnType:
    """A TiDB column type such as ``DECIMAL(10,2)`` or ``BIGINT UNSIGNED``.

    ``precision``/``scale`` are None where the wire did not say (Canal-JSON's bare ``decimal``).
    """

    kind: ColumnKind
    unsigned: bool = False
    precision: int | None = None
    scale: int | None = None
    length: int | None = None
    elements: tuple[str, ...] = ()

    def __str__(self) -> str:
        text = self.kind.value
        if self.elements:
            # ENUM/SET keep their members: the mirror turns indexes and bitmasks into labels with them.
            return text + "(" + ",".join("'" + e.replace("'", "''") + "'" for e in self.elements) + ")"
        if self.kind is ColumnKind.DECIMAL and self.precision is not None:
            text += f"({self.precision},{self.scale or 0})"
        elif self.length is not None:
            text += f"({self.length})"
        return text + (" unsigned" if self.unsigned else "")


@dataclass(frozen=True, slots=True)
class Column:
    """One upstream column: name, type, nullability and DEFAULT (as SQL literal text, if any).

    ``virtual``: a VIRTUAL generated column, whose values no protocol carries (TiDB computes them on read);
    ``expression`` is then its MySQL expression, as the DDL wrote it. ``collation``: a text column's, where
    the DDL says it (None: TiDB's default); no value of the column depends on it, so it does not tell two
    columns apart.
    """

    name: str
    type: ColumnType
    nullable: bool = True
    default: str | None = None
    has_default: bool = False
    virtual: bool = False
    expression: str | None = None
    collation: str | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class TableSchema:
    """The columns of an upstream table in order, and the key the mirror merges on."""

    columns: tuple[Column, ...]
    key: tuple[str, ...]

    def column(self, name: str) -> Column | None:
        return next((c for c in self.columns if c.name == name), None)


@dataclass(frozen=True, slots=True)
class VersionedSchema:
    """An upstream table as it was at one schema version (Simple announces them; the schema cache keeps
    them)."""

    table: TableId
    version: int
    schema: TableSchema
    # The schema as it came on the wire (JSON flavour field names), kept for the persisted cache.
    raw: str


class Op(Enum):
    """Kind of a row change, as TiCDC reports it."""

    INSERT = "INSERT"
    UPDATE = "UPDATE"
    DELETE = "DELETE"


@dataclass(frozen=True, slots=True)
class Watermark:
    """TiCDC promises that every change with commit_ts <= ts routed to this partition came before."""

    ts: int
    position: Position


@dataclass(frozen=True, slots=True)
class DdlEvent:
    """A DDL message: the SQL text TiCDC sent, where and when it committed upstream."""

    table: TableId
    commit_ts: int
    sql: str
    ddl_type: str
    position: Position
    # The table's handle key after the DDL, where the protocol says it (Simple's tableSchema indexes).
    handle_key: tuple[str, ...] | None = None
    # The statement as parsed where the event entered (``ingest.mysql.ddl.ddl_event``): planning
    # reads it (``plan.ddl_scope.statement_of``) and never parses the text again. None only for events
    # that are no DDL (a writer-schema change of TiCDC Avro, recorded in the DDL history). Typed loosely
    # because the statement types stand above the model (they are made of its columns and tables).
    statement: object | None = field(default=None, compare=False, repr=False)

    @property
    def identity(self) -> str:
        """What tells two DDLs at the same commit_ts apart (Canal-JSON carries no startTs or seq)."""
        return statement_identity(self.sql)


def statement_identity(sql: str) -> str:
    """A DDL statement with each run of whitespace made one space: the same statement however it is spaced."""
    return " ".join(sql.split())


@dataclass(frozen=True, slots=True)
class TableSignature:
    """Column types and primary key names as one group of DML messages described their table.

    Aggregated on executors; only these summaries reach the driver, never row data.
    """

    table: TableId
    mysql_types: tuple[tuple[str, str], ...]
    pk_names: tuple[str, ...]
    min_commit_ts: int
    max_commit_ts: int
    rows: int
    # Simple protocol: the schema version the rows name (their types come from the schema cache).
    schema_version: int | None = None
    # Rows that carry row-checksum fields (Simple with the changefeed's integrity check on).
    checksummed: int = 0


# Marks the step of a commit that pauses a table's change data feed for a whole-table rewrite.
FEED_PAUSED = " (change feed paused)"


@dataclass(frozen=True)
class TableState:
    """What the mirror knows of one target table, persisted with each of its Delta commits.

    ``applied_ts`` (A_T): every change with commit_ts <= applied_ts is reflected in the table.
    ``ddl_ts`` (D_T) and ``ddl_ids``: the last applied DDL and the identities applied at exactly that ts.
    ``rows_verified`` / ``rows_unverified``: of the rows applied while row checksums were checked, those
    whose checksums matched and those that carried none to check, since the mirror began.
    """

    applied_ts: int = 0
    ddl_ts: int = 0
    ddl_ids: frozenset[str] = field(default_factory=frozenset)
    rows_verified: int = 0
    rows_unverified: int = 0

    def counted(self, verified: int, unverified: int) -> TableState:
        """The state with more checked rows applied."""
        return replace(
            self,
            rows_verified=self.rows_verified + verified,
            rows_unverified=self.rows_unverified + unverified,
        )

    def checksum_fields(self) -> dict[str, int]:
        """The counters as persisted (nothing while no row was ever checked)."""
        if not (self.rows_verified or self.rows_unverified):
            return {}
        return {"rows_verified": self.rows_verified, "rows_unverified": self.rows_unverified}
