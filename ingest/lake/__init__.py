"""The lake: where a mirror's tables are (the locator, catalog names) and the one Delta I/O layer."""
