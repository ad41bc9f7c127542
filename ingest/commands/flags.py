"""Each command's flags: declared for the parser, and the ones several commands share read back (the mirror
the location flags name, where a local Spark keeps a catalog). No Spark here: the CLI builds its parser from
this module, and ``--help`` or a mistyped flag should not wait for pyspark to import.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, TypeAlias

from ingest import parameters
from ingest.config import IngestConfig
from ingest.errors import ConfigError

if TYPE_CHECKING:
    # What add_subparsers returns: argparse gives it no public name.
    Commands: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]

DEFAULT_WAREHOUSE = "spark-warehouse"


def session_flags() -> argparse.ArgumentParser:
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


def add_run(commands: Commands, session: argparse.ArgumentParser) -> None:
    run = commands.add_parser(
        "run",
        parents=[session],
        help="apply a change stream to the Delta tables, continuing from progress",
        allow_abbrev=False,
    )
    parameters.add_flags(run, parameters.RUN)
    _add_edge_flags(run)


def add_resync(commands: Commands, session: argparse.ArgumentParser) -> None:
    resync = commands.add_parser(
        "resync",
        parents=[session],
        help="rebuild one table from the input (which must still hold its whole history) and swap it in",
        allow_abbrev=False,
    )
    resync.add_argument("--table", required=True, help="the upstream table to rebuild, as database.table")
    parameters.add_flags(resync, parameters.RUN)
    _add_edge_flags(resync)


def add_status(commands: Commands, session: argparse.ArgumentParser) -> None:
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


def add_as_of(commands: Commands, session: argparse.ArgumentParser) -> None:
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


def add_changes(commands: Commands, session: argparse.ArgumentParser) -> None:
    changes = commands.add_parser(
        "changes",
        parents=[session],
        help="what changed upstream between two TSOs or times, per table (the tables' change data feed "
        "between the versions as-of gives for each end)",
    )
    _add_mirror_flags(changes)
    start = changes.add_mutually_exclusive_group(required=True)
    start.add_argument("--from-tso", default=None, help="the range's start, a TiDB TSO (exclusive)")
    start.add_argument("--from-time", default=None, help="the range's start as an ISO 8601 time")
    end = changes.add_mutually_exclusive_group()
    end.add_argument("--to-tso", default=None, help="the range's end, a TiDB TSO (default: the newest G)")
    end.add_argument("--to-time", default=None, help="the range's end as an ISO 8601 time")
    changes.add_argument(
        "--tables", default=None, help="database.table[,...] (default: every mirrored table)"
    )
    changes.add_argument(
        "--net",
        action="store_true",
        help="one row per key over the whole range: inserted, updated (its row at the end) or deleted",
    )
    output = changes.add_mutually_exclusive_group()
    output.add_argument(
        "--sql",
        action="store_true",
        help="print the Spark SQL that reads the changes (the DDLs between as comments)",
    )
    output.add_argument(
        "--out", default=None, metavar="DIR", help="write each table's changes as Parquet under DIR"
    )


def add_verify(commands: Commands, session: argparse.ArgumentParser) -> None:
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


def add_load(commands: Commands, session: argparse.ArgumentParser) -> None:
    load = commands.add_parser(
        "load",
        parents=[session],
        help="initial load from a TiDB Dumpling export; the stream then continues from its snapshot TSO",
    )
    parameters.add_flags(load, parameters.LOAD)


def add_demo(commands: Commands, session: argparse.ArgumentParser) -> None:
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
    demo.add_argument(
        "--formats",
        default=None,
        metavar="DIR",
        help="instead: one history as TiCDC wrote it in each format, a folder per format under DIR "
        "(canal-json, simple-json, simple-avro, open-protocol, storage-canal-json, storage-csv, "
        "storage-csv-old-value), each mirrored into <target-path>/<format> and compared with the first",
    )


def _add_mirror_flags(command: argparse.ArgumentParser, prefix: str = "") -> None:
    """Where a mirror is: its root (or its catalog and schemas), its state and the stream whose progress
    counts. :func:`mirror` reads them back."""
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


MIRROR_KEYS = ("target-path", "state-path", "target-catalog", "target-schema", "state-schema", "stream-id")


def mirror_flags(args: argparse.Namespace, prefix: str = "") -> dict[str, str | None]:
    """The location flags as parameters (with ``prefix``: the other mirror's)."""
    return {key: getattr(args, (prefix + key).replace("-", "_")) for key in MIRROR_KEYS}


def mirror(args: argparse.Namespace, prefix: str = "") -> IngestConfig:
    """The mirror the location flags name (with ``prefix``: the other one), as a run's config locates it;
    its input is not read."""
    given = mirror_flags(args, prefix)
    if not given["target-path"] and not given["target-catalog"]:
        raise ConfigError(f"--{prefix}target-path or --{prefix}target-catalog: say where the mirror is")
    return IngestConfig.from_params({"input": "-", **{k: v for k, v in given.items() if v is not None}})


def catalog_warehouse(warehouse: str | None, by_name: bool) -> str | None:
    """Where a local session keeps a catalog that outlives it: ``--warehouse``, else the default one for a
    mirror by name; None for a mirror by path (Spark's in-memory catalog is enough)."""
    return warehouse if warehouse is not None or not by_name else DEFAULT_WAREHOUSE
