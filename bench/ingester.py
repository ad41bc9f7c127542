"""Step ``ingester``: the Append-only ingester section. The ingester is measured during the ``apply`` step, on
the insert-only batch it has just applied (``bench.apply._ingester_run``); this step reports its row, so
without ``apply`` the table is empty."""

from __future__ import annotations

from bench.context import Bench


def ingester(bench: Bench) -> None:
    bench.out(
        "## Append-only ingester",
        "",
        "What an append-only ingester such as kafka-delta-ingest does with the same captured records as "
        "the insert-only batch of the apply table: read them, parse each Canal-JSON value (`from_json` "
        "with only the fields it needs: type, data, commitTs), type each column with the product's own "
        "conversions, and append the rows to an empty table with the mirror's layout and properties. "
        "It neither orders, nor collapses changes per key, nor keeps progress or table state, and it "
        "could not apply an UPDATE or a DELETE. Ratio = ingester time ÷ our time (`run_files`, the same "
        "run as in the apply table).",
        "",
        "| Mix, keys | Events | Ingester | Ours | Ratio |",
        "|---|---:|---:|---:|---:|",
        *bench.ingester_rows,
        "",
    )
