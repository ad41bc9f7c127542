"""Notebook parameters: Databricks widgets when there are any, else environment variables over defaults.

The notebooks in ``notebooks/`` call :func:`notebook_params` with ``globals().get("dbutils")`` and
``os.environ``; the result goes to ``IngestConfig.from_params`` like job parameters do.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ENV_PREFIX = "INGEST_"
# Where a mirror is, as widgets: a target path, or a catalog with its schemas (empty: not set).
MIRROR_WIDGETS = {"target-path": "", "target-catalog": "", "target-schema": "", "state-schema": ""}


def env_name(key: str) -> str:
    """``target-path`` -> ``INGEST_TARGET_PATH``."""
    return ENV_PREFIX + key.replace("-", "_").upper()


def notebook_params(
    defaults: Mapping[str, str], dbutils: Any | None, environ: Mapping[str, str]
) -> dict[str, str]:
    """One text widget per key on Databricks (created with its default); elsewhere ``INGEST_<KEY>``.

    Empty values are kept: ``IngestConfig.from_params`` treats them as not set.
    """
    if dbutils is not None:
        for key, default in defaults.items():
            dbutils.widgets.text(key, default)
        return {key: str(dbutils.widgets.get(key)) for key in defaults}
    return {key: environ.get(env_name(key), default) for key, default in defaults.items()}
