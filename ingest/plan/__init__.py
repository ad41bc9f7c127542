"""Pure planning: what a DDL means for a table, and how a segment of rows is merged."""
