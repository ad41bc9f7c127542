"""Databricks file-based task (spark_python_task) for a backfill: hand the job parameters to the CLI."""

from ingest.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
