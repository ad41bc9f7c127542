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


class TablesStopped(IngestError):
    """Some tables stopped just below a DDL the mirror refuses; every other table was applied and progress
    moved, and the stopped tables' later changes wait in the buffer until the DDL can be applied.

    ``result`` is the batch's result; ``stopped`` maps each stopped table to its error.
    """

    def __init__(self, stopped: Mapping[TableId, SchemaChangeRejected], result: object) -> None:
        lines = "; ".join(str(exc) for exc in stopped.values())
        super().__init__(
            f"{len(stopped)} table(s) stopped before a DDL the mirror does not apply (every other table was "
            f"applied and progress moved; their later changes wait in the buffer): {lines}"
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


class TablesFailed(IngestError):
    """More than one table of a batch failed; each is named with its error, and progress did not move."""

    def __init__(self, failures: Sequence[tuple[object, BaseException]]) -> None:
        lines = "; ".join(f"{table}: {type(exc).__name__}: {exc}" for table, exc in failures)
        super().__init__(f"{len(failures)} tables failed: {lines}")
        self.failures = list(failures)
