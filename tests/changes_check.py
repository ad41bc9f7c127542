"""Test helper: replay the changes the mirror answers between two TSOs on the table as of the first, and say
where the result differs from the table as of the second."""

from __future__ import annotations

from typing import Any

from mirror import normalize
from pyspark.sql import SparkSession

from ingest.apply.table import table_info
from ingest.commands import asof, changes
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
    snapshot: int | None = None,
) -> list[str]:
    """Apply change rows to ``state`` in place; the problems met (a delete or before-image of a row that
    is not there as it says). The rows a table created inside the range opened with (``snapshot``) carry
    the TSO of its creation, not their own: marked ``OPENED`` there."""
    problems = []
    ordered = sorted((r.asDict() for r in rows), key=lambda r: (r[VERSION], _RANK[r[CHANGE_TYPE]]))
    for row in ordered:
        kind = row.pop(CHANGE_TYPE)
        opened = row.pop(VERSION) == snapshot
        body = {k: normalize(v) for k, v in row.items()}
        if opened:
            body[ts_column] = OPENED
        k = tuple(body[c] for c in key)
        if kind in (INSERT, AFTER):
            state[k] = body
            continue
        held = state.get(k)
        if held is None or _without(held, ts_column) != _without(body, ts_column):
            problems.append(f"{where}: {kind} of {k} finds {held}, says {body}")
        if kind == DELETE:
            state.pop(k, None)
    return problems


OPENED = "opened with the table"


def _opened_as(state: dict[tuple, dict[str, Any]], expected: dict[tuple, dict[str, Any]], ts_column: str):
    """``state`` with the TSO of each row a table opened with taken from ``expected``."""
    return {
        k: {**v, ts_column: expected[k][ts_column]} if v.get(ts_column) == OPENED and k in expected else v
        for k, v in state.items()
    }


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
            expected = at(table.path, table.after)
            if net:
                problems += _net_replay(spark, table, state, expected, where)
                continue
            for n, segment in enumerate(table.segments):
                if segment.ddl and not (n == 0 and table.before is None):
                    state = at(table.path, segment.first - 1)  # the DDL, as the mirror applied it
                if not segment.empty:
                    rows = changes.segment_frame(spark, table, segment).collect()
                    key = key_at(spark, table.path, max(segment.last, segment.snapshot or 0))
                    problems += apply(state, rows, key, table.commit_ts_column, where, segment.snapshot)
            state = _opened_as(state, expected, table.commit_ts_column)
            if state != expected:
                wrong = sorted(
                    (k for k in state.keys() | expected.keys() if state.get(k) != expected.get(k)), key=repr
                )
                problems.append(f"{where}: {len(wrong)} keys differ, e.g. {wrong[0]}: "
                                f"{state.get(wrong[0])} != {expected.get(wrong[0])}")  # fmt: skip
    return problems


def _net_replay(spark, table, state: dict, expected: dict, where: str) -> list[str]:
    """Netted over the range: the keys held at the start, less its deletes, plus its inserts, are the keys at
    the end, each insert and after-image is the row at the end, and (no DDL inside the range) every row that
    differs between the ends is in the answer."""
    try:
        rows = changes.net_frame(spark, table).collect()
    except changes.ChangesRefused as exc:
        if "is not the same columns across the range" in str(exc):
            return []
        raise
    problems, keys, answered, ts = [], set(state), set(), table.commit_ts_column
    for row in rows:
        body = {k: normalize(v) for k, v in row.asDict().items() if k not in (CHANGE_TYPE, VERSION)}
        key = tuple(body[c] for c in table.key)
        answered.add(key)
        if row[CHANGE_TYPE] == DELETE:
            keys.discard(key)
        elif _without(expected.get(key) or {}, ts) != _without(body, ts):
            problems.append(
                f"{where}: {row[CHANGE_TYPE]} {body} is not the row at the end {expected.get(key)}"
            )
        else:
            keys.add(key)
    if keys != set(expected):
        problems.append(f"{where}: keys {sorted(keys ^ set(expected), key=repr)[:3]} differ at the end")
    if not table.ddls():
        missed = [
            k for k in state.keys() | expected.keys() if state.get(k) != expected.get(k) and k not in answered
        ]
        if missed:
            problems.append(f"{where}: {len(missed)} changed rows not answered, e.g. {missed[0]}")
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


def upstream_problems(spark: SparkSession, config: IngestConfig, stream, from_tso: int, to_tso: int | None):
    """Every row of the changes between two TSOs against upstream (the model, never the mirror): each delete
    and before-image is the row as upstream had it at the table's previous point (the applied TSO of its
    commit before the change's), each insert and after-image is upstream's row at its TSO, every TSO is in
    (G_A, G_B], a delete's key is gone upstream at its TSO; netted, one row per key, its kind by presence
    upstream at G_A and G_B, its image upstream's, and every key upstream changed between them present."""
    from mirror import expected_rows

    answer = changes.resolve(spark, config, from_tso, to_tso, strict=False)
    low, high = answer.from_g, answer.to_g
    problems: list[str] = []
    memo: dict[tuple, dict] = {}

    def upstream(table, ts: int) -> dict:
        if (table, ts) not in memo:
            memo[(table, ts)] = expected_rows(stream, table, ts)
        return memo[(table, ts)]

    def same(up: dict | None, body: dict, columns) -> bool:
        return up is not None and all(up.get(c) == body.get(c) for c in columns if c in up)

    for table in answer.tables:
        where = f"{table.table} {low}..{high}"
        ts_col = table.commit_ts_column
        points = sorted((c.version, c.applied_ts) for c in asof.commits(spark, table.path) if c.consistent)

        def previous(version: int, points=points) -> int:
            return max((ts for v, ts in points if v < version), default=0)

        for segment in table.segments:
            if segment.empty:
                continue
            columns = [c for c in segment.columns if c != ts_col]
            for row in changes.segment_frame(spark, table, segment).collect():
                kind, version, ts = row[CHANGE_TYPE], row[VERSION], row[ts_col]
                body = {c: normalize(row[c]) for c in columns}
                key = tuple(body[k] for k in segment.key)
                if not low < ts <= high:
                    problems.append(f"{where}: {kind} of {key} at version {version} carries TSO {ts}")
                if kind in (INSERT, AFTER) and not same(upstream(table.table, ts).get(key), body, columns):
                    problems.append(f"{where}: {kind} {body} is not upstream's row at its TSO {ts}: "
                                    f"{upstream(table.table, ts).get(key)}")  # fmt: skip
                if kind in (DELETE, BEFORE) and row[VERSION] != segment.snapshot:
                    held = upstream(table.table, previous(version)).get(key)
                    if not same(held, body, columns):
                        problems.append(f"{where}: {kind} {body} at version {version} is not the row "
                                        f"upstream had at {previous(version)}: {held}")  # fmt: skip
                if kind == DELETE and key in upstream(table.table, ts):
                    problems.append(f"{where}: delete of {key} at TSO {ts}, where upstream still has it")
        problems += _net_problems(spark, table, where, low, high, upstream)
    return problems


def _net_problems(spark, table, where: str, low: int, high: int, upstream) -> list[str]:
    try:
        rows = changes.net_frame(spark, table).collect()
    except changes.ChangesRefused as exc:
        if "is not the same columns across the range" in str(exc):
            return []  # a key change inside the range: no one key to net by
        raise
    problems = []
    start = {} if table.before is None else upstream(table.table, low)
    end = upstream(table.table, high)
    columns = [c for c in table.columns if c != table.commit_ts_column]
    common = [c for c in columns if c in table.before_columns]
    seen = set()
    for row in rows:
        body = {c: normalize(row[c]) for c in columns}
        key = tuple(body[k] for k in table.key)
        if key in seen:
            problems.append(f"{where} net: {key} twice")
        seen.add(key)
        kind = INSERT if key not in start else (AFTER if key in end else DELETE)
        if row[CHANGE_TYPE] != kind:
            problems.append(f"{where} net: {key} is {row[CHANGE_TYPE]}, upstream says {kind}")
        image, shown = (start.get(key), common) if kind == DELETE else (end.get(key), columns)
        if image is None or any(image.get(c) != body[c] for c in shown if c in image):
            problems.append(f"{where} net: {row[CHANGE_TYPE]} {body} is not upstream's {image}")
        if not low < row[table.commit_ts_column] <= high:
            problems.append(f"{where} net: {key} carries TSO {row[table.commit_ts_column]}")
    for key in start.keys() | end.keys():
        a, b = start.get(key), end.get(key)
        moved = (a is None) != (b is None) or any(a.get(c) != b.get(c) for c in common if c in a and c in b)
        if moved and key not in seen:
            problems.append(f"{where} net: {key} changed upstream ({a} -> {b}) but is not in the answer")
    return problems
