"""``demo``: mirror the bundled sample stream into a local lakehouse, by path or into catalog tables by name,
and show what landed where."""

from __future__ import annotations

from importlib.resources import files as package_files
from pathlib import Path

from pyspark.sql import SparkSession

from ingest.config import IngestConfig
from ingest.lake import delta_io
from ingest.model import tso_to_datetime
from ingest.pipeline import BatchResult, run_files
from ingest.spark import get_session

BUNDLED_SAMPLE = "samples/canal_json"


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
