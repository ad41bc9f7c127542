"""The job configuration, built once at the edge from named parameters. No I/O here."""

from __future__ import annotations

import logging
import os
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ingest import parameters, secrets
from ingest.decode import canal_json, debezium, open_protocol, simple, storage_csv, ticdc_avro
from ingest.decode.codec import Codec
from ingest.decode.compression import Compression
from ingest.decode.storage_csv import CsvOptions
from ingest.errors import ConfigError
from ingest.lake import names as catalog_names
from ingest.lake.mirror import Mirror
from ingest.model import ColumnKind, ColumnType, PartitionId, TableId
from ingest.settings import KAFKA_KEYS, KAFKA_OPTION_PREFIX, choice, kafka_from_params
from ingest.settings import (  # re-exported: the values settings take
    ChangeFeed as ChangeFeed,
)
from ingest.settings import (
    Compaction as Compaction,
)
from ingest.settings import (
    DropTablePolicy as DropTablePolicy,
)
from ingest.settings import (
    InputFormat as InputFormat,
)
from ingest.settings import (
    KafkaSource as KafkaSource,
)
from ingest.settings import (
    MissingExtensionPolicy as MissingExtensionPolicy,
)
from ingest.settings import (
    Protocol as Protocol,
)
from ingest.settings import (
    RowChecksums as RowChecksums,
)
from ingest.settings import (
    SimpleEncoding as SimpleEncoding,
)
from ingest.settings import (
    SourceKind as SourceKind,
)
from ingest.settings import (
    Trigger as Trigger,
)
from ingest.settings import (
    TypeChangePolicy as TypeChangePolicy,
)
from ingest.settings import (
    UnknownDdlPolicy as UnknownDdlPolicy,
)

logger = logging.getLogger(__name__)


STATE_DIR_NAME = "_ingest"
DEFAULT_TARGET_SCHEMA = "{database}"
DEFAULT_STATE_SCHEMA = "ticdc_ingest"
_RUN = parameters.by_key(parameters.RUN)
CSV_PREFIX = "sink-csv-"


def absolute_local_path(path: str) -> str:
    """A relative local path made absolute; URIs (``s3a://``, ``dbfs:/``) and absolute paths unchanged."""
    if not path or path.startswith("/") or re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", path):
        return path
    return os.path.abspath(path)


CHECKPOINTS_DIR_NAME = "checkpoints"


def _whole(number: float) -> int:
    if number != int(number) or number < 1:
        raise ConfigError(f"table-parallelism must be a whole number >= 1, got {number:g}")
    return int(number)


@dataclass(frozen=True)
class IngestConfig:
    """Everything one run needs to know. Build it with :meth:`from_params`."""

    input_path: str
    target_path: str = ""
    protocol: Protocol = Protocol.CANAL_JSON
    simple_encoding: SimpleEncoding = SimpleEncoding.JSON
    compression: Compression = Compression.NONE
    claim_check_path: str | None = None
    claim_check_raw_value: bool = False
    source: SourceKind = SourceKind.FILES
    state_path: str = ""
    timezone: str = "UTC"
    partitions: frozenset[PartitionId] | None = None
    table_name_template: str | None = None
    max_bad_ratio: float = 0.0
    # Tables of one batch applied at once, each from its own driver thread.
    table_parallelism: int = 4
    stream_id: str = "default"
    drop_table: DropTablePolicy = DropTablePolicy.ARCHIVE
    compaction: Compaction = Compaction.AUTO
    change_feed: ChangeFeed = ChangeFeed.ON
    unknown_ddl: UnknownDdlPolicy = UnknownDdlPolicy.FAIL
    type_change: TypeChangePolicy = TypeChangePolicy.REWRITE
    row_checksums: RowChecksums = RowChecksums.VERIFY
    input_format: InputFormat = InputFormat.AUTO
    csv: CsvOptions | None = None  # --protocol csv: the changefeed's [sink.csv] options
    schema_registry: str | None = None
    schema_registry_timeout: float = 60.0
    # Credentials stay out of the config's repr (and so out of any log line or error that prints it).
    schema_registry_user_info: str | None = field(default=None, repr=False)
    schema_registry_bearer_token: str | None = field(default=None, repr=False)
    schema_registry_ca_file: str | None = None
    schema_registry_cert_file: str | None = None
    schema_registry_key_file: str | None = None
    missing_extension: MissingExtensionPolicy = MissingExtensionPolicy.FAIL
    # TiCDC Avro: the DEFAULT of a column whose Avro field cannot carry it (a logical type with a null
    # default), as TiDB renders it; rows written before the column was added read it.
    column_defaults: Mapping[TableId, Mapping[str, str]] = field(default_factory=dict)
    # The TiDB type of a DECIMAL column whose precision the stream does not say (Canal-JSON tables known
    # only from DML, TiCDC Avro in string mode); without it such a column keeps its exact digits as text.
    column_types: Mapping[TableId, Mapping[str, ColumnType]] = field(default_factory=dict)
    # Debezium: each table's key columns by table pattern (its records name none), the first match counts.
    table_keys: tuple[tuple[str, tuple[str, ...]], ...] = ()
    extra: Mapping[str, str] = field(default_factory=dict)
    kafka: KafkaSource | None = None
    # By name: the catalog the mirrored tables are created in, their schema (a template on {database}), and
    # the schema of the mirror's own state tables; then there is no target path.
    target_catalog: str | None = None
    target_schema: str = DEFAULT_TARGET_SCHEMA
    state_schema: str | None = None

    @property
    def by_name(self) -> bool:
        """Whether the mirrored tables are catalog tables addressed by name (else Delta tables at paths)."""
        return self.target_catalog is not None

    @property
    def auto_compaction(self) -> bool:
        """Whether the tables this mirror creates turn Delta auto compaction on."""
        return self.compaction is Compaction.AUTO

    @property
    def records_changes(self) -> bool:
        """Whether mirrored tables carry Delta's change data feed (turned on at a table's next batch)."""
        return self.change_feed is ChangeFeed.ON

    def __post_init__(self) -> None:
        if self.source is SourceKind.KAFKA and self.kafka is None:
            raise ConfigError(
                "source kafka needs --kafka-bootstrap-servers and --topics (or --topic-pattern)"
            )
        if self.source is SourceKind.FILES and not self.input_path:
            raise ConfigError("input: a directory of captured Kafka records is required (--input DIR)")
        if self.by_name:
            self._check_by_name()
        elif not self.target_path:
            raise ConfigError(
                "target-path: a directory for the Delta tables is required (--target-path DIR), or "
                "--target-catalog to mirror into catalog tables by name"
            )
        if not 0.0 <= self.max_bad_ratio <= 1.0:
            raise ConfigError(f"max-bad-ratio must be in [0, 1], got {self.max_bad_ratio}")
        if self.table_parallelism < 1:
            raise ConfigError(f"table-parallelism must be a whole number >= 1, got {self.table_parallelism}")
        if not self.stream_id or any(ord(c) < 0x20 for c in self.stream_id):
            raise ConfigError(
                f"stream-id: {self.stream_id!r} must be non-empty and hold no control character"
            )
        try:
            ZoneInfo(self.timezone)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ConfigError(
                f"timezone: {self.timezone!r} is not an IANA time zone name; use the TiCDC server's zone, "
                "e.g. UTC or Asia/Shanghai"
            ) from exc
        if self.table_name_template is not None:
            try:
                self.table_name_template.format(database="d", table="t")
            except (KeyError, IndexError, ValueError) as exc:
                raise ConfigError(
                    f"table-name-template: {self.table_name_template!r} may only use {{database}} and "
                    "{table}, e.g. 'main.{database}.{table}'"
                ) from exc
            if _in_a_volume(self.target_path):
                raise ConfigError(
                    f"table-name-template: Unity Catalog cannot define a table on files in a volume, and "
                    f"target-path {self.target_path!r} is one; to register the mirrored tables, put the "
                    "mirror under an external location (s3://, abfss://, gs://), or drop "
                    "table-name-template and read the tables by path"
                )
        if self.input_format is InputFormat.STORAGE and self.protocol not in (
            Protocol.CANAL_JSON,
            Protocol.CSV,
        ):
            raise ConfigError(
                "input-format: the storage-sink layout is read for --protocol canal-json and csv only; "
                f"got protocol {self.protocol.value}"
            )
        csv_elsewhere = self.source is SourceKind.KAFKA or self.input_format not in (
            InputFormat.AUTO,
            InputFormat.STORAGE,
        )
        if self.protocol is Protocol.CSV and csv_elsewhere:
            raise ConfigError(
                "protocol: csv is what TiCDC's storage sink writes; read it with --source files and --input "
                "at the sink's root (--input-format storage or auto)"
            )
        self._check_protocol_options()
        if self.by_name:
            return
        # Delta's SQL (delta.`path`) takes absolute paths only: a relative local path is read against the
        # working directory here, once, instead of failing at the first ALTER TABLE.
        object.__setattr__(self, "target_path", absolute_local_path(self.target_path))
        if not self.state_path:
            object.__setattr__(self, "state_path", self.target_path.rstrip("/") + "/" + STATE_DIR_NAME)
        object.__setattr__(self, "state_path", absolute_local_path(self.state_path))

    def _check_by_name(self) -> None:
        catalog = (self.target_catalog or "").strip()
        if not catalog:
            raise ConfigError("target-catalog: empty; name the catalog, e.g. main (spark_catalog locally)")
        why = catalog_names.check_part(catalog, "target-catalog:")
        if why:
            raise ConfigError(why)
        if self.target_path:
            raise ConfigError(
                f"target-path ({self.target_path!r}) and target-catalog ({catalog!r}): give one; a mirror "
                "is either catalog tables by name or Delta tables at paths"
            )
        if self.state_path and not isinstance(self.state_path, catalog_names.SchemaName):
            raise ConfigError(
                "state-path: with target-catalog the mirror's state is catalog tables too; name their schema "
                "with --state-schema instead"
            )
        if self.table_name_template is not None:
            raise ConfigError(
                "table-name-template: registers path tables in a catalog; with target-catalog the tables "
                "are catalog tables already, so drop it"
            )
        try:
            self.target_schema.format(database="d")
        except (KeyError, IndexError, ValueError) as exc:
            raise ConfigError(
                f"target-schema: {self.target_schema!r} may only use {{database}}, e.g. 'tidb_{{database}}'"
            ) from exc
        if self.kafka is not None and not self.kafka.checkpoint_location:
            raise ConfigError(
                "checkpoint-location: required with --source kafka and target-catalog (there is no target "
                "path to keep Spark's checkpoint under), e.g. a volume path such as "
                "/Volumes/main/tidb/checkpoints/mirror"
            )
        state = catalog_names.parse_schema(self.state_schema or DEFAULT_STATE_SCHEMA, "state-schema")
        if len(state.parts) == 1:
            state = catalog_names.SchemaName(catalog, *state.parts)
        object.__setattr__(self, "target_catalog", catalog)
        object.__setattr__(self, "state_path", state)

    def _check_protocol_options(self) -> None:
        avro = self.protocol is Protocol.AVRO
        if avro and not self.schema_registry:
            raise ConfigError(
                "schema-registry: --protocol avro needs the URL of the changefeed's Confluent-compatible "
                "schema registry (its schema-registry option), e.g. --schema-registry http://registry:8081"
            )
        if not avro and self.schema_registry:
            raise ConfigError(
                "schema-registry applies to --protocol avro only; remove it or set the protocol"
            )
        if avro and self.compression is not Compression.NONE:
            raise ConfigError("compression: TiCDC does not compress Avro messages; remove --compression")
        if avro and self.claim_check_path:
            raise ConfigError("claim-check-path: TiCDC Avro has no claim-check; remove --claim-check-path")
        if self.protocol is Protocol.OPEN_PROTOCOL and self.claim_check_path:
            raise ConfigError(
                "claim-check-path: the mirror does not read Open Protocol claim-check files; remove "
                "--claim-check-path and set the changefeed's large-message-handle-option to none with a "
                "larger max-message-bytes, or use --protocol canal-json"
            )
        self._check_debezium_options()
        if self.row_checksums is RowChecksums.REQUIRE and not self.codec.has_checksums:
            raise ConfigError(
                f"row-checksums = require: --protocol {self.protocol.value} carries no row checksums; TiCDC "
                "writes them with --protocol simple or avro and the changefeed's [integrity] "
                'integrity-check-level = "correctness" (or set row-checksums to verify or off)'
            )
        if (
            self.missing_extension is MissingExtensionPolicy.OFFSET_ORDER
            and self.protocol is not Protocol.CANAL_JSON
        ):
            raise ConfigError("missing-extension applies to --protocol canal-json only; remove it")
        self._check_registry_access()
        if self.schema_registry_timeout <= 0:
            raise ConfigError(
                "schema-registry-timeout must be a positive number of seconds, "
                f"got {self.schema_registry_timeout}"
            )

    def _check_debezium_options(self) -> None:
        debezium_ = self.protocol is Protocol.DEBEZIUM
        if not debezium_ and self.table_keys:
            raise ConfigError("table-keys applies to --protocol debezium only; remove it or set the protocol")
        loose = [
            f"{table}.{name}={column_type}"
            for table, columns in self.column_types.items()
            for name, column_type in columns.items()
            if column_type.kind is not ColumnKind.DECIMAL
        ]
        if loose and not debezium_:
            raise ConfigError(
                f"column-types: {', '.join(loose)}: only a DECIMAL's precision can be given, except under "
                "--protocol debezium, whose records cannot tell BIGINT UNSIGNED or binary columns"
            )
        if not debezium_:
            return
        if not self.table_keys:
            raise ConfigError(
                "table-keys: --protocol debezium needs each table's key columns, since TiCDC's Debezium "
                "records carry no key: e.g. --table-keys 'shop.orders=id;shop.*=id'"
            )
        if self.timezone != "UTC":
            raise ConfigError(
                f"timezone: Debezium sends TIMESTAMP values in UTC whatever the changefeed's zone, so "
                f"{self.timezone!r} would shift them; remove --timezone"
            )
        if self.claim_check_path:
            raise ConfigError(
                "claim-check-path: TiCDC's Debezium has no claim-check; remove --claim-check-path"
            )

    def _check_registry_access(self) -> None:
        files = {
            "schema-registry-ca-file": self.schema_registry_ca_file,
            "schema-registry-cert-file": self.schema_registry_cert_file,
            "schema-registry-key-file": self.schema_registry_key_file,
        }
        settings = {
            "schema-registry-user-info": self.schema_registry_user_info,
            "schema-registry-bearer-token": self.schema_registry_bearer_token,
            **files,
        }
        given = [key for key, value in settings.items() if value]
        if given and not self.schema_registry:
            raise ConfigError(f"{', '.join(given)}: set only with --schema-registry (--protocol avro)")
        if self.schema_registry_user_info and self.schema_registry_bearer_token:
            raise ConfigError(
                "schema-registry-user-info and schema-registry-bearer-token: give one of them, not both"
            )
        if self.schema_registry_user_info is not None and ":" not in self.schema_registry_user_info:
            raise ConfigError(
                "schema-registry-user-info must be user:password (for Confluent Cloud: the API key, a colon, "
                "the API secret)"
            )
        if self.schema_registry_key_file and not self.schema_registry_cert_file:
            raise ConfigError("schema-registry-key-file needs --schema-registry-cert-file, the certificate")
        for key, file in files.items():
            if file and not os.path.isfile(file):
                raise ConfigError(f"{key}: no file at {file}")
        url = self.schema_registry or ""
        password = urllib.parse.urlsplit(url).password
        if password:
            secrets.remember(password)  # user info in the URL: masked in every log line like a secret
        if (given or "@" in url) and url.startswith("http:"):
            logger.warning(
                "schema-registry: credentials or TLS settings are given for a plain http:// registry; "
                "they travel unencrypted: use https://"
            )

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> IngestConfig:
        """Build a config from job parameters, notebook widgets or CLI flags (all strings).

        Raises:
            ConfigError: a key is unknown or a value is invalid; the message names both.
        """
        # kafka.* options go to the Kafka client as they are: their names are Kafka's, not ours.
        options = resolved(
            {k: v for k, v in params.items() if k.startswith(KAFKA_OPTION_PREFIX) and v is not None}
        )
        normalized = resolved(
            parameters.normalize({k: v for k, v in params.items() if k not in options}, parameters.RUN)
        )
        source = choice(normalized, "source", SourceKind)
        protocol = choice(normalized, "protocol", Protocol)
        if "simple-encoding" in normalized and protocol is not Protocol.SIMPLE:
            raise ConfigError(
                "simple-encoding applies to --protocol simple only; remove it or set the protocol"
            )
        partitions = normalized.get("partitions")
        kafka_given = sorted((set(normalized) & KAFKA_KEYS) | set(options))
        if source is not SourceKind.KAFKA and kafka_given:
            raise ConfigError(f"{', '.join(kafka_given)}: only apply with --source kafka")
        if source is SourceKind.KAFKA and "input" in normalized:
            raise ConfigError("input: not used with --source kafka; drop it, or use --source files")
        return cls(
            source=source,
            input_path=normalized.get("input", ""),
            protocol=protocol,
            simple_encoding=choice(normalized, "simple-encoding", SimpleEncoding),
            compression=choice(normalized, "compression", Compression),
            claim_check_path=normalized.get("claim-check-path") or None,
            claim_check_raw_value=parameters.flag(normalized, _RUN["claim-check-raw-value"]),
            target_path=normalized.get("target-path", ""),
            state_path=normalized.get("state-path", ""),
            timezone=parameters.value(normalized, _RUN["timezone"]) or "",
            partitions=parameters.parse_partitions(partitions) if partitions else None,
            table_name_template=normalized.get("table-name-template") or None,
            max_bad_ratio=parameters.number(normalized, _RUN["max-bad-ratio"]),
            table_parallelism=_whole(parameters.number(normalized, _RUN["table-parallelism"])),
            stream_id=parameters.value(normalized, _RUN["stream-id"]) or "",
            drop_table=choice(normalized, "drop-table", DropTablePolicy),
            compaction=choice(normalized, "compaction", Compaction),
            change_feed=choice(normalized, "change-feed", ChangeFeed),
            unknown_ddl=choice(normalized, "unknown-ddl", UnknownDdlPolicy),
            type_change=choice(normalized, "type-change", TypeChangePolicy),
            row_checksums=choice(normalized, "row-checksums", RowChecksums),
            kafka=kafka_from_params(normalized, options) if source is SourceKind.KAFKA else None,
            input_format=choice(normalized, "input-format", InputFormat),
            csv=_csv_options(normalized, protocol),
            schema_registry=normalized.get("schema-registry") or None,
            schema_registry_timeout=parameters.number(
                normalized, _RUN["schema-registry-timeout"], "a number of seconds"
            ),
            schema_registry_user_info=normalized.get("schema-registry-user-info") or None,
            schema_registry_bearer_token=normalized.get("schema-registry-bearer-token") or None,
            schema_registry_ca_file=normalized.get("schema-registry-ca-file") or None,
            schema_registry_cert_file=normalized.get("schema-registry-cert-file") or None,
            schema_registry_key_file=normalized.get("schema-registry-key-file") or None,
            missing_extension=choice(normalized, "missing-extension", MissingExtensionPolicy),
            column_defaults=parameters.parse_column_settings(
                "column-defaults", normalized.get("column-defaults", "")
            ),
            column_types=parameters.parse_column_types(normalized.get("column-types", "")),
            table_keys=_table_keys(normalized.get("table-keys", "")),
            target_catalog=normalized.get("target-catalog") or None,
            target_schema=parameters.value(normalized, _RUN["target-schema"]) or DEFAULT_TARGET_SCHEMA,
            state_schema=normalized.get("state-schema") or None,
        )

    @property
    def codec(self) -> Codec:
        """The protocol as the pipeline uses it: wire shape, rules and what it can express."""
        if self.protocol is Protocol.SIMPLE:
            return simple.codec(avro=self.simple_encoding is SimpleEncoding.AVRO)
        if self.protocol is Protocol.AVRO:
            return ticdc_avro.CODEC
        if self.protocol is Protocol.OPEN_PROTOCOL:
            return open_protocol.codec()
        if self.protocol is Protocol.CSV:
            return storage_csv.codec()
        if self.protocol is Protocol.DEBEZIUM:
            return debezium.CODEC
        # Canal-JSON without the TiDB extension is applied best effort, in offset order, only if opted into.
        return canal_json.codec(best_effort=self.missing_extension is MissingExtensionPolicy.OFFSET_ORDER)

    @property
    def checkpoint_location(self) -> str:
        """Spark's checkpoint for the Kafka stream: a cache of positions, our progress is the truth."""
        if self.kafka is not None and self.kafka.checkpoint_location:
            return self.kafka.checkpoint_location
        return f"{self.state_path.rstrip('/')}/{CHECKPOINTS_DIR_NAME}/{self.stream_id}"

    @classmethod
    def from_toml(cls, text: str, overrides: Mapping[str, str] | None = None) -> IngestConfig:
        """Build a config from a TOML document (top-level ``key = value``), then ``overrides`` on top.

        Raises:
            ConfigError: the TOML is invalid, a value is a table, or a key is unknown or invalid.
        """
        return cls.from_params({**parameters.params_from_toml(text), **(overrides or {})})

    @cached_property
    def mirror(self) -> Mirror:
        """Where this mirror's tables and state are (the one place a table's location is made)."""
        return Mirror(
            root=self.target_path or None,
            catalog=self.target_catalog,
            schema_template=self.target_schema,
            state=self.state_path,
            stream_id=self.stream_id,
            alias_template=self.table_name_template,
        )

    @property
    def target(self) -> str:
        """Where the mirror is, as a message names it: the target path, or the catalog and schema template."""
        return self.mirror.target

    def column_type(self, table: TableId, column: str, column_type: ColumnType) -> ColumnType:
        """The type to mirror a column as: ``column-types`` bounds a DECIMAL whose precision is unknown."""
        if column_type.kind is ColumnKind.DECIMAL and column_type.precision is None:
            return self.column_types.get(table, {}).get(column, column_type)
        return column_type


def _in_a_volume(path: str) -> bool:
    """Whether ``path`` is in a Unity Catalog volume, where Delta files may be read and written by path but
    no catalog table may be defined."""
    return re.match(r"(dbfs:)?/Volumes/", path) is not None


def resolved(normalized: dict[str, str]) -> dict[str, str]:
    """Every secret reference in the settings replaced by its value (``ingest.secrets``), at start."""
    return {key: secrets.resolve(value, setting=key) for key, value in normalized.items()}


def _table_keys(text: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    try:
        return debezium.parse_table_keys(text)
    except ValueError as exc:
        raise ConfigError(f"table-keys: {exc}") from exc


def _csv_options(normalized: Mapping[str, str], protocol: Protocol) -> CsvOptions | None:
    """The ``sink-csv-*`` settings, as the changefeed's ``[sink.csv]`` allows them; None unless csv."""
    given = sorted(key for key in normalized if key.startswith(CSV_PREFIX))
    if protocol is not Protocol.CSV:
        if given:
            raise ConfigError(
                f"{', '.join(given)}: apply to --protocol csv only; remove them or set the protocol"
            )
        return None
    options = CsvOptions(
        delimiter=parameters.value(normalized, _RUN[CSV_PREFIX + "delimiter"]) or "",
        quote=parameters.value(normalized, _RUN[CSV_PREFIX + "quote"]) or "",
        null=parameters.value(normalized, _RUN[CSV_PREFIX + "null"]) or "",
        include_commit_ts=parameters.flag(normalized, _RUN[CSV_PREFIX + "include-commit-ts"]),
        output_old_value=parameters.flag(normalized, _RUN[CSV_PREFIX + "output-old-value"]),
        output_handle_key=parameters.flag(normalized, _RUN[CSV_PREFIX + "output-handle-key"]),
        binary_encoding=parameters.value(normalized, _RUN[CSV_PREFIX + "binary-encoding-method"]) or "",
    )
    problem = storage_csv.options_problem(options)
    if problem:
        raise ConfigError(problem)
    return options
