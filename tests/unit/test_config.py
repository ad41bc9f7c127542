import pytest

from ingest.config import IngestConfig
from ingest.errors import ConfigError
from ingest.model import ColumnKind, ColumnType, PartitionId, TableId

BASE = {"input": "in", "target-path": "/lake"}


def test_defaults_put_our_state_under_the_target_path():
    config = IngestConfig.from_params(BASE)
    assert config.state_path == "/lake/_ingest"
    assert config.timezone == "UTC"
    assert config.mirror.address(TableId("shop", "orders")) == "/lake/shop/orders"
    assert config.partitions is None


def test_unknown_parameter_is_an_error_that_names_it():
    with pytest.raises(ConfigError, match=r"unknown parameter.*target-pth"):
        IngestConfig.from_params({**BASE, "target-pth": "/x"})


def test_invalid_time_zone_says_what_to_use():
    with pytest.raises(ConfigError, match="'Mars/Olympus' is not an IANA time zone"):
        IngestConfig.from_params({**BASE, "timezone": "Mars/Olympus"})


def test_partitions_ranges_and_lists():
    config = IngestConfig.from_params({**BASE, "partitions": "cdc:0-2;other:5,7"})
    assert config.partitions == {PartitionId("cdc", p) for p in (0, 1, 2)} | {
        PartitionId("other", 5),
        PartitionId("other", 7),
    }


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("partitions", "cdc", "expected 'topic:0,1"),
        ("max-bad-ratio", "2", r"must be in \[0, 1\]"),
        ("max-bad-ratio", "lots", "not a number"),
        ("protocol", "open", "not supported; use one of: canal-json, simple"),
        ("compression", "zstd", "use one of: none, lz4, snappy"),
        ("simple-encoding", "avro", "applies to --protocol simple only"),
        ("claim-check-raw-value", "maybe", "is not a boolean; use true or false"),
        ("drop-table", "purge", "'purge' is not supported; use one of: archive, delete"),
        ("unknown-ddl", "ignore", "use one of: fail, skip"),
        ("table-name-template", "{db}.{table}", "may only use"),
    ],
)
def test_bad_values_name_the_key_and_value(key, value, message):
    with pytest.raises(ConfigError, match=message):
        IngestConfig.from_params({**BASE, key: value})


@pytest.mark.parametrize("target", ["/Volumes/main/tidb/lake", "dbfs:/Volumes/main/tidb/lake"])
def test_tables_in_a_volume_cannot_be_registered_in_the_catalog(target):
    params = {**BASE, "target-path": target, "table-name-template": "main.{database}.{table}"}
    with pytest.raises(ConfigError, match=r"cannot define a table on files in a volume.*external location"):
        IngestConfig.from_params(params)
    assert IngestConfig.from_params({**params, "target-path": "s3://bucket/lake"}).table_name_template
    assert IngestConfig.from_params({**BASE, "target-path": target}).target_path == target


def test_catalog_name_from_template():
    config = IngestConfig.from_params({**BASE, "table_name_template": "main.{database}.{table}"})
    assert config.mirror.alias(TableId("shop", "orders")) == "main.shop.orders"


def test_simple_avro_with_compression_and_claim_check():
    from ingest.config import Protocol, SimpleEncoding
    from ingest.decode.compression import Compression

    config = IngestConfig.from_params(
        {**BASE, "protocol": "simple", "simple-encoding": "avro", "compression": "snappy",
         "claim-check-path": "s3a://bucket/claims", "claim-check-raw-value": "true"}
    )  # fmt: skip
    assert config.protocol is Protocol.SIMPLE and config.simple_encoding is SimpleEncoding.AVRO
    assert config.compression is Compression.SNAPPY
    assert (config.claim_check_path, config.claim_check_raw_value) == ("s3a://bucket/claims", True)


def test_a_relative_target_path_is_made_absolute_for_delta_sql(tmp_path, monkeypatch):
    # delta.`lakehouse/db/t` is refused by Spark SQL as a table name; delta.`/abs/lakehouse/db/t` is not.
    monkeypatch.chdir(tmp_path)
    config = IngestConfig.from_params({"input": "in", "target-path": "lakehouse"})
    assert config.target_path == str(tmp_path / "lakehouse")
    assert config.state_path == str(tmp_path / "lakehouse" / "_ingest")
    assert config.mirror.address(TableId("db", "t")) == str(tmp_path / "lakehouse" / "db" / "t")
    for uri in ("s3a://bucket/lake", "dbfs:/mnt/lake", "/abs/lake"):
        assert IngestConfig.from_params({"input": "in", "target-path": uri}).target_path == uri


def test_missing_extension_is_a_canal_json_policy_that_defaults_to_fail():
    base = {"input": "in", "target-path": "/lake"}
    assert not IngestConfig.from_params(base).codec.offset_order
    assert IngestConfig.from_params({**base, "missing-extension": "offset-order"}).codec.offset_order
    with pytest.raises(ConfigError, match="missing-extension applies to --protocol canal-json only"):
        IngestConfig.from_params({**base, "protocol": "simple", "missing-extension": "offset-order"})
    with pytest.raises(ConfigError, match="missing-extension"):
        IngestConfig.from_params({**base, "missing-extension": "sometimes"})


def test_column_defaults_and_types_are_read_per_table_and_column():
    config = IngestConfig.from_params(
        {
            "input": "in",
            "target-path": "/lake",
            "protocol": "avro",
            "schema-registry": "http://registry",
            "column-defaults": "acc.t_uk.c_added_dec=3.1400; acc.t_uk.note=a,b",
            "column-types": "shop.items.price=decimal(20,6)",
        }
    )
    assert config.column_defaults == {TableId("acc", "t_uk"): {"c_added_dec": "3.1400", "note": "a,b"}}
    price = config.column_type(TableId("shop", "items"), "price", ColumnType(ColumnKind.DECIMAL))
    assert (price.precision, price.scale) == (20, 6)
    # A DECIMAL whose precision the stream says is never overridden; other columns keep theirs.
    known = ColumnType(ColumnKind.DECIMAL, precision=10, scale=2)
    assert config.column_type(TableId("shop", "items"), "price", known) == known
    unknown = ColumnType(ColumnKind.DECIMAL)
    assert config.column_type(TableId("shop", "items"), "qty", unknown) == unknown


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"column-types": "shop.items=decimal(20,6)"}, "expected 'database.table.column=value'"),
        ({"column-types": "shop.items.price=varchar(3)"}, "only a DECIMAL's precision can be given"),
        ({"column-types": "shop.items.price=decimal"}, "must be a DECIMAL with a precision"),
    ],
)
def test_bad_column_settings_fail_with_what_to_change(params, message):
    with pytest.raises(ConfigError, match=message):
        IngestConfig.from_params({"input": "in", "target-path": "/lake", **params})
