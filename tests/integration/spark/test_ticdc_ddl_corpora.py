"""Corpora TiCDC v8.3.0's own code wrote for DDL histories of ours (tests/fixtures/corpora): every DDL form
TiDB documents, as TiCDC's owner rewrites it, through Canal-JSON, Simple JSON and Simple Avro. Every cell of
every table equals what TiDB returned to SELECT at the end, and no table that is gone upstream (dropped,
renamed away, a view, a table TiCDC does not replicate) is a live table in the mirror. The refusals corpus
holds DDLs the mirror does not apply: they stop exactly the tables they touch, and nothing else."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from mirror import corpus_problems, corpus_rows, recover_problems
from ticdc_fixture import CORPORA

from ingest.config import IngestConfig
from ingest.decode import storage_csv
from ingest.errors import TablesStopped, TooManyBadRecords
from ingest.model import TableId
from ingest.pipeline import run_files
from ingest.state import ddl_history
from ingest.state.progress import load_progress
from ingest.state.quarantine import read as read_quarantine
from ingest.state.table_state import read_table_state

VARIANTS = {
    "canal-json": {},
    "simple-json": {"protocol": "simple"},
    "simple-avro": {"protocol": "simple", "simple-encoding": "avro"},
    "open-protocol": {"protocol": "open-protocol"},
    # TiCDC's storage sink itself wrote these folders: the input is the sink's root.
    "storage-canal-json": {"input-format": "storage"},
    "storage-csv": {"protocol": "csv"},
    "storage-csv-old-value": {"protocol": "csv", "sink-csv-output-old-value": "true"},
}
STORAGE = ("storage-canal-json", "storage-csv", "storage-csv-old-value")
LANDING = sorted(name for name in CORPORA if name not in ("refusals", "recover"))
# CI lands every corpus once, under one protocol, and every protocol on a corpus whose messages are its own
# traps: Simple Avro on the one with every kind of DEFAULT (where TiCDC's Avro writes bytes JSON cannot),
# Simple JSON on names and on views and swaps (a view's message carries columns of type "unspecified"),
# TiCDC Avro on the tables corpus on a real broker (test_ticdc_ddl_corpora_avro), Open Protocol on TiCDC's
# own test workloads on a real broker with replays and a lagging partition (test_open_protocol_kafka;
# tests/unit/test_open_protocol proves its records carry the values its Canal-JSON records carry), and the
# cutover corpus as the uninterrupted run of the kill test (test_kill_anywhere). Simple JSON and Simple Avro
# share everything after the message is read (Avro is read into the JSON form). The `full` profile
# (CORPUS_PROFILE=full) runs every corpus under every protocol.
PROFILE = os.environ.get("CORPUS_PROFILE", "ci")
CI_RUNS = {
    ("columns", "simple-avro"),
    ("generated", "canal-json"),
    ("names", "simple-json"),
    ("partitions", "canal-json"),
    ("views-swaps", "simple-json"),
    # gh-ost and pt-online-schema-change tables start with "_", which Spark's listing hides.
    ("views-swaps", "storage-canal-json"),
}
# TiCDC's own storage sink: in CI its CSV of TiCDC's test workloads in three cumulative parts
# (test_a_storage_sink_read_as_it_grows_lands_as_read_at_once) and its Canal-JSON of the recover corpus
# (test_recover_and_flashback_bring_back_the_rows_a_real_tidb_restores); tests/unit/test_storage_csv proves
# each CSV record says what the same sink's Canal-JSON line says.
# typechanges (every type change TiDB allows, lossy ones under a non-strict sql_mode) lands in the full
# profile; in CI test_column_ddl converts as TiDB does on generated streams.
# These run by name (test_by_name), one in each Spark mode: every line of the mirror's Delta I/O is the same
# by path and by name but the addressing. In CI, the Connect one.
# In CI, on Connect, the small cutover corpus (swaps, an EXCHANGE PARTITION, a LIKE): each DDL is a round
# trip per Delta operation there; views and swaps land by path in CI, and by name under `full`.
BY_NAME = [
    ("classic", "tables", "canal-json"),
    ("connect", "views-swaps", "simple-json"),
    ("connect", "cutover", "simple-json"),
]
BY_NAME_IN_CI = ("connect", "cutover", "simple-json")
MATRIX = [
    (corpus, variant)
    for corpus in LANDING
    for variant in sorted(VARIANTS)
    if (CORPORA[corpus] / variant).is_dir() and (PROFILE == "full" or (corpus, variant) in CI_RUNS)
]


def config_for(corpus: str, variant: str, lake, **params: str) -> IngestConfig:
    records = CORPORA[corpus] / variant
    if variant not in STORAGE:
        records = records / "records.jsonl"
    return IngestConfig.from_params(
        {"input": str(records), "target-path": str(lake), **VARIANTS[variant], **params}
    )


@pytest.mark.long
@pytest.mark.parametrize(("corpus", "variant"), MATRIX)
def test_every_cell_lands_and_nothing_gone_stays_live(spark, tmp_path, corpus, variant):
    config = config_for(corpus, variant, tmp_path / "lake")
    result = run_files(spark, config)
    assert result.quarantined == 0
    assert corpus_problems(spark, config, CORPORA[corpus]) == {}


REFUSED = {
    "ref.r_now": "DEFAULT CURRENT_TIMESTAMP()",  # rows older than the DDL read when it ran
    "ref.r_pk": "no longer replicates it",  # DROP PRIMARY KEY left no NOT NULL unique key
    "ref.r_narrow": 'under type-change policy "fail"',  # INT -> VARCHAR rewrites values: approved first
    "ref.k": "PARTITION BY KEY",  # EXCHANGE of a KEY partition: TiDB's hash says which rows
    "ref.k_nt": "PARTITION BY KEY",
}
# Upstream just before each refused DDL, as the history script wrote it.
BEFORE = {
    "ref.r_now": {(1, 1), (2, 2)},
    "ref.r_pk": {(1, 1), (2, 2)},
    "ref.r_narrow": {(1, 10), (2, 20)},
    "ref.k": {(1, 1), (2, 2), (3, 3), (4, 4)},
    "ref.k_nt": {(100, 100)},
}


def refused_at(spark, config: IngestConfig) -> dict[str, int]:
    rows = ddl_history.read(spark, config.state_path).where("action = 'rejected'").collect()
    return {r["table"]: int(r["commit_ts"]) for r in rows}


@pytest.mark.parametrize("variant", ["canal-json", "simple-json"])
def test_a_refused_ddl_stops_only_the_tables_it_touches_until_the_configuration_lets_it_land(
    spark, tmp_path, variant
):
    lake = tmp_path / "lake"
    config = config_for("refusals", variant, lake, **{"type-change": "fail"})
    with pytest.raises(TablesStopped) as stopped:
        run_files(spark, config)
    assert {str(t): str(e) for t, e in stopped.value.stopped.items()}.keys() == REFUSED.keys()
    for table, exc in stopped.value.stopped.items():
        assert REFUSED[str(table)] in str(exc), exc
    # Every other table lands whole, with its rows and DDLs after the refused ones.
    assert corpus_problems(spark, config, CORPORA["refusals"], ["ref.ok", "ref.ok2"]) == {}
    # Each stopped table is upstream as it was just before its refused DDL, and says so.
    at = refused_at(spark, config)
    for name, rows in BEFORE.items():
        assert {tuple(r[c] for c in ("id", *[k for k in r if k not in ("id", "_tidb_commit_ts")]))
                for r in corpus_rows(spark, config, name)} == rows, name  # fmt: skip
        state = read_table_state(spark, config.mirror.address(TableId(*name.split("."))))
        assert state is not None and state.applied_ts < at[name], name

    # With the default type-change policy and the value upstream shows for older rows, two of them land;
    # the rest still wait.
    fixed = config_for(
        "refusals", variant, lake, **{"column-defaults": "ref.r_now.created=2026-05-01 00:01:00"}
    )
    with pytest.raises(TablesStopped) as again:
        run_files(spark, fixed)
    assert {str(t) for t in again.value.stopped} == {"ref.r_pk", "ref.k", "ref.k_nt"}
    landed = ["ref.ok", "ref.ok2", "ref.r_now", "ref.r_narrow"]
    assert corpus_problems(spark, fixed, CORPORA["refusals"], landed) == {}
    expected = json.loads((CORPORA["refusals"] / "expected.json").read_text())
    assert "ref.r_pk" in expected["ineligible"]


def test_run_exits_3_when_tables_stopped_after_committing_the_others(spark, tmp_path, capsys):
    from ingest.cli import main

    lake = tmp_path / "lake"
    records = CORPORA["refusals"] / "canal-json" / "records.jsonl"
    assert main(["run", f"--input={records}", f"--target-path={lake}"]) == 3
    out, err = capsys.readouterr()
    assert "ref.ok2: " in out and "STOPPED" in out
    # With the default type-change policy the type change lands, as TiDB applied it.
    followed = {t: e for t, e in REFUSED.items() if t != "ref.r_narrow"}
    assert err.count("error: ref.") == len(followed)
    config = config_for("refusals", "canal-json", lake)
    landed = ["ref.ok", "ref.ok2", "ref.r_narrow"]
    assert corpus_problems(spark, config, CORPORA["refusals"], landed) == {}
    # status names each stopped table and the DDL it waits at.
    assert main(["status", f"--target-path={lake}"]) == 0
    stopped = [line for line in capsys.readouterr().out.splitlines() if line.startswith("STOPPED ")]
    assert sorted(line.split(":")[0].removeprefix("STOPPED ") for line in stopped) == sorted(followed)
    assert any("DROP PRIMARY KEY" in line for line in stopped)


# In CI the Canal-JSON run of this corpus is the one test_kill_anywhere kills after a revival and then
# checks as here; this test runs it under Simple Avro (and every protocol under the full profile).
@pytest.mark.parametrize(
    "variant",
    [
        v
        for v in sorted(VARIANTS)
        if (CORPORA["recover"] / v).is_dir()
        and (PROFILE == "full" or v in ("simple-avro", "storage-canal-json"))
    ],
)
def test_recover_and_flashback_bring_back_the_rows_a_real_tidb_restores(spark, tmp_path, variant):
    """RECOVER TABLE, FLASHBACK TABLE … TO (of a dropped and of a truncated table), keys from a prefix and an
    invisible unique index, and VIRTUAL columns over TiDB's REGEXP functions (one created under
    NO_BACKSLASH_ESCAPES, one over a case-insensitive collation), against what a real TiDB holds at the end:
    the kit's state plus the rows a RECOVER restores (mirror.RESTORED). The dropped t2 (its rows now
    t2_back) and the dropped database stay retired; TiDB refused the RECOVER of a table dropped with its
    database, and TiCDC sent nothing for it."""
    config = config_for("recover", variant, tmp_path / "lake")
    result = run_files(spark, config)
    assert result.quarantined == 0
    assert recover_problems(spark, config, CORPORA["recover"]) == {}
    assert set(json.loads((CORPORA["recover"] / "expected.json").read_text())["absent"]) == {"rc.t2", "rd.t4"}


def _max_commit_ts(path: Path) -> int:
    """The newest commit ts in one data file of the storage sink."""
    if path.suffix == ".json":
        return max(json.loads(line)["_tidb"]["commitTs"] for line in path.read_bytes().splitlines() if line)
    options = storage_csv.CsvOptions()
    return max(
        int(storage_csv.fields(r.decode(), options)[3]) for r in storage_csv.records(path.read_bytes(), '"')
    )


def _grow_sink(sink: Path, root: Path, checkpoint: int) -> None:
    """The sink as TiCDC had written it when its checkpoint reached ``checkpoint``: every schema file and data
    file up to it (the kit's sink flushes at each watermark, so no file straddles one), and that checkpoint
    in ``metadata``."""
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if not path.is_file() or relative.name == "metadata" or (sink / relative).exists():
            continue
        if relative.name.startswith("schema_"):
            upto = int(relative.name.split("_")[1])
        elif relative.name.startswith("CDC") and relative.parent.name != "meta":
            upto = _max_commit_ts(path)
        else:
            continue
        if upto <= checkpoint:
            (sink / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, sink / relative)
    (sink / "metadata").write_text(json.dumps({"checkpoint-ts": checkpoint}))


@pytest.mark.parametrize("variant", [v for v in STORAGE if PROFILE == "full" or v == "storage-csv"])
def test_a_storage_sink_read_as_it_grows_lands_as_read_at_once(spark, tmp_path, variant):
    """TiCDC's test workloads through TiCDC's own storage sink, read three times as the sink grows (at its
    second and fourth checkpoints, then whole): each run reads only the files it has not read, the
    checkpoint holds back what is above it, and the end is every cell TiDB returned, as when read at once
    (test_every_cell_lands_and_nothing_gone_stays_live)."""
    corpus = CORPORA["tidb-tests"]
    root = corpus / variant
    watermarks = [
        e["ts"] for e in json.loads((corpus / "events.json").read_text()) if e["kind"] == "watermark"
    ]
    final = json.loads((root / "metadata").read_text())["checkpoint-ts"]
    sink = tmp_path / "sink"
    config = IngestConfig.from_params(
        {"input": str(sink), "target-path": str(tmp_path / "lake"), **VARIANTS[variant]}
    )
    for checkpoint in (watermarks[1], watermarks[3], final):
        _grow_sink(sink, root, checkpoint)
        try:
            result = run_files(spark, config)
        except TablesStopped as stopped:
            # The sink has tt.gone's refused DDL but not yet the DROP TABLE that ends it: the table waits
            # below the DDL, every other one lands.
            assert {str(t) for t in stopped.stopped} == {"tt.gone"} and checkpoint != final
            result = stopped.result
        assert result.quarantined == 0
        assert result.global_watermark == checkpoint
        assert sum(t.upserted + t.deleted for t in result.tables.values()) > 0  # every part brings rows
    assert corpus_problems(spark, config, corpus) == {}


def test_a_csv_record_that_is_not_its_table_versions_is_quarantined_with_its_bytes_and_nothing_moves_past_it(
    spark, tmp_path
):
    """A record cut short, in a file of its own after TiCDC's files of that folder: the batch fails (ratio 0)
    before progress moves; allowed a bad ratio, it is quarantined with its bytes, folder and position, and
    the table keeps every other row."""
    corpus = CORPORA["tidb-tests"]
    sink = tmp_path / "sink"
    shutil.copytree(corpus / "storage-csv", sink)
    folder = next(p for p in sorted((sink / "tt" / "narrow").iterdir()) if p.name.isdigit())
    day = next(p for p in folder.iterdir() if p.name != "meta")
    bad = b'"I","narrow","tt",' + str(int(folder.name) + 1).encode() + b",99\r\n"
    (day / "CDC00000000000000000099.csv").write_bytes(bad)
    params = {"input": str(sink), "target-path": str(tmp_path / "lake"), "protocol": "csv"}

    with pytest.raises(TooManyBadRecords):
        run_files(spark, IngestConfig.from_params(params))
    assert not load_progress(spark, str(tmp_path / "lake" / "_ingest"), "default").resume

    result = run_files(spark, IngestConfig.from_params({**params, "max-bad-ratio": "0.5"}))
    assert result.quarantined == 1
    [row] = read_quarantine(spark, str(tmp_path / "lake" / "_ingest")).collect()
    assert bytes(row["value"]) == bad.removesuffix(b"\r\n")
    assert row["topic"] == str(day.relative_to(sink)) and row["offset"] == 99 << 25
    assert "5 fields where the table version's" in row["error"] and "sink-csv" in row["error"]
    assert corpus_problems(spark, IngestConfig.from_params(params), corpus, ["tt.narrow"]) == {}
