"""Every job parameter, once: key, default, accepted values and help. No I/O.

``IngestConfig.from_params`` and ``LoadConfig.from_params`` take their keys and defaults from here, the CLI
builds its flags from here, and a test holds the README's configuration table against it, so a parameter
cannot be known to one and missing from another.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ingest.errors import ConfigError
from ingest.model import ColumnKind, ColumnType, PartitionId, TableId
from ingest.mysql.types import UnknownTypeError, parse_mysql_type

TRUE_WORDS = ("true", "1", "yes", "on")
FALSE_WORDS = ("false", "0", "no", "off")


@dataclass(frozen=True)
class Parameter:
    """One job parameter as every entry point spells it (``--key`` on the command line)."""

    key: str
    default: str | None  # as text, the way a job parameter arrives; None: not set
    help: str
    choices: tuple[str, ...] = ()
    group: str = ""  # a heading for the command line's help
    switch: bool = False  # on the command line a bare ``--key`` means true

    def describe(self) -> str:
        """The help text, with the default where there is one."""
        return self.help if self.default is None else f"{self.help} (default: {self.default})"


KAFKA = "Kafka source (--source kafka; any --kafka.<option>=<value> goes to the Kafka client as it is)"

RUN: tuple[Parameter, ...] = (
    Parameter("source", "files", "where records come from: 'files' = a directory of captured Kafka records "
              "(JSON Lines), 'kafka' = the topics themselves, with Spark Structured Streaming",
              ("files", "kafka")),
    Parameter("input", None, "with --source files: directory (or file) of captured records, one JSON "
              "object per line: topic, partition, offset, timestamp (ms), key and value (base64); or kcat -J "
              "output; or a TiCDC storage-sink root"),
    Parameter("input-format", "auto", "auto: a storage-sink root if <input>/metadata holds a checkpoint-ts, "
              "else each line is a captured record or a kcat -J envelope (kcat lines carry 'broker')",
              ("auto", "records", "kcat", "storage")),
    Parameter("kafka-bootstrap-servers", None, "e.g. broker1:9092,broker2:9092", group=KAFKA),
    Parameter("topics", None, "comma-separated topics TiCDC writes to", group=KAFKA),
    Parameter("topic-pattern", None, "or: a regular expression naming the topics", group=KAFKA),
    Parameter("trigger", "available-now", "available-now: read what the topics hold, then stop; "
              "processing-time: keep mirroring, one batch per trigger interval",
              ("available-now", "processing-time"), group=KAFKA),
    Parameter("trigger-interval", "30 seconds", "with processing-time: how often a batch starts, e.g. "
              "'500 milliseconds', '5 minutes'", group=KAFKA),
    Parameter("checkpoint-location", None, "Spark's checkpoint (default: <state-path>/checkpoints/"
              "<stream-id>); safe to delete, positions come from our progress", group=KAFKA),
    Parameter("max-offsets-per-trigger", None, "cap on the records one batch reads", group=KAFKA),
    Parameter("fail-on-data-loss", "true", "stop when Kafka no longer holds records not yet read",
              ("true", "false"), group=KAFKA),
    Parameter("protocol", "canal-json", "the changefeed's protocol; Canal-JSON needs "
              "enable-tidb-extension=true; avro needs --schema-registry and gives per-key convergence only; "
              "open-protocol (or default, TiCDC's name for it) is TiCDC's default; csv is the storage sink's "
              "(see the README)",
              ("canal-json", "simple", "avro", "open-protocol", "default", "csv")),
    Parameter("schema-registry", None, "--protocol avro: the Confluent-compatible schema registry the "
              "changefeed registers with"),
    Parameter("schema-registry-timeout", "60", "seconds the registry may stay unreachable (retried with "
              "backoff) before the run stops"),
    Parameter("schema-registry-user-info", None, "user:password for the registry's HTTP basic auth "
              "(Confluent's basic.auth.user.info: an API key and secret); give it as a secret reference, "
              "e.g. {{secrets/<scope>/<key>}} or {{env:NAME}}"),
    Parameter("schema-registry-bearer-token", None, "or: a bearer token for the registry, as a secret "
              "reference"),
    Parameter("schema-registry-ca-file", None, "PEM file of the CAs that sign the registry's TLS "
              "certificate, trusted instead of the system's"),
    Parameter("schema-registry-cert-file", None, "PEM client certificate, for a registry that asks for one "
              "(its key in it, or in --schema-registry-key-file)"),
    Parameter("schema-registry-key-file", None, "PEM private key of --schema-registry-cert-file"),
    Parameter("missing-extension", "fail", "Canal-JSON without enable-tidb-extension: fail, or apply it best "
              "effort in offset order (per-key convergence, see the README)", ("fail", "offset-order")),
    Parameter("column-defaults", None, "the value rows older than an ADD COLUMN read, where the stream "
              "cannot carry it: a non-literal DEFAULT (CURRENT_TIMESTAMP), in TiCDC Avro a DECIMAL added "
              "with a DEFAULT, in Debezium any column added with a DEFAULT; e.g. "
              "'shop.items.price=3.1400'; ';' between entries"),
    Parameter("column-types", None, "the type of DECIMAL columns whose precision the stream does not say, "
              "e.g. 'shop.items.price=decimal(20,6)'; ';' between entries (unset: the exact digits as text); "
              "--protocol debezium: also BIGINT UNSIGNED and binary types, which its records cannot tell"),
    Parameter("table-keys", None, "--protocol debezium: each table's key columns, which its records do not "
              "name, e.g. 'shop.orders=id;shop.lines=order_id,line;shop.*=id' (patterns, first match)"),
    Parameter("sink-csv-delimiter", ",", "--protocol csv: the changefeed's [sink.csv] delimiter (1 to 3 "
              "characters)"),
    Parameter("sink-csv-quote", '"', "--protocol csv: [sink.csv] quote (one character, or empty for "
              "backslash escapes)"),
    Parameter("sink-csv-null", "\\N", "--protocol csv: [sink.csv] null, the text of NULL"),
    Parameter("sink-csv-include-commit-ts", "true", "--protocol csv: [sink.csv] include-commit-ts, which "
              "the mirror needs: without a commit ts nothing can be ordered or deduplicated",
              ("true", "false")),
    Parameter("sink-csv-output-old-value", "false", "--protocol csv: [sink.csv] output-old-value (an "
              "UPDATE is a D and an I record)", ("true", "false")),
    Parameter("sink-csv-output-handle-key", "false", "--protocol csv: [sink.csv] output-handle-key (a row "
              "handle field before the columns)", ("true", "false")),
    Parameter("sink-csv-binary-encoding-method", "base64", "--protocol csv: [sink.csv] "
              "binary-encoding-method", ("base64", "hex")),
    Parameter("simple-encoding", "json", "the Simple protocol's encoding-format", ("json", "avro")),
    Parameter("compression", "none", "the changefeed's large-message-handle-compression",
              ("none", "lz4", "snappy")),
    Parameter("claim-check-path", None, "where the changefeed's claim-check objects are (its "
              "claim-check-storage-uri, as a Spark path)"),
    Parameter("claim-check-raw-value", "false", "true if the changefeed writes raw claim-check objects "
              "(claim-check-raw-value=true)", ("true", "false")),
    Parameter("target-path", None, "root of the mirror: tables live at <target-path>/<database>/<table>"),
    Parameter("state-path", None, "where progress and quarantine live (default: <target-path>/_ingest)"),
    Parameter("target-catalog", None, "mirror into catalog tables by name instead of a target path: the "
              "catalog they are created in (managed tables), e.g. main; spark_catalog for Spark's own"),
    Parameter("target-schema", "{database}", "with --target-catalog: the schema of each mirrored table, "
              "a template on {database}, e.g. tidb_{database}"),
    Parameter("state-schema", "ticdc_ingest", "with --target-catalog: the schema (or catalog.schema) of the "
              "mirror's own tables: progress, quarantine, DDL history"),
    Parameter("timezone", "UTC", "time zone of the TiCDC server, in which TIMESTAMP values are rendered"),
    Parameter("partitions", None, "the partitions TiCDC writes, e.g. 'tidb_cdc:0-2' or 't1:0,1;t2:0' "
              "(default: the partitions seen in the input and in earlier runs)"),
    Parameter("table-name-template", None, "also register each table in the catalog under this name, e.g. "
              "'main.{database}.{table}'"),
    Parameter("max-bad-ratio", "0", "share of records that may be quarantined before the run fails"),
    Parameter("table-parallelism", "4", "how many tables a batch applies at once (1: one after another); "
              "each runs its own Spark jobs from a driver thread"),
    Parameter("stream-id", "default", "names this stream's progress, so several streams can share a state "
              "path"),
    Parameter("unknown-ddl", "fail", "a DDL the mirror does not know or cannot parse: stop before it (fail), "
              "or record it in the DDL history and go on (skip)", ("fail", "skip")),
    Parameter("type-change", "rewrite", "a column type change that changes the values TiDB holds: rewrite "
              "the table with them, as TiDB did (rewrite), or stop before it to approve it first (fail)",
              ("rewrite", "fail")),
    Parameter("row-checksums", "verify", "TiDB's row checksums (simple and avro, with the changefeed's "
              "integrity-check-level = \"correctness\"): check each row that carries one and quarantine a "
              "mismatch (verify), also treat a row without one as bad (require), or do not check (off)",
              ("verify", "require", "off")),
    Parameter("drop-table", "archive", "DROP TABLE / DROP DATABASE: keep the table's last rows (archive) or "
              "delete them; either way the table is marked retired", ("archive", "delete")),
    Parameter("compaction", "auto", "tables the mirror creates compact their small files after writes "
              "(auto: Delta auto compaction) or not (off: run OPTIMIZE yourself)", ("auto", "off")),
    Parameter("change-feed", "on", "mirrored tables record Delta's change data feed, so `changes` can answer "
              "what changed between two TSOs (on; a table created before turns it on at its next batch), "
              "or not (off)", ("on", "off")),
)  # fmt: skip

LOAD: tuple[Parameter, ...] = (
    Parameter("input", None, "directory of the Dumpling export (with its metadata file)"),
    Parameter("target-path", None, "root of the mirror: tables live at <target-path>/<database>/<table>"),
    Parameter("state-path", None, "where progress lives (default: <target-path>/_ingest)"),
    Parameter("target-catalog", None, "load into catalog tables by name instead of a target path: their "
              "catalog, as for run"),
    Parameter("target-schema", "{database}", "with --target-catalog: each table's schema, a template on "
              "{database}"),
    Parameter("state-schema", "ticdc_ingest", "with --target-catalog: the schema of the mirror's own tables"),
    Parameter("stream-id", "default", "the stream that continues from the snapshot"),
    Parameter("timezone", "UTC", "time zone of Dumpling's session, in which TIMESTAMP values were written"),
    Parameter("max-bad-ratio", "0", "share of a table's rows that may be quarantined"),
    Parameter("force", "false", "replace tables the mirror already holds (refused if the snapshot is behind "
              "the mirror)", switch=True),
    Parameter("compaction", "auto", "tables the load creates compact their small files after writes "
              "(auto: Delta auto compaction) or not (off)", ("auto", "off")),
    Parameter("change-feed", "on", "tables the load creates record Delta's change data feed (on) or not "
              "(off)", ("on", "off")),
    Parameter("csv-separator", ",", "Dumpling's --csv-separator"),
    Parameter("csv-delimiter", '"', "Dumpling's --csv-delimiter"),
    Parameter("csv-null-value", "\\N", "Dumpling's --csv-null-value"),
    Parameter("csv-header", "true", "the CSV files start with a header line", ("true", "false")),
    Parameter("no-header", "false", "the CSV files have no header line (Dumpling's --no-header)",
              switch=True),
    Parameter("csv-line-terminator", None, "Dumpling's --csv-line-terminator (default: \\r\\n or \\n)"),
    Parameter("escape-backslash", "true", "Dumpling's --escape-backslash; only true can be loaded",
              ("true", "false")),
    Parameter("table-name-template", None, "also register each table in the catalog under this name, e.g. "
              "'main.{database}.{table}'"),
)  # fmt: skip


def by_key(parameters: Iterable[Parameter]) -> dict[str, Parameter]:
    return {p.key: p for p in parameters}


def normalize(params: Mapping[str, str | None], parameters: Iterable[Parameter]) -> dict[str, str]:
    """Keys with ``-`` (``_`` is accepted too), unset values dropped; an unknown key is an error naming it and
    every key that would have been accepted. An empty value means "not set": bundles and notebooks cannot
    leave a key out."""
    known = by_key(parameters)
    normalized = {k.replace("_", "-"): v for k, v in params.items() if v is not None}
    unknown = sorted(set(normalized) - set(known))
    if unknown:
        raise ConfigError(f"unknown parameter(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    return {k: v for k, v in normalized.items() if v != ""}


def value(params: Mapping[str, str], parameter: Parameter) -> str | None:
    """The given value, else the parameter's default."""
    return params.get(parameter.key, parameter.default)


def flag(params: Mapping[str, str], parameter: Parameter) -> bool:
    """A boolean parameter: true/false (also 1/0, yes/no, on/off, in any case)."""
    text = (value(params, parameter) or "").strip().lower()
    if text in TRUE_WORDS:
        return True
    if text in FALSE_WORDS:
        return False
    raise ConfigError(f"{parameter.key}: {text!r} is not a boolean; use true or false")


def number(params: Mapping[str, str], parameter: Parameter, what: str = "a number") -> float:
    """A numeric parameter; the error names the key, the value and what it must be."""
    text = value(params, parameter) or ""
    try:
        return float(text)
    except ValueError as exc:
        raise ConfigError(f"{parameter.key}: {text!r} is not {what}") from exc


def add_flags(parser: argparse.ArgumentParser, parameters: Iterable[Parameter]) -> None:
    """One ``--key`` per parameter. Flags default to unset, so the parameter's own default applies in one
    place (and a config file's value is not overridden by a flag nobody gave)."""
    groups: dict[str, argparse._ArgumentGroup] = {}
    for parameter in parameters:
        target: argparse._ArgumentGroup | argparse.ArgumentParser = parser
        if parameter.group:
            if parameter.group not in groups:
                groups[parameter.group] = parser.add_argument_group(parameter.group)
            target = groups[parameter.group]
        if parameter.switch:
            target.add_argument(
                f"--{parameter.key}", action="store_const", const="true", default=None, help=parameter.help
            )
        else:
            target.add_argument(
                f"--{parameter.key}",
                default=None,
                choices=list(parameter.choices) or None,
                help=parameter.describe(),
            )


def parse_partitions(text: str) -> frozenset[PartitionId]:
    """``topic:0,1,2;other:0`` or ``topic:0-3``."""
    result: set[PartitionId] = set()
    for group in filter(None, (g.strip() for g in text.split(";"))):
        topic, sep, numbers = group.rpartition(":")
        if not sep or not topic:
            raise ConfigError(f"partitions: expected 'topic:0,1,...', got {group!r}")
        for item in filter(None, (n.strip() for n in numbers.split(","))):
            lo, dash, hi = item.partition("-")
            try:
                first, last = int(lo), int(hi) if dash else int(lo)
            except ValueError as exc:
                raise ConfigError(f"partitions: {item!r} in {group!r} is not a partition number") from exc
            result.update(PartitionId(topic, p) for p in range(first, last + 1))
    if not result:
        raise ConfigError(f"partitions: no partition in {text!r}")
    return frozenset(result)


def parse_column_settings(key: str, text: str) -> dict[TableId, dict[str, str]]:
    """``db.table.column=value;db.table.other=value``: a value per upstream column (may hold commas)."""
    result: dict[TableId, dict[str, str]] = {}
    for entry in filter(None, (e.strip() for e in text.split(";"))):
        name, sep, value = entry.partition("=")
        parts = name.strip().split(".", 2)
        if not sep or len(parts) != 3 or not all(parts) or not value.strip():
            raise ConfigError(
                f"{key}: expected 'database.table.column=value' entries separated by ';', got {entry!r}"
            )
        result.setdefault(TableId(parts[0], parts[1]), {})[parts[2]] = value.strip()
    return result


def parse_column_types(text: str) -> dict[TableId, dict[str, ColumnType]]:
    result: dict[TableId, dict[str, ColumnType]] = {}
    for table, columns in parse_column_settings("column-types", text).items():
        for column, type_text in columns.items():
            try:
                column_type = parse_mysql_type(type_text)
            except UnknownTypeError as exc:
                raise ConfigError(f"column-types: {table}.{column}: {exc}") from exc
            if column_type.kind is ColumnKind.DECIMAL and column_type.precision is None:
                raise ConfigError(
                    f"column-types: {table}.{column}: {type_text!r} must be a DECIMAL with a precision, "
                    "e.g. decimal(20,6)"
                )
            result.setdefault(table, {})[column] = column_type
    return result


def params_from_toml(text: str) -> dict[str, str]:
    """TOML text as string parameters, the same form job parameters and widgets take.

    Numbers and booleans become their TOML text, arrays are joined with commas; nested tables are refused,
    so a typo'd section header cannot silently hide its keys.
    """
    try:
        document = _toml_loads(text)
    except ValueError as exc:  # tomllib.TOMLDecodeError is a ValueError
        raise ConfigError(f"config file: not valid TOML: {exc}") from exc
    params: dict[str, str] = {}
    for key, value in document.items():
        if isinstance(value, dict):
            raise ConfigError(
                f"config file: [{key}] is a table; write every setting as a top-level 'key = value'"
            )
        params[key] = _toml_text(value)
    return params


def _toml_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(_toml_text(v) for v in value)
    return str(value)


def _toml_loads(text: str) -> dict[str, object]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10 (older Databricks runtimes): the tomli backport, a conditional dependency
        import tomli as tomllib
    return tomllib.loads(text)
