"""``MemoryObjectStore``: objects in a dict, for tests and scratch work.

The same ids, errors and size cap as the loose store, and no files.
"""

from __future__ import annotations

from collections.abc import Iterator

import blake3

from ctxstore.errors import HashMismatch, InvalidEnvelope, ObjectNotFound
from ctxstore.ids import ObjectId
from ctxstore.objects.envelope import (
    DEFAULT_MAX_OBJECT_BYTES,
    HEADER_SIZE,
    StoredObject,
    canonical_bytes,
    parse_envelope,
)
from ctxstore.objects.protocol import _resolve

__all__ = ["MemoryObjectStore"]

_MEMORY_PATH = "<memory>"


class MemoryObjectStore:
    """Objects in a dict, keyed by id (implements ``ObjectStore``; no files, no locks).

    It keeps the canonical bytes, so ids never depend on compression, and a read
    re-hashes and re-parses them exactly as the loose store does after decompressing:
    a test that damages ``objects[oid]`` sees the same errors a damaged file gives.
    """

    def __init__(self, *, max_object_bytes: int = DEFAULT_MAX_OBJECT_BYTES) -> None:
        """Create an empty store.

        Args:
            max_object_bytes: The largest payload a read accepts (the loose store's cap).
        """
        self.max_object_bytes = max_object_bytes
        self.objects: dict[ObjectId, bytes] = {}

    def write(self, kind: int, payload: bytes) -> tuple[ObjectId, bool]:
        """Store an object unless an intact copy is already there.

        Args:
            kind: ``KIND_BLOB`` or ``KIND_TYPED``.
            payload: The object's bytes.

        Returns:
            The id and whether it was stored (False: deduplicated).
        """
        canon = canonical_bytes(kind, payload)
        oid = ObjectId(blake3.blake3(canon).digest())
        if self.objects.get(oid) == canon:
            return oid, False
        self.objects[oid] = canon  # a damaged entry is replaced, as the loose store does
        return oid, True

    def read(self, oid: ObjectId, *, max_payload: int | None = None) -> StoredObject:
        """Return the verified object ``oid``.

        Args:
            oid: The object's id.
            max_payload: The largest payload this read accepts (None: ``max_object_bytes``).

        Returns:
            Its id, kind and payload.

        Raises:
            ObjectNotFound: (E001) if there is no such object.
            InvalidEnvelope: (E003) if it is malformed or over its cap.
            HashMismatch: (E002) if its content does not hash to ``oid``.
        """
        canon = self.objects.get(oid)
        if canon is None:
            raise ObjectNotFound(oid)
        cap = (self.max_object_bytes if max_payload is None
               else min(max_payload, self.max_object_bytes)) + HEADER_SIZE
        if len(canon) > cap:
            # The loose store refuses the declared frame size before decoding; same words.
            raise InvalidEnvelope(oid, path=_MEMORY_PATH,
                                  detail=f"declares {len(canon)} bytes, over the {cap}-byte limit")
        digest = blake3.blake3(canon).digest()
        if digest != oid:
            raise HashMismatch(oid, path=_MEMORY_PATH, actual=digest)
        kind, payload = parse_envelope(canon, oid=oid, path=_MEMORY_PATH)
        return StoredObject(oid, kind, payload)

    def exists(self, oid: ObjectId) -> bool:
        """Return True if the store holds ``oid`` (without verifying it).

        Args:
            oid: The object's id.

        Returns:
            Whether an object is stored under that id.
        """
        return oid in self.objects

    def iter_ids(self) -> Iterator[ObjectId]:
        """Yield every stored id, ascending (a snapshot: writing while iterating is safe).

        Returns:
            An iterator over ids.
        """
        yield from sorted(self.objects)

    def resolve_prefix(self, prefix: str) -> ObjectId:
        """Resolve a unique hex prefix (4 to 64 characters) among the objects held.

        Raises:
            InvalidInput, ObjectNotFound, AmbiguousPrefix: as ``ObjectStore.resolve_prefix``.
        """
        return _resolve(prefix, self.exists, lambda p: sorted(
            name for name in (oid.hex() for oid in self.objects) if name.startswith(p)))
