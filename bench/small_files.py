"""Step ``small_files``: many small MERGEs into one table with Delta's auto compaction on (the mirror's
default) and off: data files, size, compaction commits and the time of a full read."""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass

from pyspark.sql import functions as F

from bench.context import Bench, preloaded_rows, sql_value, stopwatch
from ingest.apply.merge import RANK_COLUMN, apply_merge, slot
from ingest.apply.table import AUTO_COMPACT
from ingest.lake import delta_io
from ingest.model import TableState
from ingest.order import RANK_UPSERT
from ingest.state.table_state import state_to_metadata
from testkit.workload import table_def

logger = logging.getLogger("bench")


@dataclass(frozen=True)
class SmallFiles:
    batches: int
    merge_seconds: float
    files: int
    bytes: int
    compactions: int
    read_seconds: float
    files_compared: int  # data files after the batch both arms are compared at


def small_files(bench: Bench) -> None:
    size, off_batches = (
        bench.sizes.small_batch_rows,
        min(bench.sizes.small_batches_off, bench.sizes.small_batches),
    )
    on = _small_files_run(bench, True, bench.sizes.small_batches, off_batches)
    off = _small_files_run(bench, False, off_batches, off_batches)
    bench.results["small_files_after_1000_batches"] = on.files
    bench.results["small_files_compared_at_batch"] = off_batches
    bench.results["small_files_compaction_on_at_that_batch"] = on.files_compared
    bench.results["small_files_compaction_off_at_that_batch"] = off.files
    rows = [
        f"| {label} | {r.batches:,} | {r.merge_seconds / r.batches:.2f} s | {r.files_compared:,} "
        f"| {r.files:,} | {r.bytes / 1024:,.0f} KiB | {r.compactions:,} | {r.read_seconds:.2f} s |"
        for label, r in (("on (default)", on), ("off", off))
    ]
    bench.out(
        "## Small files",
        "",
        f"{bench.sizes.small_batches:,} small MERGE batches into one table, as a mirror that MERGEs every "
        f"few seconds makes: each batch {size:,} rows, half of them updates of existing keys spread over "
        "the whole table, half inserts (the table stays below the product's copy-on-write limit, so each "
        "MERGE rewrites the file its updates hit; a larger table gets a deletion vector instead). The "
        "table is "
        "created by the product (`apply.schema.create_table`, every mirrored table's properties) and "
        "each batch is the product's MERGE (`apply.merge.apply_merge`, the commitTs guard and "
        "userMetadata), without the rest of the pipeline: a full pipeline batch is measured in the "
        "tables above. "
        "Compaction on: the mirror's default (`delta.autoOptimize.autoCompact`: after a write, Delta "
        "decides whether small files are worth combining); off: the same table with the property set "
        f"to false, run for the first {off_batches:,} batches only (without compaction each batch adds "
        "at least one file, so its count only grows; both arms are compared at that batch). Files: "
        "`numFiles` of DESCRIBE DETAIL. Full read: every column of every row after the arm's last batch "
        "(the largest hash of a row), best of two.",
        "",
        f"| Compaction | Batches | MERGE per batch | Data files after {off_batches:,} "
        "| Data files at the end | Size | Compaction commits | Full read |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
    )


def _small_files_run(bench: Bench, compaction: bool, batches: int, count_at: int) -> SmallFiles:
    size = bench.sizes.small_batch_rows
    definition = table_def("bench", "small", bench.sizes.width)
    path = bench.dir(f"small-files-{compaction}") / "t"
    bench.mirror_table(path, definition)
    if not compaction:
        delta_io.set_properties(bench.spark, str(path), {AUTO_COMPACT: "false"})
    first = size * 10
    bench.write(preloaded_rows(bench.spark, definition, first, 1), str(path))
    next_key, seconds = first, 0.0
    files_compared = 0
    key = F.col("id")
    for batch in range(1, batches + 1):
        inserts = size // 2
        keys = bench.spark.range(size).select(
            F.when(key < inserts, key + next_key)
            .otherwise((key * 7_919 + batch * 104_729) % next_key)
            .alias("id")
        )
        source = keys.dropDuplicates(["id"]).select(
            *[
                (sql_value(kind, index + batch, key) if index else key).alias(slot(index))
                for index, kind in enumerate(definition.kinds)
            ],
            F.lit(batch + 1).cast("long").alias("commit_ts"),
            F.lit(RANK_UPSERT).alias(RANK_COLUMN),
        )
        metadata = state_to_metadata(TableState(applied_ts=batch + 1), run_id=batch, step="bench")
        with stopwatch() as took:
            apply_merge(bench.spark, str(path), source, ("id",), list(definition.names), metadata)
        seconds += took[0]
        next_key += inserts
        if batch == count_at:
            files_compared = int(delta_io.detail(bench.spark, str(path))["numFiles"])
        if batch % 100 == 0:
            logger.warning("bench: small files, compaction %s: %d batches", compaction, batch)
    detail = delta_io.detail(bench.spark, str(path))
    compactions = delta_io.history(bench.spark, str(path)).where(F.col("operation") == "OPTIMIZE").count()
    read = _best_read(bench, str(path))
    shutil.rmtree(path, ignore_errors=True)
    return SmallFiles(
        batches,
        seconds,
        int(detail["numFiles"]),
        int(detail["sizeInBytes"]),
        compactions,
        read,
        files_compared,
    )


def _best_read(bench: Bench, path: str) -> float:
    """Best of two reads of every column of every row (the largest row hash: the noop sink refuses a table
    with deletion vectors)."""
    walls = []
    for _ in range(2):
        frame = bench.spark.read.format("delta").load(path)
        with stopwatch() as took:
            frame.select(F.max(F.xxhash64(*frame.columns))).collect()
        walls.append(took[0])
    return min(walls)
