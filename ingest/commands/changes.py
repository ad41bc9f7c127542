"""What changed upstream between two TiDB timestamps, table by table: the mirror's change data feed between
the versions ``as-of`` resolves each end to. I/O; the rules are in ``ingest.commands.changes_rules`` and the
queries, which ``--sql`` prints and everything here runs, in ``ingest.commands.changes_sql``.

Each row carries the upstream columns, ``_change_type`` (insert, update_preimage, update_postimage, delete),
the table's commit-TSO column and ``_commit_version``. Only upstream's changes are rows: what the mirror wrote
for its own reasons (a new column's back-fill, a rewrite) is not. Inserts and after-images carry the TiDB
commit TSO of the change that wrote them (a DDL's, for the rows a TRUNCATE or an exchanged partition changed).
The mirror keeps no row for a delete, so deletes and before-images carry their after-image's TSO, else the
TSO their batch applied upstream up to: the change committed above the table's previous batch and at or below
it. ``net``: one row per key over the whole range, by its presence at both ends.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ingest.apply.table import table_info
from ingest.commands import asof, changes_sql
from ingest.commands import changes_rules as rules
from ingest.commands.asof_rules import CommitPoint, choose_run, choose_version
from ingest.config import IngestConfig
from ingest.errors import ChangesRefused
from ingest.lake import delta_io, delta_log, sql_text
from ingest.lake.names import TableName
from ingest.model import TableId, tso_to_datetime
from ingest.state import ddl_history
from ingest.state.table_state import PROPERTY_KEY_COLUMNS

logger = logging.getLogger(__name__)

CHANGE_TYPE, VERSION = changes_sql.CHANGE_TYPE, changes_sql.VERSION
INSERT, DELETE, BEFORE, AFTER = changes_sql.INSERT, changes_sql.DELETE, changes_sql.BEFORE, changes_sql.AFTER


@dataclass(frozen=True)
class ChangeSegment:
    """Versions ``first`` to ``last`` of one table under one schema, and the DDLs that started it (none: it
    starts the range), with the TSO of the last of them."""

    first: int
    last: int
    ddl: tuple[str, ...] = ()
    ddl_ts: int | None = None
    snapshot: int | None = None  # a table created inside the range: its rows at this version, as inserts
    key: tuple[str, ...] = ()  # its key columns (a DDL may change them between segments)
    columns: tuple[str, ...] = ()  # its columns, ours included, in the table's order

    @property
    def empty(self) -> bool:
        return self.first > self.last and self.snapshot is None

    @property
    def feed(self) -> bool:
        """Whether versions of the change data feed belong to it."""
        return self.first <= self.last


@dataclass(frozen=True)
class TableChanges:
    """One table's changes in the range: its versions at both ends (``before`` None: created inside it)."""

    table: TableId
    path: str
    before: int | None
    after: int
    segments: tuple[ChangeSegment, ...]
    key: tuple[str, ...]
    commit_ts_column: str
    bounds: Mapping[int, int]  # version -> the TSO its batch applied upstream up to
    stamps: Mapping[int, int] = field(default_factory=dict)  # version -> the TSO of the DDL that wrote it
    own: frozenset[int] = frozenset()  # versions whose rows the mirror wrote for its own reasons
    columns: tuple[str, ...] = ()  # at the end of the range
    before_columns: tuple[str, ...] = ()  # at its start
    compared: tuple[str, ...] = ()  # upstream columns of the same name and type at both ends
    types: Mapping[str, str] = field(default_factory=dict)  # each column's type at the end, in SQL

    def query(self, segment: ChangeSegment) -> str:
        """The Spark SQL query of one segment's rows (it must not be empty)."""
        return changes_sql.part_query(self._source(), self._versions(), _part(segment))

    def net_query(self) -> str:
        """The Spark SQL query of one row per key over the whole range.

        Raises:
            ChangesRefused: the table has no key, or its key is not the same columns at both ends."""
        if not self.key:
            raise ChangesRefused(f"{self.table}: has no key, so its changes cannot be netted per key")
        moved = [s for s in self.segments if not set(self.key) <= set(s.columns or self.columns)]
        if moved or (self.before is not None and not set(self.key) <= set(self.before_columns)):
            raise ChangesRefused(
                f"{self.table}: its key ({', '.join(self.key)}) is not the same columns across the range, so "
                "its changes cannot be netted per key; read them without net, or ask for a range on one side "
                "of the key change"
            )
        parts = [_part(s) for s in self.segments if not s.empty]
        ddls = self.ddls()
        ends = changes_sql.Ends(
            self.key, self.after, self.columns, self.before, self.before_columns, self.compared,
            ddls[-1][0] if ddls else None, self.types,
        )  # fmt: skip
        return changes_sql.net_query(self._source(), self._versions(), parts, ends)

    def ddls(self) -> list[tuple[int | None, str]]:
        """The DDLs inside the range, with their TSOs (not the one that created a table inside it)."""
        opened = self.before is None
        return [(s.ddl_ts, d) for n, s in enumerate(self.segments) if not (n == 0 and opened) for d in s.ddl]

    def sql(self, net: bool = False) -> list[str]:
        """Statements a Spark SQL user can run, each on one line, and the DDLs between them as comments: one
        query per segment, or (``net``) one for the whole range."""
        if net:
            ddls = [f"{self.table}: inside the range, at TSO {ts}: {ddl}" for ts, ddl in self.ddls()]
            return [*[c for d in ddls for c in changes_sql.comment(d)], f"{self.net_query()};"]
        lines = []
        for segment in self.segments:
            for ddl in segment.ddl:
                lines += changes_sql.comment(f"{self.table}: then, at TSO {segment.ddl_ts}: {ddl}")
            if not segment.empty:
                lines.append(f"{self.query(segment)};")
        return lines

    def _source(self) -> changes_sql.Source:
        by_name = isinstance(self.path, TableName)
        function = "table_changes" if by_name else "table_changes_by_path"
        name = sql_text.sql_string(str(self.path))
        return changes_sql.Source(function, name, asof.sql_name(self.path), self.commit_ts_column)

    def _versions(self) -> changes_sql.Versions:
        return changes_sql.Versions(self.bounds, self.stamps, self.own)


def _part(segment: ChangeSegment) -> changes_sql.Part:
    snapshot_ts = segment.ddl_ts if segment.snapshot is not None else None
    return changes_sql.Part(
        segment.first, segment.last, segment.columns, segment.key, segment.snapshot, snapshot_ts
    )


@dataclass(frozen=True)
class Changes:
    """The answer to "what changed between TSO A and TSO B": both ends as runs and Gs, and every table."""

    from_tso: int
    to_tso: int
    from_g: int
    to_g: int
    tables: tuple[TableChanges, ...]
    refused: Mapping[TableId, str] = field(default_factory=dict)  # not strict: tables it cannot answer

    def table(self, table: TableId) -> TableChanges:
        for t in self.tables:
            if t.table == table:
                return t
        raise ChangesRefused(f"{table}: not part of this range (it did not exist at G = {self.to_g})")

    def describe(self) -> str:
        lines = [
            f"changes from G = {self.from_g} ({_when(self.from_g)}) to G = {self.to_g} ({_when(self.to_g)})",
            f"{'table':<32} {'versions':>12}  schema changes",
        ]
        for t in self.tables:
            versions = f"{'-' if t.before is None else t.before}..{t.after}"
            ddls = [f"{s.ddl_ts}: {d}" for s in t.segments for d in s.ddl]
            lines.append(f"{t.table!s:<32} {versions:>12}  {'; '.join(ddls) or '-'}")
        lines += [f"{table!s:<32} {'REFUSED':>12}  {why}" for table, why in self.refused.items()]
        return "\n".join(lines)


def resolve(
    spark: SparkSession,
    config: IngestConfig,
    from_tso: int,
    to_tso: int | None = None,
    tables: Sequence[TableId] | None = None,
    *,
    strict: bool = True,
) -> Changes:
    """Resolve both ends as ``as-of`` does (the newest run whose G is at or below each TSO; ``to_tso`` None:
    the newest G) and cut each table's versions between into segments. Not ``strict``: a table whose range
    cannot be answered is listed in ``refused`` with why, and the others answer.

    Raises:
        ChangesRefused / AsOfRefused: a range that runs backwards, an end outside the mirror's runs, a table
            asked for that did not exist at the end, or (``strict``) a table whose range cannot be answered.
    """
    points = asof.runs(spark, config.state_path, config.stream_id)
    end = choose_run(points, to_tso if to_tso is not None else max((p.point for p in points), default=0))
    start = choose_run(points, from_tso)
    rules.check_range(start.point, end.point, from_tso, to_tso if to_tso is not None else end.point)
    wanted = list(tables) if tables is not None else asof.run_tables(spark, config, end.run_id)
    statements = _ddl_statements(spark, config, start.point, end.point)
    found, refused = [], {}
    for table in wanted:
        path = config.mirror.address(table)
        try:
            commits = _history(spark, table, path)
            after = choose_version(table, commits, end.point)
            if after is None:
                if tables is not None:
                    raise ChangesRefused(
                        f"{table}: did not exist in the mirror at G = {end.point}; leave it out"
                    )
                continue
            before = choose_version(table, commits, start.point)
            cut = rules.segments(
                table, commits, before, after, _key_changes(spark, path, commits, before, after)
            )
            found.append(_table_changes(spark, table, path, before, after, cut, commits, statements))
        except ChangesRefused as exc:
            if strict:
                raise
            refused[table] = str(exc)
    to = to_tso if to_tso is not None else end.point
    return Changes(from_tso, to, start.point, end.point, tuple(found), refused)


def _history(spark: SparkSession, table: TableId, path: str) -> list[CommitPoint]:
    try:
        return asof.commits(spark, path)
    except AnalysisException as exc:
        raise ChangesRefused(f"{table}: no Delta table at {path}; check --tables and the mirror") from exc


def _key_changes(
    spark: SparkSession, path: str, commits: list[CommitPoint], before: int | None, after: int
) -> list[int]:
    """The versions in the range at which the table's key columns changed (one properties read per DDL)."""
    candidates = rules.key_candidates(commits, before, after)
    if not candidates:
        return []
    start = before if before is not None else min(c.version for c in commits if c.version <= after)
    changed, previous = [], _key_at(spark, path, start)
    for commit in candidates:
        key = _key_at(spark, path, commit.version)
        if key != previous:
            changed.append(commit.version)
        previous = key
    return changed


def _key_at(spark: SparkSession, path: str, version: int) -> str | None:
    return delta_io.properties(spark, path, version).get(PROPERTY_KEY_COLUMNS)


def _table_changes(
    spark: SparkSession,
    table: TableId,
    path: str,
    before: int | None,
    after: int,
    cut: list[rules.Segment],
    commits: list[CommitPoint],
    statements: Mapping[tuple[str, int], list[str]],
) -> TableChanges:
    info = table_info(spark, path, after)
    if info.retired and cut and (before is None or not table_info(spark, path, before).retired):
        raise ChangesRefused(
            f"{table}: was dropped or renamed away inside the range (retired by version {after}); ask for a "
            "range that ends before the DROP/RENAME, or read the table it was renamed to"
        )
    end = delta_io.read(spark, path, after).schema
    start = delta_io.read(spark, path, before).schema if before is not None else None
    segments = []
    for s in cut:
        at = after if s is cut[-1] else max(s.last, s.snapshot or 0)
        shape = info if at == after else table_info(spark, path, at)
        columns = tuple(end.fieldNames()) if at == after else _columns(spark, path, at)
        segments.append(_segment(table, s, statements, shape.key, columns))
    types = {f.name: f.dataType for f in start.fields} if start is not None else {}
    compared = tuple(
        f.name for f in end.fields if f.name != info.commit_ts_column and types.get(f.name) == f.dataType
    )
    return TableChanges(
        table, path, before, after, tuple(segments), info.key, info.commit_ts_column, rules.bound_of(commits),
        rules.stamps_of(commits), rules.own_versions(commits), tuple(end.fieldNames()),
        tuple(start.fieldNames()) if start is not None else (), compared,
        {f.name: f.dataType.simpleString() for f in end.fields},
    )  # fmt: skip


def _columns(spark: SparkSession, path: str, version: int) -> tuple[str, ...]:
    return tuple(delta_io.read(spark, path, version).columns)


def _segment(
    table: TableId,
    segment: rules.Segment,
    statements: Mapping[tuple[str, int], list[str]],
    key: tuple[str, ...],
    columns: tuple[str, ...],
) -> ChangeSegment:
    ddl: list[str] = []
    ddl_ts = None
    for commit in segment.started_by:
        match = rules.DDL_STEP.match(commit.step)
        ts = int(match.group(1)) if match else commit.applied_ts
        said = statements.get((str(table), ts)) if match else None
        text = said or [commit.step or commit.operation]
        ddl += [t for t in text if t not in ddl]
        ddl_ts = ts
    return ChangeSegment(segment.first, segment.last, tuple(ddl), ddl_ts, segment.snapshot, key, columns)


def _ddl_statements(
    spark: SparkSession, config: IngestConfig, low: int, high: int
) -> dict[tuple[str, int], list[str]]:
    """The statements the DDL history holds for DDLs applied above ``low`` and at or below ``high``."""
    history = ddl_history.read(spark, config.state_path)
    if history is None:
        return {}
    rows = (
        history.where((F.col("commit_ts") > low) & (F.col("commit_ts") <= high))
        .where(F.col("action") != ddl_history.REJECTED)
        .select("table", "commit_ts", "sql")
        .collect()
    )
    found: dict[tuple[str, int], list[str]] = {}
    for row in rows:
        said = found.setdefault((row["table"], int(row["commit_ts"])), [])
        if row["sql"] not in said:
            said.append(row["sql"])
    return found


def segment_frame(spark: SparkSession, table: TableChanges, segment: ChangeSegment) -> DataFrame:
    """One segment's changes as rows (see the module's docstring), from the query ``--sql`` prints.

    Raises:
        ChangesRefused: VACUUM removed the segment's change files, or its feed cannot be read.
    """
    if segment.empty:
        empty = delta_io.read(spark, table.path, table.after).limit(0)
        return empty.select("*", F.lit(INSERT).alias(CHANGE_TYPE), F.lit(0).cast("long").alias(VERSION))
    return _run(spark, table, [segment], table.query(segment))


def net_frame(spark: SparkSession, table: TableChanges) -> DataFrame:
    """One row per key over the whole range, by its presence at both ends (see ``changes_sql.net_query``).

    Raises:
        ChangesRefused: as :func:`segment_frame`, and for a table without one key across the range.
    """
    return _run(spark, table, table.segments, table.net_query())


def _run(
    spark: SparkSession, table: TableChanges, segments: Sequence[ChangeSegment], query: str
) -> DataFrame:
    for segment in segments:
        if segment.feed:
            check_files(table, segment)
    try:
        rows = spark.sql(query)
        rows.schema  # noqa: B018 - resolving the read checks the range is readable
    except AnalysisException as exc:
        raise ChangesRefused(unreadable(table, segments, exc)) from exc
    return rows


def check_files(table: TableChanges, segment: ChangeSegment) -> None:
    """Refuse a segment whose change files VACUUM removed, when the table is on this machine (elsewhere the
    read fails with Delta's own error)."""
    directory = None if isinstance(table.path, TableName) else delta_log.local_dir(table.path)
    if directory is None:
        return
    try:
        gone = [f for f in delta_log.feed_files(directory, segment.first, segment.last) if not f.exists()]
    except (delta_log.Unreadable, OSError):
        return  # not a log this reader follows: Delta's read says what is wrong
    if gone:
        raise ChangesRefused(
            f"{table.table}: the changes of versions {segment.first}..{segment.last} can no longer be read: "
            f"VACUUM removed {len(gone)} of their files (e.g. {gone[0].name}). Ask for a later range, or "
            "keep files longer with delta.deletedFileRetentionDuration"
        )


def unreadable(table: TableChanges, segments: Sequence[ChangeSegment], exc: AnalysisException) -> str:
    first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    feed = [s for s in segments if s.feed] or list(segments)
    return (
        f"{table.table}: the change data of versions {feed[0].first}..{feed[-1].last} cannot be read "
        f"({first_line}). "
        "The table may not have recorded its changes then (change-feed off, or created before the mirror "
        "turned it on), or VACUUM removed the change files; ask for a later range"
    )


def _when(tso: int) -> str:
    return tso_to_datetime(tso).isoformat()


def changes(
    spark: SparkSession,
    target: str | IngestConfig,
    from_tso: int,
    to_tso: int | None = None,
    tables: Sequence[TableId | str] | None = None,
    net: bool = False,
) -> dict[TableId, DataFrame]:
    """Notebook entry point: each table's changes between ``from_tso`` and ``to_tso`` (None: the newest G)
    as one DataFrame (see the module's docstring); ``net``: one row per key over the whole range, under the
    columns the table has at its end.

    Raises:
        ChangesRefused: as :func:`resolve`, and (not ``net``) for a table whose schema changed inside the
            range (named with its DDL and TSO): read it one schema at a time with :func:`change_segments`.
    """
    answer = resolve(spark, asof.locate(target), from_tso, to_tso, _ids(tables))
    frames = {}
    for table in answer.tables:
        if net:
            frames[table.table] = net_frame(spark, table)
            continue
        ddl = table.ddls()
        if ddl:
            ts, text = ddl[0]
            raise ChangesRefused(
                f"{table.table}: its schema changed inside the range, at TSO {ts} ({_when(ts or 0)}): "
                f"{text}. Read it one schema at a time with change_segments(), net over the range with "
                "net=True, or ask for a range on one side of it"
            )
        parts = [segment_frame(spark, table, s) for s in table.segments]
        frames[table.table] = parts[0] if parts else _no_rows(spark, table)
    return frames


def change_segments(
    spark: SparkSession,
    target: str | IngestConfig,
    from_tso: int,
    to_tso: int | None = None,
    tables: Sequence[TableId | str] | None = None,
    net: bool = False,
) -> tuple[Changes, dict[TableId, list[tuple[ChangeSegment, DataFrame]]]]:
    """Each table's changes one schema at a time: its segments in order, each with the DDLs that started
    it; ``net``: one segment per table, the whole range with every DDL in it, one row per key."""
    answer = resolve(spark, asof.locate(target), from_tso, to_tso, _ids(tables))
    if net:
        return answer, {t.table: [(whole(t), net_frame(spark, t))] for t in answer.tables}
    return answer, {t.table: [(s, segment_frame(spark, t, s)) for s in t.segments] for t in answer.tables}


def whole(table: TableChanges) -> ChangeSegment:
    """The range as one segment: the versions after its start to its end, every DDL inside it."""
    first = table.segments[0].first if table.before is None and table.segments else (table.before or 0) + 1
    ddls = table.ddls()
    return ChangeSegment(
        first, table.after, tuple(d for _, d in ddls), ddls[-1][0] if ddls else None, None, table.key,
        table.columns,
    )  # fmt: skip


def changes_stream(
    spark: SparkSession, target: str | IngestConfig, table: TableId | str, from_tso: int
) -> DataFrame:
    """A Structured Streaming read of the table's changes after the version that equals upstream at
    ``from_tso`` (resolved as ``as-of`` resolves it), for a job that keeps up with the mirror. Rows as
    :func:`changes` gives them, except that deletes and before-images keep the TSO of the row they remove.
    A schema change stops the stream (Delta's own rule); start again from the DDL's TSO."""
    config = asof.locate(target)
    table_id = _ids([table])[0]  # type: ignore[index]
    start = choose_run(asof.runs(spark, config.state_path, config.stream_id), from_tso)
    path = config.mirror.address(table_id)
    version = choose_version(table_id, _history(spark, table_id, path), start.point)
    first = 0 if version is None else version
    rows = delta_io.stream_changes(spark, path, first).drop("_commit_timestamp")
    return rows if version is None else rows.where(F.col(VERSION) > version)


def _no_rows(spark: SparkSession, table: TableChanges) -> DataFrame:
    return segment_frame(spark, table, ChangeSegment(0, -1))


def _ids(tables: Sequence[TableId | str] | None) -> list[TableId] | None:
    if tables is None:
        return None
    return [t if isinstance(t, TableId) else asof.one_table(t) for t in tables]
