"""Catalog names: quoting, parsing, the state tables under a schema, and the settings of a by-name mirror."""

from __future__ import annotations

import pickle

import pytest

from ingest.config import IngestConfig
from ingest.errors import ConfigError
from ingest.lake import names as catalog_names
from ingest.lake.names import SchemaName, TableName
from ingest.model import TableId


def test_a_table_name_is_its_sql_text_with_every_part_backticked():
    name = TableName("main", "tidb_shop", "or`ders")
    assert name == "`main`.`tidb_shop`.`or``ders`"
    assert name.parts == ("main", "tidb_shop", "or`ders")
    assert name.table == "or`ders" and name.schema == SchemaName("main", "tidb_shop")
    assert name.plain() == "main.tidb_shop.or`ders"
    # It crosses a process boundary (a pool's thread, a pickled task) as what it is.
    copy = pickle.loads(pickle.dumps(name))
    assert isinstance(copy, TableName) and copy.parts == name.parts


def test_state_tables_are_children_of_a_directory_or_of_a_schema():
    assert catalog_names.child("/lake/_ingest/", "progress") == "/lake/_ingest/progress"
    under = catalog_names.child(SchemaName("main", "ticdc_ingest"), "progress")
    assert isinstance(under, TableName) and under.parts == ("main", "ticdc_ingest", "progress")


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("ops", ["ops"]),
        ("main.ops", ["main", "ops"]),
        ("`my.cat`.ops", ["my.cat", "ops"]),
        ("`a``b`", ["a`b"]),
    ],
)
def test_schema_settings_split_on_periods_outside_backticks(text, parts):
    assert catalog_names.split_name(text, "state-schema") == parts


@pytest.mark.parametrize("text", ["a.b.c", "`open", "a..b"])
def test_a_schema_setting_that_is_not_one_or_two_parts_is_refused(text):
    with pytest.raises(ConfigError, match="state-schema"):
        catalog_names.parse_schema(text, "state-schema")


@pytest.mark.parametrize(
    ("part", "reason"), [("a.b", "'.'"), ("a b", "' '"), ("a/b", "'/'"), ("x" * 256, "256")]
)
def test_names_a_catalog_cannot_hold_are_named_with_the_reason(part, reason):
    why = catalog_names.check_part(part, "table")
    assert why is not None and reason in why
    assert catalog_names.check_part("orders_2024-β", "table") is None


def by_name(**params: str) -> IngestConfig:
    return IngestConfig.from_params({"input": "/in", "target-catalog": "main", **params})


def test_a_by_name_mirror_puts_tables_and_state_in_the_catalog():
    config = by_name(**{"target-schema": "tidb_{database}"})
    location = config.mirror.address(TableId("shop", "orders"))
    assert isinstance(location, TableName) and location.parts == ("main", "tidb_shop", "orders")
    assert config.state_path == SchemaName("main", "ticdc_ingest")
    assert by_name(**{"state-schema": "ops.mirror"}).state_path == SchemaName("ops", "mirror")
    assert config.by_name and not IngestConfig.from_params({"input": "/in", "target-path": "/l"}).by_name


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"target-path": "/lake"}, "give one"),
        ({"state-path": "/lake/_ingest"}, "state-schema"),
        ({"table-name-template": "main.{database}.{table}"}, "drop it"),
        ({"target-schema": "{db}"}, "only use {database}"),
        ({"target-catalog": "my cat"}, "' '"),
    ],
)
def test_by_name_settings_that_do_not_fit_fail_at_start_saying_what_to_change(params, message):
    with pytest.raises(ConfigError, match=message):
        by_name(**params)


def test_a_kafka_mirror_by_name_needs_a_checkpoint_location():
    kafka = {"source": "kafka", "kafka-bootstrap-servers": "b:9092", "topics": "t", "target-catalog": "main"}
    with pytest.raises(ConfigError, match="checkpoint-location"):
        IngestConfig.from_params(kafka)
    config = IngestConfig.from_params({**kafka, "checkpoint-location": "/Volumes/main/tidb/cp/mirror"})
    assert config.checkpoint_location == "/Volumes/main/tidb/cp/mirror"


def test_neither_a_path_nor_a_catalog_says_both_ways():
    with pytest.raises(ConfigError, match="--target-catalog"):
        IngestConfig.from_params({"input": "/in"})


@pytest.mark.parametrize(
    "argv",
    [
        ["status", "--target-catalog", "main", "--target-schema", "tidb_{database}"],
        ["as-of", "--target-catalog", "main", "--target-schema", "tidb_{database}", "--tso", "1"],
        ["verify", "--target-catalog", "main", "--target-schema", "tidb_{database}", "--snapshot", "x"],
    ],
)
def test_every_reading_command_locates_a_mirror_by_name(argv):
    from ingest.cli import _parser
    from ingest.commands.flags import mirror

    located = mirror(_parser().parse_args(argv))
    assert located.mirror.address(TableId("shop", "orders")) == TableName("main", "tidb_shop", "orders")
    assert located.state_path == SchemaName("main", "ticdc_ingest")


def test_verify_locates_the_other_mirror_by_name_too():
    from ingest.cli import _parser
    from ingest.commands.flags import mirror

    args = _parser().parse_args(
        [
            "verify",
            "--target-path",
            "/lake",
            "--other-target-catalog",
            "main",
            "--other-state-schema",
            "ops.m",
        ]
    )
    assert not mirror(args).by_name
    other = mirror(args, "other-")
    assert other.by_name and other.state_path == SchemaName("ops", "m")


def test_a_reading_command_without_a_mirror_says_both_ways():
    from ingest.cli import _parser
    from ingest.commands.flags import mirror

    with pytest.raises(ConfigError, match="--target-path or --target-catalog"):
        mirror(_parser().parse_args(["status"]))
