# Databricks notebook source
# MAGIC %md
# MAGIC # Backfill / initial load
# MAGIC Mirror an input directory into Delta tables and stop: captured Kafka records, `kcat -J` output, or a
# MAGIC TiCDC storage-sink root (detected by its `metadata` file). Re-running continues from the committed
# MAGIC progress and applies nothing twice.
# MAGIC
# MAGIC Parameters: widgets on Databricks; in Jupyter, `INGEST_<KEY>` environment variables or the
# MAGIC defaults below.

# COMMAND ----------

import os

from ingest import IngestConfig
from ingest.notebook import MIRROR_WIDGETS, notebook_params

params = notebook_params(
    {
        "input": "",
        **MIRROR_WIDGETS,
        "input-format": "auto",
        "timezone": "UTC",
        "partitions": "",
    },
    globals().get("dbutils"),
    os.environ,
)
config = IngestConfig.from_params(params)
print(config)

# COMMAND ----------

from ingest.pipeline import run_files
from ingest.spark import get_session

spark = get_session()
result = run_files(spark, config, report=print)
print(result.describe())
for report in sorted(result.tables.values(), key=lambda r: str(r.table)):
    print("  " + report.describe())

# COMMAND ----------

from ingest.commands import status

committed, tables = status.collect(spark, config)
print(status.render(committed, tables))
