"""What several commands read from their flags: the mirror the location flags name, and where a local Spark
keeps a catalog. No Spark here: the CLI imports it before it knows the command, and ``--help`` or a mistyped
flag should not wait for pyspark to import.
"""

from __future__ import annotations

import argparse

from ingest.config import IngestConfig
from ingest.errors import ConfigError

DEFAULT_WAREHOUSE = "spark-warehouse"


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
