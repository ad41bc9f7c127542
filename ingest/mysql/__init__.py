"""MySQL and TiDB text: DDL statements, column types, partitions, generated-column expressions, JSON
text and Dumpling's files. Pure."""
