"""A table's unique indexes, and the handle key TiCDC identifies its rows by. Pure.

TiCDC's rule (``TableInfo.findHandleIndex``): the primary key if there is one; otherwise, of the unique
indexes whose columns are all NOT NULL and none a VIRTUAL generated column (``IsIndexUniqueAndNotNull``), the
one with the fewest columns, the oldest on a tie (the smallest index id, which TiDB hands out in creation
order). Canal-JSON never says which key that is, so the mirror
follows every DDL that can move it (index DDL, key DDL, column renames, drops and nullability) and applies
the rule itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

import orjson

PRIMARY = "PRIMARY"


@dataclass(frozen=True, slots=True)
class UniqueIndex:
    """A unique index (or the primary key): its name, as TiDB knows it, and its columns in order."""

    name: str
    columns: tuple[str, ...]
    primary: bool = False


@dataclass(frozen=True, slots=True)
class UniqueKeys:
    """A table's unique indexes in creation order and which columns may be in a handle key (``not_null``:
    NOT NULL and not VIRTUAL generated)."""

    indexes: tuple[UniqueIndex, ...]
    not_null: frozenset[str]

    def handle(self) -> tuple[str, ...]:
        """The handle key TiCDC uses now (empty: none, the table is not replicated)."""
        primary = next((i for i in self.indexes if i.primary), None)
        if primary is not None:
            return primary.columns
        eligible = [i for i in self.indexes if all(c in self.not_null for c in i.columns)]
        # min keeps the first of equals: the oldest index wins a tie.
        return min(eligible, key=lambda i: len(i.columns)).columns if eligible else ()

    def add(self, name: str | None, columns: Iterable[str], *, primary: bool = False) -> UniqueKeys:
        """With one more unique index; an unnamed one is named as TiDB names it (its first column, then
        ``_2``, ``_3``… while taken), and a primary key's columns become NOT NULL."""
        columns = tuple(columns)
        if primary:
            name = PRIMARY
        elif not name:
            taken = {i.name.lower() for i in self.indexes}
            name, suffix = columns[0], 2
            while name.lower() in taken:
                name, suffix = f"{columns[0]}_{suffix}", suffix + 1
        not_null = self.not_null | set(columns) if primary else self.not_null
        return UniqueKeys((*self.indexes, UniqueIndex(name, columns, primary)), not_null)

    def drop(self, name: str) -> UniqueKeys:
        """Without the index named ``name`` (names are case-insensitive); a non-unique one is not here."""
        return replace(self, indexes=tuple(i for i in self.indexes if i.name.lower() != name.lower()))

    def drop_primary(self) -> UniqueKeys:
        return replace(self, indexes=tuple(i for i in self.indexes if not i.primary))

    def rename_index(self, old: str, new: str) -> UniqueKeys:
        return replace(
            self,
            indexes=tuple(replace(i, name=new) if i.name.lower() == old.lower() else i for i in self.indexes),
        )

    def rename_column(self, old: str, new: str) -> UniqueKeys:
        def renamed(columns: Iterable[str]) -> tuple[str, ...]:
            return tuple(new if c.lower() == old.lower() else c for c in columns)

        return UniqueKeys(
            tuple(replace(i, columns=renamed(i.columns)) for i in self.indexes),
            frozenset(renamed(self.not_null)),
        )

    def drop_column(self, name: str) -> UniqueKeys:
        """TiDB takes a dropped column out of its indexes, and drops an index left without columns."""
        indexes = []
        for index in self.indexes:
            columns = tuple(c for c in index.columns if c.lower() != name.lower())
            if columns:
                indexes.append(replace(index, columns=columns))
        return UniqueKeys(tuple(indexes), frozenset(c for c in self.not_null if c.lower() != name.lower()))

    def set_nullable(self, name: str, nullable: bool) -> UniqueKeys:
        not_null = self.not_null - {name} if nullable else self.not_null | {name}
        return replace(self, not_null=frozenset(not_null))

    def to_json(self) -> str:
        return orjson.dumps(
            {
                "indexes": [
                    {"name": i.name, "columns": list(i.columns), "primary": i.primary} for i in self.indexes
                ],
                "not_null": sorted(self.not_null),
            }
        ).decode()

    @classmethod
    def from_json(cls, text: str) -> UniqueKeys:
        data = orjson.loads(text)
        return cls(
            tuple(UniqueIndex(i["name"], tuple(i["columns"]), bool(i["primary"])) for i in data["indexes"]),
            frozenset(data["not_null"]),
        )
