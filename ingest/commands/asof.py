"""Read every mirrored table as of one TiDB timestamp (TSO) or wall-clock time. I/O.

The run to use comes from ``<state>/progress`` (one row per committed run, with G); each table's version
from its own history (our commits carry their applied TSO and whether they are consistent). The rules are
in ``ingest.commands.asof_rules``. Two readers give the same answer: ``resolve`` through Spark (SQL and the
DataFrame API only, so it works the same over Spark Connect), and ``resolve_local``, which reads the Delta
logs of a mirror on this machine's file system directly, in a fraction of a second and without a JVM.
"""

from __future__ import annotations

import argparse
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ingest.commands import flags
from ingest.commands.asof_rules import CommitPoint, RunPoint, choose_run, choose_version, run_point
from ingest.config import IngestConfig
from ingest.errors import AsOfRefused, ConfigError
from ingest.lake import delta_io, delta_log, sql_text
from ingest.lake.delta_io import quote
from ingest.lake.names import TableName
from ingest.model import TableId, tso_from_datetime, tso_to_datetime
from ingest.spark import get_session
from ingest.state import progress
from ingest.state.table_state import METADATA_KEY, metadata_payload

# Temporary view names: no dots allowed, so database and table are joined by this.
logger = logging.getLogger(__name__)

VIEW_TEMPLATE = "{database}__{table}"

_TABLE_STATES = T.StructType([T.StructField("tables", T.MapType(T.StringType(), T.StructType(
    [T.StructField("applied_ts", T.LongType())])))])  # fmt: skip
_METADATA = T.StructType([T.StructField(METADATA_KEY, T.StructType([
    T.StructField("consistent", T.BooleanType()), T.StructField("applied_ts", T.LongType()),
    T.StructField("step", T.StringType())]))])  # fmt: skip


@dataclass(frozen=True)
class TableAsOf:
    """One table as of the point: the Delta version that equals upstream there."""

    table: TableId
    path: str
    version: int

    def sql(self) -> str:
        """A query that reads this version (Spark SQL, Databricks SQL)."""
        return f"SELECT * FROM {sql_name(self.path)} VERSION AS OF {self.version}"


def sql_name(path: str) -> str:
    """The table as a query names it: ``delta.`path```, or its catalog name, with quotes only where a part
    needs them (``main.tidb_shop.orders``)."""
    if isinstance(path, TableName):
        return ".".join(p if _PLAIN.fullmatch(p) else quote(p) for p in path.parts)
    return sql_text.table_ref(path)


_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class AsOf:
    """The answer to "the mirror as of TSO t": the run and G used, and each table's version.

    ``absent`` lists tables the mirror knows today that did not exist (in the mirror) yet at G.
    """

    requested_ts: int
    run_id: int
    g: int
    tables: tuple[TableAsOf, ...]
    absent: tuple[TableId, ...] = ()

    @property
    def g_time(self) -> datetime:
        return tso_to_datetime(self.g)

    def table(self, table: TableId) -> TableAsOf:
        for t in self.tables:
            if t.table == table:
                return t
        raise ConfigError(f"tables: {table} is not part of this as-of read (it had no version at G {self.g})")

    def describe(self) -> str:
        lines = [
            f"as of TSO {self.requested_ts} ({tso_to_datetime(self.requested_ts).isoformat()}): run "
            f"{self.run_id}, G = {self.g} ({self.g_time.isoformat()})",
            f"{'table':<32} {'version':>8}",
        ]
        lines += [f"{t.table!s:<32} {t.version:>8}" for t in self.tables]
        lines += [f"{t!s:<32} {'-':>8}  (not created yet at G)" for t in self.absent]
        return "\n".join(lines)


def command(args: argparse.Namespace, warehouse: str | None = None) -> int:
    """``as-of``: the Delta version of every table at a TSO or time, as a table or as SELECT queries."""
    tso = parse_moment(args.tso, args.time)
    tables = parse_tables(args.tables)
    mirror = flags.mirror(args)
    try:
        # No JVM for a mirror on this machine: the answer is in its Delta logs.
        answer = resolve_local(mirror, tso, tables)
    except delta_log.Unreadable as why:
        logger.info("as-of: reading the mirror through Spark (%s)", why)
        warehouse = flags.catalog_warehouse(warehouse, mirror.by_name)
        spark = get_session(remote=getattr(args, "spark_remote", None), catalog_warehouse=warehouse)
        answer = resolve(spark, mirror, tso, tables)
    if args.sql:
        print(f"-- as of TSO {tso}: run {answer.run_id}, G = {answer.g} ({answer.g_time.isoformat()})")
        for table in answer.tables:
            print(table.sql() + ";")
    else:
        print(answer.describe())
    return 0


def parse_moment(tso: str | None, time: str | None) -> int:
    """The TSO asked for: ``tso`` as a number, or ``time`` as an ISO 8601 instant (UTC unless it says).

    Raises:
        ConfigError: neither or both are given, or one does not parse.
    """
    if (tso is None) == (time is None):
        raise ConfigError("as-of: give exactly one of --tso N (a TiDB TSO) or --time ISO-8601")
    if tso is not None:
        if not tso.strip().isdigit():
            raise ConfigError(f"tso: {tso!r} is not a TiDB TSO (a non-negative integer)")
        return int(tso)
    assert time is not None
    try:
        moment = datetime.fromisoformat(time.strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise ConfigError(f"time: {time!r} is not an ISO 8601 time, e.g. 2026-11-20T09:00:35Z") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    # The last TSO of that millisecond: everything committed within it is included.
    return tso_from_datetime(moment, logical=(1 << 18) - 1)


def parse_tables(text: str | None) -> list[TableId] | None:
    """``db.t,db.u`` as table ids; None for all tables.

    Raises:
        ConfigError: an entry is not database.table.
    """
    if not text or not text.strip():
        return None
    tables = []
    for item in text.split(","):
        schema, dot, table = item.strip().partition(".")
        if not dot or not schema or not table:
            raise ConfigError(f"tables: expected database.table[,database.table...], got {item.strip()!r}")
        tables.append(TableId(schema, table))
    return tables


def locate(
    target: str | IngestConfig, state_path: str | None = None, stream_id: str = "default"
) -> IngestConfig:
    """The mirror at a target path (with its state path and stream), as a run's config locates its tables
    and state; a config (a mirror by name, say) is taken as it is. Its input is not read."""
    if isinstance(target, IngestConfig):
        return target
    target_path = target
    return IngestConfig.from_params(
        {"input": "-", "target-path": target_path, "state-path": state_path or "", "stream-id": stream_id}
    )


def runs(spark: SparkSession, state_path: str, stream_id: str) -> list[RunPoint]:
    """Every committed run of the stream that is a consistent point (see ``asof_rules.run_point``)."""
    path = progress.progress_path(state_path)
    try:
        df = delta_io.read(spark, path)
    except AnalysisException:
        return []
    applied = F.map_values(F.from_json("state", _TABLE_STATES)["tables"])
    rows = (
        df.where(F.col("stream_id") == stream_id)
        .select(
            "run_id",
            "committed_at",
            "global_watermark",
            F.transform(applied, lambda s: s["applied_ts"]).alias("applied"),
        )
        .collect()
    )
    points = []
    for row in rows:
        point = run_point(int(row["global_watermark"]), [int(a or 0) for a in row["applied"] or []])
        if point is not None:
            points.append(RunPoint(int(row["run_id"]), row["committed_at"], point))
    return points


def run_tables(spark: SparkSession, config: IngestConfig, run_id: int) -> list[TableId]:
    """The tables the mirror knew at a committed run (its progress row's table states)."""
    row = (
        delta_io.read(spark, progress.progress_path(config.state_path))
        .where((F.col("stream_id") == config.stream_id) & (F.col("run_id") == run_id))
        .select(F.map_keys(F.from_json("state", _TABLE_STATES)["tables"]).alias("tables"))
        .first()
    )
    names = row["tables"] if row is not None and row["tables"] else []
    return sorted(TableId(*n.split(".", 1)) for n in names)


def commits(spark: SparkSession, path: str) -> list[CommitPoint]:
    """The table's retained Delta history, each commit with what our ``userMetadata`` says of it."""
    meta = F.from_json("userMetadata", _METADATA)[METADATA_KEY]
    rows = (
        delta_io.history(spark, path)
        .select(
            "version", "operation", meta["consistent"].alias("consistent"),
            meta["applied_ts"].alias("applied_ts"), meta["step"].alias("step"),
        )
        .collect()
    )  # fmt: skip
    return [
        CommitPoint(int(r["version"]), r["consistent"], int(r["applied_ts"] or 0), r["operation"] or "",
                    r["step"] or "")
        for r in rows
    ]  # fmt: skip


def resolve(
    spark: SparkSession,
    target_path: str | IngestConfig,
    tso: int,
    tables: list[TableId] | None = None,
    *,
    state_path: str | None = None,
    stream_id: str = "default",
    check_files: bool = True,
) -> AsOf:
    """Find the newest run whose G is at or below ``tso`` and, per table, the version equal to upstream at G.

    ``tables`` defaults to every table the mirror knew at that run. ``check_files`` makes sure each chosen
    version's data files are still there (VACUUM removes those of old versions).

    Raises:
        AsOfRefused: ``tso`` is before the mirror started or after its newest G, a table asked for did not
            exist at G, or a version needed is no longer in the history or its files were vacuumed.
    """
    config = locate(target_path, state_path, stream_id)

    def history(table: TableId, path: str) -> list[CommitPoint]:
        try:
            return commits(spark, path)
        except AnalysisException as exc:
            raise AsOfRefused(f"{table}: no Delta table at {path}; check --tables and --target-path") from exc

    def check(table: TableId, path: str, version: int, g: int) -> None:
        if check_files:
            _check_files(spark, table, path, version, g)

    return _answer(
        config,
        tso,
        tables,
        runs(spark, config.state_path, config.stream_id),
        lambda run_id: run_tables(spark, config, run_id),
        history,
        check,
    )


def resolve_local(
    target_path: str | IngestConfig,
    tso: int,
    tables: list[TableId] | None = None,
    *,
    state_path: str | None = None,
    stream_id: str = "default",
) -> AsOf:
    """``resolve``, answered from the mirror's files alone, without Spark: the runs from its progress
    table, each table's versions from its commit files, and the files a chosen version needs that later
    commits removed (the only ones VACUUM may have deleted) checked on disk.

    Raises:
        delta_log.Unreadable: the mirror is not on a local file system, or uses what the direct reader
            does not follow; ``resolve`` answers then.
        AsOfRefused: as ``resolve``.
    """
    config = locate(target_path, state_path, stream_id)
    stream_id = config.stream_id
    _, state = delta_log.local_mirror(config.target_path, config.state_path)
    columns = ["run_id", "stream_id", "committed_at", "global_watermark", "state"]
    rows = delta_log.rows_if_any(state / progress.PROGRESS_DIR, columns)
    runs_of: dict[int, progress.Progress] = {}
    points = []
    for row in rows:
        if row["stream_id"] != stream_id:
            continue
        run = _parse_run(row)
        runs_of[run.run_id] = run
        point = run_point(run.global_watermark, [s.applied_ts for s in run.tables.values()])
        if point is not None:
            points.append(RunPoint(run.run_id, row["committed_at"], point))

    def history(table: TableId, path: str) -> list[CommitPoint]:
        directory = delta_log.local_dir(path)
        if directory is None or not (directory / delta_log.LOG_DIR).is_dir():
            raise AsOfRefused(f"{table}: no Delta table at {path}; check --tables and --target-path")
        return [_commit_point(c.version, c.info) for c in delta_log.commits(directory)]

    def check(table: TableId, path: str, version: int, g: int) -> None:
        directory = delta_log.local_dir(path)
        assert directory is not None  # history() read it
        gone = [f for f in delta_log.files_removed_since(directory, version) if not f.exists()]
        if gone:
            raise AsOfRefused(_vacuumed(table, version, g, f"{len(gone)} files missing, e.g. {gone[0]}"))

    def run_tables(run_id: int) -> list[TableId]:
        return sorted(runs_of[run_id].tables)

    return _answer(config, tso, tables, points, run_tables, history, check)


def _parse_run(row: dict[str, Any]) -> progress.Progress:
    try:
        return progress.parse_run(int(row["run_id"]), int(row["global_watermark"]), row["state"])
    except (ValueError, KeyError, TypeError, AttributeError) as exc:  # orjson's errors are ValueErrors
        raise delta_log.Unreadable(f"progress run {row['run_id']}: its state does not parse: {exc}") from exc


def _commit_point(version: int, info: dict[str, Any]) -> CommitPoint:
    """What a commit's ``commitInfo`` and our ``userMetadata`` in it say of it, read as ``from_json`` does:
    anything else is None/0."""
    user_metadata, operation = info.get("userMetadata"), str(info.get("operation") or "")
    ours = metadata_payload(user_metadata if isinstance(user_metadata, str) else None)
    if ours is None:
        return CommitPoint(version, None, 0, operation)
    consistent, applied, step = ours.get("consistent"), ours.get("applied_ts"), ours.get("step")
    return CommitPoint(
        version,
        consistent if isinstance(consistent, bool) else None,
        applied if isinstance(applied, int) and not isinstance(applied, bool) else 0,
        operation,
        step if isinstance(step, str) else "",
    )


def _answer(
    config: IngestConfig,
    tso: int,
    tables: list[TableId] | None,
    points: list[RunPoint],
    run_tables: Callable[[int], list[TableId]],
    history: Callable[[TableId, str], list[CommitPoint]],
    check: Callable[[TableId, str, int, int], None],
) -> AsOf:
    """The as-of answer from the runs and each table's history, however they were read."""
    chosen = choose_run(points, tso)
    wanted = tables if tables is not None else run_tables(chosen.run_id)
    found: list[TableAsOf] = []
    absent: list[TableId] = []
    for table in wanted:
        path = config.mirror.address(table)
        version = choose_version(table, history(table, path), chosen.point)
        if version is None:
            if tables is not None:
                raise AsOfRefused(
                    f"{table}: had no version equal to upstream at TSO {tso} (G = {chosen.point}, "
                    f"{tso_to_datetime(chosen.point).isoformat()}): it was created in the mirror after that. "
                    "Ask for a later TSO or leave it out of --tables"
                )
            absent.append(table)
            continue
        found.append(TableAsOf(table, path, version))
        check(table, path, version, chosen.point)
    return AsOf(tso, chosen.run_id, chosen.point, tuple(found), tuple(absent))


def _vacuumed(table: TableId, version: int, g: int, detail: str) -> str:
    return (
        f"{table}: version {version}, which held upstream at G = {g} ({tso_to_datetime(g).isoformat()}), "
        f"can no longer be read: its data files were removed (VACUUM). Ask for a TSO at or after the "
        f"table's vacuum horizon, or vacuum with a longer retention. ({detail})"
    )


def _check_files(spark: SparkSession, table: TableId, path: str, version: int, g: int) -> None:
    """Refuse a version whose data files are gone; listing them reads no data."""
    try:
        files = delta_io.read(spark, path, version).inputFiles()
        if isinstance(path, TableName) and not all(str(f).startswith("file:") for f in files):
            # A governed catalog's managed files cannot be read by path; resolving the version is the check.
            files = []
        if files:
            # Over Spark Connect inputFiles() is a protobuf repeated field, which load() refuses: not a list.
            spark.read.format("binaryFile").load(list(files)).schema  # noqa: B018 - resolving checks existence
    except AnalysisException as exc:
        raise AsOfRefused(_vacuumed(table, version, g, str(exc).splitlines()[0])) from exc


def read(spark: SparkSession, table: TableAsOf) -> DataFrame:
    """The table's rows at the version, with our ``_tidb_`` columns."""
    return delta_io.read(spark, table.path, table.version)


def dataframes(spark: SparkSession, as_of: AsOf) -> dict[TableId, DataFrame]:
    """Every table of the as-of read as a DataFrame."""
    return {t.table: read(spark, t) for t in as_of.tables}


def register_views(spark: SparkSession, as_of: AsOf, template: str = VIEW_TEMPLATE) -> dict[TableId, str]:
    """Register each table as a temporary view (default name ``<database>__<table>``); returns the names."""
    names = {}
    for t in as_of.tables:
        name = template.format(database=t.table.schema, table=t.table.table)
        read(spark, t).createOrReplaceTempView(name)
        names[t.table] = name
    return names


def as_of(
    spark: SparkSession,
    target_path: str | IngestConfig,
    *,
    tso: int | None = None,
    time: datetime | str | None = None,
    tables: list[TableId] | list[str] | None = None,
    state_path: str | None = None,
    stream_id: str = "default",
) -> tuple[AsOf, dict[TableId, DataFrame]]:
    """Notebook entry point: the as-of answer and each table's DataFrame, for a TSO or a time.

    ``time`` is a datetime (naive means UTC) or ISO 8601 text; ``tables`` ids or ``"db.t"`` names.
    """
    if isinstance(time, datetime):
        moment = time if time.tzinfo else time.replace(tzinfo=timezone.utc)
        wanted_ts = tso_from_datetime(moment, logical=(1 << 18) - 1)
    else:
        wanted_ts = parse_moment(None if tso is None else str(tso), time)
    ids = None if tables is None else [t if isinstance(t, TableId) else one_table(t) for t in tables]
    answer = resolve(spark, target_path, wanted_ts, ids, state_path=state_path, stream_id=stream_id)
    return answer, dataframes(spark, answer)


def one_table(name: str) -> TableId:
    parsed = parse_tables(name)
    assert parsed is not None and len(parsed) == 1
    return parsed[0]
