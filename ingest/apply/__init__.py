"""I/O against Delta: schema changes and MERGE."""
