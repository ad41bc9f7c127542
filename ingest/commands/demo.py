"""``demo``: mirror the bundled sample stream into a local lakehouse, by path or into catalog tables by name,
and show what landed where."""

from __future__ import annotations

from importlib.resources import files as package_files
from pathlib import Path

from pyspark.sql import SparkSession

from ingest.config import IngestConfig
from ingest.errors import TablesStopped
from ingest.lake import delta_io
from ingest.model import TableId, tso_to_datetime
from ingest.pipeline import BatchResult, run_files
from ingest.spark import get_session
from ingest.state.table_state import NOT_RETIRED, PROPERTY_RETIRED

BUNDLED_SAMPLE = "samples/canal_json"
# What TiCDC writes of one history, one folder each (the kit's layout): the settings each is read with, and
# whether the folder is the storage sink's root or holds captured Kafka records. The first is the reference.
FORMATS = {
    "canal-json": ({"protocol": "canal-json"}, False),
    "simple-json": ({"protocol": "simple"}, False),
    "simple-avro": ({"protocol": "simple", "simple-encoding": "avro"}, False),
    "open-protocol": ({"protocol": "open-protocol"}, False),
    "storage-canal-json": ({"input-format": "storage", "protocol": "canal-json"}, True),
    "storage-csv": ({"input-format": "storage", "protocol": "csv"}, True),
    "storage-csv-old-value": (
        {"input-format": "storage", "protocol": "csv", "sink-csv-output-old-value": "true"},
        True,
    ),
}


def into_path(target: Path, input_dir: str | None, remote: str | None = None) -> int:
    """The sample mirrored into Delta tables under ``target``."""
    config = IngestConfig.from_params(
        {"input": str(_sample(input_dir)), "target-path": str(target.resolve())}
    )
    _demo_run(get_session(remote=remote), config, f"{target}/")
    print(
        "Rows above G stay pending until every partition's watermark passes them. Run again to see that "
        f"nothing is applied twice, or: ticdc-ingest status --target-path {target}"
    )
    return 0


def into_catalog(input_dir: str | None, remote: str | None, warehouse: str) -> int:
    """The sample mirrored into managed tables of ``spark_catalog`` (the Connect server's, or a local one
    kept in ``warehouse``)."""
    config = IngestConfig.from_params({"input": str(_sample(input_dir)), "target-catalog": "spark_catalog"})
    spark = get_session(remote=remote, catalog_warehouse=None if remote else warehouse)
    result = _demo_run(spark, config, "catalog spark_catalog")
    where = "the Connect server's catalog" if remote else f"--warehouse {warehouse}"
    first = min(result.tables, default=None)
    status = "ticdc-ingest status --target-catalog spark_catalog" + ("" if remote else f" {where}")
    print(
        f"Each table is a managed catalog table; a Spark session of {where} reads it by name, e.g. "
        f"SELECT * FROM spark_catalog.{first or 'db.table'}. The mirror's own state is in "
        f"spark_catalog.ticdc_ingest. Status: {status}"
    )
    return 0


def _sample(input_dir: str | None) -> Path:
    return Path(input_dir) if input_dir else Path(str(package_files("ingest") / BUNDLED_SAMPLE))


def _demo_run(spark: SparkSession, config: IngestConfig, into: str) -> BatchResult:
    sample = config.input_path
    result = run_files(spark, config)
    print()
    print(f"Mirrored {sample} into {into} ({result.describe()})")
    print(f"{'table':<22} {'rows':>5} {'applied TSO':>20}  {'applied at (UTC)':<26} {'pending':>7}")
    for table, report in sorted(result.tables.items()):
        location = config.mirror.address(table)
        rows = delta_io.read(spark, location).count()
        when = tso_to_datetime(report.applied_ts).isoformat() if report.applied_ts else "-"
        print(f"{table!s:<22} {rows:>5} {report.applied_ts:>20}  {when:<26} {report.pending:>7}")
    return result


def across_formats(history: Path, target: Path, remote: str | None = None) -> int:
    """One history as TiCDC wrote it in each format under ``history`` (a folder per format), each mirrored
    into ``target/<format>``; every table compared, cell by cell, with the first format's mirror."""
    spark = get_session(remote=remote)
    present = [name for name in FORMATS if (history / name).is_dir()]
    if not present:
        print(f"error: {history} holds none of the folders {', '.join(FORMATS)}")
        return 2
    mirrors = {name: _format_run(spark, history, target, name) for name in present}
    reference = present[0]
    print()
    print(f"{'format':<22} {'records':>7} {'tables':>6} {'rows':>6}  live tables the same as in {reference}")
    worst = 0
    live = {name: _live(spark, config, result) for name, (config, result, _) in mirrors.items()}
    first = (mirrors[reference][0], live[reference])
    for name, (config, result, stopped) in mirrors.items():
        tables = live[name]
        rows = sum(delta_io.read(spark, config.mirror.address(t)).count() for t in tables)
        differing = [] if name == reference else _differing(spark, first, config, tables)
        same = f"{len(tables) - len(differing)}/{len(tables)} tables" + (
            f" (differ: {', '.join(map(str, differing))})" if differing else ""
        )
        if stopped:
            same += f"; stopped: {stopped}"
        worst = max(worst, 3 if stopped or differing else 0)
        print(f"{name:<22} {result.records:>7} {len(tables):>6} {rows:>6}  {same}")
    return worst


def _format_run(
    spark: SparkSession, history: Path, target: Path, name: str
) -> tuple[IngestConfig, BatchResult, str]:
    params, storage = FORMATS[name]
    records = history / name if storage else history / name / "records.jsonl"
    config = IngestConfig.from_params(
        {**params, "input": str(records), "target-path": str((target / name).resolve())}
    )
    try:
        result, stopped = run_files(spark, config), ""
    except TablesStopped as exc:
        assert isinstance(exc.result, BatchResult)
        result, stopped = exc.result, ", ".join(map(str, exc.stopped))
    print(f"{name}: {result.describe()}")
    return config, result, stopped


def _live(spark: SparkSession, config: IngestConfig, result: BatchResult) -> list[TableId]:
    """The tables the run touched that are live upstream (not dropped, renamed away or retired)."""
    return [
        t
        for t in sorted(result.tables)
        if delta_io.is_delta_table(spark, config.mirror.address(t))
        and delta_io.properties(spark, config.mirror.address(t)).get(PROPERTY_RETIRED, NOT_RETIRED)
        == NOT_RETIRED
    ]


def _differing(
    spark: SparkSession,
    reference: tuple[IngestConfig, list[TableId]],
    config: IngestConfig,
    tables: list[TableId],
) -> list[TableId]:
    """The tables whose upstream columns do not hold the same rows in both mirrors (or are in one only)."""
    reference_config, reference_tables = reference
    differing = sorted(set(reference_tables) - set(tables))
    for table in tables:
        if table not in reference_tables:
            differing.append(table)
            continue
        ours = delta_io.read(spark, config.mirror.address(table))
        theirs = delta_io.read(spark, reference_config.mirror.address(table))
        columns = [c for c in theirs.columns if not c.startswith("_tidb_")]
        if sorted(columns) != sorted(c for c in ours.columns if not c.startswith("_tidb_")):
            differing.append(table)
            continue
        a, b = ours.select(*columns), theirs.select(*columns)
        if a.exceptAll(b).limit(1).count() or b.exceptAll(a).limit(1).count():
            differing.append(table)
    return differing
