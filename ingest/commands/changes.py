"""What changed upstream between two TiDB timestamps, table by table: the mirror's change data feed between
the versions ``as-of`` resolves each end to. I/O; the rules are in ``ingest.commands.changes_rules``.

Each row carries the upstream columns, ``_change_type`` (insert, update_preimage, update_postimage, delete),
the table's commit-TSO column and ``_commit_version``. Inserts and after-images carry the TiDB commit TSO of
the change that wrote them. The mirror keeps no row for a delete, so deletes and before-images carry the TSO
its batch applied upstream up to: the change committed above the table's previous batch and at or below it.
"""

from __future__ import annotations

import argparse
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import orjson
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from ingest.apply.table import table_info
from ingest.commands import asof, flags
from ingest.commands import changes_rules as rules
from ingest.commands.asof_rules import CommitPoint, choose_run, choose_version
from ingest.config import IngestConfig
from ingest.errors import ChangesRefused
from ingest.lake import delta_io, delta_log, sql_text
from ingest.lake.names import TableName
from ingest.model import TableId, tso_to_datetime
from ingest.spark import get_session
from ingest.state import ddl_history
from ingest.state.table_state import PROPERTY_KEY_COLUMNS

logger = logging.getLogger(__name__)

CHANGE_TYPE, VERSION = "_change_type", "_commit_version"
INSERT, DELETE, BEFORE, AFTER = "insert", "delete", "update_preimage", "update_postimage"
_DDL_STEP = re.compile(r"ddl (\d+)")


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

    def sql(self) -> list[str]:
        """Statements a Spark SQL user can run: one ``table_changes`` query per segment, DDLs as comments."""
        function = "table_changes" if isinstance(self.path, TableName) else "table_changes_by_path"
        name = str(self.path) if isinstance(self.path, TableName) else self.path
        lines = []
        for segment in self.segments:
            lines += [f"-- {self.table}: then, at TSO {segment.ddl_ts}: {ddl}" for ddl in segment.ddl]
            if segment.snapshot is not None:
                lines.append(
                    f"SELECT *, 'insert' AS {CHANGE_TYPE}, {segment.snapshot} AS {VERSION} FROM "
                    f"{asof.sql_name(self.path)} VERSION AS OF {segment.snapshot};"
                )
            if segment.feed:
                lines.append(
                    f"SELECT * FROM {function}({sql_text.sql_string(name)}, {segment.first}, {segment.last});"
                )
        return lines


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
        commits = _history(spark, table, path)
        after = choose_version(table, commits, end.point)
        if after is None:
            if tables is not None:
                raise ChangesRefused(f"{table}: did not exist in the mirror at G = {end.point}; leave it out")
            continue
        try:
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
    keys = [
        info.key if s is cut[-1] else table_info(spark, path, max(s.last, s.snapshot or 0)).key for s in cut
    ]
    segments = tuple(_segment(table, s, statements, k) for s, k in zip(cut, keys, strict=True))
    return TableChanges(
        table, path, before, after, segments, info.key, info.commit_ts_column, rules.bound_of(commits)
    )


def _segment(
    table: TableId,
    segment: rules.Segment,
    statements: Mapping[tuple[str, int], list[str]],
    key: tuple[str, ...],
) -> ChangeSegment:
    ddl: list[str] = []
    ddl_ts = None
    for commit in segment.started_by:
        match = _DDL_STEP.match(commit.step)
        ts = int(match.group(1)) if match else commit.applied_ts
        said = statements.get((str(table), ts)) if match else None
        text = said or [commit.step or commit.operation]
        ddl += [t for t in text if t not in ddl]
        ddl_ts = ts
    return ChangeSegment(segment.first, segment.last, tuple(ddl), ddl_ts, segment.snapshot, key)


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


def segment_frame(
    spark: SparkSession, table: TableChanges, segment: ChangeSegment, net: bool = False
) -> DataFrame:
    """One segment's changes as rows (see the module's docstring); ``net``: one row per key, its state at the
    segment's end (insert, update_postimage) or a delete, keys that came and went left out."""
    if not segment.feed:
        at = table.after if segment.snapshot is None else segment.snapshot
        held = delta_io.read(spark, table.path, at)
        inserted = held.select("*", F.lit(INSERT).alias(CHANGE_TYPE), F.lit(at).cast("long").alias(VERSION))
        return inserted if segment.snapshot is not None else inserted.limit(0)
    _check_files(table, segment)
    try:
        # Delta reads the feed under the table's newest schema; the segment's own is its last version's.
        columns = delta_io.read(spark, table.path, segment.last).columns
        changed = delta_io.read_changes(spark, table.path, segment.first, segment.last)
        rows = changed.select(*[F.col(_q(c)) for c in columns], CHANGE_TYPE, VERSION)
        rows.schema  # noqa: B018 - resolving the read checks the range is readable
    except AnalysisException as exc:
        raise ChangesRefused(_unreadable(table, segment, exc)) from exc
    rows = _change_tso(spark, table, rows, segment.key)
    if segment.snapshot is not None:
        opened = segment_frame(spark, table, ChangeSegment(0, -1, snapshot=segment.snapshot))
        rows = opened.unionByName(rows)
    return _net(rows, table.table, segment.key) if net else rows


def _check_files(table: TableChanges, segment: ChangeSegment) -> None:
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


def _change_tso(spark: SparkSession, table: TableChanges, rows: DataFrame, key: tuple[str, ...]) -> DataFrame:
    """Deletes and before-images take the TSO their batch applied up to, or their after-image's."""
    bounds = spark.createDataFrame(
        [(v, ts) for v, ts in table.bounds.items()], f"{VERSION} long, _tidb_bound long"
    )
    ts = F.col(_q(table.commit_ts_column))
    removed = F.col(CHANGE_TYPE).isin(DELETE, BEFORE)
    if key:
        pair = Window.partitionBy(*[F.col(_q(k)) for k in key], F.col(VERSION))
        after_image = F.max(F.when(F.col(CHANGE_TYPE) == AFTER, ts)).over(pair)
        value = F.when(removed, F.coalesce(after_image, F.col("_tidb_bound"))).otherwise(ts)
    else:
        value = F.when(removed, F.col("_tidb_bound")).otherwise(ts)
    joined = rows.join(F.broadcast(bounds), VERSION, "left")
    return joined.withColumn(table.commit_ts_column, value).select(*[F.col(_q(c)) for c in rows.columns])


def _net(rows: DataFrame, table: TableId, key: tuple[str, ...]) -> DataFrame:
    """One row per key: its last image (insert when it was not there at the start, else an after-image)
    or a delete; a key that came and went inside the range is left out."""
    if not key:
        raise ChangesRefused(f"{table}: has no key, so its changes cannot be netted per key")
    kind = F.col(CHANGE_TYPE)
    order = F.when(kind == BEFORE, 0).when(kind == DELETE, 1).when(kind == INSERT, 2).otherwise(3)
    rank = F.col(VERSION) * 4 + order
    last = F.max_by(F.struct(*[F.col(_q(c)) for c in rows.columns]), rank).alias("_tidb_last")
    first = F.min_by(kind, rank).alias("_tidb_first")
    grouped = rows.groupBy(*[F.col(_q(k)) for k in key]).agg(first, last)
    existed, exists = F.col("_tidb_first") != INSERT, F.col("_tidb_last")[CHANGE_TYPE] != DELETE
    net_kind = F.when(~existed, INSERT).when(exists, AFTER).otherwise(DELETE)
    columns = [F.col("_tidb_last")[c].alias(c) for c in rows.columns if c != CHANGE_TYPE]
    kept = grouped.where(existed | exists).select(*columns, net_kind.alias(CHANGE_TYPE))
    return kept.select(*[F.col(_q(c)) for c in rows.columns])


def _unreadable(table: TableChanges, segment: ChangeSegment, exc: AnalysisException) -> str:
    first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return (
        f"{table.table}: the change data of versions {segment.first}..{segment.last} cannot be read "
        f"({first_line}). "
        "The table may not have recorded its changes then (change-feed off, or created before the mirror "
        "turned it on), or VACUUM removed the change files; ask for a later range"
    )


def _q(name: str) -> str:
    return delta_io.quote(name)


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
    as one DataFrame (see the module's docstring); ``net``: one row per key.

    Raises:
        ChangesRefused: as :func:`resolve`, and for a table whose schema changed inside the range (named
            with its DDL and TSO): read it one schema at a time with :func:`change_segments`.
    """
    answer = resolve(spark, asof.locate(target), from_tso, to_tso, _ids(tables))
    frames = {}
    for table in answer.tables:
        # A table created inside the range opens with its creation: only a DDL after that splits it.
        opened = table.before is None
        ddl = [(s.ddl_ts, d) for n, s in enumerate(table.segments) if not (n == 0 and opened) for d in s.ddl]
        if ddl:
            ts, text = ddl[0]
            raise ChangesRefused(
                f"{table.table}: its schema changed inside the range, at TSO {ts} ({_when(ts or 0)}): "
                f"{text}. Read it one schema at a time with change_segments(), or ask for a range on one "
                "side of it"
            )
        parts = [segment_frame(spark, table, s, net) for s in table.segments]
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
    it."""
    answer = resolve(spark, asof.locate(target), from_tso, to_tso, _ids(tables))
    return answer, {
        t.table: [(s, segment_frame(spark, t, s, net)) for s in t.segments] for t in answer.tables
    }


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


def command(args: argparse.Namespace, warehouse: str | None = None) -> int:
    """``changes``: what changed between two TSOs, as a summary, SQL statements, or files under --out."""
    from_tso = asof.parse_moment(args.from_tso, args.from_time)
    to_tso = (
        None if args.to_tso is None and args.to_time is None else asof.parse_moment(args.to_tso, args.to_time)
    )
    mirror = flags.mirror(args)
    warehouse = flags.catalog_warehouse(warehouse, mirror.by_name)
    spark = get_session(remote=getattr(args, "spark_remote", None), catalog_warehouse=warehouse)
    answer = resolve(spark, mirror, from_tso, to_tso, asof.parse_tables(args.tables), strict=False)
    print(f"-- {answer.describe().replace(chr(10), chr(10) + '-- ')}")
    refused = 3 if answer.refused else 0  # as a run with stopped tables: the others answered
    if args.sql:
        for table in answer.tables:
            print("\n".join(table.sql()))
        return refused
    counts = _write(spark, answer, Path(args.out), args.net) if args.out else _count(spark, answer, args.net)
    for table_id, count in counts.items():
        print(f"{table_id}: {count} change rows")
    return refused


def _count(spark: SparkSession, answer: Changes, net: bool) -> dict[TableId, int]:
    return {t.table: sum(segment_frame(spark, t, s, net).count() for s in t.segments) for t in answer.tables}


def _write(spark: SparkSession, answer: Changes, out: Path, net: bool) -> dict[TableId, int]:
    """Each segment as Parquet under ``<out>/<database>/<table>/<n>``, and ``<out>/_changes.json`` saying
    what the range and each segment are."""
    counts, manifest = {}, []
    for table in answer.tables:
        counts[table.table] = 0
        for n, segment in enumerate(table.segments):
            where = out / table.table.schema / table.table.table / str(n)
            frame = segment_frame(spark, table, segment, net)
            frame.write.mode("overwrite").parquet(str(where))
            counts[table.table] += spark.read.parquet(str(where)).count()
            manifest.append({
                "table": str(table.table), "segment": n, "path": str(where), "first_version": segment.first,
                "last_version": segment.last, "ddl": list(segment.ddl), "ddl_ts": segment.ddl_ts,
            })  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    summary = {
        "from_tso": answer.from_tso, "to_tso": answer.to_tso, "from_g": answer.from_g, "to_g": answer.to_g,
        "net": net, "segments": manifest,
    }  # fmt: skip
    (out / "_changes.json").write_bytes(orjson.dumps(summary, option=orjson.OPT_INDENT_2))
    return counts
