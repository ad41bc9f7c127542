"""Step ``scaling``: the same batch applied into a small and a large table, with the MERGE condition on key
equality only and with the batch's key bounds; then a type change that rewrites the large table."""

from __future__ import annotations

import logging
import shutil

from bench.context import Bench, MergeTimer, fmt_ratio, ingest_config, located, preloaded_rows, stopwatch
from bench.targets import SCALING_MISSED, TARGET_SCALING
from ingest.apply import schema as apply_schema
from ingest.model import ColumnKind, TableId, TableState
from ingest.mysql.types import parse_mysql_type
from ingest.pipeline import run_files
from ingest.plan.changes import ChangeType
from ingest.state.table_state import state_to_metadata
from testkit.workload import Mix, TableDef, Workload, write_records

logger = logging.getLogger("bench")


_INTEGERS = (ColumnKind.TINYINT, ColumnKind.SMALLINT, ColumnKind.MEDIUMINT, ColumnKind.INT, ColumnKind.BIGINT)


def scaling(bench: Bench) -> None:
    small, large, changes = bench.sizes.scale_small, bench.sizes.scale_large, bench.sizes.scale_changes
    workload = Workload(bench.spec(Mix.UPDATE_HEAVY))
    # The small table holds keys large-small..large-1, the large one 0..large-1: the batch touches the
    # newest keys of both (recent rows are the hot ones in OLTP) and inserts above both, so it means the
    # same thing to both tables.
    workload.create_tables(preloaded=small, preload_from=large - small, first_new_key=large)
    # The preloaded rows carry the CREATE's commitTs: older than every change of the batch.
    created_ts = workload.last_ts
    create = workload.take()
    workload.changes(changes)
    batch = workload.take()
    create_dir, changes_dir = bench.dir("scale-create"), bench.dir("scale-changes")
    write_records(create, create_dir, topic=workload.spec.topic)
    write_records(batch, changes_dir, topic=workload.spec.topic)
    definition = workload.tables[0].definition
    rows: list[str] = []
    totals: dict[tuple[int, bool], float] = {}
    created = bench.dir("scale-created")
    run_files(bench.spark, ingest_config(create_dir, created))
    for size in (small, large):
        built_lake = bench.dir(f"scale-{size}")
        shutil.copytree(created, built_lake)
        with stopwatch() as built:
            bench.write(
                preloaded_rows(bench.spark, definition, size, created_ts, first_key=large - size),
                located(built_lake, TableId("bench", "t0")),
            )
        for bounded in (False, True):
            target = bench.dir(f"scale-{size}-{bounded}")
            shutil.copytree(built_lake, target)
            path = located(target, TableId("bench", "t0"))
            timer = MergeTimer()
            with timer.installed(bounded=bounded), stopwatch() as took:
                run_files(bench.spark, ingest_config(changes_dir, target))
            totals[size, bounded] = took[0]
            # Keys below the batch's range exist only in the large table and are untouched.
            expected = workload.live_rows(0) + (size - small)
            actual = bench.spark.read.format("delta").load(path).count()
            if actual != expected:
                raise SystemExit(f"scaling {size:,}: the mirror holds {actual} rows, upstream {expected}")
            logger.warning(
                "bench: scaling %d rows (bounds %s) built in %.1fs, applied in %.1fs",
                size,
                bounded,
                built[0],
                took[0],
            )
            rows.append(
                f"| {size:,} | {'key bounds' if bounded else 'key equality only'} | {built[0]:.1f} s "
                f"| {took[0]:.1f} s | {sum(timer.seconds):.1f} s |"
            )
            if size == large and bounded:
                rewrite = _type_change_rewrite(bench, path, definition)
            shutil.rmtree(target, ignore_errors=True)
        shutil.rmtree(built_lake, ignore_errors=True)
    ratio = totals[large, True] / totals[small, True]
    before = totals[large, False] / totals[small, False]
    bench.headline["scaling"] = fmt_ratio(ratio)
    bench.results["merge_10m_vs_1m"] = ratio
    rewrite_ratio = rewrite / totals[small, True]
    bench.results["type_change_rewrite_10m_vs_merge_1m"] = rewrite_ratio
    bench.target(
        f"apply into {large:,} rows ≤ {TARGET_SCALING}x the time into {small:,} rows",
        ratio,
        ratio <= TARGET_SCALING,
        SCALING_MISSED,
    )
    _section(bench, rows, ratio, before, rewrite, rewrite_ratio)


def _section(
    bench: Bench, rows: list[str], ratio: float, before: float, rewrite: float, rewrite_ratio: float
) -> None:
    """The MERGE scaling section, from the measured rows and ratios."""
    small, large, changes = bench.sizes.scale_small, bench.sizes.scale_large, bench.sizes.scale_changes
    bench.out(
        "## MERGE scaling",
        "",
        f"The same batch of {changes:,} update-heavy changes (uniform over the newest {small:,} keys, "
        f"which both tables hold; inserts take keys above both) applied by `run_files` to a table of "
        f"{small:,} rows and to one of {large:,} rows. The tables were built with `spark.range` after "
        f"the pipeline created them (files in key order, at most {bench.sizes.rows_per_file:,} rows per "
        "file, as a table filled in key order or clustered on its key has). Each table is applied to "
        "twice, from the same copy: with the MERGE condition on key equality only (the product before "
        "this benchmark), and with the batch's key bounds added (the product now).",
        "",
        "| Table rows | MERGE condition | Build | Apply (run_files) | of which MERGE |",
        "|---:|---|---:|---:|---:|",
        *rows,
        "",
        f"Apply time ratio, {large:,} ÷ {small:,} rows: {fmt_ratio(ratio)} with key bounds, "
        f"{fmt_ratio(before)} with key equality only.",
        "",
        "### A type change that rewrites the table",
        "",
        f"After the batch, a MODIFY COLUMN of an integer column to VARCHAR(32) on the {large:,}-row "
        "table: "
        "TiDB converts every stored value and sends no row events, so the mirror rewrites the table with "
        f"the converted values, in one commit. It took {rewrite:.1f} s, {fmt_ratio(rewrite_ratio)} the "
        f"time of applying the batch to the {small:,}-row table (`type_change_rewrite_10m_vs_merge_1m`).",
        "",
    )


def _type_change_rewrite(bench: Bench, path: str, definition: TableDef) -> float:
    """Seconds the mirror takes to follow MODIFY COLUMN <integer> -> VARCHAR(32) on the table at ``path``
    (the values change, so the table is rewritten), as the pipeline applies it."""
    name = next(n for n, k in zip(definition.names[1:], definition.kinds[1:], strict=True) if k in _INTEGERS)
    change = ChangeType(definition.table, name, parse_mysql_type("varchar(32)"))
    metadata = state_to_metadata(TableState(), run_id=0, step="bench type change", consistent=False)
    with stopwatch() as took:
        refused = apply_schema.change_type(bench.spark, path, change, metadata, timezone="UTC", rewrite=True)
    if refused is not None:
        raise SystemExit(f"type change rewrite refused: {refused}")
    logger.warning("bench: type change rewrite of %s took %.1fs", path, took[0])
    return took[0]
