"""TiCDC-level compression of message values (``large-message-handle-compression``). Pure.

Nothing in a message says it is compressed, so the algorithm is configured. It
applies to every Canal-JSON and Simple message kind, and to claim-check payloads; never to Avro.
"""

from __future__ import annotations

from enum import Enum

import cramjam


class Compression(Enum):
    """The changefeed's ``large-message-handle-compression``."""

    NONE = "none"
    LZ4 = "lz4"  # LZ4 frame format
    SNAPPY = "snappy"  # Snappy raw block format (not framed, not Hadoop/xerial)


def decompress(value: bytes, compression: Compression) -> bytes:
    """The original message bytes.

    Raises:
        ValueError: the bytes are not valid for the configured algorithm.
    """
    if compression is Compression.NONE:
        return value
    try:
        if compression is Compression.LZ4:
            return bytes(cramjam.lz4.decompress(value))
        return bytes(cramjam.snappy.decompress_raw(value))
    except cramjam.DecompressionError as exc:
        raise ValueError(f"not {compression.value}-compressed: {exc}") from exc


def compress(value: bytes, compression: Compression) -> bytes:
    """What TiCDC writes (used by the sample stream and the tests)."""
    if compression is Compression.NONE:
        return value
    if compression is Compression.LZ4:
        return bytes(cramjam.lz4.compress(value))
    return bytes(cramjam.snappy.compress_raw(value))
