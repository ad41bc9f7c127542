"""How big each measurement is: :class:`Sizes`, every field settable by the ``BENCH_*`` environment variable
named beside it."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any


def _env_int(name: str, default: int) -> int:
    text = os.environ.get(name)
    if not text:
        return default
    try:
        return int(text.replace("_", ""))
    except ValueError as exc:
        raise SystemExit(f"{name}: {text!r} is not an integer") from exc


@dataclass(frozen=True)
class Sizes:
    """How big each measurement is. Every field can be set by the environment variable named beside it."""

    decode_events: int = 200_000  # BENCH_DECODE_EVENTS
    apply_events: int = 50_000  # BENCH_APPLY_EVENTS: DML events of the measured batch, per mix
    large_batch: int = 500_000  # BENCH_LARGE_BATCH: one more insert-only batch, 10x the size
    preload_rows: int = 100_000  # BENCH_PRELOAD_ROWS: rows in the table before the measured batch
    scale_small: int = 1_000_000  # BENCH_SCALE_SMALL
    scale_large: int = 10_000_000  # BENCH_SCALE_LARGE
    scale_changes: int = 100_000  # BENCH_SCALE_CHANGES
    width: int = 8  # BENCH_WIDTH: columns per row, key included
    partitions: int = 2  # BENCH_PARTITIONS
    repeats: int = 2  # BENCH_REPEATS: decode timings take the best of this many
    rows_per_file: int = 500_000  # BENCH_ROWS_PER_FILE: file size of the tables built by Spark
    # BENCH_MIXES: the apply runs, as mix:keys pairs
    mixes: str = "insert-only:uniform,update-heavy:uniform,delete-heavy:uniform"
    tables_events: int = 20_000  # BENCH_TABLES_EVENTS: update-heavy events of the many-tables batch
    tables_rows: int = 20_000  # BENCH_TABLES_ROWS: rows before that batch, spread over the tables
    tables_some: int = 10  # BENCH_TABLES_SOME
    tables_many: int = 100  # BENCH_TABLES_MANY
    # BENCH_TABLES_ALL: tables in the mirror of the batch that touches only ``tables_many`` of them
    tables_all: int = 1_000
    small_batches: int = 1_000  # BENCH_SMALL_BATCHES: small MERGEs into one table, compaction on
    # BENCH_SMALL_BATCHES_OFF: the same with compaction off. Fewer: without compaction every batch adds a
    # file, so the count is known to grow with the batches; the run compares both arms at this count
    small_batches_off: int = 200
    small_batch_rows: int = 100  # BENCH_SMALL_BATCH_ROWS: rows of each, half updates, half inserts

    @classmethod
    def from_env(cls, *, smoke: bool = False) -> Sizes:
        base = cls.smoke() if smoke else cls()
        values: dict[str, Any] = {}
        for name in cls.__dataclass_fields__:
            default = getattr(base, name)
            env = f"BENCH_{name.upper()}"
            values[name] = (
                _env_int(env, default) if isinstance(default, int) else os.environ.get(env, default)
            )
        return cls(**values)

    @classmethod
    def smoke(cls) -> Sizes:
        return cls(
            decode_events=2_000,
            apply_events=300,
            large_batch=0,  # the same code path as the first insert-only run; the smoke test stays short
            preload_rows=200,
            scale_small=1_000,
            scale_large=3_000,
            scale_changes=200,
            repeats=1,
            rows_per_file=500,
            mixes="insert-only:uniform,update-heavy:zipf",
            tables_events=200,
            tables_rows=60,
            tables_some=2,  # as many as tables_many: at smoke sizes one run serves both
            tables_many=2,
            tables_all=5,  # three tables the batch does not touch, as before
            small_batches=3,
            small_batches_off=2,
            small_batch_rows=10,
        )
