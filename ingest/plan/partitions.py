"""A table's partition definition as the mirror records it, and which rows a partition holds. Pure.

Followed: RANGE / RANGE COLUMNS / LIST / LIST COLUMNS on one column of an integer, DATE or DATETIME type,
and HASH on one signed integer column (TiDB puts a row in partition ``|value mod n|``, NULL in the first;
``locateHashPartition`` in TiDB's table/tables/partition.go). Not followed: string columns (which partition
a string falls in depends on its collation: PAD SPACE, case folding), KEY and LINEAR HASH (TiDB's own hash
functions), BIGINT UNSIGNED under HASH (TiDB reads the bits as a signed number). Such tables are recorded as
``unsupported``: their rows are mirrored, but a TRUNCATE/DROP PARTITION stops.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

import orjson

from ingest.model import ColumnKind, TableSchema
from ingest.mysql.partition import PartitionBy, PartitionDef

RANGE, LIST, HASH, NONE, UNSUPPORTED = "range", "list", "hash", "none", "unsupported"
INTEGER, DATE, DATETIME = "integer", "date", "datetime"

_KINDS = {
    ColumnKind.TINYINT: INTEGER, ColumnKind.SMALLINT: INTEGER, ColumnKind.MEDIUMINT: INTEGER,
    ColumnKind.INT: INTEGER, ColumnKind.BIGINT: INTEGER, ColumnKind.DATE: DATE, ColumnKind.DATETIME: DATETIME,
}  # fmt: skip
_INTEGER = re.compile(r"^[+-]?\d+$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d{1,6})?$")


@dataclass(frozen=True, slots=True)
class Partition:
    """RANGE: rows below ``bound`` (None: MAXVALUE). LIST: rows whose value is in ``values`` (None: NULL),
    or, for the DEFAULT partition, rows no other partition takes."""

    name: str
    bound: str | None = None
    values: tuple[str | None, ...] = ()
    is_default: bool = False


@dataclass(frozen=True, slots=True)
class Partitioning:
    """What the mirror knows of a table's partitions; ``reason`` says why an ``unsupported`` one is."""

    method: str
    column: str = ""
    kind: str = ""
    partitions: tuple[Partition, ...] = ()
    reason: str = ""

    @property
    def followed(self) -> bool:
        return self.method in (RANGE, LIST, HASH)

    def find(self, name: str) -> Partition | None:
        return next((p for p in self.partitions if p.name.lower() == name.lower()), None)

    def to_json(self) -> str:
        body: dict[str, Any] = {"method": self.method}
        if self.followed:
            body.update(
                column=self.column, kind=self.kind, partitions=[_partition_json(p) for p in self.partitions]
            )
        if self.reason:
            body["reason"] = self.reason
        return orjson.dumps(body).decode()


NOT_PARTITIONED = Partitioning(NONE)


def _partition_json(p: Partition) -> dict[str, Any]:
    if p.is_default:
        return {"name": p.name, "default": True}
    if p.values:
        return {"name": p.name, "values": list(p.values)}
    return {"name": p.name, "bound": p.bound}


def from_json(text: str) -> Partitioning:
    body = orjson.loads(text)
    partitions = tuple(
        Partition(p["name"], p.get("bound"), tuple(p.get("values") or ()), bool(p.get("default", False)))
        for p in body.get("partitions") or ()
    )
    return Partitioning(
        body["method"], body.get("column", ""), body.get("kind", ""), partitions, body.get("reason", "")
    )


def unsupported(reason: str) -> Partitioning:
    return Partitioning(UNSUPPORTED, reason=reason)


def from_clause(partition_by: PartitionBy | None, schema: TableSchema) -> Partitioning:
    """The partitioning of a CREATE TABLE (or ALTER TABLE … PARTITION BY) over the table's columns."""
    if partition_by is None:
        return NOT_PARTITIONED
    if partition_by.unsupported:
        return unsupported(partition_by.unsupported)
    column = next((c for c in schema.columns if c.name.lower() == partition_by.column.lower()), None)
    if column is None:
        return unsupported(f"the partition column {partition_by.column} is not a column of the table")
    kind = _KINDS.get(column.type.kind)
    if kind is None:
        return unsupported(
            f"partitions on the {column.type} column {column.name} (followed for integer, DATE and DATETIME "
            "columns only: string partitions depend on the collation)"
        )
    if partition_by.method == "HASH":
        if kind != INTEGER or (column.type.kind is ColumnKind.BIGINT and column.type.unsigned):
            return unsupported(f"PARTITION BY HASH on the {column.type} column {column.name}")
        names = tuple(Partition(p.name) for p in partition_by.partitions)
        return Partitioning(HASH, column.name, kind, names)
    method = RANGE if partition_by.method == "RANGE" else LIST
    base = Partitioning(method, column.name, kind)
    return add(base, partition_by.partitions)


def add(partitioning: Partitioning, definitions: tuple[PartitionDef, ...]) -> Partitioning:
    """ADD PARTITION: the definitions appended (those whose name is already there were added before)."""
    if not partitioning.followed:
        return partitioning
    if partitioning.method == HASH:
        return unsupported("ADD PARTITION (…) on a HASH partitioning")
    partitions = list(partitioning.partitions)
    for definition in definitions:
        if partitioning.find(definition.name) is not None:
            continue
        try:
            partitions.append(_normalized(definition, partitioning.method, partitioning.kind))
        except ValueError as exc:
            return unsupported(f"partition {definition.name}: {exc}")
    return Partitioning(partitioning.method, partitioning.column, partitioning.kind, tuple(partitions))


def drop(partitioning: Partitioning, names: tuple[str, ...]) -> Partitioning:
    """DROP PARTITION: RANGE partitions above a dropped one now start at the bound below it."""
    lowered = {n.lower() for n in names}
    kept = tuple(p for p in partitioning.partitions if p.name.lower() not in lowered)
    return Partitioning(partitioning.method, partitioning.column, partitioning.kind, kept)


def reorganize(
    partitioning: Partitioning, names: tuple[str, ...], definitions: tuple[PartitionDef, ...]
) -> Partitioning:
    """REORGANIZE PARTITION names INTO (definitions): the new partitions take the place of the first named
    one (RANGE partitions stay in bound order), the named ones leave. Rows do not change."""
    if not partitioning.followed:
        return partitioning
    if partitioning.method == HASH:
        return unsupported("REORGANIZE PARTITION on a HASH partitioning")
    lowered = {n.lower() for n in names}
    if any(partitioning.find(n) is None for n in names):
        return unsupported(f"REORGANIZE PARTITION {', '.join(names)}: not all of them are in the definition")
    try:
        new = [_normalized(d, partitioning.method, partitioning.kind) for d in definitions]
    except ValueError as exc:
        return unsupported(f"REORGANIZE PARTITION: {exc}")
    partitions: list[Partition] = []
    for partition in partitioning.partitions:
        if partition.name.lower() not in lowered:
            partitions.append(partition)
        elif new:
            partitions.extend(new)
            new = []
    return Partitioning(partitioning.method, partitioning.column, partitioning.kind, tuple(partitions))


def recount(partitioning: Partitioning, by: int) -> Partitioning:
    """COALESCE PARTITION n / ADD PARTITION PARTITIONS n on HASH: TiDB renumbers them p0 … p<count-1>."""
    if partitioning.method != HASH:
        return partitioning
    count = len(partitioning.partitions) + by
    if count < 1:
        return unsupported(f"{count} HASH partitions")
    names = tuple(Partition(f"p{i}") for i in range(count))
    return Partitioning(HASH, partitioning.column, partitioning.kind, names)


def _normalized(definition: PartitionDef, method: str, kind: str) -> Partition:
    if definition.is_default:
        if method != LIST:
            raise ValueError("DEFAULT is a LIST partition")
        return Partition(definition.name, is_default=True)
    if method == RANGE:
        if definition.values:
            raise ValueError("VALUES IN in a RANGE partitioning")
        bound = None if definition.bound is None else _value(definition.bound, kind)
        return Partition(definition.name, bound=bound)
    if not definition.values:
        raise ValueError("VALUES LESS THAN in a LIST partitioning")
    values = tuple(None if v is None else _value(v, kind) for v in definition.values)
    return Partition(definition.name, values=values)


def _value(text: str, kind: str) -> str:
    """A literal as the Delta column compares it: canonical integer, date or datetime text."""
    text = text.strip()
    if kind == INTEGER and _INTEGER.match(text):
        return str(int(text))
    if kind == DATE and _DATE.match(text):
        return date.fromisoformat(text).isoformat()
    if kind == DATETIME and _DATE.match(text):
        return datetime.fromisoformat(text).isoformat(sep=" ")
    if kind == DATETIME and _DATETIME.match(text):
        return datetime.fromisoformat(text.ljust(26, "0") if "." in text else text).isoformat(sep=" ")
    raise ValueError(f"{text!r} is not a literal {kind} value")


# -- which rows a partition holds, as data (apply turns it into a Delta predicate) ---------------------------
@dataclass(frozen=True, slots=True)
class IsNull:
    pass


@dataclass(frozen=True, slots=True)
class InRange:
    """``low <= value < high``; either end may be open (None)."""

    low: str | None
    high: str | None


@dataclass(frozen=True, slots=True)
class InValues:
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class HashRemainder:
    """``|value mod modulus| = remainder`` (the sign of ``value mod n`` follows ``value``)."""

    modulus: int
    remainder: int


@dataclass(frozen=True, slots=True)
class NoneOf:
    """Rows none of ``clauses`` takes (NULL-safe): LIST's DEFAULT partition."""

    clauses: tuple[Clause, ...]


Clause = IsNull | InRange | InValues | HashRemainder | NoneOf


@dataclass(frozen=True, slots=True)
class PartitionRows:
    """The rows of some partitions: those of ``column`` (a ``kind`` value) that any clause takes."""

    column: str
    kind: str
    clauses: tuple[Clause, ...]


def rows_of(partitioning: Partitioning, names: tuple[str, ...]) -> PartitionRows:
    """The rows the named partitions hold (names not in the definition hold none)."""
    lowered = {n.lower() for n in names}
    clauses: list[Clause] = []
    for index, partition in enumerate(partitioning.partitions):
        if partition.name.lower() in lowered:
            clauses.extend(_clauses(partitioning, index))
    return PartitionRows(partitioning.column, partitioning.kind, tuple(clauses))


def _clauses(partitioning: Partitioning, index: int) -> list[Clause]:
    partition = partitioning.partitions[index]
    if partitioning.method == HASH:
        count = len(partitioning.partitions)
        return [HashRemainder(count, index), *([IsNull()] if index == 0 else [])]
    if partitioning.method == RANGE:
        low = partitioning.partitions[index - 1].bound if index else None
        # MySQL and TiDB put NULL (below every value) into the first RANGE partition.
        return [InRange(low, partition.bound), *([IsNull()] if index == 0 else [])]
    if partition.is_default:
        others = [
            c
            for i, p in enumerate(partitioning.partitions)
            if not p.is_default
            for c in _clauses(partitioning, i)
        ]
        return [NoneOf(tuple(others))]
    listed = tuple(v for v in partition.values if v is not None)
    return [*([InValues(listed)] if listed else []), *([IsNull()] if None in partition.values else [])]
