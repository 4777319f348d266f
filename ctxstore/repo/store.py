"""The ``Store`` handle: opening, the writer lock, typed reads, pointers and history.

``open_store`` opens a ``.ctx`` directory; a ``Store`` reads typed objects through a bounded
cache, reads HEAD and STAGE, holds the writer lock and starts a ``Transaction``, the only way
objects become reachable (``transaction``). It refuses to write to a store of an older layout
whose committed ``.ctx/STAGE`` names staged work (``UpgradeRequired``).
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from ctxstore import fsio, refs
from ctxstore.config import Config
from ctxstore.discovery import check_store
from ctxstore.errors import (
    CommitOrphan,
    CtxError,
    DeserializationFailed,
    ObjectNotFound,
    RefNotFound,
    UpgradeRequired,
)
from ctxstore.limits import load_store_config
from ctxstore.model import Commit, WorkCommit, decode_typed
from ctxstore.objects import KIND_BLOB, KIND_TYPED, LayeredObjectStore, LooseObjectStore, ObjectId
from ctxstore.refs import Pointer
from ctxstore.repo.cache import OBJECT_CACHE_SIZE, ObjectCache
from ctxstore.repo.caps import typed_cap
from ctxstore.repo.transaction import Transaction

if TYPE_CHECKING:
    from ctxstore.model import TypedObject

__all__ = ["MAIN_REF", "STAGING_OBJECTS", "STAGE_TYPES", "STAGE_RECOVER_HINT", "type_name",
           "pointer_target_missing", "open_store", "ObjectCache", "OBJECT_CACHE_SIZE", "Store"]

MAIN_REF = "refs/main"
# This clone's staging area: objects no canonical commit names yet (never committed).
STAGING_OBJECTS = "local/work/objects"


# STAGE (``.ctx/local/STAGE``, per clone) names a work commit while a session is open,
# else the canonical commit the last fold produced.
STAGE_TYPES: tuple[type, ...] = (Commit, WorkCommit)
# Where STAGE is found unreadable or dangling (a crash, a Git operation): the way out.
STAGE_RECOVER_HINT = ("STAGE is damaged (an interrupted write?): run `ctx stage recover` "
                      "to re-link the intact staged work")
T = TypeVar("T")


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
