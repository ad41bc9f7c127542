"""BENCHMARKS.md from one run: its sections in order, the headline the README quotes, the Machine, Workload,
Peak memory and Targets sections around the steps' own, and the static What was tried."""

from __future__ import annotations

from datetime import datetime

from bench.context import Bench
from bench.machine import MemorySampler
from bench.sizes import Sizes

SECTIONS = (
    "## Machine",
    "## Workload",
    "## Decode",
    "## Row checksums",
    "## End-to-end apply",
    "## Naive baseline",
    "## Append-only ingester",
    "## Change data feed",
    "## Many tables",
    "## Small files",
    "## MERGE scaling",
    "## Peak memory",
    "## Targets",
    "## What was tried",
)


def _fmt_size(value: object) -> str:
    return f"{value:,}" if isinstance(value, int) else f"`{value}`"


def _mib(value: int) -> str:
    return f"{value / 1024 / 1024:,.0f} MiB"


TRIED = """\
- **Fewer Spark jobs per batch (`ingest/pipeline.py`, `ingest/buffer.py`, `ingest/progress.py`).**
  Profiled with Spark's status store (the jobs of one batch and their call sites) on an insert-only
  batch of 10,000 events: 46 jobs. Removed: the separate `first()` that looked for a fatal record (now a
  column of the per-partition aggregate the batch computes anyway); a second `table_info` per segment
  (the column check reads it and the MERGE reuses it unless a column was added); the buffer's read,
  union and second de-duplication shuffle when the last committed run left it empty, and its
  create-and-overwrite commit when it stays empty (the progress row now records how many records the
  buffer holds; unknown counts as non-empty, so older progress rows behave as before). 34 jobs after,
  same batch; in that profile the batch took 21.9 s against 28.9 s before, both at a load average of
  9-14, so the time is indicative only. The crash tests (SIGKILL between the MERGEs and progress,
  between tables, mid-DDL) pass unchanged. What remains per batch: reading the progress table and the
  target's history (Delta log reads, about 1-3 s each here), the decode pass, type signatures, control
  events, the conversion check, the MERGE, pending counts, the progress commit.
- **Decode classification (`ingest/source/decoding.py`).** The plan parses each record once (one
  `from_json`, kept in its own projection; no repeated evaluation). But kind and error were two chains
  of thirteen nested CASEs, each repeating every condition: per 100,000 Canal-JSON records, 2.03
  CPU-s for the decode against 1.02 for `from_json` alone. Now one flat CASE picks the deciding rule's
  number into a column, and kind and error are looked up from it: 1.65 CPU-s. (A first attempt that
  derived both from the same CASE expression without a column made it worse, 4.1 CPU-s: the CASE was
  evaluated once per lookup.) Same columns and values; the decode, protocol and fuzz tests pass.
- **Record-by-record JSON decode (orjson in a scalar Arrow UDF), not kept.** A decoder without
  `from_json`: each message is parsed with orjson, only the envelope fields the codec names are read,
  and the codec's rules run in Python (compiled to closures once; a message's kind memoized on the
  values of the rules' leaf conditions; row images kept as parsed unless Arrow finds a value that is
  not text, then the batch is read again with every value as from_json's text). A differential test
  found it equal to the from_json decoder over every TiCDC fixture record. Measured at a load
  average of 9-11 (100,000 Canal-JSON records): a trivial Arrow UDF alone costs 0.67 CPU-s (0.23 for
  reading the values), one that only runs `orjson.loads` 1.11, the decoder 2.98; as `mapInArrow`
  passing every message column through Python it was 3.4. On a quiet machine (load 1-1.7), per CPU-s:
  Canal-JSON 34,491 events against 63,307 for the `from_json` decoder, Simple 50,775 against 99,036.
  The per-record Python work, not the parse, is what costs; the pipeline keeps `from_json`, and the
  record-by-record decoder was not kept.
- **Fair decode measurement.** The previous report divided wall-clock rates; at a load average of 14 a
  single Python loop got about a tenth of a core (1.2 s wall for 0.11 CPU-s), so wall ratios measured
  the scheduler. The decode table now also gives events per CPU-second (JVM plus Python workers against
  the loop's own process) and takes the target's ratio from it, every timing after an untimed warm-up
  pass, best of several. The apply runs are preceded by one untimed warm-up batch (before, the first
  mix measured paid for compiling Delta's MERGE code: 77.7 s insert-only against 36.8 s update-heavy).
- **Key bounds in the MERGE condition (`ingest/apply/merge.py`).** Delta skips files by min/max
  statistics only for predicates on the target alone, and `t.id = s.id` is not one, so every MERGE read
  every file of the table. The pipeline computes the batch's min and max of the first key column (in
  the same pass that counts unconvertible rows) and adds `t.id BETWEEN lo AND hi`. Target rows outside
  cannot match, so the result is the same; the files outside are skipped. The MERGE scaling table
  measures both conditions. Timestamp keys get no bounds (a naive datetime literal would be read in the
  Python process's zone). This helps when the batch's keys are narrow relative to the table and the
  table's files are in key order; it cannot help a batch spread uniformly over all keys.
- **One MERGE per table per batch.** Already so: the batch is collapsed to one change per key (window
  over commitTs, rank, offset) and applied with one guarded MERGE per table segment; a segment ends only
  at a DDL of that table.
- **Deletion vectors.** On for every mirrored table (`delta.enableDeletionVectors`): a MERGE that
  updates or deletes a few rows of a file writes a small deletion vector instead of rewriting the file.
- **Compaction (`ingest/apply/table.py`).** A MERGE every 10 s writes at least one file per commit and
  a deletion vector per file it touches. Every mirrored table is now created with Delta's auto compaction
  (`delta.autoOptimize.autoCompact`), measured in Small files with it on and off. Chosen over an OPTIMIZE
  of our own every N batches: Delta decides from the table's small files, the compaction commit carries
  the write's userMetadata (table state, as-of points stay right; tested), and nothing in the batch engine
  changes. Optimized writes (`delta.autoOptimize.optimizeWrite`) were not turned on: a shuffle more per
  write, for batches whose MERGE already writes few files.
- **Clustering on the key / data skipping.** Skipping only pays when files have narrow key ranges: a
  table filled in key order has them, others get them from `OPTIMIZE … ZORDER BY (key)` or liquid
  clustering on the key (operator's choice, not done by the mirror).
- **Tables in parallel (`ingest/pipeline/parallel.py`, setting `table-parallelism`, default 4).** A batch's
  tables that no DDL ties together are applied from a bounded pool of driver threads; each table is still
  its own Delta commit with its own A_T and transaction id, progress moves only after all of them, and
  every failed table is reported. Timed before and after on the 10-table batch of this section (a shared
  machine, back to back): 41.0 s -> 29.5 s; 1 table 8.3 s -> 7.5 s. What the threads overlap is the work
  around the MERGEs (table state, conversion checks, key bounds, planning). The MERGE commands themselves
  take turns: Delta reads a commit's `userMetadata` and transaction id (`txnAppId`/`txnVersion`) from the
  session's configuration, which every thread of one session shares, and a SQL MERGE has no per-command
  option for them (a DataFrame write has). The MERGE column of the table above is that serial part, and
  the job list shows what each table adds. Not done yet: a session per thread (classic `newSession()`,
  Spark Connect `cloneSession()`; both see the cached batch, a global temporary view can carry each
  table's source) would let MERGEs run at once; on 2 cores that bounds the gain by the CPU the MERGEs
  use, not by their wall time. Also not done: an append instead of a MERGE for a segment without updates,
  deletes or rows already in the table (no join, and writer options instead of session settings).
- **Not tried.** A Python decoder (orjson in `mapInArrow`) would pay Arrow transfer and a Python worker
  per core on top of the limit, and building the string maps in Python costs more than the parse
  (`stack-notes` §9 measured it at the level of `from_json`). Fusing the remaining driver-side passes
  (control events, type signatures, pending counts) into one job would save two or three small jobs.
- **Load.** The report before this one was taken at a load average of 15.7 on 2 cores, where the
  insert-only batch of 50,000 events took 43.0 s; the same code on an idle machine took 6.7 s. Ratios
  of timings taken close together moved less: Canal-JSON decode 0.17x there, about 0.24x idle.
- **Profile of one insert-only batch (driver cProfile plus every Spark job from the status store).** At
  50,000 events over a quarter of the time is fixed per batch (1.8 of 6.7 s): progress load, table state
  from the Delta history, `table_info`, the progress commit. At 500,000 events it is the work per record:
  the first pass (read, decode, cache) 12.5 s of 25 s, the conversion and its check 3.9 s, the MERGE 3.5
  s, the column-type signatures 2.3 s. Changes, each measured on its own and then together (same machine,
  before and after interleaved, two rounds): 500,000 events 25.8 / 26.0 s -> 21.2 / 20.8 s; 50,000 events
  8.4 / 8.0 s -> 7.8 / 7.8 s.
  - **De-duplication by position (`ingest/pipeline.py`).** Every batch ran `dropDuplicates` over whole
    records, a shuffle of every record's bytes: 2.3 s of the 3.1 s it takes to read 500,000 captured
    records. Duplicates are rare (overlapping captures; a buffer left by a crash before progress), so
    the pass that reads the partition ranges now also counts distinct offsets, and only a batch with
    duplicates is de-duplicated. A first version looked for duplicates in the input files before
    decoding; that tokenized every line twice (1.85 s at 500,000) and was dropped.
  - **Column-type signatures (`ingest/pipeline.py`).** Each row's `mysqlType` map was turned into a
    sorted array of concatenated strings to group on: 1.74 s per 500,000 rows on the cached batch.
    Grouping on the map's key and value arrays as they come, and merging key orders on the driver:
    0.37 s.
  - **Progress (`ingest/progress.py`).** Loading it sorted every row ever committed, one small file per
    run: 0.65 s at 10 runs, 1.9 s at 600, and a 10 s trigger commits 8,640 runs a day. Now one `max_by`
    aggregate, and every 100 runs the table keeps each stream's newest 10,000 runs and is compacted.
  - Tried and not kept: caching the decoded batch without columnar compression
    (`spark.sql.inMemoryColumnarStorage.compressed=false`) saves about 1 s per 500,000 records, but it
    is a session setting read while the cache is built, and on Databricks the session is the user's;
    `StorageLevel.MEMORY_ONLY` instead of the default made no difference.
- **`parse_json` (VARIANT) instead of `from_json` (`ingest/source/decoding.py`, measured, not kept).**
  Per 100,000 Canal-JSON records: `from_json` with the envelope 0.90 CPU-s; `try_parse_json` alone 0.76
  CPU-s; `try_parse_json` plus `try_variant_get` of the seven fields the decoder needs 2.68 CPU-s.
  VARIANT parses no faster and extracting from it costs three times the whole `from_json`.
"""


def headline(bench: Bench) -> str:
    """The summary line the README quotes."""
    h = bench.headline
    sizes = bench.sizes
    return (
        f"**Headline:** Canal-JSON decode at {h.get('decode', 'n/a')} the orjson parse limit; insert-only "
        f"apply at {h.get('append', 'n/a')} a plain Delta append; the naive raw-event MERGE takes "
        f"{h.get('naive', 'n/a')} our time where it runs at all (insert-only; it fails on any batch that "
        f"changes a key twice); applying the same batch into {sizes.scale_large:,} rows takes "
        f"{h.get('scaling', 'n/a')} the time into {sizes.scale_small:,}."
    )


def render(
    bench: Bench,
    machine_rows: list[tuple[str, str]],
    memory: MemorySampler,
    started: datetime,
    seconds: float,
    smoke: bool,
) -> str:
    sizes = bench.sizes
    head = [
        "# Benchmarks",
        "",
        f"Every number below comes from one run of `make bench` on {started:%Y-%m-%d} "
        f"(started {started:%H:%M} UTC, {seconds / 60:.1f} minutes). The load average at its start is in the "
        "Machine table: above the core count, other processes took CPU from this run and absolute rates "
        "drop; ratios of timings taken close together are more stable."
        + (" **Smoke run: tiny sizes, numbers are meaningless.**" if smoke else ""),
        "",
        headline(bench),
        "",
        "## Machine",
        "",
        "| | |",
        "|---|---|",
        *[f"| {k} | {v} |" for k, v in machine_rows],
        "",
        "## Workload",
        "",
        "Streams come from `testkit.workload` (Canal-JSON with the TiDB extension, byte for byte what the "
        "upstream model in `testkit.sample` writes): CREATE TABLE on partition 0, rows routed to partitions "
        "by key, a watermark on every partition each 10,000 events and at the end of each batch. Mixes: "
        "insert-only; update-heavy 80% UPDATE / 15% INSERT / 5% DELETE; delete-heavy 60% DELETE / 20% "
        "UPDATE / 20% INSERT. Keys of UPDATE/DELETE: uniform over the live keys, or Zipf (s = 1.1).",
        "",
        "Sizes (environment variables of `make bench`): "
        + ", ".join(f"`BENCH_{k.upper()}`={_fmt_size(getattr(sizes, k))}" for k in Sizes.__dataclass_fields__)
        + ".",
        "",
    ]
    memory_section = [
        "## Peak memory",
        "",
        "Sampled every 0.2 s from `/proc` over the whole run: resident set size of the JVM and of this "
        "Python process; for the Python workers (forked from one daemon, sharing pages) the proportional "
        "set size, summed over the workers alive at the same time.",
        "",
        "| Process | Peak RSS |",
        "|---|---:|",
        f"| Spark driver JVM (local mode: driver and executors) | {_mib(memory.peak_driver)} |",
        f"| Python workers (proportional set size, summed; up to {memory.peak_worker_count} processes) | "
        f"{_mib(memory.peak_workers)} |",
        f"| Driver Python process (generator, orjson limit) | {_mib(memory.peak_self)} |",
        "",
    ]
    targets = [
        "## Targets",
        "",
        "| Target | Measured | | Why missed |",
        "|---|---:|---|---|",
        *[f"| {t} | {m} | {s} | {w} |" for t, m, s, w in bench.targets],
        "",
        "## What was tried",
        "",
        TRIED,
    ]
    return "\n".join([*head, *bench.lines, *memory_section, *targets]).rstrip() + "\n"
