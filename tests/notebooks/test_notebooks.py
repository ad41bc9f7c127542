"""Each notebook runs as a real Jupyter notebook (nbclient) against local Spark, the three in one kernel.

The Databricks source format is turned into cells by its markers; parameters are injected the way a local
Jupyter user sets them (INGEST_<KEY> environment variables) in a first cell, as papermill would.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import pytest
from jupyter_client.manager import KernelManager
from kill import child_env
from mirror import delta_rows, expected_rows
from nbclient import NotebookClient

from ingest.model import TableId
from ingest.notebook import env_name
from testkit.sample import build_sample

NOTEBOOKS = Path(__file__).parents[2] / "notebooks"
HEADER = "# Databricks notebook source"
COMMAND = "# COMMAND ----------"
MAGIC = "# MAGIC"


def to_notebook(source: str, params: dict[str, str]) -> nbformat.NotebookNode:
    """A Databricks source-format notebook as an .ipynb, with a parameter cell first."""
    assert source.startswith(HEADER)
    env = {env_name(k): v for k, v in params.items()}
    cells = [nbformat.v4.new_code_cell(f"import os\nos.environ.update({env!r})")]
    for chunk in source[len(HEADER) :].split(COMMAND):
        lines = chunk.strip("\n").splitlines()
        if lines and all(line.startswith(MAGIC) for line in lines):
            text = "\n".join(line[len(MAGIC) :].removeprefix(" ") for line in lines)
            cells.append(nbformat.v4.new_markdown_cell(text.removeprefix("%md").lstrip("\n")))
        elif lines:
            cells.append(nbformat.v4.new_code_cell("\n".join(lines)))
    return nbformat.v4.new_notebook(cells=cells)


def outputs(nb: nbformat.NotebookNode) -> str:
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    """The module's kernels by Spark mode; one at a time, and every one shut down at the end."""
    running: dict[str, KernelManager] = {}
    yield running, tmp_path_factory
    for km in running.values():
        km.shutdown_kernel(now=True)


@pytest.fixture
def kernel(kernels, spark, spark_mode):
    """One kernel (one Spark session) for every notebook of a mode: a JVM start is the slow part.

    In the Connect run the kernel inherits SPARK_REMOTE, as on Databricks serverless the notebooks get a
    Connect session: they run unchanged.
    """
    running, tmp_path_factory = kernels
    if spark_mode not in running:
        for other in list(running):  # the classic kernel's JVM is not needed any more
            running.pop(other).shutdown_kernel(now=True)
        km = KernelManager(kernel_name="python3")
        # child_env(): the classic kernel's JVM lives for a few notebooks only (see tests/kill.py).
        km.start_kernel(
            cwd=str(tmp_path_factory.mktemp("kernel")), env={**child_env(), "PYSPARK_PYTHON": sys.executable}
        )
        running[spark_mode] = km
    return running[spark_mode]


def run_notebook(kernel, name: str, params: dict[str, str]) -> str:
    nb = to_notebook((NOTEBOOKS / f"{name}.py").read_text(), params)
    NotebookClient(nb, km=kernel, timeout=900).execute()
    return outputs(nb)


def session_kind(kernel) -> str:
    """``connect`` or ``classic``: the Spark session the notebooks ran on in this kernel."""
    probe = (
        "from pyspark.sql import SparkSession\n"
        "s = SparkSession.getActiveSession()\n"
        "print('SESSION', 'connect' if type(s).__module__.startswith('pyspark.sql.connect') else 'classic')"
    )
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(probe)])
    NotebookClient(nb, km=kernel, timeout=60).execute()
    return outputs(nb).split("SESSION", 1)[1].split()[0]


@pytest.mark.long
@pytest.mark.full(modes=("connect",))  # the classic run stays in CI
@pytest.mark.both_modes
def test_backfill_then_state_then_resync_of_one_table(spark, spark_mode, kernel, tmp_path):
    stream = build_sample()
    stream.write(tmp_path / "in")
    lake = tmp_path / "lake"
    g = stream.complete_watermark()
    orders = TableId("shop", "orders")

    out = run_notebook(kernel, "backfill", {"input": str(tmp_path / "in"), "target-path": str(lake)})
    for table in (TableId("shop", "customers"), orders, TableId("inventory", "stock")):
        assert delta_rows(spark, str(lake), table) == expected_rows(stream, table, g), table
    assert "offsets done" in out and f"G = {g}" in out

    out = run_notebook(kernel, "table_state", {"target-path": str(lake), "table": "shop.customers"})
    state = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("shop.")}
    assert state["shop.customers"][1] == str(g)  # applied TSO
    assert state["shop.customers"][5] == "1"  # pending: the row above G
    assert "ALTER TABLE `shop`.`customers` ADD COLUMN `points`" in out  # last DDL and the history
    assert "lag of G at each committed run" in out and "lag of shop.customers" in out

    # Damage the table by hand; re-sync rebuilds it from the input at the state the mirror had reached.
    spark.sql(f"DELETE FROM delta.`{lake}/shop/orders` WHERE status = 'paid'")
    assert delta_rows(spark, str(lake), orders) != expected_rows(stream, orders, g)
    out = run_notebook(
        kernel, "resync", {"input": str(tmp_path / "in"), "target-path": str(lake), "table": "shop.orders"}
    )
    assert f"applied up to TSO {g}" in out
    assert delta_rows(spark, str(lake), orders) == expected_rows(stream, orders, g)
    assert session_kind(kernel) == spark_mode  # the Connect run's kernel ran the notebooks on Connect
