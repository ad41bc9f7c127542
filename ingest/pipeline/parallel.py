"""Tables of one batch applied at once from a bounded pool of driver threads. Wiring.

Each table's apply is a chain of small Spark jobs and Delta log reads that mostly wait on the driver; run side
by side they overlap, and in sessions of their own (``pipeline.sessions``) so do their commits. A table that
fails does not stop the others already started, so the batch reports every failed table, and the caller moves
progress only when none failed. Each thread inherits the calling thread's Spark job group, scheduler pool and
tags, and a table session leased in it carries the same tags, so cancelling the caller's job group reaches
every table's jobs too; a caller interrupted while waiting (a notebook's cancel) interrupts every table
session's operations before it returns.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from pyspark.sql import SparkSession
from pyspark.util import inheritable_thread_target

from ingest.errors import TablesFailed
from ingest.pipeline.sessions import TableSessions

R = TypeVar("R")
K = TypeVar("K")


def apply_tables(
    spark: SparkSession,
    tables: Sequence[K],
    apply: Callable[[K], R],
    parallelism: int,
    stop: Callable[[], bool] = lambda: False,
    sessions: TableSessions | None = None,
) -> dict[K, R]:
    """``apply`` each table, at most ``parallelism`` at once; a table not yet started when ``stop()`` turns
    true is left untouched (absent from the result).

    Raises:
        the one failed table's own error, or TablesFailed naming every failed table (chained to the first).
    """
    results: dict[K, R] = {}
    failures: dict[K, BaseException] = {}
    guard = threading.Lock()

    def run(table: K) -> None:
        if stop():
            return
        try:
            result = apply(table)
        except BaseException as exc:
            with guard:
                failures[table] = exc
            return
        with guard:
            results[table] = result

    if parallelism <= 1 or len(tables) <= 1:
        for table in tables:
            run(table)
            if failures:
                break
    else:
        pool = ThreadPoolExecutor(max_workers=parallelism, thread_name_prefix="ingest-table")
        try:
            # Wrapped once per table: a wrapper installs the one copy of the caller's local properties it
            # captured as its thread's own, so a wrapper shared by the pool's threads would have them all
            # write one Properties object, where one table's SQL execution id leaks into another's jobs
            # (their jobs are then never released by the scheduler: the driver's memory grows per batch).
            futures = [pool.submit(inheritable_thread_target(spark)(run), table) for table in tables]
            for future in futures:
                future.result()
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            if sessions is not None:
                sessions.interrupt()
            raise
        finally:
            pool.shutdown(wait=True)
    failed = [(table, failures[table]) for table in tables if table in failures]
    if len(failed) == 1:
        raise failed[0][1]
    if failed:
        raise TablesFailed(failed) from failed[0][1]
    return results
