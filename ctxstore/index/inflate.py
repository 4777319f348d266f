"""Bounded zlib decompression of the index's compressed values (file postings, file texts).

A value in the index file is untrusted input (the file may be damaged or forged): it is never
inflated past a limit the caller derives from the row (the file's size), and whether the
stream ended within it is reported so that the caller can call a cut-off value damaged.
Standard library only: the hooks' readers import it.
"""

from __future__ import annotations

import zlib

__all__ = ["inflate"]


def inflate(data: bytes, limit: int) -> tuple[bytes, bool]:
    """At most ``limit`` bytes of the zlib stream ``data``, and whether the stream ended there.

    Args:
        data: A zlib stream.
        limit: The most bytes decompressed (at least 1).

    Returns:
        The bytes, and True only when the stream was complete within ``limit`` bytes.

    Raises:
        zlib.error: if ``data`` is not a zlib stream.
        TypeError: if ``data`` is not bytes-like.
    """
    decompressor = zlib.decompressobj()
    raw = decompressor.decompress(data, limit)
    return raw, decompressor.eof and not decompressor.unconsumed_tail
