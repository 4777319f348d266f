"""``LayeredObjectStore``: the committed canonical objects over this clone's staging objects.

New objects go to the staging area; ``promote`` copies one to the canonical area when a
canonical commit reaches it, so Git only ever sees what a canonical commit names.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from pathlib import Path

import blake3

from ctxstore.errors import ObjectNotFound
from ctxstore.ids import ObjectId
from ctxstore.objects.envelope import StoredObject, canonical_bytes
from ctxstore.objects.loose import LooseObjectStore
from ctxstore.objects.protocol import _resolve

__all__ = ["LayeredObjectStore"]

class LayeredObjectStore:
    """Canonical objects over this clone's staging objects (implements ``ObjectStore``).

    Reads try the canonical area first, then the staging area; ``iter_ids`` and
    ``resolve_prefix`` see the union. Writes go to the staging area unless the canonical
    area already holds an intact copy. ``promote`` copies a staging object to the
    canonical area (the verified file as it is: the id does not change); the caller makes
    the copies durable with its transaction's barrier.
    """

    def __init__(self, canonical: LooseObjectStore, staging: LooseObjectStore) -> None:
        self.canonical = canonical
        self.staging = staging
        self.max_object_bytes = canonical.max_object_bytes

    @property
    def root(self) -> Path:
        """The canonical area's directory (``.ctx/objects``)."""
        return self.canonical.root

    @property
    def roots(self) -> tuple[Path, Path]:
        """Both areas' directories, canonical first."""
        return self.canonical.root, self.staging.root

    def path_for(self, oid: ObjectId) -> Path:
        """The existing file of ``oid`` (canonical first), else where the staging area would put it."""
        path = self.canonical.path_for(oid)
        return path if path.is_file() else self.staging.path_for(oid)

    def paths_for(self, oid: ObjectId) -> list[Path]:
        """Every existing file of ``oid``: a promoted object has two."""
        return [p for p in (self.canonical.path_for(oid), self.staging.path_for(oid)) if p.is_file()]

    def write(self, kind: int, payload: bytes) -> tuple[ObjectId, bool]:
        """Store an object in the staging area unless an intact copy exists in either area.

        Raises:
            OSError: if the file cannot be written.
        """
        canon = canonical_bytes(kind, payload)
        oid = ObjectId(blake3.blake3(canon).digest())
        if self.canonical.path_for(oid).is_file():
            # Reads try the canonical copy first: a damaged one is repaired in place.
            return oid, self.canonical.store_canonical(oid, canon)
        return oid, self.staging.store_canonical(oid, canon)

    def read(self, oid: ObjectId, *, max_payload: int | None = None) -> StoredObject:
        """Read and verify ``oid`` from the canonical area, else from the staging area.

        Raises:
            The errors of ``LooseObjectStore.read``.
        """
        try:
            return self.canonical.read(oid, max_payload=max_payload)
        except ObjectNotFound:
            return self.staging.read(oid, max_payload=max_payload)

    def exists(self, oid: ObjectId) -> bool:
        """True if either area holds a file for ``oid`` (unverified)."""
        return self.canonical.exists(oid) or self.staging.exists(oid)

    def is_canonical(self, oid: ObjectId) -> bool:
        """True if the canonical (committed) area holds a file for ``oid``."""
        return self.canonical.exists(oid)

    def promote(self, oid: ObjectId) -> tuple[StoredObject, Path | None]:
        """Copy ``oid`` from the staging area to the canonical area, verified, if not there yet.

        Returns:
            The object, and the new canonical file (None: it was already canonical).

        Raises:
            The errors of ``LooseObjectStore.read`` (a missing or damaged staging object
            is never copied), OSError if the copy cannot be written.
        """
        path = self.canonical.path_for(oid)
        if path.is_file():
            return self.canonical.read(oid), None
        stored, raw = self.staging.read_file(oid)
        self.canonical.store_file(oid, raw)
        return stored, path

    def iter_ids(self) -> Iterator[ObjectId]:
        """Every id in either area, ascending, each once.

        Raises:
            UnsafePath: (E020) if a shard directory is a symlink or not a directory.
        """
        last = None
        for oid in heapq.merge(self.canonical.iter_ids(), self.staging.iter_ids()):
            if oid != last:
                yield oid
                last = oid

    def iter_tmp_files(self) -> Iterator[Path]:
        """Leftover temp files of both areas."""
        yield from self.canonical.iter_tmp_files()
        yield from self.staging.iter_tmp_files()

    def resolve_prefix(self, prefix: str) -> ObjectId:
        """Resolve a unique hex prefix over both areas.

        Raises:
            InvalidInput, ObjectNotFound, AmbiguousPrefix: as ``LooseObjectStore.resolve_prefix``.
        """
        return _resolve(prefix, self.exists, lambda p: sorted(
            set(self.canonical.names_with_prefix(p)) | set(self.staging.names_with_prefix(p))))
