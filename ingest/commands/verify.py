"""Prove a mirror equals upstream: compare it, read as of a TSO, with a Dumpling export taken at that TSO,
or with another mirror of the same upstream. I/O.

Work stays on the executors: each side is one aggregation into per-chunk checksums (``verify_rules``), and
only the rows of chunks that differ are joined by key, so the driver receives chunk checksums and at most
``max_keys`` differing rows, whatever the size of the table. The export is read exactly as the initial load
reads it (decoded on executors, typed by the stream's own conversion) with the mirror's column types.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

import orjson
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ingest.apply import convert
from ingest.apply.merge import normalize, slot
from ingest.commands import asof, flags
from ingest.commands.load import as_changes
from ingest.commands.verify_rules import (
    CHUNK_ROWS,
    MAX_KEYS,
    Checksum,
    RowDiff,
    TableVerdict,
    VerifyReport,
    chunk_count,
    differing_chunks,
    total,
)
from ingest.config import IngestConfig
from ingest.errors import AsOfRefused, ConfigError
from ingest.lake import delta_io
from ingest.lake.delta_io import quote
from ingest.load_config import LoadConfig
from ingest.model import BAD_COLUMN, ColumnKind, TableId, tso_to_datetime
from ingest.mysql import dumpling as dd
from ingest.source import dumpling as source
from ingest.spark import get_session
from ingest.state.table_state import PROPERTY_GENERATED, PROPERTY_KEY_COLUMNS, commit_ts_column

MIRROR = "mirror"
SNAPSHOT = "snapshot"
OTHER = "other"


@dataclass(frozen=True)
class Limits:
    """How finely to chunk, and how many differing keys to list per table."""

    max_keys: int = MAX_KEYS
    chunk_rows: int = CHUNK_ROWS


# Row text that tells apart any two values a column can hold: instants and local times to the microsecond
# (the JSON writer's default stops at the millisecond), instants in UTC whatever the session's zone.
_JSON_OPTIONS = {
    "ignoreNullFields": "false",
    "timeZone": "UTC",
    "timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX",
    "timestampNTZFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSSSS",
}


def exact_text(field: T.StructField, json: bool) -> Column:
    """A column's value as the row text holds it, changed by every unit of its finest precision.

    Binaries as hex, upstream JSON (``json``) in one spelling: keys sorted, no spaces, numbers normalized,
    kept as it is where it does not parse. Decimals stay numbers at their full scale and floats numbers in
    Java's shortest round-trip form (-0.0 apart from 0.0), as the JSON writer spells them.
    """
    c = F.col(quote(field.name))
    if isinstance(field.dataType, T.BinaryType):
        return F.hex(c)
    if json:
        return F.coalesce(F.to_json(F.try_parse_json(c)), c)
    return c


def json_columns(*schemas: T.StructType) -> set[str]:
    """Columns that hold upstream JSON in any of the schemas (the mirror's column comments say so)."""
    found = set()
    for schema in schemas:
        for field in schema.fields:
            column_type = convert.column_type_of(field)
            if column_type is not None and column_type.kind is ColumnKind.JSON:
                found.add(field.name)
    return found


def canonical(df: DataFrame, columns: list[str], key: list[str], chunks: int, json: set[str]) -> DataFrame:
    """Per row: its key and whole row as JSON text (columns by name, nulls written, each value as
    ``exact_text``), the row's 64-bit hash, and its chunk (a hash of the key, so the same key is in the same
    chunk on both sides). ``json``: the columns that hold upstream JSON."""
    fields = {f.name: f for f in df.schema.fields}

    def text(names: list[str]) -> Column:
        values = [exact_text(fields[n], n in json).alias(n) for n in names]
        return F.to_json(F.struct(*values), _JSON_OPTIONS)

    return df.select(text(key).alias("k"), text(sorted(columns)).alias("r")).select(
        "k",
        "r",
        F.xxhash64("r").alias("h"),
        F.pmod(F.xxhash64(F.lit("chunk"), "k"), F.lit(chunks)).alias("chunk"),
    )


def _checksums(rows: DataFrame) -> dict[int, Checksum]:
    # Sums of 64-bit hashes overflow a long after two rows; DECIMAL(38) holds a billion of them.
    sums = rows.groupBy("chunk").agg(
        F.count("*").alias("n"),
        F.sum(F.col("h").cast(T.DecimalType(38, 0))).alias("s"),
        F.bit_xor("h").alias("x"),
    )
    return {int(r["chunk"]): Checksum(int(r["n"]), int(r["s"]), int(r["x"])) for r in sums.collect()}


def compare(
    name: str,
    left: DataFrame,
    right: DataFrame,
    columns: list[str],
    key: list[str],
    *,
    rows_hint: int,
    limits: Limits = Limits(),
    notes: tuple[str, ...] = (),
) -> TableVerdict:
    """Compare two frames over ``columns`` (typed alike), matching rows by ``key``."""
    chunks = chunk_count(rows_hint, limits.chunk_rows)
    json = json_columns(left.schema, right.schema)
    lc, rc = canonical(left, columns, key, chunks, json), canonical(right, columns, key, chunks, json)
    lsums, rsums = _checksums(lc), _checksums(rc)
    differ = differing_chunks(lsums, rsums)
    if not differ:
        return TableVerdict(name, total(lsums), total(rsums), chunks, notes=notes)
    ids = F.lit(differ)

    def side(c: DataFrame, prefix: str) -> DataFrame:
        return c.where(F.array_contains(ids, F.col("chunk"))).select(
            "k", F.col("r").alias(f"{prefix}r"), F.col("h").alias(f"{prefix}h")
        )

    joined = side(lc, "l").join(side(rc, "r"), "k", "full_outer").where(~F.col("lr").eqNullSafe(F.col("rr")))
    count = joined.count()
    diffs = tuple(
        RowDiff(str(r["k"]), r["lr"], r["rr"])
        for r in joined.orderBy("k").limit(limits.max_keys).select("k", "lr", "rr").collect()
    )
    return TableVerdict(name, total(lsums), total(rsums), chunks, len(differ), count, diffs, notes)


def _upstream_columns(spark: SparkSession, table: asof.TableAsOf, df: DataFrame) -> T.StructType:
    """Upstream's columns of a mirrored table: all but our commit-TSO column, whatever they are named."""
    ours = commit_ts_column(delta_io.properties(spark, table.path, table.version))
    return T.StructType([f for f in df.schema.fields if f.name != ours])


def _generated(spark: SparkSession, table: asof.TableAsOf, names: list[str]) -> dict[str, str]:
    """The VIRTUAL columns the mirror computes among ``names``: an export holds no values of them, so the
    export's side computes them from its rows, as the mirror does."""
    text = delta_io.properties(spark, table.path, table.version).get(PROPERTY_GENERATED, "{}")
    return {k: v for k, v in orjson.loads(text).items() if k in names}


def _mirror_key(spark: SparkSession, path: str) -> list[str]:
    value = orjson.loads(delta_io.properties(spark, path).get(PROPERTY_KEY_COLUMNS, "[]"))
    return [str(v) for v in value] if isinstance(value, list) else []


def _rows_hint(df: DataFrame) -> int:
    """Delta answers a plain count from its log, without reading data files."""
    return int(df.count())


def _missing(name: str, what: str) -> TableVerdict:
    return TableVerdict(name, Checksum(), Checksum(), 0, notes=(what,))


def command(args: argparse.Namespace, warehouse: str | None = None) -> int:
    """``verify``: compare with a Dumpling export or another mirror and print the report; exit code 0 when
    every table matches, 1 when one does not."""
    other = args.other_target_path or args.other_target_catalog
    if (args.snapshot is None) == (other is None):
        raise ConfigError(
            "verify: compare with one of --snapshot (a Dumpling export) or another mirror "
            "(--other-target-path or --other-target-catalog)"
        )
    limits = Limits(max_keys=args.max_keys, chunk_rows=args.chunk_rows)
    tables = asof.parse_tables(args.tables)
    mirror = flags.mirror(args)
    warehouse = flags.catalog_warehouse(warehouse, mirror.by_name or bool(args.other_target_catalog))
    spark = get_session(remote=getattr(args, "spark_remote", None), catalog_warehouse=warehouse)
    if args.snapshot is not None:
        report = verify_snapshot(spark, _snapshot_config(args), tables, limits)
    else:
        report = verify_mirrors(
            spark,
            mirror,
            flags.mirror(args, "other-"),
            tso=None if args.tso is None else asof.parse_moment(args.tso, None),
            tables=tables,
            limits=limits,
        )
    print(report.render())
    return 0 if report.matches else 1


def _snapshot_config(args: argparse.Namespace) -> LoadConfig:
    """The export named by ``--snapshot``, to be read as ``load`` reads it."""
    if args.tso is not None:
        raise ConfigError("tso: with --snapshot the TSO is the export's own (its metadata); leave --tso out")
    given = {
        "input": args.snapshot, **flags.mirror_flags(args),
        "timezone": args.timezone, "csv-separator": args.csv_separator,
        "csv-delimiter": args.csv_delimiter, "csv-null-value": args.csv_null_value,
        "csv-line-terminator": args.csv_line_terminator, "no-header": args.no_header,
    }  # fmt: skip
    return LoadConfig.from_params({k: v for k, v in given.items() if v is not None})


def verify_snapshot(
    spark: SparkSession, config: LoadConfig, tables: list[TableId] | None = None, limits: Limits = Limits()
) -> VerifyReport:
    """Compare the mirror of ``config``, read as of the export's snapshot TSO, with the Dumpling
    export at ``config.input_path`` (CSV options and time zone as for ``load``). Every table of the export
    is compared, or those in ``tables``.

    Raises:
        AsOfRefused: the mirror cannot be read as of the snapshot TSO (see ``asof.resolve``).
        ConfigError: the input is not a readable Dumpling export.
    """
    export = source.read_export(spark, config.input_path)
    s = export.snapshot_ts
    answer = asof.resolve(spark, config.stream, s)
    notes = [
        f"snapshot TSO {s} ({tso_to_datetime(s).isoformat()}); mirror read as of run {answer.run_id}, "
        f"G = {answer.g} ({answer.g_time.isoformat()})"
    ]
    if answer.g != s:
        notes.append(
            "G is below the snapshot TSO: rows upstream changed after G and up to the snapshot show as "
            "differences. Export at a TSO the mirror reached (status shows G), or verify after the next run"
        )
    dialect = dd.CsvDialect(
        separator=config.csv_separator.encode(),
        delimiter=config.csv_delimiter.encode(),
        null_value=config.csv_null_value.encode(),
        header=config.csv_header,
    )
    wanted = set(tables) if tables is not None else None
    verdicts = []
    for table in export.tables:
        if wanted is not None and table.table not in wanted:
            continue
        name = str(table.table)
        mirrored = next((t for t in answer.tables if t.table == table.table), None)
        if mirrored is None:
            verdicts.append(_missing(name, f"not in the mirror as of G = {answer.g}"))
            continue
        verdicts.append(_verify_export_table(spark, config, table, mirrored, s, dialect, limits))
    if wanted is not None:
        for missing in sorted(wanted - {t.table for t in export.tables}):
            verdicts.append(_missing(str(missing), "not in the export"))
    return VerifyReport(MIRROR, SNAPSHOT, s, tuple(verdicts), tuple(notes))


def _verify_export_table(
    spark: SparkSession,
    config: LoadConfig,
    table: source.ExportTable,
    mirrored: asof.TableAsOf,
    snapshot_ts: int,
    dialect: dd.CsvDialect,
    limits: Limits,
) -> TableVerdict:
    mirror = asof.read(spark, mirrored)
    schema = _upstream_columns(spark, mirrored, mirror)
    exported = [c.name for c in table.create.schema.columns]
    data_names = [c.name for c in source.data_columns(table)]
    common = [f for f in schema.fields if f.name in exported]
    names = [f.name for f in common]
    notes: list[str] = []
    only_mirror = [f.name for f in schema.fields if f.name not in exported]
    only_export = [c for c in exported if c not in schema.fieldNames()]
    if only_mirror:
        notes.append(f"columns only in the mirror: {', '.join(only_mirror)}")
    if only_export:
        notes.append(f"columns only in the export: {', '.join(only_export)}")
    key = [k for k in table.create.schema.key if k in names] or names
    if table.data_format is None:
        snapshot = spark.createDataFrame([], T.StructType(common))
    else:
        decoded = source.read_rows(spark, table, dialect, config.csv_line_terminator)
        typed = normalize(
            as_changes(decoded.where(F.col("error").isNull()), data_names, snapshot_ts),
            T.StructType(common),
            tuple(key),
            config.timezone,
            generated=_generated(spark, mirrored, names),
        )
        problems = typed.agg(
            F.count_if(F.col(BAD_COLUMN) != "").alias("bad"),
            F.first(F.when(F.col(BAD_COLUMN) != "", F.col(BAD_COLUMN)), ignorenulls=True).alias("why"),
        ).first()
        unreadable = decoded.where(F.col("error").isNotNull()).count()
        if unreadable:
            notes.append(f"{unreadable} lines of the export could not be read")
        if problems is not None and problems["bad"]:
            notes.append(f"{problems['bad']} rows of the export do not convert (first: {problems['why']})")
        snapshot = typed.where(F.col(BAD_COLUMN) == "").select(
            *[F.col(slot(i)).alias(n) for i, n in enumerate(names)]
        )
    return compare(
        str(table.table),
        mirror.select(*[F.col(quote(n)) for n in names]),
        snapshot,
        names,
        key,
        rows_hint=_rows_hint(mirror),
        limits=limits,
        notes=tuple(notes),
    )


def verify_mirrors(
    spark: SparkSession,
    target_path: str | IngestConfig,
    other_target_path: str | IngestConfig,
    *,
    tso: int | None = None,
    tables: list[TableId] | None = None,
    state_path: str | None = None,
    other_state_path: str | None = None,
    stream_id: str = "default",
    other_stream_id: str = "default",
    limits: Limits = Limits(),
) -> VerifyReport:
    """Compare two mirrors of the same upstream, each read as of ``tso`` (default: the newer TSO both have
    reached, the lower of their newest G). Tables found in one mirror only are reported as mismatches.

    Raises:
        AsOfRefused: one of the mirrors cannot be read as of the TSO.
    """
    one = asof.locate(target_path, state_path, stream_id)
    other = asof.locate(other_target_path, other_state_path, other_stream_id)
    if tso is None:
        newest = []
        for mirror in (one, other):
            points = asof.runs(spark, mirror.state_path, mirror.stream_id)
            if not points:
                raise AsOfRefused(
                    f"{mirror.target}: the mirror has no committed run to compare; run it first"
                )
            newest.append(max(p.point for p in points))
        tso = min(newest)
    left = asof.resolve(spark, one, tso, tables)
    right = asof.resolve(spark, other, tso, tables)
    notes = [
        f"as of TSO {tso} ({tso_to_datetime(tso).isoformat()}): {MIRROR} at G = {left.g} "
        f"(run {left.run_id}), {OTHER} at G = {right.g} (run {right.run_id})"
    ]
    if left.g != right.g:
        notes.append("the two mirrors stand at different G: changes between them show as differences")
    by_right = {t.table: t for t in right.tables}
    verdicts = []
    for mine in left.tables:
        theirs = by_right.pop(mine.table, None)
        if theirs is None:
            verdicts.append(_missing(str(mine.table), f"not in {OTHER} ({other.target})"))
            continue
        a, b = asof.read(spark, mine), asof.read(spark, theirs)
        sa, sb = _upstream_columns(spark, mine, a), _upstream_columns(spark, theirs, b)
        names = [n for n in sa.fieldNames() if n in sb.fieldNames()]
        notes_t = []
        if set(sa.fieldNames()) != set(sb.fieldNames()):
            notes_t.append(
                f"columns differ: only in {MIRROR}: {sorted(set(sa.fieldNames()) - set(names))}, only in "
                f"{OTHER}: {sorted(set(sb.fieldNames()) - set(names))}"
            )
        if [sa[n].dataType for n in names] != [sb[n].dataType for n in names]:
            notes_t.append("column types differ; values are compared as rendered text")
        key = [k for k in _mirror_key(spark, mine.path) if k in names] or names
        verdicts.append(
            compare(
                str(mine.table),
                a.select(*[_c(n) for n in names]),
                b.select(*[_c(n) for n in names]),
                names,
                key,
                rows_hint=_rows_hint(a),
                limits=limits,
                notes=tuple(notes_t),
            )
        )
    verdicts += [_missing(str(t), f"not in {MIRROR} ({one.target})") for t in sorted(by_right)]
    return VerifyReport(MIRROR, OTHER, tso, tuple(verdicts), tuple(notes))


def _c(name: str) -> Column:
    return F.col(quote(name))
