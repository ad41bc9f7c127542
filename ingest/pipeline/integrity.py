"""Row checksums in a batch: which rows are checked, against which column layouts, and what the checks
add to a table's report and state. Wiring; the checksum itself is ``ingest.apply.checksum``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pyspark.sql import DataFrame

from ingest.apply import checksum
from ingest.config import IngestConfig, RowChecksums
from ingest.decode import ticdc_avro as ta
from ingest.model import TableId, TableState, VersionedSchema
from ingest.pipeline.report import TableReport
from ingest.state import schema_cache


def checks(config: IngestConfig, carried: bool) -> bool:
    """Whether rows are checked: where some carry checksums (``carried``), or all must."""
    if config.row_checksums is RowChecksums.OFF or not config.codec.has_checksums:
        return False
    return carried or config.row_checksums is RowChecksums.REQUIRE


def announced_layouts(
    schemas: Mapping[schema_cache.SchemaKey, VersionedSchema], table: TableId, versions: Iterable[int | None]
) -> dict[int, checksum.Layout]:
    """Simple: the checksum layout of each schema version the table's rows name."""
    return {
        v: checksum.Layout.of(schemas[(table, v)].schema.columns)
        for v in set(versions)
        if v is not None and (table, v) in schemas
    }


def writer_layouts(book: ta.SchemaBook) -> dict[int, checksum.Layout]:
    """TiCDC Avro: the checksum layout of each writer schema that has the checksum field (its columns are
    in column-id order when checksums are on)."""
    return {
        sid: checksum.Layout.of([c.column for c in writer.columns])
        for sid, (writer, _) in book.schemas.items()
        if writer.has_checksum
    }


def checked_rows(config: IngestConfig, rows: DataFrame, layouts: Mapping[int, checksum.Layout]) -> DataFrame:
    """The rows with their checksum verdict, computed from the values as they arrived (call it before
    anything fills in or converts them)."""
    return checksum.checked(
        rows,
        layouts,
        config.timezone,
        require=config.row_checksums is RowChecksums.REQUIRE,
        deletes_carry_none=not config.codec.commit_ts_on_delete,
    )


def record(report: TableReport, state: TableState, counts: checksum.Counts) -> TableState:
    """Add a merge's checked rows to the table's report, and return its state with them counted."""
    report.verified += counts.verified
    report.unverified += counts.unverified
    report.mismatched += counts.mismatched
    return state.counted(counts.verified, counts.unverified)
