"""The targets each step checks its ratio against, and why a missed one is missed (the Targets table)."""

from __future__ import annotations

TARGET_DECODE = 0.5
TARGET_APPEND = 0.5
TARGET_SCALING = 1.5
TARGET_TABLES_MANY = 3.0
TARGET_TABLES_SOME = 1.5
TARGET_JOBS_PER_TABLE = 8.0
TARGET_BARE_MERGE = 1.0
TARGET_IDLE_TABLES = 1.2
TARGET_FROM_JSON = 0.85
TARGET_INGESTER = 0.5
TARGET_CHECKSUMS = 1.3


CHECKSUMS_MISSED = (
    "the sum runs in an Arrow UDF: each checked record's row images (every column, both images of an "
    "UPDATE) go from the JVM to a Python worker and back, and about half the added CPU is that transfer. "
    "Spark SQL has no function for a double's bits or little-endian bytes; built from its string and "
    "math functions the sums of a wide table outgrow the 64 KB Java method and run uncompiled, at 7-12x "
    "(see What was tried)"
)
DECODE_MISSED = (
    "Spark's `from_json` alone (Jackson into UnsafeRows holding string maps, no classification and no "
    "output columns) parses at about a third of orjson's rate per CPU-second, see the line under the "
    "decode table, and only reading the values out of the cached input and casting them to strings costs "
    "a large share of that; so nothing built on `from_json` can reach 0.5x. `parse_json` (VARIANT) parses "
    "no faster, and extracting the fields from it is three times slower (see What was tried). A decoder "
    "parsing with orjson in a scalar Arrow UDF and evaluating the codec's rules in Python (tried, not kept; "
    "see What was tried) measured about twice the CPU of this one"
)
FROM_JSON_MISSED = (
    "beyond parsing, the decode classifies every record (DML, DDL, watermark, bootstrap, garbage), checks "
    "its fields against the protocol's rules and builds the typed output columns (positions, row images "
    "as maps, the quarantine reason); `from_json` alone does none of that. A decode in a scalar Arrow UDF "
    "with orjson measured about twice the CPU of this one (see What was tried)"
)
APPEND_MISSED = (
    "the append writes typed rows already in memory; our batch first reads the captured records (JSON "
    "lines, base64 values), parses each TiCDC message, caches the decoded batch, converts every value "
    "from its wire text, ranks the changes per key, and MERGEs them (a join with the target, then the "
    "write), around a dozen fixed jobs for progress, table state and control events. Most of that grows "
    "with the batch: the larger insert-only batch in the apply table has about the same ratio, so batch "
    "size does not close the gap (see What was tried for the profile)"
)
INGESTER_MISSED = (
    "the ingester reads, parses, types and appends; our batch also decodes every field of the envelope "
    "and classifies each record, ranks the changes per key, MERGEs (a join with the target, then the "
    "write), and pays the fixed jobs of progress, table state and control events"
)
TABLES_MISSED = (
    "the MERGE commands: up to `table-parallelism` tables (4) are applied at once, each in a Spark session "
    "of its own, so their MERGEs run at the same time, but on this machine's cores they share the CPU. "
    "A small MERGE costs about 1.5 s whatever its rows, most of it Delta planning on the driver, and 10 of "
    "a table's 12 Spark jobs (see the job list); 100 tables at 3x the 1-table time would leave about 0.2 s "
    "each"
)
JOBS_MISSED = (
    "Delta's MERGE starts most of them (see the job list): rebuilding the file list of the table's "
    "snapshot, finding the files the source touches, copying the source first, writing, and a job for each "
    "stage of its adaptive plan; one more reads the table's newest commits for its state, one aggregates "
    "its changes. Adaptive execution off for the MERGE gets under 8, and every measured arm was slower "
    "with it (see What was tried)"
)
SCALING_MISSED = (
    "MERGE still reads the files whose key range overlaps the batch; see Files read and the table above"
)
