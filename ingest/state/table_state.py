"""How a Delta commit carries our per-table state, and Delta's idempotent-write ids.

Each commit we make stores the table's state (A_T, D_T, DDL identities) as JSON in the commit's
``userMetadata``, so the state moves atomically with the data and shows in ``DESCRIBE HISTORY``. Each
batch reads it back from the table before applying anything there, so a segment starts above what the
table holds even when the mirror's progress lags behind it (a kill between a MERGE and the progress
commit): no MERGE of ours is ever a replay, and it needs no transaction id. Delta's
``txnAppId``/``txnVersion`` would skip a write whose version is not above the last one recorded, at the
cost of rebuilding the table's transaction list (a Spark job) on every commit; nothing of ours uses them.
"""

from __future__ import annotations

import logging
import re
import threading
import weakref
from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import orjson
from pyspark.sql import Row, SparkSession

from ingest.lake import delta_io
from ingest.model import FEED_PAUSED, TableState, tso_to_datetime

logger = logging.getLogger(__name__)

METADATA_KEY = "ticdc-ingest"
CONF_USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
COMMIT_TS_COLUMN = "_tidb_commit_ts"
# The name of a table's commit-TSO column when it is not COMMIT_TS_COLUMN: upstream may have a column of that
# name (any name MySQL allows is upstream's to use), and then ours gives way to another of our own names.
PROPERTY_COMMIT_TS_COLUMN = "ticdc.commitTsColumn"
# The VIRTUAL generated columns the mirror computes: JSON {column: MySQL expression}.
PROPERTY_GENERATED = "ticdc.generated"
# How many of a table's newest commits are searched for the newest of ours.
HISTORY_DEPTH = 100
PROPERTY_KEY_COLUMNS = "ticdc.keyColumns"
PROPERTY_SOURCE_TABLE = "ticdc.sourceTable"
PROPERTY_APPLIED_TS = "ticdc.appliedTs"
# The upstream partition definition (JSON, ingest.plan.partitions); absent when the mirror never saw it.
PROPERTY_PARTITIONING = "ticdc.partitioning"
# The upstream table's unique indexes and NOT NULL columns (JSON, ingest.plan.keys), which the handle key
# follows; absent when the mirror never saw its CREATE TABLE.
PROPERTY_UNIQUE_KEYS = "ticdc.uniqueKeys"
# Why the upstream table is gone (dropped, renamed away); NOT_RETIRED while it exists.
PROPERTY_RETIRED = "ticdc.retired"
NOT_RETIRED = "no"


def commit_ts_column(properties: Mapping[str, str]) -> str:
    """The name of a mirrored table's commit-TSO column, from its properties."""
    return properties.get(PROPERTY_COMMIT_TS_COLUMN, COMMIT_TS_COLUMN)


def free_commit_ts_column(upstream: Iterable[str]) -> str:
    """A commit-TSO column name none of ``upstream``'s columns has: COMMIT_TS_COLUMN, else the first free of
    ``_tidb_commit_ts_1``, ``_tidb_commit_ts_2``, ... (Spark matches column names without case)."""
    taken = {name.casefold() for name in upstream}
    name, n = COMMIT_TS_COLUMN, 0
    while name.casefold() in taken:
        n += 1
        name = f"{COMMIT_TS_COLUMN}_{n}"
    return name


def state_to_metadata(state: TableState, *, run_id: int, step: str, consistent: bool = True) -> str:
    """The userMetadata text of a commit: our marker, the table state after it, and why it was made.

    ``consistent`` is false for the intermediate commits of a DDL (e.g. the ALTER before its back-fill):
    only versions marked consistent equal the upstream table at ``applied_ts``.
    """
    return orjson.dumps(
        {
            METADATA_KEY: {
                "consistent": consistent,
                "applied_ts": state.applied_ts,
                "applied_time": tso_to_datetime(state.applied_ts).isoformat() if state.applied_ts else None,
                "ddl_ts": state.ddl_ts,
                "ddl_ids": sorted(state.ddl_ids),
                "run_id": run_id,
                "step": step,
                **state.checksum_fields(),
            }
        }
    ).decode()


def paused_metadata(metadata: str) -> str:
    """The userMetadata of a commit that pauses a table's change data feed for a whole-table rewrite: the
    same state, its step marked, so a reader of the feed knows the versions up to the rewrite's end hold
    no change upstream made."""
    payload = orjson.loads(metadata)
    payload[METADATA_KEY]["step"] = f"{payload[METADATA_KEY].get('step', '')}{FEED_PAUSED}"
    return orjson.dumps(payload).decode()


def metadata_payload(text: str | None) -> dict[str, Any] | None:
    """Our part of a commit's userMetadata (None: the commit is not one of ours, or it does not parse)."""
    if not text or METADATA_KEY not in text:
        return None
    try:
        payload = orjson.loads(text)[METADATA_KEY]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return None
    return payload if isinstance(payload, dict) else None


def _history_rows(spark: SparkSession, path: str, limit: int | None) -> list[Row]:
    # The command's rows are collected as they are: a projection or sort of them would be a Spark job of
    # its own (a sort, three), per table and batch, on top of the job that reads the commits.
    return delta_io.history(spark, path, limit).collect()


def state_from_metadata(text: str | None) -> TableState | None:
    """Parse a commit's userMetadata; None when the commit is not one of ours."""
    payload = metadata_payload(text)
    if payload is None:
        return None
    return TableState(
        applied_ts=int(payload["applied_ts"]),
        ddl_ts=int(payload["ddl_ts"]),
        ddl_ids=frozenset(payload.get("ddl_ids", [])),
        rows_verified=int(payload.get("rows_verified", 0)),
        rows_unverified=int(payload.get("rows_unverified", 0)),
    )


def version_before(spark: SparkSession, path: str, commit_ts: int) -> int | None:
    """The table's version just before whatever it applied at or after ``commit_ts``: the newest of our
    consistent commits whose state is below it (intermediate commits of a DDL are not consistent). A DDL
    that reads another table (RENAME, CREATE TABLE … LIKE, EXCHANGE PARTITION) reads it there, so a replay
    after a crash reads the same image even when that table has moved on. None: no such version (the
    table was created at or after ``commit_ts``, or is not there)."""
    if not delta_io.is_delta_table(spark, path):
        return None
    for depth in (HISTORY_DEPTH, None):  # the newest commits first; the whole history only if need be
        rows = _history_rows(spark, path, depth)
        for row in sorted(rows, key=lambda r: int(r["version"]), reverse=True):
            payload = metadata_payload(row["userMetadata"])
            state = state_from_metadata(row["userMetadata"])
            if payload is None or state is None or not payload.get("consistent", True):
                continue
            if state.ddl_ts < commit_ts and state.applied_ts < commit_ts:
                return int(row["version"])
        if depth is None or len(rows) < depth:
            break
    return None


def truncated_before(spark: SparkSession, path: str, commit_ts: int) -> int | None:
    """The commitTs of the table's newest TRUNCATE TABLE below ``commit_ts`` (None: none), from its
    commits: where FLASHBACK TABLE of a truncated table finds the rows it brings back."""
    return newest_truncate(
        (metadata_payload(r["userMetadata"]) for r in _history_rows(spark, path, None)), commit_ts
    )


_TRUNCATE_STEP = re.compile(r"ddl (\d+): TRUNCATE\b", re.IGNORECASE)


def newest_truncate(payloads: Iterable[dict[str, Any] | None], commit_ts: int) -> int | None:
    """Of the commits' payloads, the newest TRUNCATE TABLE's commitTs below ``commit_ts``. Pure."""
    found = [
        int(match.group(1))
        for payload in payloads
        if payload and (match := _TRUNCATE_STEP.match(str(payload.get("step") or "")))
    ]
    return max((ts for ts in found if ts < commit_ts), default=None)


# The session confs a commit of ours sets for itself: never copied onto another session.
COMMIT_CONFS = (CONF_USER_METADATA,)

# Delta reads commit metadata from a session conf, which every thread of a session shares. Writes through
# one session therefore take turns: a commit holds its session's lock from setting its conf to unsetting
# it, and so does every other write made through that session while tables are being applied, which would
# otherwise carry another table's metadata. Tables applied in sessions of their own commit at the same time.
_SESSION_LOCKS: weakref.WeakKeyDictionary[SparkSession, threading.RLock] = weakref.WeakKeyDictionary()
_LOCKS_GUARD = threading.Lock()
# Writes into the mirror's own shared tables (quarantine, the DDL history's creation) and the catalog take
# turns across sessions too: each may create its table first, and concurrent MERGEs into one table conflict.
# Appends (the DDL history's entries) never conflict, and need no turn once the table exists.
_SHARED_LOCK = threading.RLock()


def _session_lock(spark: SparkSession) -> threading.RLock:
    with _LOCKS_GUARD:
        lock = _SESSION_LOCKS.get(spark)
        if lock is None:
            lock = _SESSION_LOCKS[spark] = threading.RLock()
        return lock


@contextmanager
def exclusive_write(spark: SparkSession) -> Iterator[None]:
    """The turn at writing the mirror's shared tables, and ``spark``'s write turn (both reentrant), for
    writes that set no confs of their own. Always taken in this order, so no two threads wait on each
    other."""
    with _SHARED_LOCK, _session_lock(spark):
        yield


@contextmanager
def session_confs(spark: SparkSession, confs: Mapping[str, str], *, optional: bool = False) -> Iterator[None]:
    """``confs`` set on ``spark`` for the enclosed work and put back as they were after it (unset when they
    were not set); the session's write turn is held throughout, so no other thread of the session restores
    them early or sees them outlive the work.

    ``optional``: the confs only plan the work (its result is the same without them), so one the session
    refuses to set (a runtime that allows only some settings, such as Databricks serverless) is left out.
    """
    with _session_lock(spark):
        before: dict[str, str | None] = {}
        try:
            for key, value in confs.items():
                was = spark.conf.get(key, None)
                try:
                    spark.conf.set(key, value)
                except Exception as exc:  # each runtime words a refused setting its own way
                    if not optional:
                        raise
                    logger.info("%s is not settable here, so the work is planned without it: %s", key, exc)
                    continue
                before[key] = was
            yield
        finally:
            for key, was in before.items():
                if was is None:
                    spark.conf.unset(key)
                else:
                    spark.conf.set(key, was)


# Small queries planned whole (a table's aggregate over its cached changes, the snapshot DESCRIBE DETAIL
# reads, the newest progress row): one Spark job, where adaptive execution makes a job of each stage.
WHOLE_PLAN_CONFS = {"spark.sql.adaptive.enabled": "false"}


def planned_whole(spark: SparkSession) -> AbstractContextManager[None]:
    """The enclosed small queries planned without adaptive execution, where the runtime allows it."""
    return session_confs(spark, WHOLE_PLAN_CONFS, optional=True)


@contextmanager
def committing(
    spark: SparkSession,
    metadata: str,
    confs: Mapping[str, str] | None = None,
) -> Iterator[None]:
    """Session confs that Delta reads for the next commit(s), unset afterwards; the write turn is held
    throughout (:func:`exclusive_write`). ``confs``: settings that plan these commits (never what they
    write), put back afterwards; one the session refuses is left out."""
    with _session_lock(spark), session_confs(spark, confs or {}, optional=True):
        spark.conf.set(CONF_USER_METADATA, metadata)
        try:
            yield
        finally:
            spark.conf.unset(CONF_USER_METADATA)


def read_table_state(spark: SparkSession, path: str) -> TableState | None:
    """A_T/D_T from the newest of our commits on a Delta table (None: not a table, or none of ours)."""
    if not delta_io.is_delta_table(spark, path):
        return None
    rows = _history_rows(spark, path, HISTORY_DEPTH)
    for row in sorted(rows, key=lambda r: int(r["version"]), reverse=True):
        state = state_from_metadata(row["userMetadata"])
        if state is not None:
            return state
    return TableState()
