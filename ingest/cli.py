"""``ticdc-ingest``: the entry point for job tasks and the command line.

Parameters arrive as ``--key=value`` (Databricks ``named_parameters``) or ``--key value``; they go through
``IngestConfig.from_params`` and nowhere else.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from importlib.resources import files as package_files
from pathlib import Path
from typing import TYPE_CHECKING

from ingest import parameters, secrets
from ingest.config import IngestConfig, SourceKind
from ingest.errors import ConfigError, IngestError, TablesStopped
from ingest.model import TableId, tso_to_datetime
from ingest.parameters import params_from_toml

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ingest.pipeline import BatchResult

logger = logging.getLogger("ingest")

BUNDLED_SAMPLE = "samples/canal_json"
DEFAULT_WAREHOUSE = "spark-warehouse"


def _session_flags() -> argparse.ArgumentParser:
    """Where Spark runs: given before or after the subcommand; never part of IngestConfig."""
    flags = argparse.ArgumentParser(add_help=False)
    flags.add_argument(
        "--spark-remote",
        default=argparse.SUPPRESS,
        metavar="sc://HOST:PORT",
        help="run on a Spark Connect server (default: $SPARK_REMOTE; without either, a local Spark); "
        "ignored on Databricks, which provides the session",
    )
    flags.add_argument(
        "--warehouse",
        default=argparse.SUPPRESS,
        metavar="DIR",
        help="a local Spark's warehouse, for --target-catalog spark_catalog: the managed tables and the "
        f"catalog that lists them (an embedded Derby metastore) (default: ./{DEFAULT_WAREHOUSE})",
    )
    return flags


def _parser() -> argparse.ArgumentParser:
    session = _session_flags()
    parser = argparse.ArgumentParser(
        prog="ticdc-ingest",
        description="Mirror TiDB tables into Delta Lake from TiCDC change streams.",
        parents=[session],
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG level")
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser(
        "run",
        parents=[session],
        help="apply a change stream to the Delta tables, continuing from progress",
        allow_abbrev=False,
    )
    parameters.add_flags(run, parameters.RUN)
    _add_edge_flags(run)

    resync = commands.add_parser(
        "resync",
        parents=[session],
        help="rebuild one table from the input (which must still hold its whole history) and swap it in",
        allow_abbrev=False,
    )
    resync.add_argument("--table", required=True, help="the upstream table to rebuild, as database.table")
    parameters.add_flags(resync, parameters.RUN)
    _add_edge_flags(resync)

    status = commands.add_parser(
        "status", parents=[session], help="per table: applied TSO and its time, lag, rows, pending, bad"
    )
    _add_mirror_flags(status)
    status.add_argument(
        "--lag-chart",
        default=None,
        metavar="FILE.png",
        help="also draw lag over time (G and every table, one point per committed run) into a PNG",
    )

    as_of = commands.add_parser(
        "as-of",
        parents=[session],
        help="the Delta version of every table that equals upstream at a TSO or time (the newest run's G "
        "at or below it)",
    )
    _add_mirror_flags(as_of)
    moment = as_of.add_mutually_exclusive_group(required=True)
    moment.add_argument("--tso", default=None, help="a TiDB TSO, e.g. 470591795363840000")
    moment.add_argument(
        "--time", default=None, help="an ISO 8601 time (UTC unless it says), e.g. 2026-11-20T09:00Z"
    )
    as_of.add_argument("--tables", default=None, help="database.table[,...] (default: every mirrored table)")
    as_of.add_argument(
        "--sql",
        action="store_true",
        help="print a SELECT ... VERSION AS OF query per table instead of a table",
    )

    verify = commands.add_parser(
        "verify",
        parents=[session],
        help="compare the mirror, read as of a TSO, with a Dumpling export at that TSO or with another "
        "mirror; exit code 0 when every table matches, 1 when one does not",
    )
    _add_mirror_flags(verify)
    verify.add_argument("--snapshot", default=None, help="a Dumpling export; its metadata names the TSO")
    verify.add_argument("--other-target-path", default=None, help="or: another mirror of the same upstream")
    verify.add_argument("--other-state-path", default=None, help="its state (default: <other>/_ingest)")
    verify.add_argument("--other-target-catalog", default=None, help="or: another mirror, of catalog tables")
    verify.add_argument("--other-target-schema", default=None, help="its tables' schema template")
    verify.add_argument("--other-state-schema", default=None, help="its state's schema")
    verify.add_argument("--other-stream-id", default="default", help="its stream")
    verify.add_argument(
        "--tso", default=None, help="with --other-target-path: the TSO (default: the lower of the newest Gs)"
    )
    verify.add_argument("--tables", default=None, help="database.table[,...] (default: all)")
    verify.add_argument(
        "--max-keys", type=int, default=100, help="differing keys listed per table (default 100)"
    )
    verify.add_argument(
        "--chunk-rows", type=int, default=200_000, help="rows per checksum chunk (default 200000)"
    )
    verify.add_argument("--timezone", default="UTC", help="Dumpling's session time zone (default: UTC)")
    verify.add_argument("--csv-separator", default=None, help="as for load")
    verify.add_argument("--csv-delimiter", default=None, help="as for load")
    verify.add_argument("--csv-null-value", default=None, help="as for load")
    verify.add_argument("--csv-line-terminator", default=None, help="as for load")
    verify.add_argument("--no-header", action="store_const", const="true", default=None, help="as for load")

    load = commands.add_parser(
        "load",
        parents=[session],
        help="initial load from a TiDB Dumpling export; the stream then continues from its snapshot TSO",
    )
    parameters.add_flags(load, parameters.LOAD)

    demo = commands.add_parser(
        "demo", parents=[session], help="mirror the bundled sample stream into a local lakehouse"
    )
    demo.add_argument(
        "--target-path", default="lakehouse", help="directory for the Delta tables (default: ./lakehouse)"
    )
    demo.add_argument("--input", default=None, help="sample records to use (default: the bundled sample)")
    demo.add_argument(
        "--catalog",
        action="store_true",
        help="mirror into catalog tables by name instead (spark_catalog.<database>.<table>, under "
        f"--warehouse, default ./{DEFAULT_WAREHOUSE}), which any Spark session of that warehouse can SELECT",
    )
    return parser


def _add_mirror_flags(command: argparse.ArgumentParser, prefix: str = "") -> None:
    """Where a mirror is: its root (or its catalog and schemas), its state and the stream whose progress
    counts."""
    command.add_argument(f"--{prefix}target-path", default=None, help="root of the mirror")
    command.add_argument(
        f"--{prefix}state-path", default=None, help="where progress lives (default: <target-path>/_ingest)"
    )
    command.add_argument(
        f"--{prefix}target-catalog", default=None, help="or: the catalog of a mirror of catalog tables"
    )
    command.add_argument(
        f"--{prefix}target-schema", default=None, help="its tables' schema template (default: {database})"
    )
    command.add_argument(
        f"--{prefix}state-schema", default=None, help="its state's schema (default: ticdc_ingest)"
    )
    command.add_argument(f"--{prefix}stream-id", default="default", help="whose progress to read")


MIRROR_KEYS = ("target-path", "state-path", "target-catalog", "target-schema", "state-schema", "stream-id")


def _mirror_flags(args: argparse.Namespace, prefix: str = "") -> dict[str, str | None]:
    """The location flags as parameters (with ``prefix``: the other mirror's)."""
    return {key: getattr(args, (prefix + key).replace("-", "_")) for key in MIRROR_KEYS}


def _mirror(args: argparse.Namespace, prefix: str = "") -> IngestConfig:
    """The mirror the location flags name (with ``prefix``: the other one), as a run's config locates it;
    its input is not read."""
    given = _mirror_flags(args, prefix)
    if not given["target-path"] and not given["target-catalog"]:
        raise ConfigError(f"--{prefix}target-path or --{prefix}target-catalog: say where the mirror is")
    return IngestConfig.from_params({"input": "-", **{k: v for k, v in given.items() if v is not None}})


def _catalog_warehouse(warehouse: str | None, by_name: bool) -> str | None:
    """Where a local session keeps a catalog that outlives it: ``--warehouse``, else the default one for a
    mirror by name; None for a mirror by path (Spark's in-memory catalog is enough)."""
    return warehouse if warehouse is not None or not by_name else DEFAULT_WAREHOUSE


def _add_edge_flags(run: argparse.ArgumentParser) -> None:
    """Flags of the command line itself, not of the mirror: they never reach IngestConfig."""
    run.add_argument(
        "--config",
        default=None,
        help="a TOML file of 'key = value' settings (the same keys as these flags, without '--'); flags "
        "given on the command line win over the file",
    )
    run.add_argument(
        "--progress",
        default="auto",
        choices=["auto", "on", "off"],
        help="progress lines on stderr: records, bytes and offsets done per partition (auto: when stderr "
        "is a terminal; costs one extra pass over the input)",
    )


def _params(args: argparse.Namespace) -> dict[str, str]:
    """Config parameters from the flags given, on top of the TOML file if there is one."""
    edge = {"command", "verbose", "config", "progress", "table", "spark_remote", "warehouse"}
    flags = {k.replace("_", "-"): v for k, v in vars(args).items() if k not in edge and v is not None}
    if not args.config:
        return flags
    try:
        text = Path(args.config).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"config: cannot read {args.config}: {exc}") from exc
    return {**params_from_toml(text), **flags}


def mirror_main() -> int:
    """Entry point of the mirror job task (``ticdc-ingest-mirror``): named parameters are ``run``'s."""
    return main(["run", *sys.argv[1:]])


def backfill_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the backfill job task (``ticdc-ingest-backfill``): catch up from the input and stop.

    The named parameter ``mode=load`` makes it the initial load from a Dumpling export (``load``) instead.
    """
    return main(_backfill_arguments(list(sys.argv[1:] if argv is None else argv)))


def _backfill_arguments(arguments: list[str]) -> list[str]:
    modes = [a for a in arguments if a.startswith("--mode=")]
    rest = [a for a in arguments if not a.startswith("--mode=")]
    mode = modes[-1].partition("=")[2] if modes else "run"
    if mode not in ("run", "load"):
        raise SystemExit(
            f"error: mode: {mode!r} is not supported; use run (catch up) or load (Dumpling export)"
        )
    return [mode, *rest]


# Some tables stopped before a DDL the mirror does not apply; every other table was applied.
STOPPED_EXIT_CODE = 3


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the process exit code."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if _without_subcommand(arguments):
        # Databricks python_wheel_task passes named_parameters as --key=value only, with no subcommand.
        arguments.insert(0, "run")
    arguments, kafka_options = _kafka_options(arguments)
    args = _parser().parse_args(arguments)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    for noisy in ("py4j", "sqlglot"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    remote: str | None = getattr(args, "spark_remote", None)
    warehouse: str | None = getattr(args, "warehouse", None)
    try:
        if args.command == "demo":
            if args.catalog:
                return _demo_catalog(args.input, remote, warehouse or DEFAULT_WAREHOUSE)
            return _demo(Path(args.target_path), args.input, remote)
        if args.command == "status":
            return _status(_mirror(args), args.lag_chart, remote, warehouse)
        if args.command == "as-of":
            return _as_of(args, warehouse)
        if args.command == "verify":
            return _verify(args, warehouse)
        if args.command == "load":
            return _load(vars(args))
        config = IngestConfig.from_params({**_params(args), **kafka_options})
        warehouse = _catalog_warehouse(warehouse, config.by_name)
        if args.command == "resync":
            return _resync(config, args.table, remote, warehouse)
        show = args.progress == "on" or (args.progress == "auto" and sys.stderr.isatty())
        return _run(config, show_progress=show, remote=remote, warehouse=warehouse)
    except IngestError as exc:
        logger.error("%s", exc)
        print(f"error: {secrets.redact(str(exc))}", file=sys.stderr)
        return 2


def _without_subcommand(arguments: list[str]) -> bool:
    """True when the first argument that is not a global flag (``--spark-remote``, ``-v``) is a ``--key``."""
    items = iter(arguments)
    for item in items:
        if item in ("--spark-remote", "--warehouse"):
            next(items, None)
        elif item.startswith(("--spark-remote=", "--warehouse=")) or item in ("-v", "--verbose"):
            continue
        else:
            return item.startswith("--") and item != "--help"
    return False


def _kafka_options(arguments: list[str]) -> tuple[list[str], dict[str, str]]:
    """Take ``--kafka.<option>=<value>`` (or ``--kafka.<option> <value>``) out of the arguments."""
    rest: list[str] = []
    options: dict[str, str] = {}
    items = iter(arguments)
    for item in items:
        if not item.startswith("--kafka."):
            rest.append(item)
            continue
        key, sep, value = item[2:].partition("=")
        if not sep:
            value = next(items, "")
        options[key] = value
    return rest, options


def _run(
    config: IngestConfig, show_progress: bool = False, remote: str | None = None, warehouse: str | None = None
) -> int:
    from ingest.pipeline import BatchResult, run_files
    from ingest.spark import get_session

    logger.info("config: %s", config)
    spark = get_session(remote=remote, catalog_warehouse=warehouse)
    if config.source is SourceKind.KAFKA:
        from ingest.commands.stream import run_kafka

        results = run_kafka(spark, config)
        print(f"{len(results)} batches")
    else:

        def progress_line(line: str) -> None:
            print(line, file=sys.stderr, flush=True)

        try:
            results = [run_files(spark, config, progress_line if show_progress else None)]
        except TablesStopped as exc:
            assert isinstance(exc.result, BatchResult)
            results = [exc.result]
    for result in results:
        print(result.describe())
        for report in sorted(result.tables.values(), key=lambda r: str(r.table)):
            print("  " + report.describe())
    stopped = [r for r in results[-1].tables.values() if r.stopped] if results else []
    if stopped:
        for report in stopped:
            print(f"error: {report.stopped}", file=sys.stderr)
        return STOPPED_EXIT_CODE
    return 0


def _load(flags: dict[str, str | None]) -> int:
    from ingest.commands.load import load_dumpling
    from ingest.load_config import LoadConfig
    from ingest.spark import get_session

    session_keys = ("command", "verbose", "spark_remote", "warehouse")
    params = {k: v for k, v in flags.items() if k not in session_keys and v is not None}
    config = LoadConfig.from_params(params)
    logger.info("config: %s", config)
    warehouse = _catalog_warehouse(flags.get("warehouse"), config.target_catalog is not None)
    result = load_dumpling(get_session(remote=flags.get("spark_remote"), catalog_warehouse=warehouse), config)
    print(result.describe())
    for table in result.tables:
        print("  " + table.describe())
    return 0


def _resync(
    config: IngestConfig, table_name: str, remote: str | None = None, warehouse: str | None = None
) -> int:
    from ingest.commands.resync import resync_table
    from ingest.spark import get_session

    schema, dot, table = table_name.partition(".")
    if not dot or not schema or not table:
        raise ConfigError(f"table: expected database.table, got {table_name!r}")
    result = resync_table(
        get_session(remote=remote, catalog_warehouse=warehouse), config, TableId(schema, table)
    )
    print(result.describe())
    return 0


def _status(
    config: IngestConfig,
    lag_chart: str | None = None,
    remote: str | None = None,
    warehouse: str | None = None,
) -> int:
    from ingest.commands import status
    from ingest.lake import delta_log
    from ingest.spark import get_session

    warehouse = _catalog_warehouse(warehouse, config.by_name)
    try:
        # No JVM for a mirror on this machine: the answer is in its Delta logs.
        committed, tables = status.collect_local(config)
    except delta_log.Unreadable as why:
        logging.getLogger(__name__).info("status: reading the mirror through Spark (%s)", why)
        committed, tables = status.collect(get_session(remote=remote, catalog_warehouse=warehouse), config)
    print(status.render(committed, tables))
    if lag_chart:
        spark = get_session(remote=remote, catalog_warehouse=warehouse)
        lines = status.plot_lag_chart(status.lag_history(spark, config), lag_chart)
        print(f"lag chart: {lines} lines (G and tables) drawn into {lag_chart}")
    return 0


def _as_of(args: argparse.Namespace, warehouse: str | None = None) -> int:
    from ingest.commands import asof
    from ingest.lake import delta_log
    from ingest.spark import get_session

    tso = asof.parse_moment(args.tso, args.time)
    tables = asof.parse_tables(args.tables)
    mirror = _mirror(args)
    try:
        # No JVM for a mirror on this machine: the answer is in its Delta logs.
        answer = asof.resolve_local(mirror, tso, tables)
    except delta_log.Unreadable as why:
        logging.getLogger(__name__).info("as-of: reading the mirror through Spark (%s)", why)
        warehouse = _catalog_warehouse(warehouse, mirror.by_name)
        spark = get_session(remote=getattr(args, "spark_remote", None), catalog_warehouse=warehouse)
        answer = asof.resolve(spark, mirror, tso, tables)
    if args.sql:
        print(f"-- as of TSO {tso}: run {answer.run_id}, G = {answer.g} ({answer.g_time.isoformat()})")
        for table in answer.tables:
            print(table.sql() + ";")
    else:
        print(answer.describe())
    return 0


def _verify(args: argparse.Namespace, warehouse: str | None = None) -> int:
    from ingest.commands import asof, verify
    from ingest.load_config import LoadConfig
    from ingest.spark import get_session

    other = args.other_target_path or args.other_target_catalog
    if (args.snapshot is None) == (other is None):
        raise ConfigError(
            "verify: compare with one of --snapshot (a Dumpling export) or another mirror "
            "(--other-target-path or --other-target-catalog)"
        )
    limits = verify.Limits(max_keys=args.max_keys, chunk_rows=args.chunk_rows)
    tables = asof.parse_tables(args.tables)
    mirror = _mirror(args)
    warehouse = _catalog_warehouse(warehouse, mirror.by_name or bool(args.other_target_catalog))
    spark = get_session(remote=getattr(args, "spark_remote", None), catalog_warehouse=warehouse)
    if args.snapshot is not None:
        if args.tso is not None:
            raise ConfigError(
                "tso: with --snapshot the TSO is the export's own (its metadata); leave --tso out"
            )
        flags = {
            "input": args.snapshot, **_mirror_flags(args),
            "timezone": args.timezone, "csv-separator": args.csv_separator,
            "csv-delimiter": args.csv_delimiter, "csv-null-value": args.csv_null_value,
            "csv-line-terminator": args.csv_line_terminator, "no-header": args.no_header,
        }  # fmt: skip
        config = LoadConfig.from_params({k: v for k, v in flags.items() if v is not None})
        report = verify.verify_snapshot(spark, config, tables, limits)
    else:
        report = verify.verify_mirrors(
            spark,
            mirror,
            _mirror(args, "other-"),
            tso=None if args.tso is None else asof.parse_moment(args.tso, None),
            tables=tables,
            limits=limits,
        )
    print(report.render())
    return 0 if report.matches else 1


def _demo(target: Path, input_dir: str | None, remote: str | None = None) -> int:
    from ingest.spark import get_session

    config = IngestConfig.from_params(
        {"input": str(_sample(input_dir)), "target-path": str(target.resolve())}
    )
    _demo_run(get_session(remote=remote), config, f"{target}/")
    print(
        "Rows above G stay pending until every partition's watermark passes them. Run again to see that "
        f"nothing is applied twice, or: ticdc-ingest status --target-path {target}"
    )
    return 0


def _demo_catalog(input_dir: str | None, remote: str | None, warehouse: str) -> int:
    from ingest.spark import get_session

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
    from ingest.lake import delta_io
    from ingest.pipeline import run_files

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


if __name__ == "__main__":
    raise SystemExit(main())
