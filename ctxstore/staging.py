"""Staging sessions: work commits, and folding them into canonical commits.

Every mutation writes its objects and a ``work_commit`` and moves STAGE in one
transaction, so it is durable and visible at once (DESIGN §5). ``commit`` and
``compact`` fold the staging chain into one canonical commit whose parent is the
current HEAD, keeping only the newest record of each key; ``abort`` records the
session without replaying it; ``recover`` repairs STAGE after a crash (spec 002 §11.5).

Pointers that hold several heads after a Git merge are resolved here, by a merge
commit (or a fast-forward), the next time anything writes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import field, replace

from ctxstore import fsio
from ctxstore import refs as refs_mod
from ctxstore.clock import next_stamp, now_ms
from ctxstore.errors import CtxError, InvalidInput, NothingToDo, RefNotFound, StagingConflict
from ctxstore.model import ChangeBatch, Commit, NarrativeRef, WorkCommit, decode_typed
from ctxstore.model.commit import CommitV2, StepKind
from ctxstore.model.knowledge import KnowledgeRecord
from ctxstore.objects import KIND_TYPED, ObjectId
from ctxstore.records import dataclass
from ctxstore.refs import Pointer
from ctxstore.replay import fold_records
from ctxstore.repo import MAX_COMMIT_BYTES, STAGE_TYPES, Store, Transaction

__all__ = [
    "StageResult",
    "SessionStatus",
    "RecoverReport",
    "UnnamedWork",
    "find_unnamed_work",
    "resolve_main",
    "resolve_stage",
    "stage_records",
    "start_session",
    "check_commit_message",
    "check_text",
    "commit_stage",
    "abort_session",
    "flush",
    "session_status",
    "recover",
    "stage_needs_recover",
    "stage_chain",
    "merge_main_heads",
    "merge_stage_heads",
    "new_session_id",
]

Progress = Callable[[int, int], None]  # (done, total)


@dataclass(frozen=True)
class StageResult:
    """What a staged write produced."""

    work_commit: ObjectId
    batches: tuple[ObjectId, ...]  # the change batches holding its records, in order
    session_id: str


def new_session_id() -> str:
    """A random (version 4) UUID as text, as ``str(uuid.uuid4())`` gives.

    Built here because ``import uuid`` loads ``platform`` (~2.5 ms), and the first write
    of a Claude Code session starts a staging session inside the Stop hook.
    """
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


# -- merging multi-head pointers ---------------------------------------------------------------


def merge_main_heads(store: Store, tx: Transaction, heads: Sequence[ObjectId]) -> ObjectId:
    """Return one commit that contains every head.

    A head that contains the others (fast-forward) or a new merge commit whose parents are all heads
    (sorted).

    The merge commit's timestamp is the newest parent's, so two clones resolving the
    same conflict write the same object.
    """
    heads = sorted(set(heads))
    if len(heads) == 1:
        return heads[0]
    for cand in heads:
        if all(store.is_ancestor(other, cand) for other in heads if other != cand):
            return cand
    parents = [store.read_typed(h, Commit) for h in heads]
    merge = Commit(parents=tuple(heads), timestamp_unix=max(p.timestamp_unix for p in parents),
                   message=f"Merge {len(heads)} heads of refs/main")
    return tx.put(merge)


def merge_stage_heads(store: Store, tx: Transaction, heads: Sequence[ObjectId], base: ObjectId
                      ) -> ObjectId:
    """Like ``merge_main_heads`` for STAGE: one work commit reaching every staged head."""
    heads = sorted(set(heads))
    if len(heads) == 1:
        return heads[0]
    for cand in heads:
        if all(store.is_ancestor(other, cand) for other in heads if other != cand):
            return cand
    works = [store.read_typed(h, WorkCommit) for h in heads]
    merge = WorkCommit(parents=tuple(heads), base=base, session_id=works[0].session_id,
                       created_at=max(w.created_at for w in works), step_kind="merge",
                       message=f"Merge {len(heads)} staging heads")
    return tx.put(merge)


def resolve_main(store: Store, tx: Transaction) -> tuple[ObjectId, Pointer]:
    """Return HEAD's commit, queueing a merge if the ref holds several heads.

    Returns:
        The single head and the pointer as read (the CAS expectation for later moves).
    """
    name = store.head_ref()
    pointer = store.read_head()
    if not pointer.conflicted:
        store.check_head_commits(pointer)  # E001/E004: never build on a broken HEAD
        return pointer.single, pointer
    head = merge_main_heads(store, tx, pointer.heads)
    tx.move_pointer(name, head, expected=pointer)
    # Later moves of this ref within the same transaction compare against the
    # resolved value, which is what will be on disk by then.
    return head, Pointer(name, (head,), head.hex().encode() + b"\n")


def resolve_stage(store: Store, tx: Transaction, base: ObjectId
                  ) -> tuple[ObjectId | None, Pointer | None]:
    """Return STAGE's work commit (None if nothing is staged), merging several heads.

    Heads that are canonical commits (STAGE after a fold) are dropped when STAGE
    holds several heads after a Git merge: they are in HEAD's history by then.
    """
    pointer = store.read_stage()
    if pointer is None:
        return None, None
    works = store.staged_heads(pointer)
    if not pointer.conflicted:
        return (works[0] if works else None), pointer
    work = merge_stage_heads(store, tx, works, base) if works else None
    target = work if work is not None else base
    tx.move_pointer("STAGE", target, expected=pointer, expect_type=STAGE_TYPES)
    return work, Pointer("STAGE", (target,), target.hex().encode() + b"\n")


# -- staged writes ------------------------------------------------------------------------------

def _append_work(store: Store, tx: Transaction, *, step_kind: StepKind, message: str,
                 change_batches: Sequence[ObjectId] = (), payload: Sequence[ObjectId] = (),
                 narrative_refs: Sequence[NarrativeRef] = (), new_session: bool = False
                 ) -> tuple[ObjectId, str]:
    head, _ = resolve_main(store, tx)
    stage, stage_ptr = resolve_stage(store, tx, head)
    if stage is not None and new_session:
        raise StagingConflict("a staging session is already open",
                              hint="run `ctx commit -m MSG`, `ctx stage compact` or `ctx stage abort` first")
    if stage is None:
        parents: tuple[ObjectId, ...] = ()
        session_id, created = new_session_id(), now_ms()
    else:
        prev = store.read_typed(stage, WorkCommit)
        parents = (stage,)
        session_id, created = prev.session_id, next_stamp(prev.created_at)
    work = WorkCommit(parents=parents, base=head, session_id=session_id, created_at=created,
                      step_kind=step_kind, message=message,
                      change_batches=tuple(change_batches), payload=tuple(payload),
                      narrative_refs=tuple(narrative_refs))
    oid = tx.put(work)
    tx.move_pointer("STAGE", oid, expected=stage_ptr, expect_type=STAGE_TYPES)
    return oid, session_id


def stage_records(store: Store, records: Sequence[KnowledgeRecord], *, message: str = "",
                  step_kind: StepKind = "change", author: str | None = None,
                  blobs: Iterable[bytes] = (), narrative_refs: Sequence[NarrativeRef] = (),
                  tx: Transaction | None = None) -> StageResult:
    """Write ``records`` as one change batch and a work commit, and move STAGE.

    ``blobs`` are stored first (e.g. large node content the records reference). When
    ``tx`` is given the caller's transaction is used (and committed by the caller).

    Raises:
        LockConflict, StagingConflict, StorageIOError: if the write cannot happen; the
            store is then as it was.
    """
    check_text(message, "the work commit message")

    def run(t: Transaction) -> StageResult:
        # Check HEAD and STAGE before writing anything: a write refused because a pointer
        # (or the commit it names) is damaged must leave no stray objects behind.
        store.check_head_commits()
        store.staged_heads()
        batch_ids: list[ObjectId] = []
        if records:
            # The batches first: text they cannot encode (a lone surrogate in a tag or in
            # metadata) is refused before any object, blobs included, is written.
            try:
                batch_ids = t.put_records(records, created_at=now_ms(), author=author)
            except UnicodeEncodeError:
                raise InvalidInput("a node holds text that is not valid Unicode (a lone "
                                   "surrogate, e.g. from bytes that are not UTF-8)") from None
        payload = [t.put_blob(b) for b in blobs]
        work, session = _append_work(store, t, step_kind=step_kind, message=message,
                                     change_batches=batch_ids,
                                     payload=payload, narrative_refs=narrative_refs)
        return StageResult(work, tuple(batch_ids), session)

    if tx is not None:
        return run(tx)
    with store.transaction() as t:
        return run(t)


def start_session(store: Store, task: str) -> StageResult:
    """Open a staging session for ``task`` (a ``session_start`` work commit).

    A session a write opened implicitly (``ctx add`` before any ``ctx stage start``, as
    spec 002 A.5 steps 1-2 do) is adopted: its chain is re-linked behind a
    ``session_start`` step carrying ``task``, so it keeps its work and gets the title.

    Raises:
        StagingConflict: if a session started by ``ctx stage start`` is already open.
        InvalidInput: if the task is not valid Unicode text.
    """
    check_text(task, "the task")
    with store.transaction() as tx:
        head, _ = resolve_main(store, tx)
        stage, stage_ptr = resolve_stage(store, tx, head)
        chain = [work for _, work in stage_chain(store, [stage])] if stage is not None else []
        if not chain or any(work.step_kind == "session_start" for work in chain):
            oid, session = _append_work(store, tx, step_kind="session_start", message=task,
                                        new_session=True)
            return StageResult(oid, (), session)
        start = replace(chain[0], step_kind="session_start", message=task, change_batches=(),
                        payload=(), narrative_refs=())
        oid = _relink(tx, [start, *chain])
        tx.move_pointer("STAGE", oid, expected=stage_ptr, expect_type=STAGE_TYPES)
    return StageResult(oid, (), start.session_id)


def stage_chain(store: Store, heads: Iterable[ObjectId]) -> list[tuple[ObjectId, WorkCommit]]:
    """Every work commit reachable from ``heads`` through work-commit parents, oldest first."""
    chain = [(oid, obj) for oid, obj in store.iter_history(heads, follow_base=False)
             if isinstance(obj, WorkCommit)]
    chain.reverse()
    return chain


# -- folding ------------------------------------------------------------------------------------

@dataclass
class FoldResult:
    """What ``commit_stage`` did."""

    commit: ObjectId | None
    records: int
    work_commits: int
    narrative_refs: int
    session_id: str | None
    amended: bool = False
    # The merge commit of HEAD's ref when it held several heads (a Git merge) and this call
    # resolved them; with nothing to fold it is the only canonical commit written.
    merge_commit: ObjectId | None = None
    merged_heads: int = 0


def _latest_refs(refs_lists: Iterable[Iterable[NarrativeRef]]) -> list[NarrativeRef]:
    latest: dict[str, NarrativeRef] = {}
    for refs_ in refs_lists:
        for ref in refs_:
            latest[ref.path] = ref
    return [latest[p] for p in sorted(latest)]


def check_commit_message(message: str | None, *, amend: bool = False) -> None:
    """Refuse a commit message ``commit_stage`` would refuse.

    Callers who change something before folding (narrative ingestion) can so fail before that
    change.

    Raises:
        InvalidInput: if the message is missing (and ``amend`` does not keep the old one),
            blank, or not valid Unicode text.
    """
    if message is None and not amend:
        raise InvalidInput("a commit message is required", hint="ctx commit -m MESSAGE")
    if message is not None and not message.strip():
        raise InvalidInput("the commit message is empty")
    check_text(message, "the commit message")


def check_text(text: str | None, what: str) -> None:
    """Refuse text no object can store.

    A lone surrogate (what Python makes of bytes that are not UTF-8) cannot be encoded, and would
    fail a write half-way.

    Raises:
        InvalidInput: naming ``what``.
    """
    if text is None:
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"{what} is not valid Unicode text (a lone surrogate at "
                           f"character {exc.start + 1})") from None


def commit_stage(store: Store, message: str | None, *, amend: bool = False,
                 narrative: bool = True, allow_empty: bool = False,
                 kind: str = "commit", progress: Progress | None = None) -> FoldResult:
    """Fold STAGE into one canonical commit on HEAD's ref and clear STAGE.

    Args:
        store: The store.
        message: The commit message (None with ``amend`` keeps the old one).
        amend: Replace HEAD's commit instead of adding a child of it.
        narrative: Snapshot changed narrative files into the commit.
        allow_empty: Create a commit even when nothing changed.
        kind: ``"commit"`` or ``"compact"`` (wording only; the result is the same).
        progress: Called with (work commits read, total) while the session is read.

    Returns:
        What was folded. ``commit`` is None when there was nothing to commit.

    Raises:
        InvalidInput: for a missing or blank message (see ``check_commit_message``).
        StagingConflict: if HEAD or STAGE moved concurrently.
    """
    from ctxstore.narrative import snapshot as narrative_mod

    check_commit_message(message, amend=amend)
    with store.transaction() as tx:
        before = store.read_head()
        head, head_ptr = resolve_main(store, tx)
        merged = (head, len(before.heads)) if before.conflicted else (None, 0)
        stage, stage_ptr = resolve_stage(store, tx, head)
        chain = stage_chain(store, [stage]) if stage is not None else []
        records: list[KnowledgeRecord] = []
        for done, (_, work) in enumerate(chain, 1):
            for bid in work.change_batches:
                records.extend(store.read_typed(ObjectId(bid), ChangeBatch).records)
            if progress is not None and (done % 64 == 0 or done == len(chain)):
                progress(done, len(chain))
        curated = fold_records(records)
        staged_refs = _latest_refs(w.narrative_refs for _, w in chain)
        snap_refs = narrative_mod.snapshot_changes(store, tx, head, staged_refs) if narrative else []
        nrefs = _latest_refs([staged_refs, snap_refs])
        session_id = chain[0][1].session_id if chain else None
        if not (curated or nrefs or chain or amend or allow_empty):
            return FoldResult(None, 0, 0, 0, None, merge_commit=merged[0],
                              merged_heads=merged[1])
        batch_ids = tx.put_records(curated, created_at=now_ms(), author=None) if curated else []
        new: Commit
        if amend:
            old = store.read_typed(head, Commit)
            if isinstance(old, CommitV2):
                new = _commit_v2(store, old, curated, parents=old.parents,
                                 message=old.message if message is None else message,
                                 timestamp=now_ms() // 1000,
                                 batches=old.change_batches + tuple(batch_ids),
                                 edge_batches=old.edge_batches,
                                 nrefs=tuple(_latest_refs([old.narrative_refs, nrefs])),
                                 session_id=session_id or old.session_id,
                                 aborted_work=old.aborted_work)
            else:  # a commit an older ctx wrote keeps its form
                tree = _fold_tree(store, tx, old, curated)
                new = Commit(parents=old.parents, timestamp_unix=now_ms() // 1000,
                             message=old.message if message is None else message,
                             root_tree=old.root_tree if tree is None else tree,
                             change_batches=old.change_batches + tuple(batch_ids),
                             edge_batches=old.edge_batches,
                             narrative_refs=tuple(_latest_refs([old.narrative_refs, nrefs])),
                             cargo_snapshot=old.cargo_snapshot, code_snapshot=old.code_snapshot,
                             diagnostics_snapshot=old.diagnostics_snapshot,
                             session_id=session_id or old.session_id,
                             aborted_work=old.aborted_work)
        else:
            parent = store.read_typed(head, Commit)
            new = _commit_v2(store, parent, curated, parents=(head,), message=message or "",
                             timestamp=max(now_ms() // 1000, parent.timestamp_unix),
                             batches=tuple(batch_ids), edge_batches=(), nrefs=tuple(nrefs),
                             session_id=session_id, aborted_work=None)
        oid = tx.put(new)
        tx.move_pointer(store.head_ref(), oid, expected=head_ptr)
        tx.move_pointer("STAGE", oid, expected=stage_ptr, expect_type=STAGE_TYPES)
    return FoldResult(oid, len(curated), len(chain), len(nrefs), session_id, amended=amend,
                      merge_commit=merged[0], merged_heads=merged[1])


def fold_received_stage(store: Store) -> FoldResult | None:
    """Fold the staged work an older store's committed ``.ctx/STAGE`` names into one commit.

    Before STAGE moved to ``local/STAGE`` it was committed, so a clone received other
    people's unfolded sessions (or its own, from an older ctx: the two cannot be told
    apart). Their records are kept and shared as one canonical commit, and the work is
    nobody's staged session; ``local/STAGE`` then names that commit and the legacy file is
    never read or written again. A damaged legacy STAGE is left to ``ctx stage recover``.

    Returns:
        The fold, or None when there was nothing to fold.
    """
    if not refs_mod.reads_legacy_stage(store.root):
        return None
    try:
        works = store.staged_heads()
    except CtxError:
        return None
    if not works:
        return None
    session = store.read_typed(works[0], WorkCommit).session_id
    return commit_stage(store, f"Fold staged work received through Git (session {session})",
                        narrative=False)


def _commit_v2(store: Store, base: Commit, curated: Sequence[KnowledgeRecord], *,
               parents: tuple[ObjectId, ...], message: str, timestamp: int,
               batches: tuple[ObjectId, ...], edge_batches: tuple[ObjectId, ...],
               nrefs: tuple[NarrativeRef, ...], session_id: str | None,
               aborted_work: ObjectId | None) -> CommitV2:
    """A canonical commit naming the code it was made against (DESIGN §5, ``CommitV2``).

    The work tree's Git ``HEAD`` (commit and tree ids) stands for the code: nothing of the
    code index is copied. The Cargo and diagnostics snapshots current after this commit are
    ``base``'s (its lists in v2; its single fields in a v1 commit), each replaced by a newer
    snapshot of the same workspace or command name among ``curated``.
    """
    from ctxstore.git import head_ids
    from ctxstore.model.build import (
        CargoMetadataSnapshot,
        CargoRecord,
        CommandRunRecord,
        DiagnosticsSnapshot,
    )

    git_commit, git_tree = head_ids(store.worktree)
    cargo: dict[str, ObjectId] = {}
    runs: dict[str, ObjectId] = {}
    if isinstance(base, CommitV2):
        old_cargo, old_runs = base.cargo_snapshots, base.diagnostics_snapshots
    else:
        old_cargo = (base.cargo_snapshot,) if base.cargo_snapshot else ()
        old_runs = (base.diagnostics_snapshot,) if base.diagnostics_snapshot else ()
    for oid in old_cargo:  # a few objects: one per workspace
        cargo[store.read_typed(ObjectId(oid), CargoMetadataSnapshot).workspace_root] = oid
    for oid in old_runs:  # one per command name
        runs[store.read_typed(ObjectId(oid), DiagnosticsSnapshot).name] = oid
    for rec in curated:
        if isinstance(rec, CargoRecord):
            cargo[rec.workspace_root] = rec.snapshot
        elif isinstance(rec, CommandRunRecord):
            runs[rec.name] = rec.snapshot
    return CommitV2(parents=parents, timestamp_unix=timestamp, message=message,
                    change_batches=batches, edge_batches=edge_batches, narrative_refs=nrefs,
                    session_id=session_id, aborted_work=aborted_work, git_commit=git_commit,
                    git_tree=git_tree, cargo_snapshots=tuple(sorted(set(cargo.values()))),
                    diagnostics_snapshots=tuple(sorted(set(runs.values()))))


def _fold_tree(store: Store, tx: Transaction, base: Commit, curated: Sequence[KnowledgeRecord]
               ) -> ObjectId | None:
    """The new root tree when the fold changes the ingested files (``code.tree``), else None."""
    from ctxstore.code import tree as code_tree

    return code_tree.fold_root_tree(store, tx, base, curated) \
        if code_tree.touches_files(curated) else None


def abort_session(store: Store, reason: str | None) -> FoldResult:
    """Close the staging session without applying it.

    Its changes leave the visible state, but the chain stays reachable from the
    abort commit (``aborted_work``) so ``gc`` keeps it and nothing is destroyed.

    Raises:
        NothingToDo: if nothing is staged.
        InvalidInput: if the reason is not valid Unicode text.
    """
    check_text(reason, "the reason")
    with store.transaction() as tx:
        head, head_ptr = resolve_main(store, tx)
        stage, stage_ptr = resolve_stage(store, tx, head)
        if stage is None:
            raise NothingToDo("no staging session to abort")
        chain = stage_chain(store, [stage])
        first = chain[0][1]
        task = first.message if first.step_kind == "session_start" else first.session_id
        text = f"Abort session {first.session_id}: {task}"
        if reason:
            text += f"\n\nReason: {reason}"
        parent = store.read_typed(head, Commit)
        commit = Commit(parents=(head,), timestamp_unix=max(now_ms() // 1000, parent.timestamp_unix),
                        message=text, root_tree=parent.root_tree,
                        session_id=first.session_id, aborted_work=stage)
        oid = tx.put(commit)
        tx.move_pointer(store.head_ref(), oid, expected=head_ptr)
        tx.move_pointer("STAGE", oid, expected=stage_ptr, expect_type=STAGE_TYPES)
    return FoldResult(oid, 0, len(chain), 0, first.session_id)


def flush(store: Store) -> ObjectId | None:
    """Make the staging state durable (it already is after every write) and resolve a multi-head STAGE.

    Returns the staging head, or None if nothing is staged.
    """
    with store.transaction() as tx:
        head, _ = resolve_main(store, tx)
        stage, _ = resolve_stage(store, tx, head)
        tx.promote(head)  # repairs a committed history that reaches staging-only objects
        tx._touched = True  # one barrier, even when nothing new was written
    return stage


# -- status and recovery --------------------------------------------------------------------------

@dataclass
class SessionStatus:
    """The staging state as ``ctx stage status`` shows it."""

    head: ObjectId
    head_conflicted: bool
    stage: tuple[ObjectId, ...]
    session_id: str | None = None
    task: str | None = None
    base: ObjectId | None = None
    work_commits: int = 0
    records: int = 0
    started_at: int | None = None
    updated_at: int | None = None
    steps: dict[str, int] = field(default_factory=dict)


def session_status(store: Store) -> SessionStatus:
    """Describe HEAD and the staging session (a read: takes no lock)."""
    head_ptr = store.read_head()
    works = store.staged_heads()
    status = SessionStatus(head=head_ptr.heads[0], head_conflicted=head_ptr.conflicted,
                           stage=tuple(works))
    if not works:
        return status
    chain = stage_chain(store, works)
    first, last = chain[0][1], chain[-1][1]
    status.session_id = first.session_id
    status.task = first.message if first.step_kind == "session_start" else None
    status.base = ObjectId(first.base)
    status.work_commits = len(chain)
    status.started_at, status.updated_at = first.created_at, last.created_at
    for _, work in chain:
        status.steps[work.step_kind] = status.steps.get(work.step_kind, 0) + 1
        for bid in work.change_batches:
            status.records += len(store.read_typed(ObjectId(bid), ChangeBatch).records)
    return status


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
    tip = _relink(tx, chain)
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


def _relink(tx: Transaction, chain: list[WorkCommit]) -> ObjectId:
    """Write ``chain`` (oldest first, not empty) as a fresh linear chain; its tip."""
    prev: ObjectId | None = None
    for work in chain:
        prev = tx.put(replace(work, parents=(prev,) if prev else ()))
    assert prev is not None
    return prev


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

