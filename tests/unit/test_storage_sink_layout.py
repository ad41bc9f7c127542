"""Positions in TiCDC's storage-sink layout: which synthetic partition and offset each file and DDL gets."""

import orjson

from ingest.model import PartitionId
from ingest.source.storage_sink import LINE_BITS, data_file, ddl_message, schema_partition

ROOT = "file:/s3/bucket/cdc"


def test_data_file_partition_is_its_folder_and_offsets_grow_with_the_file_index():
    f = data_file(ROOT, f"{ROOT}/shop/orders/449000000000000001/2026-11-20/CDC00000000000000000007.json")
    assert f is not None
    assert f.partition == PartitionId("shop/orders/449000000000000001/2026-11-20", 0)
    assert f.first_offset == 7 << LINE_BITS
    assert f.last_slot == (8 << LINE_BITS) - 1


def test_partition_folder_and_no_date_folder_are_both_understood():
    with_partition = data_file(ROOT, f"{ROOT}/shop/orders/4490/112/2026-11-20/CDC1.json")
    no_date = data_file(ROOT, f"{ROOT}/shop/orders/4490/CDC000002.json")
    assert with_partition is not None and with_partition.partition.topic == "shop/orders/4490/112/2026-11-20"
    assert no_date is not None and (no_date.partition.topic, no_date.index) == ("shop/orders/4490", 2)


def test_files_outside_the_layout_are_not_data():
    assert data_file(ROOT, f"{ROOT}/shop/orders/meta/CDC.index") is None
    assert data_file(ROOT, f"{ROOT}/shop/orders/4490/meta/CDC1.json") is None
    assert data_file(ROOT, f"{ROOT}/orders/CDC1.json") is None


def test_a_table_called_meta_is_still_data():
    f = data_file(ROOT, f"{ROOT}/shop/meta/4490/CDC3.json")
    assert f is not None and f.partition.topic == "shop/meta/4490"


def test_schema_files_belong_to_their_table_or_database_meta_partition():
    assert schema_partition(ROOT, f"{ROOT}/shop/orders/meta/schema_44_123.json") == PartitionId(
        "shop/orders/meta", 0
    )
    assert schema_partition(ROOT, f"{ROOT}/shop/meta/schema_44_123.json") == PartitionId("shop/meta", 0)
    assert schema_partition(ROOT, f"{ROOT}/shop/orders/4490/schema_1.json") is None


def test_a_schema_file_with_a_query_is_a_ddl_at_its_table_version():
    ts = 449_000_000_000_000_123
    offset, value = ddl_message(
        {"Schema": "shop", "Table": "orders", "TableVersion": ts, "Query": "ALTER TABLE orders ADD c INT",
         "Type": 5, "Version": 1}
    )  # fmt: skip
    message = orjson.loads(value)
    assert offset == ts
    assert message["isDdl"] is True and message["type"] == "ALTER"
    assert message["_tidb"]["commitTs"] == ts
    assert (message["database"], message["table"], message["sql"]) == (
        "shop",
        "orders",
        "ALTER TABLE orders ADD c INT",
    )


def test_a_schema_file_without_a_query_is_a_new_table_version_not_a_ddl():
    # TiCDC also starts a table version when it reschedules the table or the changefeed restarts.
    assert (
        ddl_message({"Schema": "shop", "Table": "orders", "TableVersion": 5, "Query": "", "Type": 0}) is None
    )
