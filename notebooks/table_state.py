# Databricks notebook source
# MAGIC %md
# MAGIC # Per-table state
# MAGIC For each mirrored table: applied TSO and its wall-clock time, lag, rows, pending rows, quarantined
# MAGIC records and the last DDL; then the DDL history, the quarantine, and the lag over time from the
# MAGIC progress table (a text chart for job logs, and the lag DataFrame for display() to chart).

# COMMAND ----------

import os

from ingest import IngestConfig
from ingest.notebook import MIRROR_WIDGETS, notebook_params

where = {**MIRROR_WIDGETS, "stream-id": "default"}
params = notebook_params({**where, "table": ""}, globals().get("dbutils"), os.environ)
# The input is not read here; the config only locates the mirror and its state (by path or by name).
config = IngestConfig.from_params({"input": "-", **{key: params[key] for key in where}})
table = params["table"]

# COMMAND ----------

from ingest.commands import status
from ingest.spark import get_session

spark = get_session()
committed, tables = status.collect(spark, config)
print(status.render(committed, tables))

# COMMAND ----------

# MAGIC %md
# MAGIC ## DDL history

# COMMAND ----------

from pyspark.sql import functions as F

from ingest.state import ddl_history

history = ddl_history.read(spark, config.state_path)
if history is not None:
    if table:
        history = history.where(F.col("table") == table)
    history.orderBy("commit_ts").select("commit_time", "table", "action", "sql", "detail").show(
        50, truncate=80
    )
else:
    print("no DDL recorded yet")

# COMMAND ----------

# MAGIC %md
# MAGIC ## Quarantined records

# COMMAND ----------

from ingest.state import quarantine

rejected = quarantine.read(spark, config.state_path)
if rejected is None:
    print("nothing quarantined")
else:
    rejected.groupBy("table", "error_class").count().orderBy("table").show(50, truncate=False)

# COMMAND ----------

# MAGIC %md
# MAGIC ## Lag over time

# COMMAND ----------

points = status.lag_history(spark, config)
# The text chart reads the same in a job log; on Databricks, display() draws the DataFrame as a line chart
# (pick committed_at as the key, lag_seconds as the value, table as the series).
print(status.render_lag_chart(points, "G"))
if table:
    print(status.render_lag_chart(points, table))
lag = status.lag_frame(spark, [p for p in points if not table or p.table in ("G", table)])
if globals().get("dbutils") is not None:  # on Databricks, where display() charts a DataFrame
    display(lag.orderBy("committed_at"))
else:
    lag.orderBy("committed_at", "table").show(50, truncate=False)
