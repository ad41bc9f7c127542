"""Which tables a DDL touches, and how: a rename's pairs, an exchange's two sides, whether applying it to one
table reads another. Pure: read from the statement parsed where the event entered."""

from __future__ import annotations

from collections.abc import Collection

from ingest.model import DdlEvent, TableId
from ingest.mysql import ddl as mysql_ddl
from ingest.mysql import partition as mp


def statement_of(ddl: DdlEvent) -> mysql_ddl.Statement:
    """The DDL's statement, parsed where the event entered (``mysql_ddl.ddl_event``); planning never parses
    text again."""
    statement = ddl.statement
    if not isinstance(statement, mysql_ddl.Statement):
        raise ValueError(f"a DDL event without its parsed statement: {ddl.sql!r} (build it with ddl_event)")
    return statement


def affected_tables(ddl: DdlEvent, known: Collection[TableId]) -> list[TableId]:
    """Every table a DDL changes, in the order their steps must run (a rename's source before its target).

    ``known`` are the tables the mirror knows, for DROP DATABASE. An empty list means a database-level DDL
    that touches no table.
    """
    statement = statement_of(ddl)
    if isinstance(statement, mysql_ddl.RenameTables):
        return [t for pair in statement.pairs for t in pair]
    if isinstance(statement, mysql_ddl.DropDatabase):
        return sorted(t for t in known if t.schema == statement.schema)
    if isinstance(statement, mysql_ddl.CreateTableLike):
        return [statement.source, statement.table]
    if isinstance(statement, mysql_ddl.CreateTable | mysql_ddl.DropTable | mysql_ddl.TruncateTable):
        return [statement.table]
    if isinstance(statement, mysql_ddl.RecoverTable):
        table, source = statement.table or ddl.table, statement.source or ddl.table
        return [table] if source == table else [source, table]
    if isinstance(statement, mysql_ddl.PartitionDdl) and isinstance(statement.action, mp.ExchangePartition):
        return [statement.table, exchange_partner(statement)]
    if isinstance(statement, mysql_ddl.AlterTable | mysql_ddl.PartitionDdl | mysql_ddl.TableOptions):
        return [statement.table]
    if isinstance(statement, mysql_ddl.CreateDatabase | mysql_ddl.DatabaseOptions):
        return []
    if isinstance(statement, mysql_ddl.NonDataObject):
        return [statement.name] if statement.name is not None else []
    return [ddl.table] if ddl.table.table else []


def drops(ddl: DdlEvent, table: TableId) -> bool:
    """Whether the DDL removes ``table`` upstream: a DROP TABLE of it or a DROP DATABASE of its database."""
    statement = statement_of(ddl)
    if isinstance(statement, mysql_ddl.DropTable):
        return statement.table == table
    return isinstance(statement, mysql_ddl.DropDatabase) and statement.schema == table.schema


def is_rename(ddl: DdlEvent) -> bool:
    """Whether a DDL renames tables (its affected tables then come in (source, target) pairs)."""
    return isinstance(statement_of(ddl), mysql_ddl.RenameTables)


def rename_pairs(ddl: DdlEvent) -> tuple[tuple[TableId, TableId], ...]:
    """The (old, new) pairs a RENAME event moves (none for any other DDL)."""
    statement = statement_of(ddl)
    return statement.pairs if isinstance(statement, mysql_ddl.RenameTables) else ()


def exchange_partner(statement: mysql_ddl.PartitionDdl) -> TableId:
    """The non-partitioned table of an EXCHANGE PARTITION (unqualified: the partitioned table's database)."""
    assert isinstance(statement.action, mp.ExchangePartition)
    other = statement.action.other
    return TableId(*other) if len(other) == 2 else TableId(statement.table.schema, other[0])


def exchange_tables(ddl: DdlEvent) -> tuple[TableId, TableId] | None:
    """(partitioned, other) of an EXCHANGE PARTITION event; None for any other DDL."""
    statement = statement_of(ddl)
    if isinstance(statement, mysql_ddl.PartitionDdl) and isinstance(statement.action, mp.ExchangePartition):
        return statement.table, exchange_partner(statement)
    return None


def reads_other_tables(ddl: DdlEvent) -> bool:
    """Whether applying a DDL to one table reads another (RENAME, CREATE TABLE … LIKE, EXCHANGE PARTITION):
    every table it names must then be applied up to just before it first, and each reads the others as
    they were just before it."""
    statement = statement_of(ddl)
    if isinstance(statement, mysql_ddl.RecoverTable):  # FLASHBACK TABLE t TO t2 reads t's copy
        return statement.source is not None and statement.source != statement.table
    return isinstance(statement, mysql_ddl.RenameTables | mysql_ddl.CreateTableLike) or (
        isinstance(statement, mysql_ddl.PartitionDdl) and isinstance(statement.action, mp.ExchangePartition)
    )
