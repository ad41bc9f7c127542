"""Test helper: replay the changes the mirror answers between two TSOs on the table as of the first, and say
where the result differs from the table as of the second."""

from __future__ import annotations

from typing import Any

from mirror import normalize
from pyspark.sql import SparkSession

from ingest.apply.table import table_info
from ingest.commands import changes
from ingest.commands.changes import AFTER, BEFORE, CHANGE_TYPE, DELETE, INSERT, VERSION
from ingest.config import IngestConfig
from ingest.lake import delta_io

_RANK = {BEFORE: 0, DELETE: 1, INSERT: 2, AFTER: 3}


def key_at(spark: SparkSession, path: str, version: int) -> tuple[str, ...]:
    return table_info(spark, path, version).key


def rows_at(spark: SparkSession, path: str, version: int) -> dict[tuple, dict[str, Any]]:
    key = key_at(spark, path, version)
    rows = delta_io.read(spark, path, version).collect()
    found = {}
    for row in rows:
        values = {k: normalize(v) for k, v in row.asDict().items()}
        found[tuple(values[k] for k in key)] = values
    return found


def apply(
    state: dict[tuple, dict[str, Any]],
    rows: list,
    key: tuple[str, ...],
    ts_column: str,
    where: str,
    net: bool = False,
) -> list[str]:
    """Apply change rows to ``state`` in place; the problems met (a delete or before-image of a row that
    is not there as it says; netted, a delete carries the row's last image, not the one held)."""
    problems = []
    ordered = sorted((r.asDict() for r in rows), key=lambda r: (r[VERSION], _RANK[r[CHANGE_TYPE]]))
    for row in ordered:
        kind = row.pop(CHANGE_TYPE)
        row.pop(VERSION)
        body = {k: normalize(v) for k, v in row.items()}
        k = tuple(body[c] for c in key)
        if kind in (INSERT, AFTER):
            state[k] = body
            continue
        held = state.get(k)
        if held is None or (not net and _without(held, ts_column) != _without(body, ts_column)):
            problems.append(f"{where}: {kind} of {k} finds {held}, says {body}")
        if kind == DELETE:
            state.pop(k, None)
    return problems


def _without(row: dict[str, Any], column: str) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k != column}


def replay_problems(
    spark: SparkSession, config: IngestConfig, from_tso: int, to_tso: int | None
) -> list[str]:
    """Every table: as of ``from_tso``, the changes to ``to_tso`` applied (a DDL between segments taken as
    the mirror applied it), compared with the table as of ``to_tso``; plain and netted per key."""
    answer = changes.resolve(spark, config, from_tso, to_tso, strict=False)
    problems = []
    for table, why in answer.refused.items():  # only a table dropped or renamed away inside the range
        if "was dropped or renamed away inside the range" not in why:
            problems.append(f"{table} {answer.from_g}..{answer.to_g}: refused: {why}")
    held: dict[tuple[str, int], dict[tuple, dict[str, Any]]] = {}

    def at(path: str, version: int) -> dict[tuple, dict[str, Any]]:
        if (path, version) not in held:
            held[(path, version)] = rows_at(spark, path, version)
        return dict(held[(path, version)])

    for table in answer.tables:
        for net in (False, True):
            where = f"{table.table} {answer.from_g}..{answer.to_g}{' net' if net else ''}"
            state = {} if table.before is None else at(table.path, table.before)
            for n, segment in enumerate(table.segments):
                if segment.ddl and not (n == 0 and table.before is None):
                    state = at(table.path, segment.first - 1)  # the DDL, as the mirror applied it
                if not segment.empty:
                    rows = changes.segment_frame(spark, table, segment, net).collect()
                    key = key_at(spark, table.path, max(segment.last, segment.snapshot or 0))
                    problems += apply(state, rows, key, table.commit_ts_column, where, net)
            expected = at(table.path, table.after)
            if state != expected:
                wrong = sorted(
                    (k for k in state.keys() | expected.keys() if state.get(k) != expected.get(k)), key=repr
                )
                problems.append(f"{where}: {len(wrong)} keys differ, e.g. {wrong[0]}: "
                                f"{state.get(wrong[0])} != {expected.get(wrong[0])}")  # fmt: skip
    return problems


def comparable(rows) -> list[tuple]:
    """Rows without the TSO of deletes and before-images (a stream keeps the row's own there)."""
    found = []
    for row in rows:
        values = row.asDict()
        if values[CHANGE_TYPE] in (DELETE, BEFORE):
            values.pop("_tidb_commit_ts", None)
        found.append(tuple(sorted((k, repr(normalize(v))) for k, v in values.items())))
    return sorted(found)


def streamed(spark: SparkSession, config: IngestConfig, table, from_tso: int, work) -> list:
    """The rows a stream of the table's changes from ``from_tso`` gives, run until it has read them all."""
    sink = work / f"{table.schema}.{table.table}-stream"
    query = (
        changes.changes_stream(spark, config, table, from_tso)
        .writeStream.format("parquet")
        .option("checkpointLocation", str(work / f"{table.schema}.{table.table}-checkpoint"))
        .trigger(availableNow=True)
        .start(str(sink))
    )
    query.awaitTermination()
    return spark.read.parquet(str(sink)).collect() if (sink / "_spark_metadata").exists() else []


def stream_problems(spark: SparkSession, config: IngestConfig, from_tso: int, work) -> list[str]:
    """Every table that changed after ``from_tso`` in one schema (a DDL stops a stream, Delta's rule): the
    stream from ``from_tso`` run to the end gives the same rows as the range to the newest G."""
    answer = changes.resolve(spark, config, from_tso, None, strict=False)
    problems = []
    for table in answer.tables:
        if table.before is None or len(table.segments) != 1 or table.segments[0].ddl:
            continue
        expected = comparable(changes.segment_frame(spark, table, table.segments[0]).collect())
        if comparable(streamed(spark, config, table.table, from_tso, work)) != expected:
            problems.append(f"{table.table} from {from_tso}: the stream differs from the range")
    return problems
