"""A tiny run of the benchmark suite: it runs end to end and writes a report with every section.

Only the shape of the report is checked; performance is measured by `make bench`, never asserted here.
"""

import json
import math
import re

import pytest

from bench.report import SECTIONS
from bench.run import run
from bench.sizes import Sizes

# A time difference over a time: at smoke sizes the 100-table run can finish before the 1-table one, so the
# sign is noise there. Only its presence and finiteness are the report's shape.
DIFFERENCE_KEYS = ("extra_table_vs_bare_merge",)
RESULT_KEYS = (
    "tables_100_vs_1",
    "tables_10_vs_1",
    "insert_apply_vs_ingest",
    "insert_apply_vs_append",
    "decode_canal_json_vs_orjson",
    "merge_10m_vs_1m",
    "type_change_rewrite_10m_vs_merge_1m",
    "naive_vs_ours",
    "jobs_per_batch_1_table",
    "jobs_per_batch_100_tables",
    "jobs_per_extra_table",
    "tables_100_vs_1_parallelism_1",
    "tables_100_vs_1_parallelism_8",
    "tables_1000_touch_100_vs_100",
    "status_1000_tables_s",
    "decode_vs_from_json",
    "small_files_after_1000_batches",
    "merge_with_change_feed_vs_without",
)


@pytest.mark.full  # the bench itself is run by `make bench`
@pytest.mark.long
def test_smoke_run_writes_a_report_with_every_section(spark, tmp_path):
    sizes = Sizes.smoke()
    output = tmp_path / "BENCHMARKS.md"
    results = tmp_path / "results.json"
    text = run(spark, sizes, output, tmp_path / "work", smoke=True, results=results)

    assert output.read_text() == text
    positions = [text.find(section + "\n") for section in SECTIONS]
    assert all(p >= 0 for p in positions), [s for s, p in zip(SECTIONS, positions, strict=True) if p < 0]
    assert positions == sorted(positions)

    for label in ("Cores", "RAM", "CPU", "Python", "Java", "Spark", "Delta"):
        assert re.search(rf"^\| {label} \| \S", text, re.M), label
    assert "`from_json` with the envelope schema alone" in text
    for protocol, limit in (
        ("canal-json", "orjson"),
        (r"simple \(JSON\)", "orjson"),
        (r"simple \(Avro\)", "fastavro"),
        (r"avro \(TiCDC Avro\)", "fastavro"),
    ):
        row = rf"^\| {protocol} \| [\d,]+ \| [\d,]+ \| [\d,]+ / [\d,]+ \({limit}\) \| [\d.]+x \| [\d.]+x \|$"
        assert re.search(row, text, re.M), protocol
    assert not re.search(r"^\| [^|]+ \| not measured", text, re.M)
    # One apply row per configured run, each with its event count and a ratio to the plain append.
    for run_spec in sizes.mixes.split(","):
        mix, keys = run_spec.split(":")
        assert re.search(
            rf"^\| {mix}, {keys} \| {sizes.apply_events:,} \| [\d,]+ \| .* \| [\d.]+x \|$", text, re.M
        )
    if sizes.large_batch:
        assert re.search(
            rf"^\| insert-only, uniform \| {sizes.large_batch:,} \| [\d,]+ \| .* \| [\d.]+x \|$", text, re.M
        )
    # Update-heavy Zipf changes one key several times in a batch: the raw-event MERGE cannot run.
    assert re.search(r"^\| update-heavy, zipf \| does not run: .*multiple source rows", text, re.M | re.I)
    assert re.search(r"^\| insert-only, uniform \| [\d.]+ s \| [\d.]+ s \| [\d.]+x \|$", text, re.M)
    for size in (sizes.scale_small, sizes.scale_large):
        for condition in ("key equality only", "key bounds"):
            assert re.search(
                rf"^\| {size:,} \| {condition} \| [\d.]+ s \| [\d.]+ s \| [\d.]+ s \|$", text, re.M
            )
    assert re.search(r"^\| Spark driver JVM .* \| [1-9][\d,]* MiB \|$", text, re.M)
    targets = re.findall(r"^\| (.+?) \| -?[\d.]+x \| (met|missed) \|", text, re.M)
    assert len(targets) == 10, targets

    assert re.search(
        rf"^\| insert-only, uniform \| {sizes.apply_events:,} \| [\d.]+ s \| [\d.]+ s \| [\d.]+x \|$",
        text,
        re.M,
    )
    for count in (1, sizes.tables_some, sizes.tables_many):
        assert re.search(
            rf"^\| {count:,} \| [\d,]+ \| [\d.]+ s \| [\d.]+ s \| [1-9]\d* \| [\d.]+x \|$", text, re.M
        ), count
    for compaction, batches in ((r"on \(default\)", sizes.small_batches), ("off", sizes.small_batches_off)):
        assert re.search(
            rf"^\| {compaction} \| {batches:,} \| [\d.]+ s \| [1-9][\d,]* \| [1-9][\d,]* \| [\d,]+ KiB "
            r"\| [\d,]+ \| [\d.]+ s \|$",
            text,
            re.M,
        ), compaction
    document = json.loads(results.read_text())
    assert document["smoke"] is True
    assert len(document["load_average_at_start"]) == 3
    for key in RESULT_KEYS:
        assert isinstance(document[key], int | float) and document[key] >= 0, key
    for key in DIFFERENCE_KEYS:
        assert isinstance(document[key], int | float) and math.isfinite(document[key]), key
