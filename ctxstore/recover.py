"""Recovery of STAGE after a crash or a lost pointer (spec 002 §11.5): ``ctx stage recover``.

``recover`` re-links the intact work commits of a damaged staging chain, re-attaches staged
work no pointer names (a deleted STAGE), or resets STAGE to HEAD when nothing can be kept.
``find_unnamed_work`` finds such work for ``ctx debug verify`` (W003) and the CLI asks
``stage_needs_recover`` after a damaged-store error to point at ``ctx stage recover``.
Every move of STAGE is a compare-and-swap under the store lock; running ``recover`` twice
gives the same result as running it once. A storage module: it imports nothing above
``staging``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import field

from ctxstore import fsio
from ctxstore import refs as refs_mod
from ctxstore.errors import CtxError, RefNotFound
from ctxstore.model import ChangeBatch, Commit, WorkCommit, decode_typed
from ctxstore.objects import KIND_TYPED, ObjectId
from ctxstore.records import dataclass
from ctxstore.refs import Pointer
from ctxstore.repo import MAX_COMMIT_BYTES, STAGE_TYPES, Store, Transaction
from ctxstore.staging import merge_stage_heads, relink, resolve_main, resolve_stage

__all__ = ["MAX_SCANNED_OBJECT_BYTES", "RecoverReport", "UnnamedWork", "find_unnamed_work",
           "recover", "stage_needs_recover"]


@dataclass(frozen=True)
class UnnamedWork:
    """Staged work that no pointer names: a chain of work commits, named by its tip.

    Attributes:
        tip: The newest work commit of the chain (no other work commit has it as parent).
        session_id: The staging session of the tip.
        work_commits: How many work commits the chain holds (the tip included).
        created_at: The tip's creation time (ms since the epoch).
    """

    tip: ObjectId
    session_id: str
    work_commits: int
    created_at: int


@dataclass
class RecoverReport:
    """What ``recover`` found and did.

    ``unnamed`` lists staged work no pointer names that was left alone (STAGE is intact,
    so it may be the leftover of an interrupted write): ``recover(adopt=True)`` takes it.
    """

    state: str  # "clean", "no-session", "repaired", "reset"
    stage: ObjectId | None = None
    kept: int = 0
    lost: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    unnamed: list[UnnamedWork] = field(default_factory=list)


def stage_needs_recover(store: Store) -> bool:
    """True if STAGE is unreadable or its staging chain has a missing or damaged work commit.

    What ``ctx stage recover`` repairs; the CLI asks this after an E001/E004/E005/E009 error
    to point at it. Reads only, without the lock.
    """
    try:
        pointer = store.read_stage()
    except RefNotFound:
        return True
    # An unreadable head is kept by _staged_heads, so the walk counts it as lost.
    return bool(_walk_intact(store, _staged_heads(store, pointer))[1])


def _work_ok(store: Store, oid: bytes) -> WorkCommit | None:
    try:
        work = store.read_typed(ObjectId(oid), WorkCommit)
        for bid in work.change_batches:
            store.read_typed(ObjectId(bid), ChangeBatch)
        for pid in work.payload:
            store.objects.read(ObjectId(pid))
        store.read_typed(ObjectId(work.base), Commit)
    except CtxError:
        return None
    return work


def recover(store: Store, *, adopt: bool = False) -> RecoverReport:
    """Check STAGE after a crash and repair it (spec 002 §11.5).

    * STAGE is missing (deleted by hand, or lost in a Git operation): staged work that
      no pointer names (``find_unnamed_work``) is re-attached: STAGE names its chain,
      or a merge of the chains when there are several. With none, nothing to do.
    * STAGE names a canonical commit (nothing staged): nothing to do; with ``adopt``,
      staged work no pointer names is re-attached as above.
    * STAGE and its whole chain verify: the session can be resumed or compacted; with
      ``adopt``, staged work no pointer names is merged into it.
    * Otherwise every intact work commit of the affected session(s) is re-linked, in
      order of creation, into a fresh linear chain (found by walking back from STAGE
      and, past a damaged link, by scanning the object store); work commits that
      cannot be read are reported as lost. When nothing of STAGE can be read, the
      newest intact chain tip of a session not folded into HEAD is adopted; with
      none, STAGE is reset to HEAD (nothing staged).

    Without ``adopt``, work no pointer names is only reported (``unnamed``) while STAGE
    exists: it may be what a killed command wrote before it could move STAGE, which that
    command never acknowledged. Every move of STAGE is a compare-and-swap under the lock.
    Running it twice gives the same result as running it once.

    Args:
        store: The store.
        adopt: Also re-attach staged work no pointer names when STAGE exists.

    Raises:
        LockConflict: if another writer holds the lock.
        StagingConflict: if STAGE moved while recovering.
    """
    store._cache.clear()  # files may have changed under a long-lived handle
    with store.transaction() as tx:
        head, _ = resolve_main(store, tx)
        stage_ptr, broken_raw, notes = _read_stage(store)
        if stage_ptr is None and broken_raw is None:
            # STAGE is gone, not garbled: whatever staged work no pointer names is what it
            # named (a deleted STAGE must not hide acknowledged writes).
            return _attach_unnamed(store, tx, None, None, head,
                                   ["STAGE was missing"])
        heads = _staged_heads(store, stage_ptr)
        if stage_ptr is not None and not heads and not stage_ptr.conflicted:
            return _recover_nothing_staged(store, tx, stage_ptr, head, adopt=adopt)
        kept, lost = _walk_intact(store, heads)
        if not lost and stage_ptr is not None:
            return _recover_intact(store, tx, stage_ptr, head, kept, adopt=adopt)
        return _recover_damaged(store, tx, stage_ptr, broken_raw, head, kept, lost, notes)


def _read_stage(store: Store) -> tuple[Pointer | None, bytes | None, list[str]]:
    """STAGE as read under the lock: the pointer, the bytes of an unreadable one, notes.

    Returns ``(pointer, None, [])`` for a readable STAGE, ``(None, None, [])`` for a missing
    one, and ``(None, old bytes, [note])`` for one that is not a pointer (at most 4 KiB read:
    the bytes are shown in the note, never kept).
    """
    try:
        return refs_mod.read_pointer(store.root, "STAGE"), None, []
    except RefNotFound as exc:
        path = refs_mod.stage_file(store.root)
        broken_raw = fsio.read_regular(path, 4096) if path.is_file() else b""  # bounded: shown, never kept
        return None, broken_raw, [f"STAGE was unreadable ({exc.detail}); "
                                  f"old bytes {broken_raw[:80]!r}"]


def _staged_heads(store: Store, stage_ptr: Pointer | None) -> list[ObjectId]:
    """The heads of STAGE that hold staged work.

    A head that is a canonical commit (a fold result) is left out; an unreadable one is kept,
    so the walk counts it as lost.
    """
    heads: list[ObjectId] = []
    for h in (stage_ptr.heads if stage_ptr else ()):
        try:
            if isinstance(store.read_typed(h, STAGE_TYPES), Commit):
                continue  # a fold result: nothing staged on this head
        except CtxError:
            pass  # unreadable: counted as lost below
        heads.append(h)
    return heads


def _recover_nothing_staged(store: Store, tx: Transaction, stage_ptr: Pointer, head: ObjectId,
                            *, adopt: bool) -> RecoverReport:
    """STAGE names a canonical commit: report unnamed work, or re-attach it with ``adopt``."""
    if adopt:
        return _attach_unnamed(store, tx, stage_ptr, None, head, [])
    return RecoverReport("no-session", unnamed=find_unnamed_work(store))


def _recover_intact(store: Store, tx: Transaction, stage_ptr: Pointer, head: ObjectId,
                    kept: dict[bytes, WorkCommit], *, adopt: bool) -> RecoverReport:
    """STAGE and its whole chain verify.

    Several heads (after a Git merge) are merged; with ``adopt``, unnamed work is merged in;
    else the chain is reported clean, with the unnamed work found.
    """
    if stage_ptr.conflicted:
        stage, _ = resolve_stage(store, tx, head)
        return RecoverReport("repaired", stage, len(kept), notes=["merged staging heads"])
    if adopt:
        return _attach_unnamed(store, tx, stage_ptr, stage_ptr.single, head, [],
                               kept=len(kept))
    return RecoverReport("clean", stage_ptr.single if kept else None, len(kept),
                         unnamed=find_unnamed_work(store))


def _recover_damaged(store: Store, tx: Transaction, stage_ptr: Pointer | None,
                     broken_raw: bytes | None, head: ObjectId, kept: dict[bytes, WorkCommit],
                     lost: list[str], notes: list[str]) -> RecoverReport:
    """STAGE is unreadable or its chain is damaged: re-link the intact work, or reset STAGE.

    The sessions to keep are those of the intact work not folded into HEAD (or of an adopted
    orphan tip); their intact work commits are gathered, re-linked into one linear chain, and
    STAGE is moved to its tip. With none, STAGE is reset to HEAD.
    """
    sessions = _sessions_to_keep(store, head, kept, lost, notes)
    if sessions is None:
        _move_stage(store, tx, stage_ptr, broken_raw, head)
        return RecoverReport("reset", None, 0, lost,
                             notes + ["STAGE reset to HEAD: nothing staged"])
    _gather_session_work(store, sessions, kept)
    chain = _dedup_steps(kept)
    tip = relink(tx, chain)
    _move_stage(store, tx, stage_ptr, broken_raw, tip)
    return RecoverReport("repaired", tip, len(chain), sorted(set(lost)), notes)


def _sessions_to_keep(store: Store, head: ObjectId, kept: dict[bytes, WorkCommit],
                      lost: list[str], notes: list[str]) -> set[str] | None:
    """The sessions whose work is re-linked, or None when there is nothing to keep.

    Those of the intact work not folded into HEAD; with none, the newest intact orphan tip
    of a session not folded is adopted (its chain added to ``kept`` and ``lost``, a note
    added to ``notes``).
    """
    folded = _folded_sessions(store, head)
    sessions = {w.session_id for w in kept.values()} - folded
    if sessions:
        return sessions
    tip = _adopt_orphan_tip(store, folded)
    if tip is None:
        return None
    notes.append(f"adopted intact work commit {tip.hex()}")
    more, more_lost = _walk_intact(store, [tip])
    kept.update(more)
    lost.extend(more_lost)
    return {w.session_id for w in more.values()}


def _gather_session_work(store: Store, sessions: set[str], kept: dict[bytes, WorkCommit]
                         ) -> None:
    """Add to ``kept`` every intact work commit of ``sessions`` in the object store.

    Past a damaged link the older commits of a session are unreachable from STAGE: they are
    found by scanning (recovery is rare; a scan is acceptable).
    """
    for oid, work in _iter_work_commits(store):
        if work.session_id in sessions and oid not in kept and _work_ok(store, oid):
            kept[oid] = work


def _attach_unnamed(store: Store, tx: Transaction, ptr: Pointer | None, current: ObjectId | None,
                    head: ObjectId, notes: list[str], *, kept: int = 0) -> RecoverReport:
    """Point STAGE at the staged work no pointer names.

    With ``current``, the chain STAGE names now is merged in: one chain is taken as it is, several
    are joined through one merge work commit.
    """
    found = [w for w in find_unnamed_work(store) if _work_ok(store, w.tip) is not None]
    if not found:
        if current is not None:
            return RecoverReport("clean", current, kept)
        return RecoverReport("no-session")
    tips = [w.tip for w in found]
    target = merge_stage_heads(store, tx, [*([current] if current else []), *tips], head)
    # CAS: ``ptr`` is STAGE as read under this lock (None: it must still be absent).
    tx.move_pointer("STAGE", target, expected=ptr, expect_type=STAGE_TYPES)
    for w in found:
        notes.append(f"re-attached {w.work_commits} work commits of session {w.session_id} "
                     f"(tip {w.tip.hex()}) that no pointer named")
    total = kept + sum(w.work_commits for w in found)
    return RecoverReport("repaired", target, total, notes=notes)


# Work commits and commits are small: larger object files are skipped unread, so the scan
# for unnamed work never decompresses blobs (a stored file can be up to 1 GiB).
MAX_SCANNED_OBJECT_BYTES = 4 << 20


def _iter_commit_objects(store: Store) -> Iterator[tuple[ObjectId, Commit | WorkCommit]]:
    """Every readable commit and work commit in the object store (damaged ones skipped).

    Objects already decoded (``ctx debug verify`` decodes everything) are not read again.
    """
    for oid in store.objects.iter_ids():
        obj = store._cache.get(oid)
        if obj is None:
            try:
                if store.objects.path_for(oid).lstat().st_size > MAX_SCANNED_OBJECT_BYTES:
                    continue
                # Only commits are wanted: a small file declaring more (a bomb) is refused unread.
                stored = store.objects.read(oid, max_payload=MAX_COMMIT_BYTES)
                if stored.kind != KIND_TYPED:
                    continue
                obj = decode_typed(stored.payload, oid=oid)
            except (CtxError, OSError):
                continue  # damage is verify's to report
        if isinstance(obj, (Commit, WorkCommit)):
            yield oid, obj


def _pointer_heads(store: Store) -> set[bytes]:
    """Every id HEAD's ref, the refs under refs/ and STAGE name (unreadable ones skipped)."""
    names = ["STAGE"]
    try:
        names.append(store.head_ref())
    except CtxError:
        pass
    base = store.root / "refs"
    if base.is_dir() and not base.is_symlink():
        names += [p.relative_to(store.root).as_posix() for p in sorted(base.rglob("*"))
                  if p.is_file() and not p.name.endswith(".tmp")]
    heads: set[bytes] = set()
    for name in dict.fromkeys(names):
        try:
            ptr = refs_mod.read_pointer(store.root, name)
        except CtxError:
            continue
        if ptr is not None:
            heads.update(ptr.heads)
    return heads


def find_unnamed_work(store: Store, heads: Iterable[bytes] | None = None) -> list[UnnamedWork]:
    """Staged work that no pointer names: what a deleted or replaced STAGE hides.

    A chain counts when none of its work commits is reachable from a pointer, its base
    commits are (it was built on this history), and none of its sessions was folded or
    aborted (a commit anywhere in the store carries the session id) or is still staged
    (re-linked copies of a recovered chain stay behind). One scan of the object store;
    object files over ``MAX_SCANNED_OBJECT_BYTES`` are skipped unread.

    Args:
        store: The store.
        heads: The ids the pointers name (default: read HEAD's ref, refs/* and STAGE).

    Returns:
        One entry per chain tip, newest first.
    """
    commits: dict[bytes, Commit | WorkCommit] = dict(_iter_commit_objects(store))
    todo = list(_pointer_heads(store) if heads is None else heads)
    reach: set[bytes] = set()
    while todo:  # iterative: histories can be 100,000 commits deep
        oid = todo.pop()
        if oid in reach or oid not in commits:
            continue
        reach.add(oid)
        obj = commits[oid]
        todo.extend(obj.parents)
        if isinstance(obj, WorkCommit):
            todo.append(obj.base)
        elif obj.aborted_work:
            todo.append(obj.aborted_work)
    works = {oid: w for oid, w in commits.items() if isinstance(w, WorkCommit)}
    done = {c.session_id for c in commits.values() if isinstance(c, Commit) and c.session_id}
    done |= {works[oid].session_id for oid in reach if oid in works}
    orphans = {oid: w for oid, w in works.items() if oid not in reach}
    inner = {p for w in orphans.values() for p in w.parents}
    found: list[UnnamedWork] = []
    for tip in (oid for oid in orphans if oid not in inner):
        chain, stack = set(), [tip]
        while stack:
            oid = stack.pop()
            if oid in chain or oid not in orphans:
                continue
            chain.add(oid)
            stack.extend(orphans[oid].parents)
        members = [orphans[oid] for oid in chain]
        if any(w.session_id in done for w in members):
            continue  # folded, aborted, or the leftover copies of a recovered chain
        if any(w.base not in reach for w in members):
            continue  # built on a history no pointer has any more
        found.append(UnnamedWork(ObjectId(tip), orphans[tip].session_id, len(chain),
                                 orphans[tip].created_at))
    found.sort(key=lambda w: (w.created_at, w.tip), reverse=True)
    return found


def _walk_intact(store: Store, heads: Iterable[ObjectId]
                 ) -> tuple[dict[bytes, WorkCommit], list[str]]:
    kept: dict[bytes, WorkCommit] = {}
    lost: list[str] = []
    todo, seen = list(heads), set()
    while todo:
        oid = todo.pop()
        if oid in seen:
            continue
        seen.add(oid)
        work = _work_ok(store, oid)
        if work is None:
            lost.append(oid.hex())
            continue
        kept[oid] = work
        todo.extend(ObjectId(p) for p in work.parents)
    return kept, lost


def _dedup_steps(kept: dict[bytes, WorkCommit]) -> list[WorkCommit]:
    """Intact work commits oldest first, one per step.

    An earlier recovery's re-linked copies differ only in their parents.
    """
    chain: list[WorkCommit] = []
    seen: set[tuple[object, ...]] = set()
    for _oid, work in sorted(kept.items(), key=lambda kv: (kv[1].created_at, kv[0])):
        if work.step_kind == "merge" and not work.change_batches:
            continue  # merge nodes carry nothing once the chain is linear
        step = (work.created_at, work.session_id, work.step_kind, work.message,
                work.change_batches, work.payload, work.narrative_refs)
        if step not in seen:
            seen.add(step)
            chain.append(work)
    return chain


def _folded_sessions(store: Store, head: ObjectId) -> set[str]:
    return {obj.session_id for _, obj in store.iter_history([head])
            if isinstance(obj, Commit) and obj.session_id}


def _iter_work_commits(store: Store) -> Iterator[tuple[ObjectId, WorkCommit]]:
    for oid, obj in _iter_commit_objects(store):
        if isinstance(obj, WorkCommit):
            yield oid, obj


def _adopt_orphan_tip(store: Store, folded: set[str]) -> ObjectId | None:
    """The newest intact work commit nothing references, of a session not folded."""
    works = dict(_iter_work_commits(store))
    referenced = {p for w in works.values() for p in w.parents}
    tips = [(w.created_at, oid) for oid, w in works.items()
            if oid not in referenced and w.session_id not in folded
            and _work_ok(store, oid) is not None]
    return ObjectId(max(tips)[1]) if tips else None


def _move_stage(store: Store, tx: Transaction, ptr: Pointer | None, broken: bytes | None,
                new: ObjectId) -> None:
    if ptr is not None:
        tx.move_pointer("STAGE", new, expected=ptr, expect_type=STAGE_TYPES)
        return
    # STAGE holds bytes that are not a pointer: ``recover`` is the explicit request to
    # replace them (the old bytes are reported, never silently dropped).
    tx.commit()
    refs_mod.write_pointer(store.root, "STAGE", new)

