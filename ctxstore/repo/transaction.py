"""``Transaction``: objects first, one durability barrier, then pointers by compare-and-swap.

It writes objects (temp + rename, no fsync), then issues one durability barrier for all of
them, then moves pointers by compare-and-swap under the lock. So no pointer ever names an
object that is not durable, and a transaction of N objects pays one barrier, not N fsyncs. A
transaction that moves a canonical ref first *promotes* what the new commit reaches from the
clone's staging area to the committed area, inside the same barrier.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, Protocol

from ctxstore import fsio, refs
from ctxstore.errors import BudgetExceeded, ObjectNotFound, StagingConflict, StorageIOError
from ctxstore.model import ChangeBatch, Commit, decode_typed, encode_typed
from ctxstore.model.references import ABORTED_WORK, iter_references
from ctxstore.objects import KIND_BLOB, KIND_TYPED, ObjectId
from ctxstore.records import dataclass
from ctxstore.refs import Pointer
from ctxstore.repo.caps import _TYPED_CAPS, MAX_BATCH_BYTES

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ctxstore.model import TypedObject
    from ctxstore.model.knowledge import KnowledgeRecord
    from ctxstore.objects import LayeredObjectStore
    from ctxstore.repo.cache import ObjectCache

__all__ = ["Transaction", "TransactionStore"]

# Up to this many objects a transaction fsyncs each file and its directory; above it, one
# filesystem-wide barrier (syncfs) is cheaper. Small writes thus never wait for other
# processes' dirty data, which syncfs would flush too.
SMALL_TRANSACTION = 32


class TransactionStore(Protocol):
    """What a ``Transaction`` needs of the store that opens it (``repo.store.Store``).

    A protocol, not the class, so that the store can open transactions without the two
    modules importing each other.
    """

    root: Path
    objects: LayeredObjectStore
    _cache: ObjectCache

    def lock(self) -> AbstractContextManager[None]:
        """The writer lock, held for the transaction's life."""

    def ensure_staging_area(self) -> None:
        """Create the clone's staging area before the first object is written."""

    def read_typed(self, oid: ObjectId, expect: Any = None) -> Any:
        """Read and decode a typed object (checks a pointer's target before it moves)."""


@dataclass
class _PointerMove:
    name: str
    expected: Pointer | None
    new: ObjectId | None
    expect_type: type | tuple[type, ...]


class Transaction:
    """Objects first, one barrier, then pointers: see the module docstring.

    Use as ``with store.transaction() as tx: ...``. Leaving the block normally
    commits; an exception abandons it (objects already written stay unreachable
    until ``ctx gc``; no pointer moves).
    """

    def __init__(self, store: TransactionStore) -> None:
        self.store = store
        self.written: list[ObjectId] = []
        self._touched = False
        self._oids: list[ObjectId] = []
        self._moves: list[_PointerMove] = []
        self._promote_roots: list[ObjectId] = []
        self._pruned_ids: frozenset[bytes] | None = None  # ctxstore.prunedlist, read when needed
        self._lock_cm = store.lock()
        self.done = False

    def __enter__(self) -> Transaction:
        self._lock_cm.__enter__()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> Literal[False]:
        try:
            if exc_type is None:
                self.commit()
        finally:
            self._lock_cm.__exit__(exc_type, exc, tb)
        return False

    def _put(self, kind: int, payload: bytes) -> ObjectId:
        try:
            self.store.ensure_staging_area()
            oid, wrote = self.store.objects.write(kind, payload)
        except OSError as exc:
            raise StorageIOError(exc.filename or str(self.store.objects.root),
                                 op="writing an object", error=exc) from exc
        self._touched = True
        # Deduplicated objects count too: an existing file may have been left by a
        # writer that died before its barrier, so it is made durable here as well.
        self._oids.append(oid)
        if wrote:
            self.written.append(oid)
        return oid

    def put(self, obj: TypedObject) -> ObjectId:
        """Store a typed record; return its id.

        Raises:
            BudgetExceeded: (E010) if a commit is larger than a read of one accepts
                (``MAX_COMMIT_BYTES``): nothing is written that could not be read back.
        """
        payload = encode_typed(obj)
        cap = _TYPED_CAPS.get(type(obj))
        if cap is not None and len(payload) > cap:
            raise BudgetExceeded(f"a {type(obj).TYPE} of {len(payload)} bytes is over the "
                                 f"{cap}-byte limit of its kind")
        oid = self._put(KIND_TYPED, payload)
        self.store._cache[oid] = obj
        return oid

    def put_records(self, records: Sequence[KnowledgeRecord], *, created_at: int,
                    author: str | None) -> list[ObjectId]:
        """Store knowledge records as change batches, in order; return the batches' ids.

        One batch holds them unless its payload would pass ``MAX_BATCH_BYTES``; then they
        are split, in order, over as many batches as keep each under it.

        Raises:
            BudgetExceeded: (E010) if a single record is over the limit.
            UnicodeEncodeError: for text that is not valid Unicode (nothing is written).
        """
        pending: list[tuple[int, int]] = [(0, len(records))]
        payloads: list[bytes] = []
        while pending:
            lo, hi = pending.pop()
            payload = encode_typed(ChangeBatch(created_at=created_at, author=author,
                                               records=tuple(records[lo:hi])))
            if len(payload) <= MAX_BATCH_BYTES:
                payloads.append(payload)
            elif hi - lo == 1:
                raise BudgetExceeded(f"a knowledge record of {len(payload)} bytes is over the "
                                     f"{MAX_BATCH_BYTES}-byte limit of a change batch")
            else:  # the second half first: the stack pops the first half next
                mid = (lo + hi) // 2
                pending += [(mid, hi), (lo, mid)]
        return [self._put(KIND_TYPED, payload) for payload in payloads]

    def put_blob(self, data: bytes) -> ObjectId:
        """Store raw bytes; return their id."""
        return self._put(KIND_BLOB, data)

    def put_payload(self, payload: bytes) -> ObjectId:
        """Store a typed record already encoded by ``encode_typed`` (in another process)."""
        return self._put(KIND_TYPED, payload)

    def adopt(self, oid: ObjectId, kind: int, payload: bytes) -> ObjectId:
        """Take in an object this command wrote before the lock (in a worker process).

        It is made durable with this transaction's own objects. A file that is no longer
        there (an aggressive gc ran in between) is written again from ``payload``.

        Args:
            oid: The object's id, as the writer computed it from ``payload``.
            kind: ``KIND_BLOB`` or ``KIND_TYPED``.
            payload: The object's payload (raw bytes, or an encoded typed record).

        Returns:
            ``oid``.

        Raises:
            StorageIOError: if it has to be written again and cannot be.
        """
        if not self.store.objects.exists(oid):
            return self._put(kind, payload)
        self._touched = True
        self._oids.append(oid)
        return oid

    def _promote(self) -> list[Path]:
        """Copy what each canonical ref move reaches from the staging area to the committed one.

        Walks from each new ``refs/*`` target along ``iter_references`` and stops at objects
        already committed (whose own closure is committed). An abort commit's
        ``aborted_work`` stays behind: aborted steps never leave this clone.

        Returns:
            The new files in the committed area.

        Raises:
            ObjectNotFound, HashMismatch, InvalidEnvelope: for a missing or damaged staging
                object (nothing is promoted from damage; no pointer moves).
            OSError: if a copy cannot be written.
        """
        objects = self.store.objects
        stack = [m.new for m in self._moves if m.new is not None and m.name.startswith("refs/")]
        stack += self._promote_roots
        seen: set[bytes] = set()
        copied: list[Path] = []
        while stack:
            oid = ObjectId(stack.pop())
            if oid in seen or objects.is_canonical(oid):
                continue
            seen.add(oid)
            try:
                stored, path = objects.promote(oid)
            except ObjectNotFound:
                if self._pruned(oid):
                    continue  # `ctx gc` pruned it (an older ctx's code index): never promoted
                raise
            if path is not None:
                copied.append(path)
            if stored.kind == KIND_TYPED:
                obj = self.store._cache.get(oid) or decode_typed(stored.payload, oid=oid)
                stack.extend(ObjectId(ref) for ref, want in iter_references(obj)
                             if want is not ABORTED_WORK)
        return copied

    def _pruned(self, oid: ObjectId) -> bool:
        """Whether a list of ``ctx gc`` names ``oid`` (``ctxstore.prunedlist``): read once, when asked."""
        from ctxstore.prunedlist import read_pruned

        if self._pruned_ids is None:
            self._pruned_ids = read_pruned(self.store.root).ids
        return oid in self._pruned_ids

    def _make_durable(self, promoted: list[Path]) -> None:
        oids = list(dict.fromkeys(self._oids))
        if len(oids) + len(promoted) > SMALL_TRANSACTION:
            fsio.sync_barrier(self.store.root)
            return
        # Paths only for small transactions: building 10,000 Path objects costs ~4 us each.
        # Every copy: a promoted object's staging file is as new as its committed one.
        paths = list(dict.fromkeys([*(p for oid in oids for p in self.store.objects.paths_for(oid)),
                                    *promoted]))
        for path in paths:
            fsio.fsync_path(path)
        for folder in dict.fromkeys(p.parent for p in paths):
            fsio.fsync_dir(folder)
        for root in dict.fromkeys(p.parent.parent for p in paths):
            fsio.fsync_dir(root)  # a shard directory may be new

    def promote(self, oid: ObjectId) -> None:
        """Promote what ``oid`` reaches to the committed area at commit, as a ``refs/*`` move does.

        For a canonical ref the caller writes itself after the transaction (a ref that
        could not be read, so no compare-and-swap is possible).
        """
        self._promote_roots.append(oid)

    def move_pointer(self, name: str, new: ObjectId | None, *, expected: Pointer | None,
                     expect_type: type | tuple[type, ...] = Commit) -> None:
        """Queue a compare-and-swap of pointer ``name`` (None deletes it).

        ``expected`` is the pointer as read earlier under this lock (None: must be absent).
        """
        self._moves.append(_PointerMove(name, expected, new, expect_type))

    def commit(self) -> None:
        """Make every object durable, then move the queued pointers.

        Raises:
            StorageIOError: if the barrier or a pointer write fails (no pointer moved
                after a failed barrier).
            StagingConflict: if a pointer changed since it was read.
            ObjectNotFound, DeserializationFailed: if a pointer would name a missing
                object or one of the wrong type.
        """
        if self.done:
            return
        self.done = True
        store = self.store
        try:
            promoted = self._promote()
        except OSError as exc:
            raise StorageIOError(str(exc.filename or store.objects.root),
                                 op="promoting objects to the committed area", error=exc) from exc
        if self._touched or promoted:
            try:
                self._make_durable(promoted)
            except OSError as exc:
                raise StorageIOError(str(exc.filename or store.root), op="durability barrier",
                                     error=exc) from exc
        for move in self._moves:
            if move.new is not None:
                # Refuse a pointer to a missing object (E001) or to an object of the
                # wrong type (E004) before touching the pointer file.
                store.read_typed(move.new, move.expect_type)
            current = refs.read_pointer(store.root, move.name)
            if (current.raw if current else None) != (move.expected.raw if move.expected else None):
                raise StagingConflict(f"{move.name} changed while this command ran",
                                      hint="run the command again")
            try:
                if move.new is None:
                    refs.delete_pointer(store.root, move.name)
                else:
                    refs.write_pointer(store.root, move.name, move.new)
            except OSError as exc:
                raise StorageIOError(str(store.root / move.name), op="moving a pointer",
                                     error=exc) from exc
