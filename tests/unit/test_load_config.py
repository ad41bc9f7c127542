import os

import pytest

from ingest.errors import ConfigError
from ingest.load_config import LoadConfig
from ingest.model import TableId


def test_defaults_are_dumplings_and_the_state_path_is_the_mirrors():
    config = LoadConfig.from_params({"input": "export", "target-path": "lake/"})
    assert (config.csv_separator, config.csv_delimiter, config.csv_null_value, config.csv_header) == (
        ",",
        '"',
        "\\N",
        True,
    )
    # Relative local paths are made absolute (Delta's SQL takes absolute paths only).
    assert config.state_path == os.path.abspath("lake/_ingest") and not config.force
    assert config.stream.mirror.address(TableId("shop", "orders")) == os.path.abspath("lake/shop/orders")


def test_csv_flags_as_typed_on_a_shell():
    config = LoadConfig.from_params(
        {"input": "e", "target_path": "l", "csv-separator": "\\t", "no-header": "true", "force": "true"}
    )
    assert (config.csv_separator, config.csv_header, config.force) == ("\t", False, True)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"input": "e", "target-path": "l", "csv-seperator": ";"}, "unknown parameter.*csv-seperator"),
        ({"input": "e", "target-path": "l", "escape-backslash": "false"}, "--escape-backslash=true"),
        ({"input": "e", "target-path": "l", "force": "maybe"}, "force: 'maybe' is not a boolean"),
        ({"input": "e", "target-path": "l", "timezone": "Mars/Base"}, "timezone"),
        ({"target-path": "l"}, "input: the directory of a Dumpling export is required"),
    ],
)
def test_bad_load_parameters_fail_at_start_saying_what_to_change(params, message):
    with pytest.raises(ConfigError, match=message):
        LoadConfig.from_params(params)
