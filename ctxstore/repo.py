"""The store handle: discovery, opening, the writer lock, transactions and history.

A ``Transaction`` is the only way objects become reachable: it writes objects (temp +
rename, no fsync), then issues one durability barrier for all of them, then moves
pointers by compare-and-swap under the lock. So no pointer ever names an object that
is not durable, and a transaction of N objects pays one barrier, not N fsyncs.

New objects land in this clone's staging area (``.ctx/local/work/objects``, never
committed). A transaction that moves a canonical ref (``refs/*``) first *promotes* what
the new commit reaches to the committed area (``.ctx/objects``), inside the same
barrier: Git sees canonical commits and what they name, never the per-write work of a
session, and no committed object refers to one that exists only in a clone's staging
area (docs/git.md, "Where objects live").

A writer refuses a store of an older layout whose committed ``.ctx/STAGE`` names staged
work (``UpgradeRequired``): folding that work is the explicit ``ctx upgrade``, never a side
effect of the first write. This module imports nothing above the storage layer.
"""

from __future__ import annotations

import heapq
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Literal, TypeVar

from ctxstore import fsio, refs
from ctxstore.clock import now_ms  # re-exported: the clock owns the wall clock
from ctxstore.config import Config
from ctxstore.discovery import (
    CTX_DIRNAME,
    STORE_DIRS,
    STORE_FILES,
    check_layout,
    check_store,
    discover_store,
)
from ctxstore.errors import (
    BudgetExceeded,
    CommitOrphan,
    CtxError,
    DeserializationFailed,
    ObjectNotFound,
    RefNotFound,
    StagingConflict,
    StorageIOError,
    UpgradeRequired,
)
from ctxstore.limits import load_store_config
from ctxstore.model import ChangeBatch, Commit, WorkCommit, decode_typed, encode_typed
from ctxstore.model.commit import CommitV2
from ctxstore.model.references import ABORTED_WORK, iter_references
from ctxstore.objects import KIND_BLOB, KIND_TYPED, LayeredObjectStore, LooseObjectStore, ObjectId
from ctxstore.records import dataclass
from ctxstore.refs import Pointer

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ctxstore.model import TypedObject
    from ctxstore.model.knowledge import KnowledgeRecord

__all__ = [
    "CTX_DIRNAME",
    "MAIN_REF",
    "STAGE_TYPES",
    "type_name",
    "Store",
    "ObjectCache",
    "OBJECT_CACHE_SIZE",
    "Transaction",
    "STORE_DIRS",
    "STORE_FILES",
    "check_layout",
    "discover_store",
    "open_store",
    "now_ms",
    "STAGE_RECOVER_HINT",
    "STAGING_OBJECTS",
    "pointer_target_missing",
    "MAX_BATCH_BYTES",
    "MAX_COMMIT_BYTES",
    "typed_cap",
]

MAIN_REF = "refs/main"
# This clone's staging area: objects no canonical commit names yet (never committed).
STAGING_OBJECTS = "local/work/objects"
# Up to this many objects a transaction fsyncs each file and its directory; above it, one
# filesystem-wide barrier (syncfs) is cheaper. Small writes thus never wait for other
# processes' dirty data, which syncfs would flush too.
SMALL_TRANSACTION = 32
# STAGE (``.ctx/local/STAGE``, per clone) names a work commit while a session is open,
# else the canonical commit the last fold produced.
STAGE_TYPES: tuple[type, ...] = (Commit, WorkCommit)
# Where STAGE is found unreadable or dangling (a crash, a Git operation): the way out.
STAGE_RECOVER_HINT = ("STAGE is damaged (an interrupted write?): run `ctx stage recover` "
                      "to re-link the intact staged work")
T = TypeVar("T")
# A commit or a staging step holds ids and a message: every command and hook reads the head
# commit, so a file claiming more (a decompression bomb planted in a clone) is refused from
# what it declares, before it is decoded. 16 MiB is half a million ids; a write refuses more.
MAX_COMMIT_BYTES = 16 << 20
# A change batch holds the knowledge records of one operation, or of one fold of staged
# work: a write splits its records over as many batches as it needs (``put_records``), so a
# read refuses a batch that declares more than any write makes.
MAX_BATCH_BYTES = 64 << 20
_TYPED_CAPS: dict[type, int] = {Commit: MAX_COMMIT_BYTES, CommitV2: MAX_COMMIT_BYTES,
                                WorkCommit: MAX_COMMIT_BYTES,
                                ChangeBatch: MAX_BATCH_BYTES}


def typed_cap(expect: type | tuple[type, ...] | None) -> int | None:
    """The largest payload an object of the kind(s) ``expect`` may have (None: the store's cap)."""
    if expect is None:
        return None
    caps = [_TYPED_CAPS.get(kind) for kind in (expect if isinstance(expect, tuple) else (expect,))]
    return None if None in caps else max(c for c in caps if c is not None)


def pointer_target_missing(name: str, oid: bytes) -> ObjectNotFound:
    """E001 for an object the pointer ``name`` names and this clone lacks, with its fix.

    A ref (``refs/main``) comes from Git, so its history says who set it; STAGE is this
    clone's own, and ``ctx stage recover`` repairs it.
    """
    if name == "STAGE":
        return ObjectNotFound(oid, referenced_by=name, hint=STAGE_RECOVER_HINT)
    return ObjectNotFound(oid, referenced_by=name, hint=(
        f"`git log -p -- .ctx/{name}` shows which commit set it; `git checkout -- .ctx/{name}` "
        "restores the committed pointer, `ctx debug verify` checks the rest"))
def type_name(expect: type | tuple[type, ...]) -> str:
    """``commit`` / ``commit or work_commit`` for error messages."""
    kinds = expect if isinstance(expect, tuple) else (expect,)
    return " or ".join(k.TYPE for k in kinds)  # type: ignore[attr-defined]


def open_store(ctx_dir: Path) -> Store:
    """Open the store at ``ctx_dir`` (the ``.ctx`` directory itself).

    Raises:
        StoreNotFound: if ``ctx_dir`` is not a store.
        UnsafePath: (E020) if a fixed entry of the store is a symlink or of the wrong
            kind (``check_layout``).
        ConfigInvalid, UnsupportedStoreVersion: for a bad config.toml.

    Its resource limits are decided by ``limits.load_store_config``: a committed config.toml
    raises none without the user's consent.
    """
    ctx_dir = Path(ctx_dir)
    check_store(ctx_dir)
    return Store(ctx_dir.resolve(), load_store_config(ctx_dir))


# Decoded objects a Store keeps: enough for the commit chain and records of a large sync,
# bounded so that a long-lived process (an MCP server) does not grow with the store.
OBJECT_CACHE_SIZE = 4096


class ObjectCache:
    """A least-recently-used map of object id to decoded object, holding at most ``capacity`` entries.

    Objects are immutable, so an entry is never stale.
    """

    def __init__(self, capacity: int) -> None:
        """Args: capacity: The most entries kept (at least 1)."""
        self.capacity = max(1, capacity)
        self._items: OrderedDict[bytes, TypedObject] = OrderedDict()

    def get(self, oid: bytes) -> TypedObject | None:
        """The cached object (now the most recently used), or None."""
        obj = self._items.get(oid)
        if obj is not None:
            self._items.move_to_end(oid)
        return obj

    def __setitem__(self, oid: bytes, obj: TypedObject) -> None:
        self._items[oid] = obj
        self._items.move_to_end(oid)
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)

    def __contains__(self, oid: object) -> bool:
        return oid in self._items

    def __len__(self) -> int:
        return len(self._items)

    def clear(self) -> None:
        """Forget every entry."""
        self._items.clear()


class Store:
    """An open ``.ctx/`` store."""

    def __init__(self, root: Path, config: Config) -> None:
        self.root = root
        self.config = config
        # Loose areas, not any ObjectStore: gc, verify and _make_durable need file paths.
        level = config.get("storage", "compression_level")
        cap = config.get("storage", "max_object_bytes")
        self.objects = LayeredObjectStore(
            LooseObjectStore(root / "objects", compression_level=level, max_object_bytes=cap,
                             anchor=root),
            LooseObjectStore(root / STAGING_OBJECTS, compression_level=level,
                             max_object_bytes=cap, anchor=root))
        self.lock_timeout: float = config.get("lock", "timeout_seconds")
        self._lock_depth = 0
        self._lock_owner: int | None = None
        self._cache = ObjectCache(OBJECT_CACHE_SIZE)
        self._staging_ready = False
        self._stage_checked = False
        self._upgrading = False

    def ensure_staging_area(self) -> None:
        """Create this clone's staging area (``local/work/objects``) durably, once.

        Every directory on the way must be a real directory (E020 otherwise): a planted
        link there would send every staged write outside the store.

        Raises:
            UnsafePath: (E020) naming a link or a file on the way.
            OSError: if a directory cannot be created.
        """
        if self._staging_ready:
            return
        root = self.objects.staging.root
        with fsio.open_dir(self.root) as store_dir:
            created = store_dir.ensure_dir(root)
        if created:
            for folder in (root.parent, root.parent.parent, self.root):
                fsio.fsync_dir(folder)  # each new directory's entry survives a crash
        self._staging_ready = True

    @property
    def worktree(self) -> Path:
        """The directory that holds ``.ctx/`` (the repository root)."""
        return self.root.parent

    # -- locking -------------------------------------------------------------------------
    @contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the writer lock (re-entrant within one thread).

        Raises:
            LockConflict: if another process holds it longer than the configured wait.
            UpgradeRequired: (E026) for a store that ``needs_upgrade`` (outside ``upgrading``);
                the lock is released again.
        """
        me = threading.get_ident()
        if self._lock_depth and self._lock_owner == me:
            self._lock_depth += 1
            try:
                yield
            finally:
                self._lock_depth -= 1
            return
        with fsio.hold_lock(self.root / "LOCK", timeout=self.lock_timeout):
            self._lock_owner, self._lock_depth = me, 1
            try:
                self._check_layout()  # under the lock: the layout cannot change meanwhile
                yield
            finally:
                self._lock_owner, self._lock_depth = None, 0

    @property
    def locked(self) -> bool:
        """True while this thread holds the writer lock."""
        return bool(self._lock_depth) and self._lock_owner == threading.get_ident()

    # -- objects -------------------------------------------------------------------------
    def read_typed(self, oid: ObjectId, expect: type[T] | tuple[type, ...] | None = None) -> T:
        """Read and decode a typed object, optionally requiring its class.

        The read is capped by what ``expect`` may hold (``typed_cap``): a commit file that
        declares gigabytes is refused before it is decoded.

        Raises:
            ObjectNotFound, HashMismatch, InvalidEnvelope: from the object store.
            DeserializationFailed: if it is a blob, undecodable, or not ``expect``.
            OutOfMemory: (E010) if the object does not fit in the memory available.
        """
        obj = self._cache.get(oid)
        if obj is None:
            stored = self.objects.read(oid, max_payload=typed_cap(expect))
            if stored.kind != KIND_TYPED:
                raise DeserializationFailed(oid, detail="is a blob, not a typed object")
            obj = decode_typed(stored.payload, oid=oid)
            self._cache[oid] = obj
        if expect is not None and not isinstance(obj, expect):
            raise DeserializationFailed(
                oid, detail=f"is a {type(obj).TYPE}, expected a {type_name(expect)}")
        return obj  # type: ignore[return-value]

    def read_blob(self, oid: ObjectId) -> bytes:
        """Read a blob's bytes.

        Raises:
            ObjectNotFound, HashMismatch, InvalidEnvelope: from the object store.
            DeserializationFailed: if the object is typed, not a blob.
        """
        stored = self.objects.read(oid)
        if stored.kind != KIND_BLOB:
            raise DeserializationFailed(oid, detail="is a typed object, not a blob")
        return stored.payload

    # -- pointers ------------------------------------------------------------------------
    def head_ref(self) -> str:
        """The ref HEAD points to (``refs/main``)."""
        return refs.read_head_target(self.root)

    def check_head_commits(self, pointer: Pointer | None = None) -> None:
        """Read every commit HEAD's ref names (before a write builds on them).

        Raises:
            ObjectNotFound: (E001) naming the ref, if a head is missing.
            CtxError: (E002-E005) if the ref or a commit it names is damaged.
        """
        pointer = pointer if pointer is not None else self.read_head()
        for head in pointer.heads:
            try:
                self.read_typed(head, Commit)
            except ObjectNotFound:
                raise pointer_target_missing(pointer.name, head) from None

    def read_head(self) -> Pointer:
        """Read the pointer HEAD names.

        Raises:
            RefNotFound: if HEAD or its target is missing or malformed.
        """
        return refs.read_head(self.root)

    def read_stage(self) -> Pointer | None:
        """Read STAGE (None only in stores that never had one).

        Raises:
            RefNotFound: (E005) if STAGE is not a pointer; the hint names ``ctx stage recover``.
        """
        try:
            return refs.read_pointer(self.root, "STAGE")
        except RefNotFound as exc:
            exc.hint = exc.hint or STAGE_RECOVER_HINT
            raise

    def staged_heads(self, pointer: Pointer | None = None) -> list[ObjectId]:
        """The work commits STAGE names (empty when nothing is staged).

        Raises:
            CtxError: (E001-E005) if STAGE or an object it names is damaged.
        """
        pointer = self.read_stage() if pointer is None else pointer
        if pointer is None:
            return []
        return self.work_heads(pointer.heads)

    def work_heads(self, heads: Iterable[ObjectId]) -> list[ObjectId]:
        """Those of STAGE's ``heads`` that are work commits: staged work.

        A head that is a canonical commit is what the last fold made: nothing is staged on
        it, and it is no part of the state once HEAD's ref has moved elsewhere (a ``git
        checkout`` of another branch).

        Raises:
            CtxError: (E001-E005) if an object named is missing or damaged.
        """
        out = []
        for h in heads:
            try:
                obj: TypedObject = self.read_typed(h, STAGE_TYPES)
            except ObjectNotFound:  # a crash, or a Git operation, left STAGE dangling
                raise ObjectNotFound(h, referenced_by="STAGE", hint=STAGE_RECOVER_HINT) from None
            if isinstance(obj, WorkCommit):
                out.append(h)
        return out

    def transaction(self) -> Transaction:
        """Start a write transaction (a context manager that holds the lock).

        Raises:
            UpgradeRequired: (E026) on entering it, for an older store whose committed
                ``.ctx/STAGE`` names staged work (see ``lock``).
        """
        return Transaction(self)

    def needs_upgrade(self) -> bool:
        """True for an older store whose committed ``.ctx/STAGE`` names staged work.

        That work came through Git, so it is nobody's session here: ``history.upgrade``
        folds it into one canonical commit (``ctx upgrade``), after which ``local/STAGE``
        exists and the legacy file is never read again. A damaged legacy STAGE is left to
        ``ctx stage recover`` (False here). Reads only.
        """
        if not refs.reads_legacy_stage(self.root):
            return False
        try:
            return bool(self.staged_heads())
        except CtxError:
            return False  # damaged: what ``ctx stage recover`` repairs, not an upgrade

    @contextmanager
    def upgrading(self) -> Iterator[None]:
        """Let this thread write to a store that ``needs_upgrade``: the upgrade step itself."""
        self._upgrading = True
        try:
            yield
        finally:
            self._upgrading = False

    def _check_layout(self) -> None:
        """Refuse a writer on a store that ``needs_upgrade`` (checked once per handle).

        Reading never writes, and neither does a write that did not ask for it: the fold of
        work received through Git is the explicit ``ctx upgrade`` (or ``ctx rebuild``).

        Raises:
            UpgradeRequired: (E026) naming the legacy pointer file.
        """
        if self._stage_checked or self._upgrading:
            return
        if self.needs_upgrade():
            raise UpgradeRequired(str(self.root / refs.LEGACY_STAGE))
        self._stage_checked = True

    # -- history -------------------------------------------------------------------------
    def iter_history(self, heads: Iterable[ObjectId], *, follow_base: bool = True
                     ) -> Iterator[tuple[ObjectId, Commit | WorkCommit]]:
        """Yield every commit and work commit reachable from ``heads``, newest first.

        Iterative (a 100,000-commit chain needs no recursion). Work commits also lead
        to their ``base`` canonical commit when ``follow_base`` is set.

        Raises:
            CtxError: (E001-E004) for a missing or damaged commit on the way.
        """
        seen: set[bytes] = set()
        # The decoded commit rides in the heap entry (the store's cache is bounded and may
        # have dropped it by the time it is popped); the oid breaks stamp ties first.
        heap: list[tuple[int, bytes, Commit | WorkCommit]] = []

        def push(oid: bytes, referenced_by: bytes | None) -> None:
            if oid in seen:
                return
            seen.add(oid)
            try:
                obj: TypedObject = self.read_typed(ObjectId(oid))
            except ObjectNotFound:
                if referenced_by is None:
                    raise
                raise CommitOrphan(oid, child=referenced_by) from None  # E009, exit 3
            if not isinstance(obj, (Commit, WorkCommit)):
                raise DeserializationFailed(oid, detail=f"is a {type(obj).TYPE}, not a commit")
            stamp = obj.timestamp_unix * 1000 if isinstance(obj, Commit) else obj.created_at
            heapq.heappush(heap, (-stamp, oid, obj))

        for head in heads:
            push(head, None)
        while heap:
            _, oid, obj = heapq.heappop(heap)
            yield ObjectId(oid), obj
            for parent in obj.parents:
                push(parent, oid)
            if follow_base and isinstance(obj, WorkCommit):
                push(obj.base, oid)

    def is_ancestor(self, ancestor: ObjectId, descendant: ObjectId) -> bool:
        """True if ``ancestor`` is reachable from ``descendant`` (or equal)."""
        if ancestor == descendant:
            return True
        return any(oid == ancestor for oid, _ in self.iter_history([descendant]))


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

    def __init__(self, store: Store) -> None:
        self.store = store
        self.written: list[ObjectId] = []
        self._touched = False
        self._oids: list[ObjectId] = []
        self._moves: list[_PointerMove] = []
        self._promote_roots: list[ObjectId] = []
        self._pruned_ids: frozenset[bytes] | None = None  # ctxstore.pruned, read when needed
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

