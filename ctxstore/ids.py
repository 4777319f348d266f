"""Identifiers: object ids (32 raw bytes), node ids (ULIDs) and the form of Git's ids.

Owns ``ObjectId`` and its one text form at the edges (``oid.hex()`` out,
``parse_object_id`` in), the ULID node ids: their alphabet, generation and
validation, and ``is_git_id`` (a Git commit or tree id as Git writes it). It must not
touch the store, the clock module or anything above ``errors`` (STYLE §2.2): every layer
imports it, hooks included.

The ULID code is hand-written on purpose. ``python-ulid`` would replace some twenty
lines, but importing it pulls in ``uuid``, ``importlib.metadata``, ``inspect`` and
``typing_extensions``: measured with ``python -X importtime``, about 16 ms on top of what
a hook already imports, against 0.2 ms for this module, and hooks run on every prompt.
The text format is fixed: stores committed to Git hold these ids.
"""

from __future__ import annotations

import os
import time
from typing import NewType

from ctxstore.errors import InvalidInput

__all__ = [
    "ObjectId",
    "NodeId",
    "OBJECT_ID_BYTES",
    "ULID_ALPHABET",
    "ULID_LENGTH",
    "parse_object_id",
    "new_ulid",
    "is_ulid",
    "ulid_time_ms",
    "is_git_id",
]

ObjectId = NewType("ObjectId", bytes)
"""32 raw bytes: the BLAKE3 hash of an object's canonical bytes (DESIGN §3)."""
NodeId = NewType("NodeId", str)
"""A knowledge node id: a 26-character ULID."""

OBJECT_ID_BYTES = 32
_HEX = frozenset("0123456789abcdef")

# Crockford base32 (no I, L, O, U), most significant 5 bits first: 48 bits of
# milliseconds then 80 random bits, 130 bits of text for 128 of value, so the first
# character is at most "7".
ULID_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
ULID_LENGTH = 26
_ULID_CHARS = frozenset(ULID_ALPHABET)
_ULID_FIRST = frozenset("01234567")
_TIME_CHARS = 10


def parse_object_id(text: str) -> ObjectId:
    """Parse 64 lowercase hex characters into an ObjectId.

    Args:
        text: The hex form of an object id, as ``oid.hex()`` writes it.

    Returns:
        The 32 raw bytes.

    Raises:
        InvalidInput: if ``text`` is not exactly 64 lowercase hex characters.
    """
    if len(text) != 64 or not _HEX.issuperset(text):
        raise InvalidInput(f"not an object id: {text[:80]!r} (want 64 lowercase hex characters)")
    return ObjectId(bytes.fromhex(text))


def new_ulid(*, now_ms: int | None = None) -> NodeId:
    """Return a new ULID: 48 bits of milliseconds and 80 fresh random bits.

    The random part is drawn anew even within one millisecond (not incremented), so
    ids made together still differ early enough for short prefixes to tell them apart.
    Ids made in different milliseconds sort in time order.

    Args:
        now_ms: The millisecond timestamp to encode; the wall clock when None.

    Returns:
        26 characters of Crockford base32.
    """
    ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    value = ((ms & ((1 << 48) - 1)) << 80) | int.from_bytes(os.urandom(10), "big")
    return NodeId("".join(ULID_ALPHABET[(value >> shift) & 31] for shift in range(125, -1, -5)))


def is_ulid(text: object) -> bool:
    """Whether ``text`` is a ULID as ``new_ulid`` writes it (upper case, 26 characters).

    Args:
        text: Any value (import documents are untrusted JSON).

    Returns:
        True for a well-formed ULID.
    """
    return (isinstance(text, str) and len(text) == ULID_LENGTH and text[0] in _ULID_FIRST
            and _ULID_CHARS.issuperset(text))


def ulid_time_ms(text: str) -> int:
    """The millisecond timestamp a ULID encodes.

    Args:
        text: A ULID.

    Returns:
        Milliseconds since the epoch.

    Raises:
        InvalidInput: if ``text`` is not a ULID.
    """
    if not is_ulid(text):
        raise InvalidInput(f"not a node id: {str(text)[:80]!r} (want a 26-character ULID)")
    ms = 0
    for ch in text[:_TIME_CHARS]:
        ms = ms * 32 + ULID_ALPHABET.index(ch)
    return ms


def is_git_id(value: str) -> bool:
    """Whether ``value`` is a Git object id as Git writes it (40 or 64 lowercase hex digits)."""
    return len(value) in (40, 64) and set(value) <= _HEX
