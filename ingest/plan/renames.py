"""A RENAME TABLE statement as one step: which table each name holds once the whole statement ran. Pure.

TiCDC sends a multi-table RENAME (``RENAME TABLE t TO t_old, t_new TO t``, the cut-over of online
schema-change tools) as one DDL event per pair, all with the statement's commitTs, and they may reach the
mirror in any order (with topic-per-table dispatch each goes to its own topic). Applied pair by pair in
arrival order, a swap would copy the new table into ``t`` before ``t_old`` copied the old one. So the pairs
of one commitTs are put back in an order the statement can have run them in (every step moves a name that
exists to a name that does not), and each name is given the table it holds at the end: a copy of that
table as it was just before the statement, or a retired mark where nothing holds it any more.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from ingest.model import TableId

Pair = tuple[TableId, TableId]


def order_pairs(pairs: Iterable[Pair], live: Collection[TableId]) -> tuple[Pair, ...]:
    """The pairs in an order in which each moves an existing name to a free one.

    ``live``: the tables that existed before the statement, as far as the mirror knows; a source that no
    pair creates existed too. Ties keep the given order; pairs no order admits follow in the given order.
    """
    remaining = list(dict.fromkeys(pairs))
    targets = {new for _, new in remaining}
    present = set(live) | {old for old, _ in remaining if old not in targets}
    ordered: list[Pair] = []
    while remaining:
        step = next((p for p in remaining if p[0] in present and p[1] not in present), None)
        if step is None:
            ordered.extend(remaining)
            break
        remaining.remove(step)
        present.discard(step[0])
        present.add(step[1])
        ordered.append(step)
    return tuple(ordered)


@dataclass(frozen=True, slots=True)
class RenameGroup:
    """The pairs of one RENAME statement, in the order it ran them, and the names live before it."""

    pairs: tuple[Pair, ...]
    live: frozenset[TableId]

    @classmethod
    def of(cls, pairs: Iterable[Pair], live: Collection[TableId]) -> RenameGroup:
        return cls(order_pairs(pairs, live), frozenset(live))

    def holders(self) -> dict[TableId, TableId]:
        """For every name that holds a table after the statement: the table it held before (itself when
        the statement did not move it)."""
        holds = {name: name for name in self._before()}
        for old, new in self.pairs:
            if old in holds:
                holds[new] = holds.pop(old)
        return holds

    def source_of(self, table: TableId) -> TableId | None:
        """The table whose rows ``table`` holds after the statement, when that is another one."""
        source = self.holders().get(table)
        return source if source is not None and source != table else None

    def retires(self, table: TableId) -> bool:
        """Whether ``table`` existed before the statement and no longer exists after it."""
        return table in self._before() and table not in self.holders()

    def _before(self) -> set[TableId]:
        """The statement's names that existed before it: the live ones, and sources no pair creates."""
        targets = {new for _, new in self.pairs}
        named = {name for pair in self.pairs for name in pair}
        return (set(self.live) & named) | {old for old, _ in self.pairs if old not in targets}
