# Databricks notebook source
# MAGIC %md
# MAGIC # Backfill from captured records
# MAGIC Mirror a directory of captured TiCDC Kafka records into Delta tables. Re-running continues from the
# MAGIC committed progress and applies nothing twice.

# COMMAND ----------

from ingest import IngestConfig
from ingest.pipeline import run_files
from ingest.spark import get_session

try:
    dbutils  # noqa: B018 - defined on Databricks
    for name, default in [("input", ""), ("target-path", ""), ("timezone", "UTC"), ("partitions", "")]:
        dbutils.widgets.text(name, default)
    params = {name: dbutils.widgets.get(name) for name in ["input", "target-path", "timezone", "partitions"]}
except NameError:
    import os

    params = {"input": os.environ["INGEST_INPUT"], "target-path": os.environ["INGEST_TARGET_PATH"]}

config = IngestConfig.from_params({k: v for k, v in params.items() if v})

# COMMAND ----------

result = run_files(get_session(), config)
print(result.describe())
for report in result.tables.values():
    print(report.describe())
