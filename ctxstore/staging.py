"""Staging sessions: work commits, and folding them into canonical commits.

Every mutation writes its objects and a ``work_commit`` and moves STAGE in one
transaction, so it is durable and visible at once (DESIGN §5). ``commit`` and
``compact`` fold the staging chain into one canonical commit whose parent is the
current HEAD, keeping only the newest record of each key; ``abort`` records the
session without replaying it. Repairing STAGE after a crash (spec 002 §11.5) is
``recover``'s. What a commit carries besides its records (narrative snapshots, the file
tree) is handed in by the commit use case (``history.commit``): this module imports nothing
above the storage layer.

Pointers that hold several heads after a Git merge are resolved here, by a merge
commit (or a fast-forward), the next time anything writes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import field, replace

from ctxstore.clock import next_stamp, now_ms
from ctxstore.errors import InvalidInput, NothingToDo, StagingConflict
from ctxstore.model import ChangeBatch, Commit, NarrativeRef, WorkCommit
from ctxstore.model.code import FileRecord, FileRemoved
from ctxstore.model.commit import CommitV2, StepKind
from ctxstore.model.knowledge import KnowledgeRecord
from ctxstore.objects import ObjectId
from ctxstore.records import dataclass
from ctxstore.refs import Pointer
from ctxstore.replay import fold_records
from ctxstore.repo import STAGE_TYPES, Store, Transaction

__all__ = [
    "NarrativeSnapshot",
    "TreeBuilder",
    "StageResult",
    "SessionStatus",
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
    "stage_chain",
    "merge_main_heads",
    "merge_stage_heads",
    "new_session_id",
    "relink",
]

Progress = Callable[[int, int], None]  # (done, total)
# What a fold's commit carries besides its records, supplied by the commit use case
# (``history.commit``): this layer knows nothing of narrative files or code.
# (store, tx, HEAD, the narrative refs staged steps carried) -> the snapshots to add
NarrativeSnapshot = Callable[[Store, Transaction, ObjectId, list[NarrativeRef]], list[NarrativeRef]]
# (store, tx, the commit the fold starts from, the curated records) -> the new root tree
TreeBuilder = Callable[[Store, Transaction, Commit, Sequence[KnowledgeRecord]], ObjectId | None]


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


def _containing_head(store: Store, heads: Sequence[ObjectId]) -> ObjectId | None:
    """The first of the sorted ``heads`` that contains all the others (a fast-forward), or None."""
    for cand in heads:
        if all(store.is_ancestor(other, cand) for other in heads if other != cand):
            return cand
    return None


def merge_main_heads(store: Store, tx: Transaction, heads: Sequence[ObjectId]) -> ObjectId:
    """Return one commit that contains every head.

    A head that contains the others (fast-forward) or a new merge commit whose parents are all heads
    (sorted).

    The merge commit's timestamp is the newest parent's, so two clones resolving the
    same conflict write the same object.
    """
    heads = sorted(set(heads))
    if (head := _containing_head(store, heads)) is not None:
        return head
    parents = [store.read_typed(h, Commit) for h in heads]
    merge = Commit(parents=tuple(heads), timestamp_unix=max(p.timestamp_unix for p in parents),
                   message=f"Merge {len(heads)} heads of refs/main")
    return tx.put(merge)


def merge_stage_heads(store: Store, tx: Transaction, heads: Sequence[ObjectId], base: ObjectId
                      ) -> ObjectId:
    """Like ``merge_main_heads`` for STAGE: one work commit reaching every staged head."""
    heads = sorted(set(heads))
    if (head := _containing_head(store, heads)) is not None:
        return head
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
        oid = relink(tx, [start, *chain])
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
                 snapshot: NarrativeSnapshot | None = None, tree: TreeBuilder | None = None,
                 allow_empty: bool = False, kind: str = "commit",
                 progress: Progress | None = None) -> FoldResult:
    """Fold STAGE into one canonical commit on HEAD's ref and clear STAGE.

    What the commit holds besides the folded records comes from the caller, so this layer
    knows nothing of narrative files or code: ``snapshot`` gives the narrative snapshots,
    ``tree`` the root tree of the ingested files (``history.commit`` passes both).

    Args:
        store: The store.
        message: The commit message (None with ``amend`` keeps the old one).
        amend: Replace HEAD's commit instead of adding a child of it.
        snapshot: Snapshots changed narrative files into the commit (None: none are taken;
            those staged steps carried are kept).
        tree: Builds the new root tree when amending a commit an older ctx wrote (one with a
            root tree) and the fold changes its ingested files: required then. A new
            commit names the code by its Git ids instead (``CommitV2``).
        allow_empty: Create a commit even when nothing changed.
        kind: ``"commit"`` or ``"compact"`` (wording only; the result is the same).
        progress: Called with (work commits read, total) while the session is read.

    Returns:
        What was folded. ``commit`` is None when there was nothing to commit.

    Raises:
        InvalidInput: for a missing or blank message (see ``check_commit_message``).
        StagingConflict: if HEAD or STAGE moved concurrently.
        ValueError: if the fold changes ingested files and no ``tree`` was given (a bug
            of the caller; nothing is written).
    """
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
        snap_refs = snapshot(store, tx, head, staged_refs) if snapshot is not None else []
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
                new_tree = _fold_tree(store, tx, old, curated, tree)
                new = Commit(parents=old.parents, timestamp_unix=now_ms() // 1000,
                             message=old.message if message is None else message,
                             root_tree=old.root_tree if new_tree is None else new_tree,
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


def _fold_tree(store: Store, tx: Transaction, base: Commit, curated: Sequence[KnowledgeRecord],
               tree: TreeBuilder | None) -> ObjectId | None:
    """The new root tree when the fold changes the ingested files (built by ``tree``), else None."""
    if not any(isinstance(r, (FileRecord, FileRemoved)) for r in curated):
        return None
    if tree is None:
        raise ValueError("the fold changes ingested files: commit_stage needs tree=")
    return tree(store, tx, base, curated)


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


def relink(tx: Transaction, chain: list[WorkCommit]) -> ObjectId:
    """Write ``chain`` (oldest first, not empty) as a fresh linear chain; its tip."""
    prev: ObjectId | None = None
    for work in chain:
        prev = tx.put(replace(work, parents=(prev,) if prev else ()))
    assert prev is not None
    return prev
