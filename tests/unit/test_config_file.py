"""Configuration from a TOML file and from job-parameter shapes; the CLI's precedence between the two."""

import pytest

from ingest.cli import _params, _parser
from ingest.config import IngestConfig, InputFormat, UnknownDdlPolicy
from ingest.errors import ConfigError
from ingest.parameters import params_from_toml

TOML = """
input = "/data/in"
target-path = "/lake"
timezone = "Asia/Shanghai"
max-bad-ratio = 0.25
partitions = "cdc:0-1;other:0"
input-format = "kcat"
"""


def test_toml_file_builds_the_same_typed_config_as_parameters():
    from_file = IngestConfig.from_toml(TOML)
    from_params = IngestConfig.from_params(
        {
            "input": "/data/in",
            "target-path": "/lake",
            "timezone": "Asia/Shanghai",
            "max-bad-ratio": "0.25",
            "partitions": "cdc:0-1;other:0",
            "input-format": "kcat",
        }
    )
    assert from_file == from_params
    assert from_file.max_bad_ratio == from_params.max_bad_ratio == 0.25
    assert from_file.timezone == "Asia/Shanghai"
    assert from_file.input_format is InputFormat.KCAT


def test_unknown_key_in_toml_is_an_error_that_names_it():
    with pytest.raises(ConfigError, match=r"unknown parameter.*target_pth|unknown parameter.*target-pth"):
        IngestConfig.from_toml('input = "x"\ntarget_pth = "/lake"\n')


def test_a_toml_table_is_refused_rather_than_ignored():
    with pytest.raises(ConfigError, match=r"\[ingest\] is a table"):
        params_from_toml('[ingest]\ninput = "x"\n')


def test_invalid_toml_says_so():
    with pytest.raises(ConfigError, match="not valid TOML"):
        params_from_toml('input = "x\n')


def test_booleans_and_numbers_become_their_toml_text():
    text = 'a = true\nb = 3\nc = 0.5\nd = ["t1", "t2"]\n'
    assert params_from_toml(text) == {"a": "true", "b": "3", "c": "0.5", "d": "t1,t2"}


def test_empty_job_parameters_mean_not_set():
    config = IngestConfig.from_params(
        {"input": "in", "target-path": "/lake", "input-format": "", "timezone": ""}
    )
    assert config.input_format is InputFormat.AUTO
    assert config.timezone == "UTC"


def test_command_line_flags_win_over_the_file_and_flag_defaults_lose_to_it(tmp_path):
    path = tmp_path / "mirror.toml"
    path.write_text('input = "/from/file"\ntarget-path = "/lake"\ntimezone = "Asia/Tokyo"\n')
    arguments = ["run", "--config", str(path), "--input=/from/flag"]
    args = _parser().parse_args(arguments)
    params = _params(args)
    assert params["input"] == "/from/flag"  # explicit flag beats the file
    assert params["timezone"] == "Asia/Tokyo"  # file beats the parameter's default (UTC)
    assert "config" not in params and "progress" not in params
    # Defaults fill what the file leaves out, from the one parameter table.
    assert IngestConfig.from_params(params).unknown_ddl is UnknownDdlPolicy.FAIL


def test_unknown_key_in_the_file_fails_through_the_cli(tmp_path, capsys):
    from ingest.cli import main

    path = tmp_path / "mirror.toml"
    path.write_text('input = "/in"\ntarget-path = "/lake"\ntopic = "typo"\n')
    assert main(["run", "--config", str(path)]) == 2
    assert "unknown parameter(s) topic" in capsys.readouterr().err


def test_storage_layout_is_for_canal_json_and_csv_only():
    with pytest.raises(ConfigError, match="layout is read for --protocol canal-json and csv only"):
        IngestConfig.from_params(
            {"input": "in", "target-path": "/l", "input-format": "storage", "protocol": "simple"}
        )


def test_the_backfill_entry_point_runs_or_loads():
    from ingest.cli import _backfill_arguments

    assert _backfill_arguments(["--input=x", "--target-path=y"]) == ["run", "--input=x", "--target-path=y"]
    assert _backfill_arguments(["--mode=load", "--input=x"]) == ["load", "--input=x"]
    with pytest.raises(SystemExit, match="use run"):
        _backfill_arguments(["--mode=merge"])
