"""The Spark SQL text of the changes between two TSOs: one query per segment of a table, and one for its net
effect per key over the whole range. Pure: ``changes`` runs these same texts and ``--sql`` prints them, so
what a user runs in SQL is what the command writes.

A segment's query reads the change data feed of its versions, leaves out the versions whose rows the mirror
wrote for its own reasons (a new column's back-fill), and gives each row the TSO of the upstream change:
inserts and after-images their own, unless a DDL wrote them (a TRUNCATE, a partition exchanged), which gives
its TSO to every row it changed; deletes and before-images their after-image's, else the TSO their batch
applied upstream up to.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ingest.lake.names import quote

CHANGE_TYPE, VERSION = "_change_type", "_commit_version"
INSERT, DELETE, BEFORE, AFTER = "insert", "delete", "update_preimage", "update_postimage"
# Names of the queries' own working columns: ours (``_tidb_``), and never an upstream column of the table.
_BOUND, _STAMP, _AFTER_TS, _AT_A, _AT_B = (
    "_tidb_changes_bound", "_tidb_changes_stamp", "_tidb_changes_after_ts", "_tidb_changes_at_a",
    "_tidb_changes_at_b",
)  # fmt: skip


@dataclass(frozen=True)
class Source:
    """A mirrored table as the queries read it."""

    feed_function: str  # table_changes (catalog name) or table_changes_by_path
    feed_name: str  # the function's first argument, as a SQL string literal
    table_ref: str  # the table as a FROM clause names it
    commit_ts_column: str


@dataclass(frozen=True)
class Versions:
    """What the queries need to know of the table's versions."""

    bounds: Mapping[int, int]  # version -> the TSO its batch applied upstream up to
    stamps: Mapping[int, int]  # version -> the TSO of the DDL that wrote it
    own: frozenset[int]  # versions whose rows are the mirror's own: no change upstream made


@dataclass(frozen=True)
class Part:
    """One segment's rows: the feed of ``first`` to ``last`` (none when ``first > last``), after the rows the
    table held at ``snapshot`` as inserts (a table created inside the range), under ``columns``."""

    first: int
    last: int
    columns: tuple[str, ...]
    key: tuple[str, ...]
    snapshot: int | None = None
    snapshot_ts: int | None = None  # the TSO the snapshot's rows came into the table at (its creating DDL)


def part_query(source: Source, versions: Versions, part: Part) -> str:
    """The rows of one segment, under its columns, then ``_change_type`` and ``_commit_version``."""
    queries = []
    if part.snapshot is not None:
        queries.append(_snapshot_query(source, part))
    if part.first <= part.last:
        queries.append(_feed_query(source, versions, part))
    return " UNION ALL ".join(queries)


def _snapshot_query(source: Source, part: Part) -> str:
    ts = quote(source.commit_ts_column)
    stamped = f"coalesce(CAST({_number(part.snapshot_ts)} AS BIGINT), {ts}) AS {ts}"
    columns = [stamped if c == source.commit_ts_column else quote(c) for c in part.columns]
    return (
        f"SELECT {', '.join(columns)}, '{INSERT}' AS {CHANGE_TYPE}, "
        f"CAST({part.snapshot} AS BIGINT) AS {VERSION} FROM {source.table_ref} VERSION AS OF {part.snapshot}"
    )


def _feed_query(source: Source, versions: Versions, part: Part) -> str:
    ts = quote(source.commit_ts_column)
    marks = ", ".join(
        f"({v}, {_number(versions.bounds.get(v))}, {_number(versions.stamps.get(v))})"
        for v in range(part.first, part.last + 1)
    )
    own = sorted(v for v in versions.own if part.first <= v <= part.last)
    where = f" WHERE c.{VERSION} NOT IN ({', '.join(map(str, own))})" if own else ""
    if part.key:
        pair = ", ".join(f"c.{quote(k)}" for k in part.key)
        after = (
            f"max(CASE WHEN c.{CHANGE_TYPE} = '{AFTER}' THEN c.{ts} END) "
            f"OVER (PARTITION BY {pair}, c.{VERSION})"
        )
    else:
        after = "CAST(NULL AS BIGINT)"
    removed = f"{CHANGE_TYPE} IN ('{DELETE}', '{BEFORE}')"
    value = (
        f"CASE WHEN {removed} THEN coalesce({_STAMP}, {_AFTER_TS}, {_BOUND}) "
        f"ELSE coalesce({_STAMP}, {ts}) END"
    )
    outer = [f"{value} AS {ts}" if c == source.commit_ts_column else quote(c) for c in part.columns]
    inner = [f"c.{quote(c)}" for c in part.columns]
    return (
        f"SELECT {', '.join(outer)}, {CHANGE_TYPE}, {VERSION} FROM (SELECT {', '.join(inner)}, "
        f"c.{CHANGE_TYPE}, c.{VERSION}, CAST(m.b AS BIGINT) AS {_BOUND}, CAST(m.s AS BIGINT) AS {_STAMP}, "
        f"{after} AS {_AFTER_TS} "
        f"FROM {source.feed_function}({source.feed_name}, {part.first}, {part.last}) AS c "
        f"LEFT JOIN (VALUES {marks}) AS m(v, b, s) ON c.{VERSION} = m.v{where})"
    )


def net_query(
    source: Source,
    versions: Versions,
    parts: Sequence[Part],
    ends: Ends,
) -> str:
    """One row per key over the whole range, by its presence at the range's ends: an insert or an
    after-image with the row at the end, or a delete with the row at the start. A key is in the answer when
    a change touched it or its row differs between the ends (a DDL that moved rows, such as a swap of two
    tables, has no rows of its own); a key that came and went is left out. Rows have the end's columns (a
    column dropped inside the range is left out; one added inside it is null in a delete), the TSO of the
    key's last change (else of the range's last DDL) and the version of it."""
    ts = quote(source.commit_ts_column)
    key = ends.key
    keys = ", ".join(quote(k) for k in key)
    changed = (
        " UNION ALL ".join(
            f"SELECT {keys}, {ts}, {VERSION} FROM ({part_query(source, versions, p)})" for p in parts
        )
        or f"SELECT {keys}, {ts}, CAST(NULL AS BIGINT) AS {VERSION} FROM {source.table_ref} LIMIT 0"
    )
    at_start = set(ends.before_columns)
    values = []
    for c in ends.columns:
        if c == source.commit_ts_column:
            values.append(f"coalesce(n.{_AFTER_TS}, CAST({_number(ends.ddl_ts)} AS BIGINT), b.{ts}) AS {ts}")
        elif c in key:
            values.append(
                f"coalesce(b.{quote(c)}, a.{quote(c)}) AS {quote(c)}" if ends.before else f"b.{quote(c)}"
            )
        elif c in at_start:
            # A column whose type changed inside the range: a delete's value at the start, in the end's type.
            start = f"a.{quote(c)}" if c in ends.compared else f"try_cast(a.{quote(c)} AS {ends.types[c]})"
            values.append(f"CASE WHEN b.{_AT_B} THEN b.{quote(c)} ELSE {start} END AS {quote(c)}")
        else:
            values.append(f"b.{quote(c)}")
    touched = (
        f"WITH n AS (SELECT {keys}, max({ts}) AS {_AFTER_TS}, max({VERSION}) AS {VERSION} "
        f"FROM ({changed}) GROUP BY {keys})"
    )
    version = f"coalesce(n.{VERSION}, CAST({ends.after} AS BIGINT)) AS {VERSION}"
    b_side = f"(SELECT *, true AS {_AT_B} FROM {source.table_ref} VERSION AS OF {ends.after}) AS b"
    if ends.before is None:
        return (
            f"{touched} SELECT {', '.join(values)}, '{INSERT}' AS {CHANGE_TYPE}, {version} FROM {b_side} "
            f"JOIN n ON {_on('n', 'b', key)}"
        )
    a_side = f"(SELECT *, true AS {_AT_A} FROM {source.table_ref} VERSION AS OF {ends.before}) AS a"
    kind = (
        f"CASE WHEN a.{_AT_A} IS NULL THEN '{INSERT}' WHEN b.{_AT_B} IS NULL THEN '{DELETE}' "
        f"ELSE '{AFTER}' END"
    )
    same = " AND ".join(f"a.{quote(c)} <=> b.{quote(c)}" for c in ends.compared) or "true"
    found = " AND ".join(f"n.{quote(k)} <=> coalesce(b.{quote(k)}, a.{quote(k)})" for k in key)
    moved = f"n.{_AFTER_TS} IS NOT NULL OR a.{_AT_A} IS NULL OR b.{_AT_B} IS NULL OR NOT ({same})"
    return (
        f"{touched} SELECT {', '.join(values)}, {kind} AS {CHANGE_TYPE}, {version} FROM {a_side} "
        f"FULL OUTER JOIN {b_side} ON {_on('a', 'b', key)} "
        f"LEFT JOIN n ON {found} WHERE {moved}"
    )


@dataclass(frozen=True)
class Ends:
    """The range's ends as a net answer needs them."""

    key: tuple[str, ...]
    after: int  # the version at the end
    columns: tuple[str, ...]  # its columns
    before: int | None  # the version at the start (None: the table was created inside the range)
    before_columns: tuple[str, ...]
    compared: tuple[str, ...]  # upstream columns of the same name and type at both ends
    ddl_ts: int | None  # the TSO of the range's last DDL
    types: Mapping[str, str]  # each column's type at the end, as SQL names it


def _on(left: str, right: str, key: tuple[str, ...]) -> str:
    return " AND ".join(f"{left}.{quote(k)} <=> {right}.{quote(k)}" for k in key)


def comment(text: str) -> list[str]:
    """``text`` as SQL comment lines, every line of it commented."""
    return [f"-- {line}".rstrip() for line in text.splitlines() or [""]]


def _number(value: int | None) -> str:
    return "NULL" if value is None else str(int(value))
