"""What a batch applies each table with, and the value it keeps for each table it touches. Data only."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession

from ingest.config import IngestConfig
from ingest.model import DdlEvent, TableId, TableSignature, TableState, VersionedSchema
from ingest.pipeline.ordering import Ordering
from ingest.plan.renames import RenameGroup
from ingest.state import ddl_history, schema_cache


@dataclass(frozen=True)
class BatchContext:
    """What every table of one batch is applied with: the configuration, the ordering mode, the run, the
    announced table schemas (Simple), and the batch's view of the DDL history."""

    config: IngestConfig
    ordering: Ordering
    run_id: int
    schemas: Mapping[schema_cache.SchemaKey, VersionedSchema]
    listed: ddl_history.Listed


@dataclass
class BatchTable:
    """One table the batch touches, built once per batch: its id and address (from the mirror's locator),
    its state (as the batch started, from the mirror's own state read once, then as applied so far), and
    what the batch brings it: its DDLs, its rows' signatures and commit times."""

    id: TableId
    address: str
    state: TableState
    ddls: list[DdlEvent] = field(default_factory=list)
    signatures: list[TableSignature] = field(default_factory=list)
    stamps: list[int] | None = None  # the sorted commit_ts of its rows, where known


@dataclass(frozen=True)
class Pass:
    """One pass over a table: the session and rows it runs on, up to ``bound``. ``held_through`` None is
    the first pass, which stops the table just below rows that do not convert; otherwise the second, past
    them (quarantined up to that commit_ts). ``renames``: the RENAME statements the table's DDLs belong to,
    by commitTs."""

    session: SparkSession
    dml: DataFrame
    bound: int
    held_through: int | None = None
    renames: Mapping[int, RenameGroup] = field(default_factory=dict)
