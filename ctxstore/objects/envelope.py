"""The CTXO1 envelope: an object's canonical bytes, its id, and parsing them back.

An object's canonical bytes are ``b"CTXO1" + kind + u64le(len(payload)) + payload``; its id
is the BLAKE3 hash of those bytes. ``StoredObject`` is what a read returns.
"""

from __future__ import annotations

import struct

import blake3

from ctxstore.errors import InvalidEnvelope
from ctxstore.ids import ObjectId
from ctxstore.records import dataclass

__all__ = ["ENVELOPE_MAGIC", "KIND_BLOB", "KIND_TYPED", "HEADER_SIZE", "DEFAULT_MAX_OBJECT_BYTES",
           "RETAIN_BYTES", "canonical_bytes", "object_id_of", "parse_envelope", "StoredObject"]

ENVELOPE_MAGIC = b"CTXO1"
KIND_BLOB = 1
KIND_TYPED = 2
_KINDS = (KIND_BLOB, KIND_TYPED)
_HEADER = struct.Struct("<5sBQ")
HEADER_SIZE = _HEADER.size  # 14
DEFAULT_MAX_OBJECT_BYTES = 1 << 30
# Objects up to this size are decoded in one pass and then hashed; a larger one is hashed
# while it streams (``_CHUNK`` at a time) and decoded again only once it verified.
RETAIN_BYTES = 64 << 20
_CHUNK = 1 << 20
# The largest zstd window a streamed read allocates (zstd's own default limit, level 22's
# window): a frame asking for more is refused, never given the memory.
_MAX_WINDOW = 1 << 27
_HEX = frozenset("0123456789abcdef")


def canonical_bytes(kind: int, payload: bytes) -> bytes:
    """Return the envelope of ``payload``: the bytes an object id is computed over."""
    return _HEADER.pack(ENVELOPE_MAGIC, kind, len(payload)) + payload


def object_id_of(kind: int, payload: bytes) -> ObjectId:
    """Return the id an object with this kind and payload has (pure)."""
    return ObjectId(blake3.blake3(canonical_bytes(kind, payload)).digest())


def parse_envelope(data: bytes, *, oid: bytes | None = None, path: str = "?") -> tuple[int, bytes]:
    """Split canonical bytes into (kind, payload), checking magic, kind and length.

    Raises:
        InvalidEnvelope: if the bytes are not a well-formed CTXO1 envelope.
    """
    if len(data) < HEADER_SIZE:
        raise InvalidEnvelope(oid, path=path, detail=f"envelope too short ({len(data)} bytes)")
    magic, kind, length = _HEADER.unpack_from(data)
    if magic != ENVELOPE_MAGIC:
        raise InvalidEnvelope(oid, path=path, detail=f"unknown envelope magic {magic!r}")
    if kind not in _KINDS:
        raise InvalidEnvelope(oid, path=path, detail=f"unknown object kind {kind}")
    if length != len(data) - HEADER_SIZE:
        raise InvalidEnvelope(
            oid, path=path,
            detail=f"envelope declares {length} payload bytes but holds {len(data) - HEADER_SIZE}",
        )
    return kind, data[HEADER_SIZE:]


@dataclass(frozen=True, slots=True)
class StoredObject:
    """A verified object: its id, kind and payload."""

    oid: ObjectId
    kind: int
    payload: bytes
