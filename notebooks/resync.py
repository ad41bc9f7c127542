# Databricks notebook source
# MAGIC %md
# MAGIC # Re-sync one table
# MAGIC Rebuilds one table from the input, which must still hold the table's whole history, and swaps it in
# MAGIC at the state the rebuild reached (its applied TSO never moves back; the run refuses otherwise). The
# MAGIC mirror's progress and buffer are untouched: the next run filters what the table already holds. Use it
# MAGIC after a table was damaged or edited by hand. See `ingest/commands/resync.py` for the exact contract.

# COMMAND ----------

import os

from ingest import IngestConfig, TableId
from ingest.notebook import MIRROR_WIDGETS, notebook_params

params = notebook_params(
    {
        "input": "",
        **MIRROR_WIDGETS,
        "input-format": "auto",
        "timezone": "UTC",
        "table": "",
    },
    globals().get("dbutils"),
    os.environ,
)
schema, _, name = params.pop("table").partition(".")
table = TableId(schema, name)
config = IngestConfig.from_params(params)

# COMMAND ----------

from ingest.commands.resync import resync_table
from ingest.spark import get_session

spark = get_session()
result = resync_table(spark, config, table)
print(result.describe())

# COMMAND ----------

from ingest.commands import status

committed, tables = status.collect(spark, config)
print(status.render(committed, [t for t in tables if t.table == table]))
