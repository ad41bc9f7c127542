"""The values settings take (protocols, sources, policies) and the Kafka source's options. No I/O."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import TypeVar

from ingest import parameters, secrets
from ingest.errors import ConfigError

_RUN = parameters.by_key(parameters.RUN)
KAFKA_OPTION_PREFIX = "kafka."
_INTERVAL = re.compile(r"^\d+ (milliseconds?|seconds?|minutes?|hours?)$")

E = TypeVar("E", bound=Enum)


def choice(
    params: Mapping[str, str],
    key: str,
    kind: type[E],
    table: Mapping[str, parameters.Parameter] | None = None,
) -> E:
    """An enum-valued parameter (of the run's table unless given another); the error names the key, the
    value and every accepted value."""
    text = parameters.value(params, (table or _RUN)[key]) or ""
    try:
        return kind(text)
    except ValueError as exc:
        accepted = ", ".join(str(member.value) for member in kind)
        raise ConfigError(f"{key}: {text!r} is not supported; use one of: {accepted}") from exc


class Protocol(Enum):
    """The TiCDC protocol the changefeed writes."""

    CANAL_JSON = "canal-json"
    SIMPLE = "simple"
    AVRO = "avro"  # TiCDC Avro, Confluent wire format with a schema registry: per-key convergence only
    OPEN_PROTOCOL = "open-protocol"  # TiCDC's default protocol: batches of events, watermarks, DDL text
    CSV = "csv"  # the storage sink's CSV: rows with the [sink.csv] options, schema files, the checkpoint
    DEBEZIUM = "debezium"  # rows only, each with its Connect schema: per-key convergence, keys given

    @classmethod
    def _missing_(cls, value: object) -> Protocol | None:
        # TiCDC's own name for Open Protocol (pkg/config/sink_protocol.go): a changefeed that never chose one.
        return cls.OPEN_PROTOCOL if value == "default" else None


class SimpleEncoding(Enum):
    """The Simple protocol's ``encoding-format``."""

    JSON = "json"
    AVRO = "avro"


class SourceKind(Enum):
    """Where the records come from."""

    FILES = "files"
    KAFKA = "kafka"


class Trigger(Enum):
    """When a Kafka stream runs its micro-batches."""

    AVAILABLE_NOW = "available-now"  # read everything there is now, in batches, then stop
    PROCESSING_TIME = "processing-time"  # keep mirroring, one batch per trigger-interval


class InputFormat(Enum):
    """How the files source reads its input directory."""

    AUTO = "auto"  # a storage-sink layout if <input>/metadata holds a checkpoint-ts, else line by line
    RECORDS = "records"  # captured records: value and key in base64
    KCAT = "kcat"  # `kcat -J` envelopes: payload and key as JSON strings
    STORAGE = "storage"  # TiCDC's storage-sink layout (Canal-JSON or CSV files)


class DropTablePolicy(Enum):
    """What DROP TABLE (and DROP DATABASE) does to the mirrored table."""

    ARCHIVE = "archive"  # keep the last rows readable, marked retired
    DELETE = "delete"  # delete the rows, keep the retired mark


class Compaction(Enum):
    """Whether the tables the mirror creates compact their small files after writes."""

    AUTO = "auto"  # Delta auto compaction (delta.autoOptimize.autoCompact)
    OFF = "off"  # left to the user's own OPTIMIZE


class ChangeFeed(Enum):
    """Whether the mirrored tables record Delta's change data feed, which ``changes`` reads."""

    ON = "on"  # delta.enableChangeDataFeed on every mirrored table
    OFF = "off"


class TypeChangePolicy(Enum):
    """What a MODIFY/CHANGE COLUMN that Delta cannot apply as type widening does."""

    FAIL = "fail"  # stop before it, naming table, column, old -> new type and position
    REWRITE = "rewrite"  # rewrite the table with the column cast to the new type


class RowChecksums(Enum):
    """Whether the rows' TiDB checksums (Simple and Avro with ``integrity-check-level = "correctness"``)
    are checked before anything is applied."""

    VERIFY = "verify"  # check every row image that carries one; a stream without them is mirrored as it is
    REQUIRE = "require"  # the same, and a row that carries none (apart from a split update's halves) is bad
    OFF = "off"  # do not check


class UnknownDdlPolicy(Enum):
    """What a DDL the mirror does not know (or cannot parse) does to the run."""

    FAIL = "fail"  # stop before it, progress not moved
    SKIP = "skip"  # record it in the DDL history as skipped and go on


class MissingExtensionPolicy(Enum):
    """What Canal-JSON without ``enable-tidb-extension`` (no commitTs, no watermarks) does to the run."""

    FAIL = "fail"  # stop at once: nothing can be ordered or deduplicated exactly
    OFFSET_ORDER = "offset-order"  # best effort: apply in offset order, commit time from "es" (ms)


# Kafka option names whose values are secrets whatever they say (SASL JAAS lines, key and trust store
# passwords, OAuth tokens).
SECRET_WORDS = ("password", "jaas", "secret", "token", "key")


@dataclass(frozen=True, repr=False)
class KafkaSource:
    """Where and how a Kafka stream reads. Our progress, not Spark's checkpoint, owns the positions."""

    bootstrap_servers: str
    topics: tuple[str, ...] = ()
    topic_pattern: str | None = None
    trigger: Trigger = Trigger.AVAILABLE_NOW
    trigger_interval: str = "30 seconds"
    checkpoint_location: str = ""  # default: <state-path>/checkpoints/<stream-id>
    max_offsets_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    # kafka.* passed to Spark as they are; shown by ``shown_options``, for they may hold a secret (SASL)
    options: Mapping[str, str] = field(default_factory=dict, repr=False)

    @property
    def shown_options(self) -> dict[str, str]:
        """The options as they may be logged: values of keys that name a secret masked, and every resolved
        secret reference masked wherever it appears."""
        return {
            key: secrets.MASK if any(word in key.lower() for word in SECRET_WORDS) else secrets.redact(value)
            for key, value in self.options.items()
        }

    def __repr__(self) -> str:
        shown = {name: getattr(self, name) for name in self.__dataclass_fields__ if name != "options"}
        fields = ", ".join(f"{name}={value!r}" for name, value in shown.items())
        return f"KafkaSource({fields}, options={self.shown_options!r})"

    def __post_init__(self) -> None:
        if not self.bootstrap_servers:
            raise ConfigError(
                "kafka-bootstrap-servers: required with --source kafka, e.g. --kafka-bootstrap-servers "
                "broker1:9092,broker2:9092"
            )
        if bool(self.topics) == bool(self.topic_pattern):
            raise ConfigError(
                "topics / topic-pattern: give exactly one, e.g. --topics tidb_cdc,other or "
                "--topic-pattern 'tidb_cdc_.*'"
            )
        if self.topic_pattern is not None:
            try:
                re.compile(self.topic_pattern)
            except re.error as exc:
                raise ConfigError(
                    f"topic-pattern: {self.topic_pattern!r} is not a regular expression: {exc}"
                ) from exc
        if not _INTERVAL.match(self.trigger_interval):
            raise ConfigError(
                f"trigger-interval: {self.trigger_interval!r} is not an interval; write e.g. '30 seconds', "
                "'500 milliseconds' or '5 minutes'"
            )
        if self.max_offsets_per_trigger is not None and self.max_offsets_per_trigger < 1:
            raise ConfigError(
                "max-offsets-per-trigger: must be a positive number of records, got "
                f"{self.max_offsets_per_trigger}"
            )


KAFKA_KEYS = {p.key for p in parameters.RUN if p.group == parameters.KAFKA}


def kafka_from_params(params: Mapping[str, str], options: Mapping[str, str]) -> KafkaSource:
    bootstrap = params.get("kafka-bootstrap-servers", "")
    passed = options.get("kafka.bootstrap.servers")
    if passed and bootstrap and passed != bootstrap:
        raise ConfigError(
            f"kafka-bootstrap-servers ({bootstrap!r}) and kafka.bootstrap.servers ({passed!r}) disagree; "
            "give only one"
        )
    limit_text = params.get("max-offsets-per-trigger")
    try:
        limit = int(limit_text) if limit_text else None
    except ValueError as exc:
        raise ConfigError(f"max-offsets-per-trigger: {limit_text!r} is not a whole number") from exc
    return KafkaSource(
        bootstrap_servers=bootstrap or passed or "",
        topics=tuple(t.strip() for t in params.get("topics", "").split(",") if t.strip()),
        topic_pattern=params.get("topic-pattern") or None,
        trigger=choice(params, "trigger", Trigger),
        trigger_interval=(parameters.value(params, _RUN["trigger-interval"]) or "").strip(),
        checkpoint_location=params.get("checkpoint-location", ""),
        max_offsets_per_trigger=limit,
        fail_on_data_loss=parameters.flag(params, _RUN["fail-on-data-loss"]),
        options={k: v for k, v in options.items() if k != "kafka.bootstrap.servers"},
    )
