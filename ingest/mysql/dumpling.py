"""TiDB Dumpling export: file names, the ``metadata`` file, and one data line -> Canal-JSON wire text. Pure.

Dumpling writes (``--filetype sql`` or ``csv``, ``--escape-backslash`` on by default):

- ``metadata``: ``SHOW MASTER STATUS:`` with ``Pos: <TSO>``, the snapshot every data file was read at;
- ``<db>-schema-create.sql`` (CREATE DATABASE) and ``<db>.<table>-schema.sql`` (CREATE TABLE, unqualified);
- ``<db>.<table>.<n>.sql``: ``INSERT INTO `t` VALUES`` and then one ``(v1,v2,...)`` tuple per line, ending in
  ``,`` or ``;``. Strings are ``'...'`` with backslash escapes, binary columns ``x'hex'``, NULL as ``NULL``;
- ``<db>.<table>.<n>.csv``: an optional header line, then one record per line: strings between the delimiter
  (``"``) with backslash escapes, numbers bare, NULL as the bare null value (``\\N``), binary bytes raw.

With backslash escaping, newlines inside values are written as ``\\n``, so every row is one physical line:
that is what lets Spark split a big data file across tasks by lines and run :func:`decode_line` on executors.

Values become the text Canal-JSON would carry for the same column, so the stream's
own conversion (``ingest.apply.convert``) types them: binary bytes as latin-1 code points, BIT as its
unsigned number, ENUM as its 1-based index and SET as its bitmask.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

METADATA_FILE = "metadata"
SCHEMA_CREATE_SUFFIX = "-schema-create.sql"
TABLE_SCHEMA_SUFFIX = "-schema.sql"
# Other schema objects Dumpling may write; nothing to mirror.
IGNORED_SUFFIXES = ("-schema-view.sql", "-schema-trigger.sql", "-schema-post.sql", "-schema-sequence.sql")
# Hadoop's codecs decompress these transparently when Spark reads text.
COMPRESSED_SUFFIXES = (".gz",)

# MySQL's backslash escapes (the ones Dumpling writes are \0 \n \r \\ \' \" \Z and the CSV delimiter).


class DumplingFormatError(ValueError):
    """A Dumpling file (metadata, schema or data line) does not have the expected shape."""


class DataFormat(Enum):
    """The ``--filetype`` of the data files."""

    SQL = "sql"
    CSV = "csv"


@dataclass(frozen=True, slots=True)
class CsvDialect:
    """Dumpling's CSV flags ``--csv-separator``, ``--csv-delimiter``, ``--csv-null-value``, ``--no-header``.

    Only backslash escaping (Dumpling's default ``--escape-backslash=true``) keeps every record on one line.
    """

    separator: bytes = b","
    delimiter: bytes = b'"'
    null_value: bytes = b"\\N"
    header: bool = True

    def __post_init__(self) -> None:
        if not self.separator:
            raise DumplingFormatError("the CSV separator must not be empty")


# -- metadata and file names ---------------------------------------------------------------------------


def parse_metadata(text: str) -> int:
    """The snapshot TSO of a Dumpling ``metadata`` file: ``Pos:`` of its first master-status block.

    For a TiDB source ``Pos`` is the TSO every data file was read at (``--consistency snapshot``). A block
    marked ``AFTER CONNECTION POOL ESTABLISHED`` is a later position and is not the snapshot.

    Raises:
        DumplingFormatError: no position, or one that is not a TSO.
    """
    in_status = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(("SHOW MASTER STATUS:", "SHOW BINARY LOG STATUS:")):
            in_status = "AFTER CONNECTION" not in stripped
            continue
        if in_status and stripped.startswith("Pos:"):
            value = stripped[len("Pos:") :].strip()
            if not value.isdigit() or int(value) < 1 << 18:
                raise DumplingFormatError(
                    f"metadata: Pos {value!r} is not a TiDB TSO; the export must come from TiDB with "
                    "--consistency snapshot (the default for TiDB)"
                )
            return int(value)
        if not stripped:
            in_status = False
    raise DumplingFormatError(
        "metadata: no 'SHOW MASTER STATUS' position found; the load needs the snapshot TSO Dumpling records "
        "there (export from TiDB with the default --consistency snapshot)"
    )


@dataclass(frozen=True, slots=True)
class DataFile:
    """A data file: which table it holds (by its name prefix) and in which format."""

    prefix: str
    format: DataFormat


def uncompressed_name(name: str) -> str:
    """A file name without the compression suffix Dumpling's ``--compress`` adds."""
    for suffix in COMPRESSED_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def data_file(name: str) -> DataFile | None:
    """``<db>.<table>.<n>.sql|csv`` (optionally ``.gz``) -> its ``<db>.<table>`` prefix and format."""
    base = uncompressed_name(name)
    stem, dot, extension = base.rpartition(".")
    if not dot or extension not in ("sql", "csv") or stem.endswith(TABLE_SCHEMA_SUFFIX[:-4]):
        return None
    prefix, dot, index = stem.rpartition(".")
    if not dot or not index.isdigit():
        return None
    return DataFile(prefix, DataFormat(extension))


def table_schema_prefix(name: str) -> str | None:
    """``<db>.<table>-schema.sql`` (optionally ``.gz``) -> ``<db>.<table>``."""
    name = uncompressed_name(name)
    if not name.endswith(TABLE_SCHEMA_SUFFIX) or name.endswith(SCHEMA_CREATE_SUFFIX):
        return None
    if name.endswith(IGNORED_SUFFIXES):
        return None
    return name[: -len(TABLE_SCHEMA_SUFFIX)]


def create_table_statement(text: str) -> str:
    """The CREATE TABLE statement of a table schema file, without Dumpling's ``/*!40101 SET ...*/;`` lines."""
    kept = [
        line
        for line in text.splitlines()
        if line.strip() and not (line.lstrip().startswith("/*!") and line.rstrip().endswith("*/;"))
    ]
    statement = "\n".join(kept).strip()
    return statement[:-1].rstrip() if statement.endswith(";") else statement
