"""A protocol as one object: what its records look like, how each is classified, and what it can express.

Each protocol module (``canal_json``, ``simple``, ``ticdc_avro``) builds its :class:`Codec`. The rules
are data: predicates over named envelope fields, each with the kind and message of the records it
matches. ``ingest.source.decoding`` compiles them into Spark columns; :func:`read` evaluates them on one
parsed message in plain Python. Both read the same rules, so each rule is written once. Pure.

Predicates follow SQL's three-valued logic, as Spark evaluates them: a comparison with a null field is
unknown (``None``), and a rule matches only when its predicate is true.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

import orjson

from ingest.decode.compression import Compression
from ingest.model import TSO_LOGICAL_BITS, DdlEvent, Op, Position, VersionedSchema, Watermark

KIND_DML = "dml"
KIND_DDL = "ddl"
KIND_WATERMARK = "watermark"
KIND_BAD = "bad"
KIND_FATAL = "fatal"
KIND_BOOTSTRAP = "bootstrap"
CONTROL_KINDS = (KIND_DDL, KIND_WATERMARK, KIND_BOOTSTRAP)

# The ``type`` of decoded DML records, whatever the protocol calls them on the wire.
TYPE_INSERT = Op.INSERT.value
TYPE_UPDATE = Op.UPDATE.value
TYPE_DELETE = Op.DELETE.value

NOT_A_RECORD = "not a captured Kafka record (topic/partition/offset missing)"
CLAIM_CHECK_NOT_CONFIGURED = (
    "claim-check reference, but no --claim-check-path: set it to the changefeed's claim-check-storage-uri "
    "(any path Spark can read)"
)
HANDLE_KEY_ONLY = (
    "handle-key-only message: the full row must be read back from the upstream TiDB, which the mirror does "
    "not do; use large-message-handle-option=claim-check (or a larger max-message-bytes) in the changefeed"
)


def unknown_type(typ: str | None) -> str:
    """The message of a record that no rule matches: its ``type`` is none the protocol knows."""
    return 'unknown "type" ' + ("null" if typ is None else f"'{typ}'")


class BinaryText(Enum):
    """How a protocol writes bytes as JSON text."""

    LATIN1 = "latin-1"  # Canal-JSON: each byte is the code point of the same number
    BASE64 = "base64"  # Simple JSON, and TiCDC Avro as decoded here: standard padded base64


class TypesFrom(Enum):
    """Where the column types of a protocol's rows come from."""

    ROWS = "rows"  # every row names its columns' types (Canal-JSON's mysqlType)
    ANNOUNCED = "announced"  # rows name a schema version that control messages announce (Simple)
    WRITER_SCHEMA = "writer-schema"  # the registry's writer schema each record names (TiCDC Avro)


class WireType(Enum):
    """The JSON shapes an envelope field is read as. A nested object read as TEXT keeps its JSON text."""

    TEXT = "text"
    LONG = "long"  # TSOs are < 2^63 for centuries: exact as longs, never through a double
    BOOLEAN = "boolean"
    TEXTS = "texts"  # an array of strings
    ROW = "row"  # an object of column name -> text
    ROWS = "rows"  # an array of such objects


@dataclass(frozen=True, slots=True)
class Wire:
    """One envelope field: its name and its shape, or the fields of a nested object."""

    name: str
    type: WireType | tuple[Wire, ...]


# -- expressions over envelope fields ----------------------------------------------------------------------


class Expr:
    """A value computed from one message's envelope fields."""


class Pred:
    """A condition on one message's envelope fields: true, false or unknown (a null compared)."""

    def __and__(self, other: Pred) -> Pred:
        return And(self, other)

    def __or__(self, other: Pred) -> Pred:
        return Or(self, other)

    def __invert__(self) -> Pred:
        return Not(self)


@dataclass(frozen=True, slots=True)
class Field(Expr):
    """An envelope field by its path (``("_tidb", "commitTs")``); null when absent."""

    path: tuple[str, ...]


def field(*path: str) -> Field:
    return Field(path)


@dataclass(frozen=True, slots=True)
class Coalesce(Expr):
    """The first of the values that is not null."""

    values: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class When(Expr):
    """``then`` where the condition is true, else ``otherwise`` (null when not given)."""

    condition: Pred
    then: Expr
    otherwise: Expr | None = None


@dataclass(frozen=True, slots=True)
class TsoFromMillis(Expr):
    """The TSO of a time in milliseconds (logical part 0)."""

    millis: Expr


@dataclass(frozen=True, slots=True)
class JsonField(Expr):
    """A top-level field of a JSON object given as text (or already parsed), as text."""

    json: Expr
    name: str


@dataclass(frozen=True, slots=True)
class First(Expr):
    """The first element of an array (null for an empty one)."""

    array: Expr


@dataclass(frozen=True, slots=True)
class IsNull(Pred):
    value: Expr


@dataclass(frozen=True, slots=True)
class Eq(Pred):
    value: Expr
    constant: str


@dataclass(frozen=True, slots=True)
class In(Pred):
    value: Expr
    constants: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class IsTrue(Pred):
    """True only for a true boolean: null counts as false."""

    value: Expr


@dataclass(frozen=True, slots=True)
class Empty(Pred):
    """An array with no element (unknown for a null array)."""

    array: Expr


@dataclass(frozen=True, slots=True)
class And(Pred):
    left: Pred
    right: Pred


@dataclass(frozen=True, slots=True)
class Or(Pred):
    left: Pred
    right: Pred


@dataclass(frozen=True, slots=True)
class Not(Pred):
    operand: Pred


def present(value: Expr) -> Pred:
    return Not(IsNull(value))


@dataclass(frozen=True, slots=True)
class Rule:
    """Records the predicate holds for are of ``kind``; ``message`` says why, for bad and fatal ones."""

    when: Pred
    kind: str
    message: str = ""


# -- what the driver sees of a control record -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Decoded:
    """One classified record as the decoded columns give it (what control events are built from)."""

    position: Position
    kind: str
    error: str | None = None
    type: str | None = None
    database: str | None = None
    table: str | None = None
    commit_ts: int | None = None
    sql: str | None = None
    # A table schema as JSON text (from Spark) or as the parsed object (from a parsed message).
    table_schema: str | Mapping[str, Any] | None = None
    pre_table_schema: str | Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Control:
    """What a control record tells the driver: the event it places in commit order (None for an
    announcement such as Simple's BOOTSTRAP), and the table schemas it announces."""

    event: DdlEvent | Watermark | None
    schemas: tuple[VersionedSchema, ...] = ()


def _no_control(record: Decoded) -> Control:
    raise ValueError(f"{record.position}: this protocol has no control records")


# One event of a record: its JSON message, or why it is bad.
SplitEvent = tuple[bytes | None, str | None]
# One record's key and value -> its events, in order.
Splitter = Callable[[bytes | None, bytes | None], list[SplitEvent]]


@dataclass(frozen=True)
class Codec:
    """One protocol, chosen once from the configuration: its wire shape, rules and what it can express.

    ``envelope`` empty: the records are not JSON and are decoded record by record (TiCDC Avro).
    ``columns``: each decoded column the protocol fills, as an expression over the envelope; the others
    are null. ``rules``: the first that matches classifies a record; none: an unknown ``type`` (bad).
    ``transcode``: made on each executor, turns a payload into the JSON the envelope reads (Simple Avro).
    ``split``: made on each executor, turns one record (key and value) into the JSON of each event it
    holds, or the reason an event is bad (Open Protocol, whose records batch several events).
    ``has_checksums``: its rows can carry TiDB's row checksums (the ``checksum_*`` decoded columns).
    """

    name: str
    types_from: TypesFrom
    has_watermarks: bool
    has_ddl: bool
    has_old_image: bool
    commit_ts_on_delete: bool
    binary_text: BinaryText
    envelope: tuple[Wire, ...] = ()
    columns: tuple[tuple[str, Expr], ...] = ()
    rules: tuple[Rule, ...] = ()
    transcode: Callable[[], Callable[[bytes], bytes]] | None = None
    split: Callable[[Compression], Splitter] | None = None
    control: Callable[[Decoded], Control] = _no_control
    has_checksums: bool = False

    @property
    def offset_order(self) -> bool:
        """Without watermarks nothing says a batch is complete: rows are applied in offset order."""
        return not self.has_watermarks

    def column(self, name: str) -> Expr | None:
        return next((expr for column, expr in self.columns if column == name), None)


# -- evaluation on one parsed message -------------------------------------------------------------------


def value(expr: Expr, fields: Mapping[str, Any]) -> Any:
    """An expression's value on one parsed message."""
    if isinstance(expr, Field):
        current: Any = fields
        for name in expr.path:
            current = current.get(name) if isinstance(current, Mapping) else None
        return current
    if isinstance(expr, Coalesce):
        return next((v for v in (value(e, fields) for e in expr.values) if v is not None), None)
    if isinstance(expr, When):
        if holds(expr.condition, fields):
            return value(expr.then, fields)
        return None if expr.otherwise is None else value(expr.otherwise, fields)
    if isinstance(expr, TsoFromMillis):
        millis = value(expr.millis, fields)
        return None if millis is None else int(millis) << TSO_LOGICAL_BITS
    if isinstance(expr, JsonField):
        obj = value(expr.json, fields)
        if isinstance(obj, str):
            obj = orjson.loads(obj)
        found = obj.get(expr.name) if isinstance(obj, Mapping) else None
        return None if found is None else str(found)
    if isinstance(expr, First):
        array = value(expr.array, fields)
        return array[0] if array else None
    raise TypeError(f"not an expression: {expr!r}")


def test(pred: Pred, fields: Mapping[str, Any]) -> bool | None:
    """A predicate on one parsed message: True, False, or None (unknown)."""
    if isinstance(pred, IsNull):
        return value(pred.value, fields) is None
    if isinstance(pred, Eq):
        found = value(pred.value, fields)
        return None if found is None else found == pred.constant
    if isinstance(pred, In):
        found = value(pred.value, fields)
        return None if found is None else found in pred.constants
    if isinstance(pred, IsTrue):
        return value(pred.value, fields) is True
    if isinstance(pred, Empty):
        array = value(pred.array, fields)
        return None if array is None else len(array) < 1
    if isinstance(pred, And):
        left, right = test(pred.left, fields), test(pred.right, fields)
        if left is False or right is False:
            return False
        return None if left is None or right is None else True
    if isinstance(pred, Or):
        left, right = test(pred.left, fields), test(pred.right, fields)
        if left is True or right is True:
            return True
        return None if left is None or right is None else False
    if isinstance(pred, Not):
        result = test(pred.operand, fields)
        return None if result is None else not result
    raise TypeError(f"not a predicate: {pred!r}")


def holds(pred: Pred, fields: Mapping[str, Any]) -> bool:
    """Whether a rule with this predicate matches: only a true predicate does."""
    return test(pred, fields) is True


def classify(codec: Codec, fields: Mapping[str, Any]) -> tuple[str, str | None]:
    """The kind of one parsed message and, for a bad or fatal one, why."""
    for rule in codec.rules:
        if holds(rule.when, fields):
            return rule.kind, rule.message or None
    typ = codec.column("type")
    found = None if typ is None else value(typ, fields)
    return KIND_BAD, unknown_type(None if found is None else str(found))


def read(codec: Codec, fields: Mapping[str, Any], position: Position) -> Decoded:
    """One parsed message as the decoded columns give it: the pure counterpart of the Spark decoding."""
    kind, error = classify(codec, fields)

    def column(name: str) -> Any:
        expr = codec.column(name)
        return None if expr is None else value(expr, fields)

    commit_ts = column("commit_ts")
    return Decoded(
        position=position,
        kind=kind,
        error=error,
        type=column("type"),
        database=column("database"),
        table=column("table"),
        commit_ts=None if commit_ts is None else int(commit_ts),
        sql=column("sql"),
        table_schema=column("table_schema"),
        pre_table_schema=column("pre_table_schema"),
    )
