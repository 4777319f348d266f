"""A file's own term list (``file_postings``): its ranking postings, file-major, in one value.

``file_term_rows`` holds the ranking postings term-major (``(term, field, file)``: what a pack
reads). The other direction (a file's postings: to delete them, for Tantivy's copy, for the
terms an explained hit holds) is this value, one per file, instead of a second b-tree over
the postings (code schema 8: the postings' file index was 26.5 MB at 10,000 files; these
values take about 5 MB).

The value is ``zlib`` over little-endian signed 64-bit integers: the number of body terms
and of path terms, then per field (body, then path) the term ids ascending as differences
from the previous one, then their counts in the same order. Decompression is bounded by the
file's size (``limit``): a forged row cannot make a reader inflate without bound.

No SQL here, and nothing heavy imported: ``search.rows`` decodes these too.
"""

from __future__ import annotations

import sys
import zlib
from array import array
from collections.abc import Mapping

from ctxstore.index.inflate import inflate

__all__ = ["BODY", "PATH", "pack_postings", "posting_limit", "unpack_postings"]

BODY, PATH = 0, 1  # ``file_term_rows.field``


def _ints(values: list[int]) -> bytes:
    out = array("q", values)
    if sys.byteorder == "big":  # pragma: no cover - the value is little-endian everywhere
        out.byteswap()
    return out.tobytes()


def pack_postings(body: Mapping[int, int], path: Mapping[int, int]) -> bytes:
    """The value of a file's postings: term id -> count, for its body and for its path."""
    values = [len(body), len(path)]
    for terms in (body, path):
        ids = sorted(terms)
        previous = 0
        for term in ids:
            values.append(term - previous)
            previous = term
        values.extend(terms[t] for t in ids)
    return zlib.compress(_ints(values), 6)


def posting_limit(byte_count: int) -> int:
    """The most a file of ``byte_count`` bytes can decompress to (its terms, and its path's)."""
    return 64 * (max(byte_count, 0) + 4096)


def unpack_postings(data: bytes, limit: int) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """``(body, path)``: each a list of ``(term id, count)``, ids ascending.

    Args:
        data: A ``file_postings`` value.
        limit: At most this many bytes are decompressed (``posting_limit``).

    Raises:
        ValueError: The value is damaged (does not decompress, is longer than ``limit``,
            or does not hold what its counts say).
    """
    try:
        raw, whole = inflate(data, limit)
    except (zlib.error, TypeError) as exc:
        raise ValueError(f"a file_postings value does not decompress ({exc})") from exc
    if not whole or len(raw) % 8:
        raise ValueError("a file_postings value is truncated or too long")
    values = array("q")
    values.frombytes(raw)
    if sys.byteorder == "big":  # pragma: no cover
        values.byteswap()
    if len(values) < 2 or values[0] < 0 or values[1] < 0 \
            or len(values) != 2 + 2 * (values[0] + values[1]):
        raise ValueError("a file_postings value does not hold what its counts say")
    out: list[list[tuple[int, int]]] = []
    at = 2
    for count in (values[0], values[1]):
        ids, term = [], 0
        for delta in values[at:at + count]:
            term += delta
            ids.append(term)
        out.append(list(zip(ids, values[at + count:at + 2 * count], strict=True)))
        at += 2 * count
    return out[0], out[1]
