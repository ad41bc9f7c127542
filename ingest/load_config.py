"""An initial load's settings: where the Dumpling export is, how its CSV is written, which mirror it fills."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ingest import parameters
from ingest.config import DEFAULT_TARGET_SCHEMA, IngestConfig, resolved
from ingest.errors import ConfigError
from ingest.settings import ChangeFeed, Compaction, choice


def _unescape_option(text: str) -> str:
    r"""Dumpling's CSV options as typed on a shell: ``\t``, ``\n`` and ``\r`` stand for tab, LF and CR."""
    return text.replace("\\t", "\t").replace("\\r", "\r").replace("\\n", "\n")


@dataclass(frozen=True)
class LoadConfig:
    """An initial load from a TiDB Dumpling export. Build it with :meth:`from_params`.

    The CSV options mirror Dumpling's flags of the same names, with Dumpling's defaults.
    """

    input_path: str
    target_path: str = ""
    state_path: str = ""
    stream_id: str = "default"
    timezone: str = "UTC"
    max_bad_ratio: float = 0.0
    force: bool = False
    csv_separator: str = ","
    csv_delimiter: str = '"'
    csv_null_value: str = "\\N"
    csv_header: bool = True
    csv_line_terminator: str | None = None
    table_name_template: str | None = None
    compaction: Compaction = Compaction.AUTO
    change_feed: ChangeFeed = ChangeFeed.ON
    target_catalog: str | None = None
    target_schema: str = DEFAULT_TARGET_SCHEMA
    state_schema: str | None = None

    def __post_init__(self) -> None:
        if not self.input_path:
            raise ConfigError("input: the directory of a Dumpling export is required (--input DIR)")
        if not self.csv_separator:
            raise ConfigError("csv-separator: must not be empty (Dumpling's default is ',')")
        # The same checks and defaults as a streaming run of the same mirror.
        object.__setattr__(self, "state_path", self.stream.state_path)

    @property
    def stream(self) -> IngestConfig:
        """The streaming config of the same mirror (paths, stream id, time zone)."""
        return IngestConfig(
            input_path=self.input_path,
            target_path=self.target_path,
            state_path=self.state_path,
            timezone=self.timezone,
            max_bad_ratio=self.max_bad_ratio,
            stream_id=self.stream_id,
            table_name_template=self.table_name_template,
            compaction=self.compaction,
            change_feed=self.change_feed,
            target_catalog=self.target_catalog,
            target_schema=self.target_schema,
            state_schema=self.state_schema,
        )

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> LoadConfig:
        """Build a load config from CLI flags, job parameters or widgets (all strings).

        Raises:
            ConfigError: a key is unknown or a value is invalid; the message names both.
        """
        normalized = resolved(parameters.normalize(params, parameters.LOAD))
        load = parameters.by_key(parameters.LOAD)

        def text(key: str) -> str:
            return parameters.value(normalized, load[key]) or ""

        if not parameters.flag(normalized, load["escape-backslash"]):
            raise ConfigError(
                "escape-backslash: only exports written with Dumpling's default --escape-backslash=true can "
                "be loaded (it keeps every row on one line, so big files split across tasks); export again "
                "without --escape-backslash=false"
            )
        header = parameters.flag(normalized, load["csv-header"]) and not parameters.flag(
            normalized, load["no-header"]
        )
        terminator = normalized.get("csv-line-terminator")
        return cls(
            input_path=text("input"),
            target_path=text("target-path"),
            state_path=text("state-path"),
            stream_id=text("stream-id"),
            timezone=text("timezone"),
            max_bad_ratio=parameters.number(normalized, load["max-bad-ratio"]),
            force=parameters.flag(normalized, load["force"]),
            csv_separator=_unescape_option(text("csv-separator")),
            csv_delimiter=_unescape_option(text("csv-delimiter")),
            csv_null_value=text("csv-null-value"),
            csv_header=header,
            csv_line_terminator=_unescape_option(terminator) if terminator else None,
            table_name_template=normalized.get("table-name-template") or None,
            compaction=choice(normalized, "compaction", Compaction, load),
            change_feed=choice(normalized, "change-feed", ChangeFeed, load),
            target_catalog=normalized.get("target-catalog") or None,
            target_schema=text("target-schema") or DEFAULT_TARGET_SCHEMA,
            state_schema=normalized.get("state-schema") or None,
        )
