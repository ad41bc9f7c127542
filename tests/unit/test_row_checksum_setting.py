"""The row-checksums setting, and the counts a checked run keeps: in each table's commits, in the progress
row, and in the batch result the metrics table holds."""

from __future__ import annotations

import pytest

from ingest.config import IngestConfig, RowChecksums
from ingest.errors import ConfigError
from ingest.model import TableId, TableState
from ingest.pipeline import BatchResult, TableReport
from ingest.state import progress
from ingest.state.table_state import state_from_metadata, state_to_metadata

BASE = {"input": "/in", "target-path": "/lake"}


def test_verify_is_the_default_and_require_needs_a_protocol_that_carries_checksums():
    assert IngestConfig.from_params({**BASE, "protocol": "simple"}).row_checksums is RowChecksums.VERIFY
    required = IngestConfig.from_params({**BASE, "protocol": "simple", "row-checksums": "require"})
    assert required.row_checksums is RowChecksums.REQUIRE
    with pytest.raises(ConfigError, match=r"row-checksums = require: --protocol canal-json carries no row"):
        IngestConfig.from_params({**BASE, "row-checksums": "require"})
    with pytest.raises(ConfigError, match="row-checksums"):
        IngestConfig.from_params({**BASE, "protocol": "simple", "row-checksums": "sometimes"})


def test_a_tables_counts_travel_with_its_commits_and_the_progress_row():
    state = TableState(applied_ts=9, ddl_ts=3, ddl_ids=frozenset({"x"})).counted(5, 2).counted(1, 0)
    assert (state.rows_verified, state.rows_unverified) == (6, 2)
    assert state_from_metadata(state_to_metadata(state, run_id=1, step="merge")) == state
    assert (
        progress._table_state({"applied_ts": 9, "ddl_ts": 3, "ddl_ids": ["x"], **state.checksum_fields()})
        == state
    )
    # A table never checked writes what it always wrote.
    assert "rows_verified" not in state_to_metadata(TableState(applied_ts=9), run_id=1, step="merge")


def test_the_batch_result_keeps_each_tables_checksum_counts():
    t = TableId("shop", "orders")
    report = TableReport(t, upserted=3, applied_ts=7, verified=40, unverified=2, mismatched=1)
    result = BatchResult(run_id=4, records=9, global_watermark=11, quarantined=1, tables={t: report},
                         seconds=1.5, bytes=99, decoded={t: 43})  # fmt: skip
    assert BatchResult.from_json(result.to_json()) == result
    assert result.metrics()["tables"]["shop.orders"]["checksums_verified"] == 40
    assert "row checksums: 40 verified, 2 carried none, 1 mismatched" in report.describe()


def test_rows_are_checked_where_some_carry_checksums_or_all_must():
    from ingest.pipeline import integrity

    def config(**params: str) -> IngestConfig:
        return IngestConfig.from_params({**BASE, "protocol": "simple", **params})

    assert integrity.checks(config(), carried=True)
    assert not integrity.checks(
        config(), carried=False
    )  # a changefeed without the integrity check pays nothing
    assert integrity.checks(config(**{"row-checksums": "require"}), carried=False)
    assert not integrity.checks(config(**{"row-checksums": "off"}), carried=True)
    assert not integrity.checks(IngestConfig.from_params(BASE), carried=True)  # canal-json carries none
