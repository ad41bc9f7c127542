"""``ticdc-ingest``: the entry point for job tasks and the command line.

Parameters arrive as ``--key=value`` (Databricks ``named_parameters``) or ``--key value``; they go through
``IngestConfig.from_params`` and nowhere else. ``ingest.commands.flags`` declares each command's flags; here
they are parsed and handed to the command's module under ``ingest.commands``.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from ingest import secrets
from ingest.commands import flags
from ingest.config import IngestConfig
from ingest.errors import ConfigError, IngestError
from ingest.load_config import LoadConfig
from ingest.parameters import params_from_toml

logger = logging.getLogger("ingest")


def _parser() -> argparse.ArgumentParser:
    session = flags.session_flags()
    parser = argparse.ArgumentParser(
        prog="ticdc-ingest",
        description="Mirror TiDB tables into Delta Lake from TiCDC change streams.",
        parents=[session],
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG level")
    commands = parser.add_subparsers(dest="command", required=True)
    # The order the usage line and the help list them in.
    subcommands = [
        flags.add_run, flags.add_resync, flags.add_status, flags.add_as_of, flags.add_changes,
        flags.add_verify, flags.add_load,
        flags.add_demo,
    ]  # fmt: skip
    for add in subcommands:
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

        if args.formats:
            return demo.across_formats(Path(args.formats), Path(args.target_path), remote)
        if args.catalog:
            return demo.into_catalog(args.input, remote, warehouse or flags.DEFAULT_WAREHOUSE)
        return demo.into_path(Path(args.target_path), args.input, remote)
    if args.command == "status":
        located = flags.mirror(args)
        from ingest.commands import status

        return status.command(located, args.lag_chart, remote, warehouse)
    if args.command == "as-of":
        from ingest.commands import asof

        return asof.command(args, warehouse)
    if args.command == "changes":
        from ingest.commands import changes_out

        return changes_out.command(args, warehouse)
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
