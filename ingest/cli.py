"""``ticdc-ingest``: the entry point for job tasks and the command line.

Parameters arrive as ``--key=value`` (Databricks ``named_parameters``) or ``--key value``; they go through
``IngestConfig.from_params`` and nowhere else. Each command's work is in its module under
``ingest.commands``; here the flags are declared, parsed and handed to it.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from ingest import parameters, secrets
from ingest.commands import flags
from ingest.commands.flags import DEFAULT_WAREHOUSE
from ingest.config import IngestConfig
from ingest.errors import ConfigError, IngestError
from ingest.load_config import LoadConfig
from ingest.parameters import params_from_toml

if TYPE_CHECKING:
    # What add_subparsers returns: argparse gives it no public name.
    Commands: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]

logger = logging.getLogger("ingest")


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


def _add_run(commands: Commands, session: argparse.ArgumentParser) -> None:
    run = commands.add_parser(
        "run",
        parents=[session],
        help="apply a change stream to the Delta tables, continuing from progress",
        allow_abbrev=False,
    )
    parameters.add_flags(run, parameters.RUN)
    _add_edge_flags(run)


def _add_resync(commands: Commands, session: argparse.ArgumentParser) -> None:
    resync = commands.add_parser(
        "resync",
        parents=[session],
        help="rebuild one table from the input (which must still hold its whole history) and swap it in",
        allow_abbrev=False,
    )
    resync.add_argument("--table", required=True, help="the upstream table to rebuild, as database.table")
    parameters.add_flags(resync, parameters.RUN)
    _add_edge_flags(resync)


def _add_status(commands: Commands, session: argparse.ArgumentParser) -> None:
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


def _add_as_of(commands: Commands, session: argparse.ArgumentParser) -> None:
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


def _add_verify(commands: Commands, session: argparse.ArgumentParser) -> None:
    verify = commands.add_parser(
        "verify",
        parents=[session],
        help="compare the mirror, read as of a TSO, with a Dumpling export at that TSO or with another "
        "mirror; exit code 0 when every table matches, 1 when one does not",
    )
    _add_mirror_flags(verify)
    verify.add_argument("--snapshot", default=None, help="a Dumpling export; its metadata names the TSO")
    _add_other_mirror_flags(verify)
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
    _add_export_format_flags(verify)


def _add_other_mirror_flags(verify: argparse.ArgumentParser) -> None:
    """The mirror ``verify`` compares with, instead of an export."""
    verify.add_argument("--other-target-path", default=None, help="or: another mirror of the same upstream")
    verify.add_argument("--other-state-path", default=None, help="its state (default: <other>/_ingest)")
    verify.add_argument("--other-target-catalog", default=None, help="or: another mirror, of catalog tables")
    verify.add_argument("--other-target-schema", default=None, help="its tables' schema template")
    verify.add_argument("--other-state-schema", default=None, help="its state's schema")
    verify.add_argument("--other-stream-id", default="default", help="its stream")


def _add_export_format_flags(verify: argparse.ArgumentParser) -> None:
    """How the export ``verify`` reads was written: ``load``'s flags of the same names."""
    verify.add_argument("--timezone", default="UTC", help="Dumpling's session time zone (default: UTC)")
    verify.add_argument("--csv-separator", default=None, help="as for load")
    verify.add_argument("--csv-delimiter", default=None, help="as for load")
    verify.add_argument("--csv-null-value", default=None, help="as for load")
    verify.add_argument("--csv-line-terminator", default=None, help="as for load")
    verify.add_argument("--no-header", action="store_const", const="true", default=None, help="as for load")


def _add_load(commands: Commands, session: argparse.ArgumentParser) -> None:
    load = commands.add_parser(
        "load",
        parents=[session],
        help="initial load from a TiDB Dumpling export; the stream then continues from its snapshot TSO",
    )
    parameters.add_flags(load, parameters.LOAD)


def _add_demo(commands: Commands, session: argparse.ArgumentParser) -> None:
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


def _add_mirror_flags(command: argparse.ArgumentParser, prefix: str = "") -> None:
    """Where a mirror is: its root (or its catalog and schemas), its state and the stream whose progress
    counts. ``flags.mirror`` reads them back."""
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


def _parser() -> argparse.ArgumentParser:
    session = _session_flags()
    parser = argparse.ArgumentParser(
        prog="ticdc-ingest",
        description="Mirror TiDB tables into Delta Lake from TiCDC change streams.",
        parents=[session],
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG level")
    commands = parser.add_subparsers(dest="command", required=True)
    # The order the usage line and the help list them in.
    for add in (_add_run, _add_resync, _add_status, _add_as_of, _add_verify, _add_load, _add_demo):
        add(commands, session)
    return parser


def _params(args: argparse.Namespace) -> dict[str, str]:
    """Config parameters from the flags given, on top of the TOML file if there is one."""
    edge = {"command", "verbose", "config", "progress", "table", "spark_remote", "warehouse"}
    given = {k.replace("_", "-"): v for k, v in vars(args).items() if k not in edge and v is not None}
    if not args.config:
        return given
    try:
        text = Path(args.config).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"config: cannot read {args.config}: {exc}") from exc
    return {**params_from_toml(text), **given}


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
    try:
        return _dispatch(args, kafka_options)
    except IngestError as exc:
        logger.error("%s", exc)
        print(f"error: {secrets.redact(str(exc))}", file=sys.stderr)
        return 2


def _dispatch(args: argparse.Namespace, kafka_options: dict[str, str]) -> int:
    """Hand the parsed flags to the command. Its module is imported only now: each imports pyspark, which
    ``--help`` and a mistyped flag should not wait for."""
    remote: str | None = getattr(args, "spark_remote", None)
    warehouse: str | None = getattr(args, "warehouse", None)
    if args.command == "demo":
        from ingest.commands import demo

        if args.catalog:
            return demo.into_catalog(args.input, remote, warehouse or DEFAULT_WAREHOUSE)
        return demo.into_path(Path(args.target_path), args.input, remote)
    if args.command == "status":
        located = flags.mirror(args)
        from ingest.commands import status

        return status.command(located, args.lag_chart, remote, warehouse)
    if args.command == "as-of":
        from ingest.commands import asof

        return asof.command(args, warehouse)
    if args.command == "verify":
        from ingest.commands import verify

        return verify.command(args, warehouse)
    if args.command == "load":
        return _load(args, remote, warehouse)
    return _run_or_resync(args, kafka_options, remote, warehouse)


def _load(args: argparse.Namespace, remote: str | None, warehouse: str | None) -> int:
    """``load``: every flag but the session's is a setting of the load."""
    session_keys = ("command", "verbose", "spark_remote", "warehouse")
    config = LoadConfig.from_params(
        {k: v for k, v in vars(args).items() if k not in session_keys and v is not None}
    )
    logger.info("config: %s", config)
    from ingest.commands import load

    return load.command(config, remote, warehouse)


def _run_or_resync(
    args: argparse.Namespace, kafka_options: dict[str, str], remote: str | None, warehouse: str | None
) -> int:
    """``run`` and ``resync`` take the same settings, from the flags and the ``--config`` file."""
    config = IngestConfig.from_params({**_params(args), **kafka_options})
    warehouse = flags.catalog_warehouse(warehouse, config.by_name)
    if args.command == "resync":
        from ingest.commands import resync

        return resync.command(config, args.table, remote, warehouse)
    from ingest.commands import run

    show = args.progress == "on" or (args.progress == "auto" and sys.stderr.isatty())
    logger.info("config: %s", config)
    return run.command(config, show_progress=show, remote=remote, warehouse=warehouse)


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


if __name__ == "__main__":
    raise SystemExit(main())
