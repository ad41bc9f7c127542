"""The parameter table is the one definition: the README's configuration reference, the CLI's flags and
``from_params`` all agree with it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ingest import parameters
from ingest.cli import _parser
from ingest.config import IngestConfig
from ingest.errors import ConfigError
from ingest.load_config import LoadConfig

README = Path(__file__).parents[2] / "README.md"


def readme_rows() -> dict[str, str]:
    """Parameter -> default cell of the README's configuration reference table."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("### Configuration reference") :]
    section = section[: re.search(r"\n##+ ", section[4:]).start() + 4]
    rows: dict[str, str] = {}
    for line in section.splitlines():
        match = re.match(r"^\| (`[^|]+`) \| ([^|]*) \|", line)
        if not match or match.group(1) == "`kafka.<option>`":
            continue
        for key in re.findall(r"`([^`]+)`", match.group(1)):
            rows[key] = match.group(2).strip()
    return rows


def test_the_readme_lists_every_run_parameter_and_no_other():
    assert set(readme_rows()) == {p.key for p in parameters.RUN}


@pytest.mark.parametrize("parameter", [p for p in parameters.RUN if p.default is not None], ids=str)
def test_the_readme_gives_each_literal_default(parameter):
    assert readme_rows()[parameter.key] == f"`{parameter.default}`"


def test_every_parameter_is_a_flag_of_its_command():
    actions = {
        name: {a.option_strings[0][2:] for a in sub._actions if a.option_strings}
        for name, sub in _parser()._subparsers._group_actions[0].choices.items()
    }
    assert {p.key for p in parameters.RUN} <= actions["run"]
    assert {p.key for p in parameters.RUN} <= actions["resync"]
    assert {p.key for p in parameters.LOAD} <= actions["load"]


def test_from_params_takes_every_key_of_its_table_and_fills_the_defaults():
    for config_class, table in ((IngestConfig, parameters.RUN), (LoadConfig, parameters.LOAD)):
        with pytest.raises(ConfigError, match="unknown parameter") as raised:
            config_class.from_params({"input": "in", "target-path": "/lake", "no-such-key": "x"})
        known = str(raised.value).split("known: ")[1].split(", ")
        assert set(known) == {p.key for p in table}
    config = IngestConfig.from_params({"input": "in", "target-path": "/lake"})
    assert (config.timezone, config.stream_id, config.max_bad_ratio) == ("UTC", "default", 0.0)
    load = LoadConfig.from_params({"input": "in", "target-path": "/lake"})
    assert (load.csv_separator, load.csv_null_value, load.csv_header, load.force) == (",", "\\N", True, False)
