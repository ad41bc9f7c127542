"""The ``changes`` command: what changed between two TSOs as a summary, as the SQL that reads it, or as
Parquet files with a manifest. A table that cannot be answered, whenever that is found, is named on stderr
with why and in the manifest; the others answer, and the exit code is 3. I/O."""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

import orjson
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession

from ingest.commands import asof, flags
from ingest.commands.changes import (
    Changes,
    ChangeSegment,
    TableChanges,
    check_files,
    net_frame,
    resolve,
    segment_frame,
    unreadable,
    whole,
)
from ingest.errors import ChangesRefused
from ingest.model import TableId
from ingest.spark import get_session

_T = TypeVar("_T")


def command(args: argparse.Namespace, warehouse: str | None = None) -> int:
    """``changes``: what changed between two TSOs, as a summary, SQL statements, or files under --out. A
    table that cannot be answered is named on stderr with why (and in the manifest); the others answer, and
    the exit code is 3."""
    from_tso = asof.parse_moment(args.from_tso, args.from_time)
    to_tso = (
        None if args.to_tso is None and args.to_time is None else asof.parse_moment(args.to_tso, args.to_time)
    )
    mirror = flags.mirror(args)
    warehouse = flags.catalog_warehouse(warehouse, mirror.by_name)
    spark = get_session(remote=getattr(args, "spark_remote", None), catalog_warehouse=warehouse)
    answer = resolve(spark, mirror, from_tso, to_tso, asof.parse_tables(args.tables), strict=False)
    refused = dict(answer.refused)
    if args.sql:
        printed = _answer_each(answer, refused, lambda t: _statements(t, args.net))
        _summary(answer, refused)
        for lines in printed.values():
            print("\n".join(lines))
    elif args.out:
        counts = _write(spark, answer, refused, Path(args.out), args.net)
        _summary(answer, refused)
        for table_id, count in counts.items():
            print(f"{table_id}: {count} change rows")
    else:
        counts = _answer_each(answer, refused, lambda t: _count(spark, t, args.net))
        _summary(answer, refused)
        for table_id, count in counts.items():
            print(f"{table_id}: {count} change rows")
    for table_id, why in refused.items():
        print(f"ticdc-ingest changes: {table_id}: refused: {why}", file=sys.stderr)
    return 3 if refused else 0  # as a run with stopped tables: the others answered


def _summary(answer: Changes, refused: Mapping[TableId, str]) -> None:
    answered = tuple(t for t in answer.tables if t.table not in refused)
    told = Changes(answer.from_tso, answer.to_tso, answer.from_g, answer.to_g, answered, refused)
    print(f"-- {told.describe().replace(chr(10), chr(10) + '-- ')}")


def _answer_each(
    answer: Changes, refused: dict[TableId, str], each: Callable[[TableChanges], _T]
) -> dict[TableId, _T]:
    """``each`` of every table; a table it refuses goes to ``refused`` with why, and the others answer."""
    found = {}
    for table in answer.tables:
        try:
            found[table.table] = each(table)
        except ChangesRefused as exc:
            refused[table.table] = str(exc)
    return found


def _statements(table: TableChanges, net: bool) -> list[str]:
    for segment in table.segments:  # what cannot be read is refused here too, not when the SQL runs
        if segment.feed:
            check_files(table, segment)
    return table.sql(net)


def _frames(spark: SparkSession, table: TableChanges, net: bool) -> list[tuple[ChangeSegment, DataFrame]]:
    if net:
        return [(whole(table), net_frame(spark, table))]
    return [(s, segment_frame(spark, table, s)) for s in table.segments]


def _count(spark: SparkSession, table: TableChanges, net: bool) -> int:
    return sum(frame.count() for _, frame in _frames(spark, table, net))


def _write(
    spark: SparkSession, answer: Changes, refused: dict[TableId, str], out: Path, net: bool
) -> dict[TableId, int]:
    """Each table's segments (``net``: one) as Parquet under ``<out>/<database>/<table>/<n>``, and
    ``<out>/_changes.json`` saying what the range, each segment and each refused table are. A table is
    written under ``<out>/_partial`` and moved into place whole: a refusal met while writing it leaves
    nothing of it."""
    counts, manifest = {}, []
    partial = out / "_partial"
    for table in answer.tables:
        if table.table in refused:
            continue
        staged = partial / table.table.schema / table.table.table
        final = out / table.table.schema / table.table.table
        try:
            entries, counts[table.table] = _write_table(spark, table, staged, final, net)
        except ChangesRefused as exc:
            refused[table.table] = str(exc)
            counts.pop(table.table, None)
            shutil.rmtree(staged, ignore_errors=True)
            continue
        shutil.rmtree(final, ignore_errors=True)
        final.parent.mkdir(parents=True, exist_ok=True)
        if staged.exists():
            staged.rename(final)
        else:
            final.mkdir()
        manifest += entries
    shutil.rmtree(partial, ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    summary = {
        "from_tso": answer.from_tso, "to_tso": answer.to_tso, "from_g": answer.from_g, "to_g": answer.to_g,
        "net": net, "segments": manifest,
        "refused": [{"table": str(t), "reason": why} for t, why in refused.items()],
    }  # fmt: skip
    (out / "_changes.json").write_bytes(orjson.dumps(summary, option=orjson.OPT_INDENT_2))
    return counts


def _write_table(
    spark: SparkSession, table: TableChanges, staged: Path, final: Path, net: bool
) -> tuple[list[dict[str, object]], int]:
    shutil.rmtree(staged, ignore_errors=True)
    entries, count = [], 0
    for n, (segment, frame) in enumerate(_frames(spark, table, net)):
        try:
            frame.write.mode("overwrite").parquet(str(staged / str(n)))
        except AnalysisException as exc:  # a feed that fails only as it is read
            raise ChangesRefused(unreadable(table, [segment], exc)) from exc
        count += spark.read.parquet(str(staged / str(n))).count()
        entries.append({
            "table": str(table.table), "segment": n, "path": str(final / str(n)),
            "first_version": segment.first, "last_version": segment.last, "ddl": list(segment.ddl),
            "ddl_ts": segment.ddl_ts,
        })  # fmt: skip
    return entries, count
