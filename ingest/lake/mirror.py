"""Where a mirror lives: its tables, its own state tables, its stream. Built once from the configuration; the
one place that says where an upstream table's mirror is. No I/O.

A table lives at ``<root>/<database>/<table>`` (path mode), or by name at ``<catalog>.<schema>.<table>``,
where the schema comes from a template on the database (``tidb_{database}``). Only here is such an address
made; everything else asks for it with the table's :class:`~ingest.model.TableId`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ingest.lake.names import TableName
from ingest.model import TableId


@dataclass(frozen=True)
class Mirror:
    """A mirror's places: where its tables are, where its state is, and which stream it follows.

    ``root``: the directory of a path-mode mirror; ``catalog`` and ``schema_template``: the catalog and
    schema of a mirror by name (``catalog`` None for path mode). ``state``: the mirror's own tables (a
    directory, or a :class:`~ingest.lake.names.SchemaName`). ``alias_template``: a catalog name each
    table of a path-mode mirror is also registered under (``main.{database}.{table}``), if any.
    """

    root: str | None = None
    catalog: str | None = None
    schema_template: str = "{database}"
    state: str = ""
    stream_id: str = "default"
    alias_template: str | None = None

    def address(self, table: TableId) -> str:
        """Where ``table``'s mirror is: a path, or a :class:`~ingest.lake.names.TableName`."""
        if self.catalog is not None:
            return TableName(self.catalog, self.schema_template.format(database=table.schema), table.table)
        assert self.root is not None, "a mirror by path has a root"
        return f"{self.root.rstrip('/')}/{table.schema}/{table.table}"

    def alias(self, table: TableId) -> str | None:
        """The catalog name ``table`` is also registered under (``table-name-template``), if one is set."""
        if self.alias_template is None:
            return None
        return self.alias_template.format(database=table.schema, table=table.table)

    def staging(self, table: TableId, folder: str) -> str:
        """A directory of its own for ``table`` under the mirror's state (a re-sync rebuilds it there)."""
        return f"{self.state.rstrip('/')}/{folder}/{table.schema}.{table.table}"

    @property
    def target(self) -> str:
        """Where the mirror is, as a message names it: the directory, or the catalog and schema template."""
        if self.catalog is not None:
            return f"{self.catalog}.{self.schema_template}"
        return self.root or ""
