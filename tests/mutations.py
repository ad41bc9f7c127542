"""Byte mutations shared by the decoder fuzz tests (Hypothesis strategies and how to apply them)."""

from __future__ import annotations

from hypothesis import strategies as st

BYTE_MUTATION = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 10_000), st.integers(1, 255)),
    st.tuples(st.just("truncate"), st.integers(0, 10_000)),
    st.tuples(st.just("insert"), st.integers(0, 10_000), st.binary(min_size=1, max_size=4)),
)


def mutate_bytes(value: bytes, op: tuple) -> bytes:
    """Flip one byte, truncate, or insert a few bytes, at a position taken modulo the length."""
    if op[0] == "flip":
        i = op[1] % max(len(value), 1)
        return value[:i] + bytes([value[i] ^ op[2]]) + value[i + 1 :] if value else value
    if op[0] == "truncate":
        return value[: op[1] % max(len(value), 1)]
    i = op[1] % (len(value) + 1)
    return value[:i] + op[2] + value[i:]
