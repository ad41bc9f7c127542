"""Tables that DDLs reading across tables (RENAME, CREATE TABLE … LIKE, EXCHANGE PARTITION) tie together
in a batch, and what such a DDL needs to be applied to each of them. Wiring (I/O)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql import SparkSession

from ingest.config import IngestConfig
from ingest.errors import SchemaChangeRejected
from ingest.model import DdlEvent, TableId
from ingest.pipeline.ddl import table_before
from ingest.plan import schema as plan_schema
from ingest.plan.renames import RenameGroup

RenameGroups = Mapping[int, RenameGroup] | None


@dataclass(frozen=True)
class TiedGroup:
    """Tables that DDLs reading across tables tie together, and those DDLs' commitTs in order."""

    tables: tuple[TableId, ...]
    stamps: tuple[int, ...]
    ddls: tuple[DdlEvent, ...]

    def __str__(self) -> str:
        return ", ".join(str(t) for t in self.tables)


def tied_groups(ddls: list[DdlEvent], known: set[TableId], g: int) -> list[TiedGroup]:
    """The tables each eligible cross-table DDL ties together (joined where they share a table)."""
    links = [
        (d, plan_schema.affected_tables(d, known))
        for d in ddls
        if d.commit_ts <= g and plan_schema.reads_other_tables(d)
    ]
    parent: dict[TableId, TableId] = {}

    def root(table: TableId) -> TableId:
        while parent.setdefault(table, table) != table:
            table = parent[table]
        return table

    for _, affected in links:
        for other in affected[1:]:
            parent[root(other)] = root(affected[0])
    members: dict[TableId, set[TableId]] = defaultdict(set)
    for table in list(parent):
        members[root(table)].add(table)
    groups = []
    for top, tables in sorted(members.items()):
        mine = tuple(d for d, affected in links if root(affected[0]) == top)
        groups.append(TiedGroup(tuple(sorted(tables)), tuple(sorted({d.commit_ts for d in mine})), mine))
    return groups


def tied_stop(
    table: TableId, blocked: list[TableId], stopped: Mapping[TableId, Exception], stamp: int
) -> SchemaChangeRejected:
    causes = "; ".join(f"{t} ({stopped[t]})" for t in blocked)
    return SchemaChangeRejected(
        f"{table}: stopped before commitTs {stamp}, where a DDL reads across tables, because a table it "
        f"reads stopped before it: {causes}",
        table=table,
        commit_ts=stamp,
    )


def rename_groups(
    spark: SparkSession, config: IngestConfig, ddls: tuple[DdlEvent, ...], stamp: int
) -> dict[int, RenameGroup]:
    """The RENAME statement at ``stamp`` (its events' pairs), with the names that were live just before it."""
    pairs = [p for d in ddls if d.commit_ts == stamp for p in plan_schema.rename_pairs(d)]
    if not pairs:
        return {}
    names = {name for pair in pairs for name in pair}
    live = {name for name in names if table_before(spark, config, name, stamp) is not None}
    return {stamp: RenameGroup.of(pairs, live)}
