"""The schema changes a DDL plans for one table: what ``plan.schema`` decides and ``pipeline.schema_change``
applies. Pure data."""

from __future__ import annotations

from dataclasses import dataclass

from ingest.model import Column, ColumnType, TableId, TableSchema
from ingest.plan import partitions
from ingest.plan.keys import UniqueKeys
from ingest.plan.partitions import Partitioning, PartitionRows


@dataclass(frozen=True, slots=True)
class CreateTable:
    table: TableId
    schema: TableSchema
    partitioning: Partitioning = partitions.NOT_PARTITIONED
    unique_keys: UniqueKeys | None = None


@dataclass(frozen=True, slots=True)
class AddColumn:
    """Add ``column``; when ``backfill`` is not None, existing rows get that value (wire text)."""

    table: TableId
    column: Column
    first: bool
    after: str | None
    backfill: str | None


@dataclass(frozen=True, slots=True)
class CreateLike:
    """CREATE TABLE ... LIKE: a new empty table with the source's columns and key, as the source was just
    before ``before_ts`` (the DDL's commitTs)."""

    table: TableId
    source: TableId
    before_ts: int | None = None


@dataclass(frozen=True, slots=True)
class CreateTableReplacing(CreateTable):
    """CREATE TABLE of a name whose earlier table was dropped or renamed away: a new table identity."""


@dataclass(frozen=True, slots=True)
class DropColumn:
    table: TableId
    name: str


@dataclass(frozen=True, slots=True)
class RenameColumn:
    table: TableId
    old: str
    new: str


@dataclass(frozen=True, slots=True)
class ChangeType:
    """A column's TiDB type changes. Apply widens the Delta type when Delta allows it, else refuses.
    ``collation``: the one its new definition states."""

    table: TableId
    name: str
    type: ColumnType
    collation: str | None = None


@dataclass(frozen=True, slots=True)
class ChangeGenerated:
    """A VIRTUAL generated column gets a new type or expression: its values are computed again."""

    table: TableId
    column: Column


@dataclass(frozen=True, slots=True)
class Truncate:
    table: TableId


@dataclass(frozen=True, slots=True)
class Retire:
    """The upstream table is gone (dropped, or renamed away): keep a retired mark so replays stay out.

    ``keep_rows``: the DROP TABLE policy ``archive`` keeps the last rows readable, ``delete`` removes
    them. A rename's source always keeps them: the target copies them, possibly after a crash between
    the two steps.
    """

    table: TableId
    reason: str
    keep_rows: bool


@dataclass(frozen=True, slots=True)
class Revive:
    """RECOVER TABLE / FLASHBACK TABLE: the dropped table ``source`` comes back as ``table`` with the rows it
    had at its DROP (TiCDC sends none of them), from the mirror's copy of it as it was just before
    ``before_ts`` (the DDL's commitTs)."""

    table: TableId
    source: TableId
    before_ts: int | None = None


@dataclass(frozen=True, slots=True)
class CopyFrom:
    """RENAME: the new table starts as the old one's rows, schema and key, as the old one was just before
    ``before_ts`` (the RENAME's commitTs)."""

    table: TableId
    source: TableId
    before_ts: int | None = None


@dataclass(frozen=True, slots=True)
class ChangeKey:
    """The handle key TiCDC identifies rows by is now ``key``: the mirror merges on it from here on."""

    table: TableId
    key: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SetUniqueKeys:
    """Record the table's unique indexes as they are after the DDL (the handle key follows from them)."""

    table: TableId
    keys: UniqueKeys


@dataclass(frozen=True, slots=True)
class DeletePartitionRows:
    """TRUNCATE/DROP PARTITION: delete the partitions' rows, then record the definition left after it."""

    table: TableId
    names: tuple[str, ...]
    rows: PartitionRows
    partitioning: Partitioning


@dataclass(frozen=True, slots=True)
class ExchangeRows:
    """EXCHANGE PARTITION, one side of it: the partitioned table's ``rows`` (its partition) trade places with
    all rows of the other table. ``partitioned``: this is the partitioned table, whose partition now holds
    the other table's rows; otherwise this table now holds exactly that partition's rows. Both sides read
    each other as they were just before ``before_ts``, so either may go first and a replay changes nothing.
    """

    table: TableId
    partner: TableId
    rows: PartitionRows
    partitioned: bool
    before_ts: int


@dataclass(frozen=True, slots=True)
class SetPartitioning:
    """ADD PARTITION, ALTER TABLE … PARTITION BY, REMOVE PARTITIONING: no row changes, a new definition."""

    table: TableId
    partitioning: Partitioning


@dataclass(frozen=True, slots=True)
class RecordOnly:
    """Nothing to change in Delta; the DDL is still recorded as applied. ``warning``: the user should
    know (the mirror differs from upstream by design here, e.g. a VIRTUAL column left out)."""

    reason: str
    warning: bool = False


@dataclass(frozen=True, slots=True)
class Reject:
    """A change we do not apply; the run stops before this DDL and progress does not move past it.

    ``unknown``: the statement is one we do not know (or cannot parse), which the ``skip`` policy for
    unknown DDL lets pass with an audit record; a known change we refuse is never skipped.
    """

    reason: str
    unknown: bool = False


SchemaChange = (
    CreateTable
    | AddColumn
    | DropColumn
    | RenameColumn
    | ChangeType
    | ChangeGenerated
    | Truncate
    | Retire
    | CopyFrom
    | Revive
    | CreateLike
    | ChangeKey
    | SetUniqueKeys
    | DeletePartitionRows
    | ExchangeRows
    | SetPartitioning
    | RecordOnly
    | Reject
)
