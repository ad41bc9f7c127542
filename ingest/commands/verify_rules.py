"""How two copies of a table are compared, and how the outcome reads. Pure: no Spark.

Every row is rendered canonically (its columns, by name, as JSON text) and hashed to 64 bits; a table's
checksum is its row count, the sum and the XOR of those hashes, so it does not depend on row order. Rows are
split into chunks by a hash of their key: each key lands in the same chunk on both sides, whatever its type,
and chunks are even without sampling the keys first. Per-chunk checksums are compared first; only rows of
chunks that differ are joined by key to name the rows that differ.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

# A chunk is small enough that joining the rows of a differing one is cheap, and big enough that the
# per-chunk checksums of a billion-row table stay a small result for the driver.
CHUNK_ROWS = 200_000
MAX_CHUNKS = 50_000
MAX_KEYS = 100


def chunk_count(rows: int, chunk_rows: int = CHUNK_ROWS, max_chunks: int = MAX_CHUNKS) -> int:
    """Chunks for a table of about ``rows`` rows: at least one, about ``chunk_rows`` rows each."""
    if chunk_rows <= 0:
        raise ValueError("chunk_rows must be positive")
    return max(1, min(max_chunks, math.ceil(rows / chunk_rows)))


@dataclass(frozen=True)
class Checksum:
    """Order-independent checksum of a set of rows."""

    rows: int = 0
    hash_sum: int = 0
    hash_xor: int = 0

    def __add__(self, other: Checksum) -> Checksum:
        return Checksum(
            self.rows + other.rows, self.hash_sum + other.hash_sum, self.hash_xor ^ other.hash_xor
        )


def total(chunks: dict[int, Checksum]) -> Checksum:
    result = Checksum()
    for checksum in chunks.values():
        result = result + checksum
    return result


def differing_chunks(left: dict[int, Checksum], right: dict[int, Checksum]) -> list[int]:
    """Chunk ids whose checksums differ (a chunk missing on one side counts as empty there)."""
    return sorted(c for c in set(left) | set(right) if left.get(c, Checksum()) != right.get(c, Checksum()))


class DiffKind(Enum):
    ONLY_LEFT = "only in {left}"
    ONLY_RIGHT = "only in {right}"
    DIFFERENT = "values differ"


@dataclass(frozen=True)
class RowDiff:
    """One key whose rows differ: its key and both rows as canonical JSON (None: no row on that side)."""

    key: str
    left: str | None
    right: str | None

    @property
    def kind(self) -> DiffKind:
        if self.right is None:
            return DiffKind.ONLY_LEFT
        if self.left is None:
            return DiffKind.ONLY_RIGHT
        return DiffKind.DIFFERENT


@dataclass(frozen=True)
class TableVerdict:
    """The comparison of one table: both checksums, the chunks and rows that differ, and notes (columns
    on one side only, rows that could not be read)."""

    table: str
    left: Checksum
    right: Checksum
    chunks: int
    differing_chunks: int = 0
    differing_rows: int = 0
    diffs: tuple[RowDiff, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def matches(self) -> bool:
        return self.left == self.right and not self.differing_rows and not self.notes


@dataclass(frozen=True)
class VerifyReport:
    """A verification of every table: which sides were compared, as of which TSO, and per table."""

    left: str
    right: str
    tso: int
    tables: tuple[TableVerdict, ...]
    notes: tuple[str, ...] = ()

    @property
    def matches(self) -> bool:
        return all(t.matches for t in self.tables)

    def render(self, max_rows: int = 20) -> str:
        """The summary table, then for each mismatch its notes and the first differing keys."""
        lines = [
            *self.notes,
            f"{'table':<32} {'result':<9} {self.left + ' rows':>16} {self.right + ' rows':>16} "
            f"{'chunks':>7} {'differ':>7} {'rows differ':>11}",
        ]
        for t in self.tables:
            result = "match" if t.matches else "MISMATCH"
            lines.append(
                f"{t.table:<32} {result:<9} {t.left.rows:>16} {t.right.rows:>16} "
                f"{t.chunks:>7} {t.differing_chunks:>7} {t.differing_rows:>11}"
            )
        for t in self.tables:
            if t.matches:
                continue
            lines.append(f"{t.table}:")
            lines += [f"  {note}" for note in t.notes]
            for diff in t.diffs[:max_rows]:
                kind = diff.kind.value.format(left=self.left, right=self.right)
                lines.append(f"  key {diff.key}: {kind}")
                if diff.left is not None:
                    lines.append(f"    {self.left}: {diff.left}")
                if diff.right is not None:
                    lines.append(f"    {self.right}: {diff.right}")
            if len(t.diffs) > max_rows:
                lines.append(f"  ... {len(t.diffs) - max_rows} more keys listed in the report")
        verdict = "MATCH" if self.matches else "MISMATCH"
        lines.append(f"{verdict}: {sum(t.matches for t in self.tables)} of {len(self.tables)} tables match")
        return "\n".join(lines)
