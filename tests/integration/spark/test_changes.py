"""Changes between two TSOs: the table as of the first with the changes applied is the table as of the second,
for every pair of runs and every table (plain and netted per key), over a history of ours and over corpora
TiCDC's own code wrote; DDLs cut the answer into segments; what cannot be answered is refused."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest
from asof_history import CUSTOMERS_T, NOTES_T, ORDERS_T, _customer
from changes_check import comparable, replay_problems, stream_problems, streamed, upstream_problems
from mirror import corpus_problems, located
from ticdc_fixture import CORPORA

from ingest.cli import main
from ingest.commands import asof, changes
from ingest.config import IngestConfig
from ingest.errors import AsOfRefused, ChangesRefused
from ingest.model import TableId
from ingest.pipeline import run_files
from testkit.sample import ADD_POINTS, CUSTOMERS, SIMPLE_FOR_TESTS, Stream


def _config(lake: Path) -> IngestConfig:
    return asof.locate(str(lake))


def _pairs(gs: tuple[int, ...], rng: random.Random) -> list[tuple[int, int]]:
    """Every pair of runs, each end either G itself or a TSO between it and the next run's G."""
    pairs = []
    for i, a in enumerate(gs):
        for b in gs[i + 1 :]:
            later = [g for g in gs if g > b]
            pairs.append((a, b if not later or rng.random() < 0.5 else rng.randrange(b, later[0])))
    return pairs


def test_every_pair_of_runs_replays_to_the_later_one_plain_and_net(spark, mirrored_history):
    config = _config(mirrored_history.lake)
    for a, b in _pairs(mirrored_history.gs, random.Random(7)):
        assert replay_problems(spark, config, a, b) == []


def test_rows_carry_the_change_type_and_the_tidb_commit_tso_of_each_change(spark, mirrored_history):
    g1, g2, _ = mirrored_history.gs
    frames = changes.changes(spark, str(mirrored_history.lake), g1, g2)
    assert set(frames) == {CUSTOMERS_T, ORDERS_T, NOTES_T}
    s = mirrored_history.stream
    customers = {(r["id"], r["_change_type"]): r["_tidb_commit_ts"] for r in frames[CUSTOMERS_T].collect()}
    # Run 2 updated customer 2 at tso(11) and deleted customer 3 at tso(12): the after-image says tso(11),
    # the before-image the same; the delete the TSO its batch applied up to (G2), which is at or above it.
    assert customers == {
        (2, "update_preimage"): s.tso(11), (2, "update_postimage"): s.tso(11), (3, "delete"): g2,
    }  # fmt: skip
    assert frames[ORDERS_T].count() == 0  # untouched in run 2
    notes = frames[NOTES_T].collect()  # created inside the range: its rows are inserts
    assert sorted((r["id"], r["_change_type"]) for r in notes) == [
        (1, "insert"),
        (2, "insert"),
        (3, "insert"),
    ]


def test_net_gives_one_row_per_key_as_it_ended(spark, mirrored_history):
    g1, _, g3 = mirrored_history.gs
    _answer, parts = changes.change_segments(spark, str(mirrored_history.lake), g1, g3, [ORDERS_T], net=True)
    [(_segment, frame)] = parts[ORDERS_T]
    assert [(r["order_id"], r["_change_type"]) for r in frame.collect()] == [(104, "delete")]


def test_a_schema_change_inside_the_range_is_a_segment_with_its_ddl_and_changes_refuses_to_merge_it(
    spark, mirrored_history
):
    _g1, g2, g3 = mirrored_history.gs
    _answer, parts = changes.change_segments(spark, str(mirrored_history.lake), g2, g3, [CUSTOMERS_T])
    segments = [s for s, _ in parts[CUSTOMERS_T]]
    # The DDL was the first thing upstream did after G2: the answer starts with it.
    assert segments[0].ddl and not segments[0].empty
    added = [s for s in segments if s.ddl]
    assert any("ADD COLUMN" in d.upper() and "points" in d for s in added for d in s.ddl), added
    assert added[0].ddl_ts == mirrored_history.stream.tso(21)
    # After the DDL: customer 1's points set to 7.
    after = [r.asDict() for r in parts[CUSTOMERS_T][-1][1].collect()]
    assert {"id": 1, "points": 7, "_change_type": "update_postimage"}.items() <= next(
        r for r in after if r["id"] == 1 and r["_change_type"] == "update_postimage" and r["points"] == 7
    ).items()
    with pytest.raises(
        ChangesRefused, match=r"shop\.customers: its schema changed inside the range, at TSO "
    ):
        changes.changes(spark, str(mirrored_history.lake), g2, g3, ["shop.customers"])
    # The other tables of the same range answer.
    assert changes.changes(spark, str(mirrored_history.lake), g2, g3, [ORDERS_T])[ORDERS_T].count() == 1


def test_refuses_a_range_that_runs_backwards_or_ends_past_the_newest_g(spark, mirrored_history):
    g1, g2, g3 = mirrored_history.gs
    lake = str(mirrored_history.lake)
    with pytest.raises(ChangesRefused, match="is after to TSO"):
        changes.changes(spark, lake, g3, g1)
    with pytest.raises(AsOfRefused, match="after the newest global watermark"):
        changes.changes(spark, lake, g1, g3 + (1 << 20))
    with pytest.raises(AsOfRefused, match="before the mirror started"):
        changes.changes(spark, lake, g1 - (1 << 30), g2)


def test_cli_prints_queries_that_read_the_same_rows_and_writes_parquet_with_a_manifest(
    spark, mirrored_history, capsys, tmp_path
):
    g1, g2, _ = mirrored_history.gs
    lake = str(mirrored_history.lake)
    assert main(["changes", f"--target-path={lake}", f"--from-tso={g1}", f"--to-tso={g2}", "--sql"]) == 0
    queries = [line for line in capsys.readouterr().out.splitlines() if line.startswith("SELECT")]
    counts = sorted(n for q in queries if (n := spark.sql(q.rstrip(";")).count()))
    frames = changes.changes(spark, lake, g1, g2)
    assert counts == sorted(f.count() for f in frames.values() if f.count())
    out = tmp_path / "out"
    assert (
        main(["changes", f"--target-path={lake}", f"--from-tso={g1}", f"--to-tso={g2}", f"--out={out}"]) == 0
    )
    manifest = json.loads((out / "_changes.json").read_text())
    assert (manifest["from_g"], manifest["to_g"]) == (g1, g2)
    written = spark.read.parquet(str(out / "shop" / "customers" / "0"))
    assert sorted(map(tuple, written.select("id", "_change_type").collect())) == sorted(
        map(tuple, frames[CUSTOMERS_T].select("id", "_change_type").collect())
    )


def test_a_stream_from_a_tso_gives_the_same_rows_as_the_range_to_the_end(spark, mirrored_history, tmp_path):
    g1, _, g3 = mirrored_history.gs
    lake = str(mirrored_history.lake)
    for table in (ORDERS_T, NOTES_T):
        got = comparable(streamed(spark, asof.locate(lake), table, g1, tmp_path))
        expected = comparable(changes.changes(spark, lake, g1, g3, [table])[table].collect())
        assert got == expected and expected, table


def test_a_table_created_before_the_feed_turns_it_on_at_its_next_batch_and_answers_from_there(
    spark, run, lake
):
    s = Stream(tz_name="UTC")
    t = s.create_table(SIMPLE_FOR_TESTS, s.tso(1))
    s.insert(t, {"id": 1, "v": "a"}, s.tso(2))
    s.watermark(s.tso(10))
    g1 = run(s, **{"change-feed": "off"}).global_watermark
    s.update(t, (1,), {"v": "b"}, s.tso(11))
    s.watermark(s.tso(20))
    run(s, **{"change-feed": "off"})
    s.insert(t, {"id": 2, "v": "c"}, s.tso(21))
    s.watermark(s.tso(30))
    run(s)
    s.delete(t, (1,), s.tso(31))
    s.watermark(s.tso(40))
    g4 = run(s).global_watermark
    with pytest.raises(ChangesRefused, match=r"app\.t: its change data feed starts at version"):
        changes.changes(spark, str(lake), g1, g4)
    # From the version it was turned on at (the table as of G2) on, it answers.
    config = _config(lake)
    assert replay_problems(spark, config, s.tso(20), g4) == []
    frames = changes.changes(spark, str(lake), s.tso(20), g4)
    rows = frames[TableId("app", "t")].orderBy("_commit_version").collect()
    assert [(r["id"], r["_change_type"]) for r in rows] == [
        (2, "insert"), (1, "delete"),
    ]  # fmt: skip


def test_a_table_created_inside_the_range_then_altered_is_refused_whole_and_answered_in_segments(
    spark, run, lake
):
    s = Stream(tz_name="UTC")
    notes = s.create_table(SIMPLE_FOR_TESTS, s.tso(1))
    s.insert(notes, {"id": 1, "v": "a"}, s.tso(2))
    s.watermark(s.tso(10))
    g1 = run(s).global_watermark
    customers = s.create_table(CUSTOMERS, s.tso(11))
    s.insert(customers, _customer(1), s.tso(12))
    s.add_column(customers, ADD_POINTS, s.tso(13), "points", "int", default=100)
    s.update(customers, (1,), {"points": 7}, s.tso(14))
    s.watermark(s.tso(20))
    g2 = run(s).global_watermark
    with pytest.raises(ChangesRefused, match=r"shop\.customers: its schema changed inside the range"):
        changes.changes(spark, str(lake), g1, g2, [CUSTOMERS_T])
    _, parts = changes.change_segments(spark, str(lake), g1, g2, [CUSTOMERS_T])
    (created, first), (added, second) = parts[CUSTOMERS_T]
    assert "CREATE TABLE" in created.ddl[0] and "ADD COLUMN" in added.ddl[0]
    assert [(r["id"], r["_change_type"]) for r in first.collect()] == [(1, "insert")]
    assert ("points", 7) in {(k, v) for r in second.collect() for k, v in r.asDict().items()}
    assert replay_problems(spark, _config(lake), g1, g2) == []


def test_truncate_is_deletes_rename_opens_the_new_name_and_refuses_the_old_drop_refuses(
    spark, run, lake, capsys
):
    s = Stream(tz_name="UTC")
    t = s.create_table(SIMPLE_FOR_TESTS, s.tso(1))
    u = s.create_table(SIMPLE_FOR_TESTS.replace("`t`", "`u`"), s.tso(1))
    gone = s.create_table(SIMPLE_FOR_TESTS.replace("`t`", "`gone`"), s.tso(1))
    for table in (t, u, gone):
        s.insert(table, {"id": 1, "v": "a"}, s.tso(2))
        s.insert(table, {"id": 2, "v": "b"}, s.tso(2))
    s.watermark(s.tso(10))
    g1 = run(s).global_watermark
    s.truncate(t, s.tso(11))
    s.insert(t, {"id": 3, "v": "c"}, s.tso(12))
    renamed = TableId("app", "u2")
    s.rename_table(u, renamed, s.tso(13))
    s.drop_table(gone, s.tso(14))
    s.watermark(s.tso(20))
    g2 = run(s).global_watermark
    answer = changes.resolve(spark, _config(lake), g1, g2, strict=False)
    assert set(answer.refused) == {u, gone}
    assert all("was dropped or renamed away inside the range" in why for why in answer.refused.values())
    frames = changes.changes(spark, str(lake), g1, g2, [t, renamed])
    truncated = sorted((r["id"], r["_change_type"], r["_tidb_commit_ts"]) for r in frames[t].collect())
    # The TRUNCATE's deletes carry the TSO its batch applied up to; the insert after it its own.
    assert [(i, kind) for i, kind, _ in truncated] == [(1, "delete"), (2, "delete"), (3, "insert")]
    assert truncated[2][2] == s.tso(12) and truncated[0][2] >= s.tso(11)
    assert sorted((r["id"], r["_change_type"]) for r in frames[renamed].collect()) == [
        (1, "insert"),
        (2, "insert"),
    ]
    with pytest.raises(ChangesRefused, match=r"app\.gone: was dropped or renamed away"):
        changes.changes(spark, str(lake), g1, g2, [gone])
    assert replay_problems(spark, _config(lake), g1, g2) == []
    # Refused when the range is resolved: named on stderr and in the manifest, the others written, exit 3.
    out = lake.parent / "out"
    ends = [f"--target-path={lake}", f"--from-tso={g1}", f"--to-tso={g2}"]
    assert main(["changes", *ends, f"--out={out}"]) == 3
    err = capsys.readouterr().err
    assert "app.u: refused: app.u: was dropped or renamed away" in err and "app.gone: refused" in err
    manifest = json.loads((out / "_changes.json").read_text())
    assert sorted(r["table"] for r in manifest["refused"]) == ["app.gone", "app.u"]
    assert sorted({e["table"] for e in manifest["segments"]}) == ["app.t", "app.u2"]


def test_a_swap_of_two_tables_is_a_segment_with_the_renames(spark, run, lake):
    s = Stream(tz_name="UTC")
    a = s.create_table(SIMPLE_FOR_TESTS, s.tso(1))
    b = s.create_table(SIMPLE_FOR_TESTS.replace("`t`", "`b`"), s.tso(1))
    s.insert(a, {"id": 1, "v": "in a"}, s.tso(2))
    s.insert(b, {"id": 2, "v": "in b"}, s.tso(2))
    s.watermark(s.tso(10))
    g1 = run(s).global_watermark
    tmp = TableId("app", "tmp")
    s.rename_table(a, tmp, s.tso(11))
    s.rename_table(b, a, s.tso(12))
    s.rename_table(tmp, b, s.tso(13))
    s.insert(a, {"id": 3, "v": "new in a"}, s.tso(14))
    s.watermark(s.tso(20))
    g2 = run(s).global_watermark
    _, parts = changes.change_segments(spark, str(lake), g1, g2, [a])
    *_, (last, frame) = parts[a]
    assert any("RENAME TABLE" in d.upper() for d in last.ddl), last
    assert [(r["id"], r["_change_type"]) for r in frame.collect()] == [(3, "insert")]
    with pytest.raises(ChangesRefused, match=r"app\.t: its schema changed inside the range"):
        changes.changes(spark, str(lake), g1, g2, [a])
    assert replay_problems(spark, _config(lake), g1, g2) == []


def test_a_new_columns_back_fill_is_no_change_and_every_row_is_upstreams(spark, mirrored_history):
    g1, g2, g3 = mirrored_history.gs
    lake = str(mirrored_history.lake)
    _, parts = changes.change_segments(spark, lake, g2, g3, [CUSTOMERS_T])
    rows = sorted(
        (r["id"], r["_change_type"], r["points"], r["_tidb_commit_ts"])
        for _, frame in parts[CUSTOMERS_T]
        if "points" in frame.columns
        for r in frame.collect()
    )
    # ADD COLUMN points NOT NULL DEFAULT 100 changed no row upstream; then customer 1's points became 7. Its
    # before-image holds the 100 upstream had, not the NULL the column held before the mirror filled it.
    s = mirrored_history.stream
    assert rows == [(1, "update_postimage", 7, s.tso(22)), (1, "update_preimage", 100, s.tso(22))]
    config = _config(mirrored_history.lake)
    for a, b in [(g1, g2), (g2, g3), (g1, g3)]:
        assert upstream_problems(spark, config, s, a, b) == [], (a, b)


NOTES_CREATE = """CREATE TABLE `app`.`notes` (
  `id` int(11) NOT NULL,
  `body` varchar(20) DEFAULT NULL,
  PRIMARY KEY (`id`)
)"""


@pytest.fixture(scope="module")
def across_a_ddl(spark, tmp_path_factory):
    """One range in which app.t gains a column between its changes, a key (9) comes and goes across that
    DDL, and app.notes is created with a CREATE TABLE of several lines; built once for the module's tests,
    which only read it."""
    root = tmp_path_factory.mktemp("across-a-ddl")
    lake = root / "lake"

    def run(stream: Stream):
        directory = root / f"input-{len(list(root.glob('input-*')))}"
        stream.write(directory)
        return run_files(spark, IngestConfig.from_params({"input": str(directory), "target-path": str(lake)}))

    s = Stream(tz_name="UTC")
    t = s.create_table(SIMPLE_FOR_TESTS, s.tso(1))
    s.insert(t, {"id": 1, "v": "a"}, s.tso(2))
    s.insert(t, {"id": 2, "v": "b"}, s.tso(2))
    s.watermark(s.tso(10))
    g1 = run(s).global_watermark
    s.insert(t, {"id": 9, "v": "brief"}, s.tso(11))
    s.update(t, (9,), {"v": "briefer"}, s.tso(12))
    s.update(t, (1,), {"v": "a2"}, s.tso(12))
    s.delete(t, (2,), s.tso(12))
    add = "ALTER TABLE `app`.`t` ADD COLUMN `n` int(11) NOT NULL DEFAULT '4'"
    s.add_column(t, add, s.tso(13), "n", "int", default=4)
    s.delete(t, (9,), s.tso(14))
    s.insert(t, {"id": 3, "v": "c", "n": 5}, s.tso(14))
    notes = s.create_table(NOTES_CREATE, s.tso(15))
    s.insert(notes, {"id": 1, "body": "x"}, s.tso(16))
    s.watermark(s.tso(20))
    g2 = run(s).global_watermark
    return s, t, notes, g1, g2, lake


# The tests that read the across-a-DDL history run on one worker, which builds it once.
ACROSS_A_DDL = pytest.mark.xdist_group("across_a_ddl")


@ACROSS_A_DDL
def test_net_is_one_row_per_key_over_the_whole_range_across_a_ddl(spark, across_a_ddl):
    s, t, _notes, g1, g2, lake = across_a_ddl
    _, parts = changes.change_segments(spark, str(lake), g1, g2, [t])
    plain = [[(r["id"], r["_change_type"]) + ((r["n"],) if "n" in f.columns else ()) for r in f.collect()]
             for _, f in parts[t]]  # fmt: skip
    # Row by row: key 9 is inserted before the DDL and deleted after it, its delete the row upstream had.
    assert sorted(plain[0]) == [(1, "update_postimage"), (1, "update_preimage"), (2, "delete"), (9, "insert")]
    assert sorted(plain[1]) == [(3, "insert", 5), (9, "delete", 4)]
    net = changes.changes(spark, str(lake), g1, g2, [t], net=True)[t]
    assert net.columns == ["id", "v", "_tidb_commit_ts", "n", "_change_type", "_commit_version"]
    rows = {r["id"]: (r["_change_type"], r["v"], r["n"], r["_tidb_commit_ts"]) for r in net.collect()}
    # Netted: by presence at both ends, under the end's columns; 9 came and went, so it is left out.
    assert set(rows) == {1, 2, 3}
    assert rows[1] == ("update_postimage", "a2", 4, s.tso(12)) and rows[3] == ("insert", "c", 5, s.tso(14))
    assert rows[2][:3] == ("delete", "b", None) and g1 < rows[2][3] < s.tso(13)
    assert upstream_problems(spark, _config(lake), s, g1, g2) == []
    assert replay_problems(spark, _config(lake), g1, g2) == []


def _printed_statements(out: str) -> list[str]:
    statements = []
    for line in out.splitlines():
        assert line.startswith("--") or line.endswith(";"), line  # every line runs in Spark SQL as it is
        if not line.startswith("--"):
            statements.append(line.rstrip(";"))
    return statements


def _bag(rows) -> list[tuple]:
    return sorted(tuple(sorted((k, repr(v)) for k, v in r.asDict().items())) for r in rows)


@ACROSS_A_DDL
@pytest.mark.parametrize("net", [False, True])
def test_printed_sql_runs_as_it_is_and_gives_the_rows_out_writes(spark, across_a_ddl, capsys, tmp_path, net):
    _s, _t, _notes, g1, g2, lake = across_a_ddl
    ends = [f"--target-path={lake}", f"--from-tso={g1}", f"--to-tso={g2}", *(["--net"] if net else [])]
    assert main(["changes", *ends, "--sql"]) == 0
    printed = capsys.readouterr().out
    assert "--   `body` varchar(20) DEFAULT NULL," in printed  # the CREATE TABLE's every line is a comment
    from_sql = [r for q in _printed_statements(printed) for r in spark.sql(q).collect()]
    out = tmp_path / "out"
    assert main(["changes", *ends, f"--out={out}"]) == 0
    manifest = json.loads((out / "_changes.json").read_text())
    assert manifest["refused"] == [] and manifest["net"] is net
    written = [r for entry in manifest["segments"] for r in spark.read.parquet(entry["path"]).collect()]
    assert _bag(from_sql) == _bag(written) and written


def test_refused_tables_are_named_on_stderr_and_in_the_manifest_and_the_others_answer_vacuum_included(
    spark, mirrored_history, tmp_path, capsys
):
    g1, g2, _ = mirrored_history.gs
    lake = tmp_path / "lake"
    shutil.copytree(mirrored_history.lake, lake)
    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:
        spark.sql(f"VACUUM delta.`{located(lake, CUSTOMERS_T)}` RETAIN 0 HOURS")
    finally:
        spark.conf.unset("spark.databricks.delta.retentionDurationCheck.enabled")
    ends = [f"--target-path={lake}", f"--from-tso={g1}", f"--to-tso={g2}"]
    out = tmp_path / "out"
    # Found only while writing: the VACUUMed feed. Exit 3, the others written, nothing of the refused one.
    assert main(["changes", *ends, f"--out={out}"]) == 3
    err = capsys.readouterr().err
    assert "shop.customers: refused: shop.customers: the changes of versions" in err and "VACUUM" in err
    manifest = json.loads((out / "_changes.json").read_text())
    assert [r["table"] for r in manifest["refused"]] == ["shop.customers"]
    assert "VACUUM removed" in manifest["refused"][0]["reason"]
    assert not (out / "shop" / "customers").exists() and not (out / "_partial").exists()
    assert (out / "app" / "t" / "0").is_dir() and (out / "shop" / "orders").is_dir()
    # The same in SQL, and in a count.
    assert main(["changes", *ends, "--sql"]) == 3
    printed = capsys.readouterr()
    assert "shop.customers: refused" in printed.err and located(lake, CUSTOMERS_T) not in printed.out
    assert located(lake, ORDERS_T) not in printed.out  # untouched in the range: no query
    assert main(["changes", *ends]) == 3
    assert "shop.customers: refused" in capsys.readouterr().err
    # In Python: the table raises, naming it; an untouched one answers.
    with pytest.raises(ChangesRefused, match=r"shop\.customers: the changes of versions .* VACUUM removed"):
        changes.changes(spark, str(lake), g1, g2, [CUSTOMERS_T])
    assert changes.changes(spark, str(lake), g1, g2, [ORDERS_T])[ORDERS_T].count() == 0


# Kit-made corpora mirrored in several runs, each over a longer prefix of the records TiCDC wrote, which must
# land cell for cell as in one run; then, for pairs of runs and every table, the changes between them, plain
# and net. A full-profile test: in CI, changes across DDLs are replayed by test_ddl_property's generated
# streams and the tests above. CORPUS_PROFILE=full: every pair of three runs of the tables, columns (every
# column DDL, key changes, rewrites) and partitions corpora.
CORPUS_RUNS = 3
IN_RUNS = ["tables", "columns", "partitions"]


@pytest.fixture(scope="module", params=IN_RUNS)
def corpus_in_runs(request, spark, tmp_path_factory):
    corpus = request.param
    lines = (CORPORA[corpus] / "canal-json" / "records.jsonl").read_text().splitlines(keepends=True)
    root = tmp_path_factory.mktemp(f"changes-{corpus}")
    lake, records = root / "lake", root / "records.jsonl"
    gs: list[int] = []
    for n in range(1, CORPUS_RUNS + 1):
        records.write_text("".join(lines[: len(lines) * n // CORPUS_RUNS]))
        config = IngestConfig.from_params({"input": str(records), "target-path": str(lake)})
        result = run_files(spark, config)
        assert result.quarantined == 0
        gs.append(result.global_watermark)
    assert corpus_problems(spark, config, CORPORA[corpus]) == {}
    return corpus, lake, tuple(dict.fromkeys(gs))


@pytest.mark.long
@pytest.mark.full
def test_kit_corpora_every_pair_of_runs_replays_to_the_later_one(spark, corpus_in_runs, tmp_path):
    corpus, lake, gs = corpus_in_runs
    assert len(gs) == CORPUS_RUNS, gs
    config = _config(lake)
    for a, b in _pairs(gs, random.Random(corpus)):
        assert replay_problems(spark, config, a, b) == [], (corpus, a, b)
    # A stream from each run's point to the end, for every table that kept its schema since.
    for a in gs[:-1]:
        assert stream_problems(spark, config, a, tmp_path / str(a)) == [], (corpus, a)
