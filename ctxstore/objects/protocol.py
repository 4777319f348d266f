"""``ObjectStore``, the protocol the library programs against, and id prefix resolution.

Every implementation (``loose``, ``layered``, ``memory``) is checked by one contract suite
(``tests/contracts/test_object_store.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol, runtime_checkable

from ctxstore.errors import AmbiguousPrefix, InvalidInput, ObjectNotFound
from ctxstore.ids import ObjectId, parse_object_id
from ctxstore.objects.envelope import _HEX, StoredObject

__all__ = ["ObjectStore"]

@runtime_checkable
class ObjectStore(Protocol):
    """What the library needs of an object store: content-addressed, verified bytes.

    Every implementation gives the same ids for the same (kind, payload), raises the
    same errors (``ObjectNotFound``, ``AmbiguousPrefix``, ``InvalidInput``,
    ``InvalidEnvelope`` for an object over ``max_object_bytes``) and enumerates ids in
    ascending byte order. ``tests/contracts/test_object_store.py`` runs against each.
    """

    max_object_bytes: int

    def write(self, kind: int, payload: bytes) -> tuple[ObjectId, bool]:
        """Store an object unless an intact copy is already there.

        Args:
            kind: ``KIND_BLOB`` or ``KIND_TYPED``.
            payload: The object's bytes (the envelope is added by the store).

        Returns:
            The id and whether the object was written (False: deduplicated).

        Raises:
            OSError: if a file-backed store cannot write.
        """
        ...

    def read(self, oid: ObjectId, *, max_payload: int | None = None) -> StoredObject:
        """Return the verified object ``oid``.

        Args:
            oid: The object's id.
            max_payload: The largest payload this read accepts, when the caller knows its
                kind needs less than ``max_object_bytes`` (a commit); None: that cap.

        Returns:
            Its id, kind and payload.

        Raises:
            ObjectNotFound: (E001) if there is no such object.
            InvalidEnvelope: (E003) if it is malformed or over its cap.
            HashMismatch: (E002) if its content does not hash to ``oid``.
            OutOfMemory: (E010) if a valid object is larger than the memory available.
        """
        ...

    def exists(self, oid: ObjectId) -> bool:
        """Return True if the store holds ``oid`` (without verifying it).

        Args:
            oid: The object's id.

        Returns:
            Whether an object is stored under that id.
        """
        ...

    def iter_ids(self) -> Iterator[ObjectId]:
        """Yield the id of every stored object (unverified), ascending.

        Returns:
            An iterator over ids.
        """
        ...

    def resolve_prefix(self, prefix: str) -> ObjectId:
        """Resolve a unique hex prefix (4 to 64 characters) to an id.

        Args:
            prefix: Hex text, case-insensitive, surrounding white space ignored.

        Returns:
            The one id that starts with ``prefix``.

        Raises:
            InvalidInput: if the prefix is too short or not hex.
            ObjectNotFound: (E001) if nothing matches.
            AmbiguousPrefix: (E016) if several objects match.
        """
        ...


def _normalize_prefix(prefix: str) -> str:
    """Lower-case and check an abbreviated id; a full id must be exact hex.

    Raises:
        InvalidInput: if it is under 4 or over 64 characters or not hex.
    """
    prefix = prefix.strip().lower()
    if len(prefix) == 64:
        parse_object_id(prefix)  # raises InvalidInput with its own message
        return prefix
    if not 4 <= len(prefix) <= 64 or not _HEX.issuperset(prefix):
        raise InvalidInput(f"not an object id or prefix: {prefix!r} (want 4-64 hex characters)")
    return prefix


def _resolve(prefix: str, exists: Callable[[ObjectId], bool],
             names_with: Callable[[str], list[str]]) -> ObjectId:
    """Resolve a hex prefix: a full id that ``exists``, else the one name ``names_with`` gives.

    Raises:
        InvalidInput, ObjectNotFound, AmbiguousPrefix: as ``LooseObjectStore.resolve_prefix``.
    """
    prefix = _normalize_prefix(prefix)
    if len(prefix) == 64:
        oid = ObjectId(bytes.fromhex(prefix))
        if not exists(oid):
            raise ObjectNotFound(prefix)
        return oid
    return _unique_match(prefix, names_with(prefix))


def _unique_match(prefix: str, names: list[str]) -> ObjectId:
    """Return the one id among sorted hex ``names``.

    Raises:
        ObjectNotFound: if ``names`` is empty.
        AmbiguousPrefix: if it holds several.
    """
    if not names:
        raise ObjectNotFound(prefix)
    if len(names) > 1:
        raise AmbiguousPrefix(prefix, names)
    return ObjectId(bytes.fromhex(names[0]))
