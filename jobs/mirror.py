"""Databricks file-based task (spark_python_task): hand the job parameters to the CLI."""

from ingest.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
