"""The mirror's own state, as Delta tables under ``<target-path>/_ingest`` (progress, buffer, quarantine, DDL
history, schema cache) and in each mirrored table's commits and properties (``table_state``)."""
