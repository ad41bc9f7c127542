"""A Spark session of its own for each table applied at once. Wiring (I/O).

Delta takes a commit's ``userMetadata`` and transaction id from session confs, so two tables committing
through one session must take turns. Each table instead runs in a session of its own: classic Spark's
``newSession()`` (the caller's settable confs copied over), Spark Connect's ``cloneSession()`` (confs and
temporary views copied by the server). Sessions share the application: its executors, its cache and its
catalog. The batch's decoded rows reach a table session as a view over the caller's cached frame (a global
temporary view on classic Spark, a temporary view cloned with the session on Connect), so their cached
blocks are read, not decoded again.

A session is leased to one table at a time and returned to the pool after it; the caller's job tags go with
it. Classic sessions are kept for the caller's next batches (a long-running mirror makes thousands), their
confs copied again from the caller's at each batch; Connect clones are released after each batch. Where a
session cannot be made (a runtime that refuses it), every table runs in the caller's session and takes turns
at committing, as a single session must.
"""

from __future__ import annotations

import logging
import queue
import threading
import uuid
import weakref
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession

from ingest.state.table_state import COMMIT_CONFS

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Lease:
    """A session to apply one table in, and the batch's decoded rows as that session reads them."""

    session: SparkSession
    dml: DataFrame


# Classic table sessions a caller's earlier batches made and no batch is using now.
_KEPT: weakref.WeakKeyDictionary[SparkSession, list[SparkSession]] = weakref.WeakKeyDictionary()
_KEPT_GUARD = threading.Lock()


def is_connect(spark: SparkSession) -> bool:
    return type(spark).__module__.startswith("pyspark.sql.connect")


class TableSessions:
    """Up to ``size`` sessions for the tables of one batch, made on first need; :meth:`close` drops them."""

    def __init__(self, spark: SparkSession, dml: DataFrame, size: int) -> None:
        self._spark = spark
        self._dml = dml
        self._size = max(size, 1)
        self._idle: queue.SimpleQueue[SparkSession] = queue.SimpleQueue()
        self._made: list[SparkSession] = []
        self._guard = threading.Lock()
        self._view: str | None = None
        self._view_ref = ""  # the view's name as a table session reads it
        self._shared = False  # every table runs in the caller's session

    @contextmanager
    def lease(self) -> Iterator[Lease]:
        """A session for one table, with the caller's job tags (as seen in this thread) added to it."""
        session = self._take()
        if session is None:
            yield Lease(self._spark, self._dml)
            return
        tags = self._spark.getTags()
        for tag in tags:
            session.addTag(tag)
        try:
            yield Lease(session, session.table(self._view_ref))
        finally:
            session.clearTags()
            self._idle.put(session)

    def interrupt(self) -> None:
        """Interrupt every operation of the table sessions (the caller was cancelled)."""
        for session in list(self._made):
            try:
                session.interruptAll()
            except Exception as exc:  # best effort: the session may be gone already
                logger.debug("could not interrupt a table session: %s", exc)

    def close(self) -> None:
        """Drop the batch's view and release the sessions made for it."""
        if self._view is not None:
            try:
                if is_connect(self._spark):
                    self._spark.catalog.dropTempView(self._view)
                else:
                    self._spark.catalog.dropGlobalTempView(self._view)
            except Exception as exc:
                logger.debug("could not drop view %s: %s", self._view, exc)
        if is_connect(self._spark):
            for session in self._made:
                _release(session)
        else:
            with _KEPT_GUARD:
                _KEPT.setdefault(self._spark, []).extend(self._made)
        self._made.clear()

    def _take(self) -> SparkSession | None:
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            pass
        with self._guard:
            if self._shared:
                return None
            if len(self._made) >= self._size:
                return self._idle.get()  # more leases at once than sessions: wait for one to come back
            try:
                session = self._make()
            except Exception as exc:
                self._shared = True
                logger.warning(
                    "tables are applied in the caller's Spark session, one commit at a time: a session "
                    "of their own could not be made (%s)",
                    exc,
                )
                return None
            self._made.append(session)
            return session

    def _make(self) -> SparkSession:
        spark = self._spark
        if self._view is None:
            name = f"ingest_dml_{uuid.uuid4().hex}"
            if is_connect(spark):
                self._dml.createOrReplaceTempView(name)  # cloned with each session
                self._view_ref = name
            else:
                self._dml.createOrReplaceGlobalTempView(name)
                self._view_ref = f"{spark.conf.get('spark.sql.globalTempDatabase', 'global_temp')}.{name}"
            self._view = name
        if is_connect(spark):
            clone: SparkSession = spark.cloneSession()  # type: ignore[attr-defined]
            return clone
        with _KEPT_GUARD:
            kept = _KEPT.get(spark)
            session = kept.pop() if kept else spark.newSession()
        _copy_confs(spark.conf.getAll, session)
        return session


def _copy_confs(confs: Mapping[str, str], session: SparkSession) -> None:
    """The caller's settable confs (time zone, ANSI mode, Delta settings…) onto a classic table session; on a
    session kept from an earlier batch, a conf the caller has unset since is unset too."""
    for key in session.conf.getAll:
        if key not in confs and key not in COMMIT_CONFS and session.conf.isModifiable(key):
            session.conf.unset(key)
    for key, value in confs.items():
        if key in COMMIT_CONFS or not session.conf.isModifiable(key):
            continue
        session.conf.set(key, value)


def _release(session: SparkSession) -> None:
    """Release a cloned Spark Connect session on the server (``stop()`` would also stop a local server)."""
    client = getattr(session, "_client", None)
    if client is None:
        return
    try:
        client.release_session()
        client.close()
    except Exception as exc:
        logger.debug("could not release a table session: %s", exc)
