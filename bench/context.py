"""What every step shares: :class:`Bench` (the Spark session, the sizes, the work directory, the report's
lines, targets and results), timing (:func:`stopwatch`, :class:`MergeTimer`), the preloaded rows, Spark job
sites and the number formats of the report."""

from __future__ import annotations

import re
import shutil
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

import ingest.pipeline.segments
from bench.sizes import Sizes
from ingest.apply import schema as apply_schema
from ingest.config import IngestConfig
from ingest.lake import delta_io
from ingest.lake.mirror import Mirror
from ingest.model import ColumnKind, TableId, TableState
from ingest.mysql.ddl import CreateTable, parse_ddl
from ingest.state.table_state import COMMIT_TS_COLUMN, state_to_metadata
from testkit.workload import DATETIME_BASE_MICROS, KeyDistribution, Mix, TableDef, WorkloadSpec


@contextmanager
def stopwatch() -> Iterator[list[float]]:
    box: list[float] = []
    started = time.perf_counter()
    try:
        yield box
    finally:
        box.append(time.perf_counter() - started)


@dataclass
class MergeTimer:
    """Times each MERGE command alone: the SQL MERGE inside its commit settings, not the work around it
    (the pipeline calls both functions by name)."""

    seconds: list[float] = field(default_factory=list)

    @contextmanager
    def installed(self, *, bounded: bool = True) -> Iterator[MergeTimer]:
        """``bounded=False`` drops the key bounds, to measure the MERGE as it was before they existed."""
        original_apply, original_merge = ingest.pipeline.segments.apply_merge, delta_io.merge

        def unbounded(*args: Any, **kwargs: Any) -> Any:
            kwargs.pop("bounds", None)
            return original_apply(*args[:6], **kwargs)  # spark, path, source, key, columns, metadata

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return original_merge(*args, **kwargs)
            finally:
                self.seconds.append(time.perf_counter() - started)

        if not bounded:
            ingest.pipeline.segments.apply_merge = unbounded  # type: ignore[assignment]
        delta_io.merge = timed
        try:
            yield self
        finally:
            ingest.pipeline.segments.apply_merge = original_apply
            delta_io.merge = original_merge


def sql_value(kind: ColumnKind, column: int, key: Column) -> Column:
    """Spark's twin of testkit.workload.preloaded_value: the same values from the same key."""
    if kind is ColumnKind.BIGINT:
        return key
    if kind is ColumnKind.INT:
        return ((key * 31 + column) % 1_000_000).cast("int")
    if kind is ColumnKind.VARCHAR:
        return F.concat(F.lit(f"v{column}-"), key.cast("string"))
    if kind is ColumnKind.DECIMAL:
        return (((key * 7 + column) % 10_000_000).cast("decimal(12,0)") / 100).cast("decimal(12,2)")
    if kind is ColumnKind.DATETIME:
        return F.timestamp_seconds(F.lit(DATETIME_BASE_MICROS // 1_000_000) + key).cast("timestamp_ntz")
    raise ValueError(kind)


def preloaded_rows(
    spark: SparkSession, definition: TableDef, rows: int, commit_ts: int, *, first_key: int = 0
) -> DataFrame:
    """The rows ``testkit.workload`` takes to exist before its stream (``rows`` keys from ``first_key``)."""
    key = F.col("id")
    columns = [
        sql_value(kind, index, key).alias(name)
        for index, (name, kind) in enumerate(zip(definition.names, definition.kinds, strict=True))
    ]
    return spark.range(first_key, first_key + rows).select(
        *columns, F.lit(commit_ts).cast("long").alias(COMMIT_TS_COLUMN)
    )


def ingest_config(input_dir: Path, target: Path, **params: str) -> IngestConfig:
    return IngestConfig.from_params({"input": str(input_dir), "target-path": str(target), **params})


def rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else float("nan")


def fmt_rate(value: float) -> str:
    return f"{value:,.0f}"


def fmt_ratio(value: float) -> str:
    return f"{value:.2f}x"


def located(root: Path, table: TableId) -> str:
    """Where a path-mode mirror under ``root`` keeps ``table`` (the product's own locator)."""
    return Mirror(root=str(root)).address(table)


def job_sites(spark: SparkSession, group: str) -> Counter[str]:
    """The jobs of a job group by the call site Spark recorded for each (its first stage's name: for a job
    started from Python, the action and the Python file and line that called it)."""
    tracker = spark.sparkContext.statusTracker()
    sites: Counter[str] = Counter()
    for job in tracker.getJobIdsForGroup(group):
        info = tracker.getJobInfo(job)
        stages = sorted(info.stageIds) if info else []
        stage = tracker.getStageInfo(stages[0]) if stages else None
        name = stage.name if stage else "(unknown)"
        sites[re.sub(r"\S*/(ingest|bench)/", r"\1/", name).replace("|", "/")] += 1
    return sites


@dataclass
class Bench:
    """One run's shared state: each step reads the session and sizes, and adds its report lines, targets,
    headline figures and results."""

    spark: SparkSession
    sizes: Sizes
    workdir: Path
    lines: list[str] = field(default_factory=list)
    targets: list[tuple[str, str, str, str]] = field(default_factory=list)
    headline: dict[str, str] = field(default_factory=dict)
    results: dict[str, float] = field(default_factory=dict)  # bench/results.json
    ingester_rows: list[str] = field(default_factory=list)
    # A smoke run shows the report's shape only: a run configured as one already made is not made again.
    smoke: bool = False
    tables_runs: int = 0  # tables.py numbers its runs: Spark lists a job group's jobs across every run

    def dir(self, name: str) -> Path:
        path = self.workdir / name
        shutil.rmtree(path, ignore_errors=True)
        return path

    def out(self, *lines: str) -> None:
        self.lines.extend(lines)

    def target(self, text: str, ratio: float, met: bool, why_missed: str) -> None:
        self.targets.append((text, fmt_ratio(ratio), "met" if met else "missed", "" if met else why_missed))

    def spec(
        self, mix: Mix, keys: KeyDistribution = KeyDistribution.UNIFORM, tables: int = 1
    ) -> WorkloadSpec:
        # One watermark per 10k events: G always reaches the end of the batch, as in a steady stream.
        return WorkloadSpec(
            tables=tables, width=self.sizes.width, mix=mix, keys=keys, partitions=self.sizes.partitions
        )

    def mirror_table(self, path: Path, definition: TableDef) -> None:
        """An empty table created by the product, with every property a mirrored table carries."""
        statement = parse_ddl(definition.create_sql, definition.table.schema)
        assert isinstance(statement, CreateTable)
        apply_schema.create_table(
            self.spark,
            str(path),
            definition.table,
            statement.schema,
            state_to_metadata(TableState(), run_id=0, step="bench"),
        )

    def write(self, frame: DataFrame, path: str) -> None:
        frame.write.format("delta").mode("append").option("maxRecordsPerFile", self.sizes.rows_per_file).save(
            path
        )
