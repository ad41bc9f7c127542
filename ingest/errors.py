"""Every error ingest raises on purpose. One base class, one sentence per subclass."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ingest.model import Position, TableId


class IngestError(Exception):
    """Base class for all ingest errors."""


class ConfigError(IngestError):
    """A job parameter is missing, unknown or invalid."""


class SparkSetupError(IngestError):
    """The local Spark session could not start, typically because its jars could not be fetched."""


class DecodeError(IngestError):
    """A message cannot be decoded; it is quarantined and the batch goes on."""

    def __init__(self, reason: str, *, protocol: str, position: Position | None = None) -> None:
        where = f" at {position}" if position is not None else ""
        super().__init__(f"{protocol}: {reason}{where}")
        self.reason = reason
        self.protocol = protocol
        self.position = position


class SchemaChangeRejected(IngestError):
    """A DDL needs a change we do not apply automatically; the run stops before progress moves.

    With ``table`` and ``commit_ts`` (a DDL refused on one table), only the tables that DDL touches stop,
    just below it, and the rest of the batch goes on (see :class:`TablesStopped`).
    """

    def __init__(self, message: str, *, table: TableId | None = None, commit_ts: int | None = None) -> None:
        super().__init__(message)
        self.table, self.commit_ts = table, commit_ts


class TableFailed(IngestError):
    """One table failed inside a batch (any error but a refused DDL); it stops there and the others go on.

    ``applied_ts`` is what the table holds (its last commit); its later changes wait in the buffer and the
    next batch tries the table again from there.
    """

    def __init__(self, table: TableId, applied_ts: int, cause: BaseException) -> None:
        first = _first_line(cause)
        super().__init__(
            f"{table}: {type(cause).__name__}: {first} (the table holds upstream up to TSO {applied_ts}; its "
            "later changes wait, and every batch tries it again)"
        )
        self.table, self.applied_ts = table, applied_ts


def _first_line(cause: BaseException) -> str:
    """The line of an error that says what happened: a JVM error's own message, not py4j's wrapper."""
    lines = [x.strip() for x in str(cause).splitlines() if x.strip()]
    lines = [x.removeprefix(": ") for x in lines if not x.startswith(("An error occurred while", "at "))]
    return lines[0][:500] if lines else ""


class TablesStopped(IngestError):
    """Some tables stopped (below a DDL the mirror refuses, or on an error of their own); every other table
    was applied and progress moved, and the stopped tables' later changes wait in the buffer.

    ``result`` is the batch's result; ``stopped`` maps each stopped table to its error.
    """

    def __init__(self, stopped: Mapping[TableId, IngestError], result: object) -> None:
        lines = "; ".join(str(exc) for exc in stopped.values())
        super().__init__(
            f"{len(stopped)} table(s) stopped (every other table was applied and progress moved; their later "
            f"changes wait in the buffer): {lines}"
        )
        self.stopped, self.result = dict(stopped), result


class OrderingError(IngestError):
    """Input breaks TiCDC ordering guarantees, or a batch cannot be applied without breaking ours."""


class TooManyBadRecords(IngestError):
    """The share of quarantined records in a batch is above max_bad_ratio; progress is not moved."""


class RegistryUnavailable(IngestError):
    """The schema registry did not answer within the retry budget; nothing was applied."""


class RegistryRefused(IngestError):
    """The schema registry refused the credentials, or its TLS certificate is not trusted: retrying would not
    help; nothing was applied."""


class KafkaRefused(IngestError):
    """The Kafka broker refused the mirror's login, its TLS handshake or its access to the topics: retrying
    would not help; nothing was read or written."""


class AsOfRefused(IngestError):
    """The mirror cannot answer a read as of the TSO asked for (before it started, after its G, or the
    version that held it was vacuumed or cleaned from the log)."""


class ChangesRefused(AsOfRefused):
    """The mirror cannot answer what changed between two TSOs for a table: the range runs backwards, starts
    before the table's change data feed, or holds a re-sync, a drop, or change files VACUUM removed."""


class TablesFailed(IngestError):
    """More than one table of a batch failed; each is named with its error, and progress did not move."""

    def __init__(self, failures: Sequence[tuple[object, BaseException]]) -> None:
        lines = "; ".join(f"{table}: {type(exc).__name__}: {exc}" for table, exc in failures)
        super().__init__(f"{len(failures)} tables failed: {lines}")
        self.failures = list(failures)
