"""``ctx commit``, and the steps that follow every canonical commit (``after_commit``).

``commit`` ingests hand edits of narrative entries, then folds the staging session into one
canonical commit (``staging.commit_stage``), handing the fold the narrative snapshots and
the file tree it carries (``fold``). ``after_commit`` is what every canonical commit is
followed by, whichever path made it (commit, compaction, abort, upgrade, the merge of a
rebuild):

1. the graph view (``DERIVED/scc_latest``) is rebuilt, read from the session's index, so
   it reflects the new state, and the Tantivy index is brought up to date where it serves
   (``search.tantivy_index``); both are derived, so a failure is a notice, never an error;
2. the store is staged in Git (``git add .ctx``) when Git tracks it (docs/git.md).

Nothing here prints: the result records carry what the front end says. The steps after
the commit run once the store lock is released where the caller allows it, so a hook
waiting for the lock does not wait for networkx or Git.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ctxstore.code.tree import fold_tree
from ctxstore.narrative.ingest import NarrativeChange, ingest_narrative_edits
from ctxstore.narrative.snapshot import snapshot_changes
from ctxstore.records import dataclass
from ctxstore.security.guard import guard
from ctxstore.staging import FoldResult, check_commit_message, commit_stage

if TYPE_CHECKING:
    from ctxstore.repo import Store
    from ctxstore.session import Session

__all__ = ["CommitResult", "PostCommit", "check_message", "commit", "fold", "after_commit",
           "made_commit"]


@dataclass(frozen=True, slots=True)
class PostCommit:
    """What ran after a canonical commit.

    Attributes:
        git_staged: True if the store was staged in Git (``git add .ctx``).
        notices: One line per step that could not run (the graph view), for the front end
            to show; the commit stands either way.
    """

    git_staged: bool = False
    notices: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class CommitResult:
    """What ``commit`` (and ``compact``) did.

    Attributes:
        fold: The fold: the commit (None when nothing was committed), its counts, and the
            merge commit of a pointer a Git merge left with several heads.
        edits: What the hand edits of narrative entries became.
        after: The steps that followed the commit.
    """

    fold: FoldResult
    edits: tuple[NarrativeChange, ...] = ()
    after: PostCommit = PostCommit()

    @property
    def committed(self) -> bool:
        """True when a canonical commit was written (a fold, or only a merge of heads)."""
        return made_commit(self.fold)

    @property
    def git_staged(self) -> bool:
        """True if the store was staged in Git afterwards."""
        return self.after.git_staged

    @property
    def notices(self) -> tuple[str, ...]:
        """The one-line notices of the steps after the commit."""
        return self.after.notices


def check_message(message: str | None, *, amend: bool = False) -> None:
    """Refuse a commit message ``commit`` would refuse, before anything else is written.

    ``ctx add -m MSG`` checks it before the node is staged, not after.

    Args:
        message: The message.
        amend: Whether the commit amends (a missing message then keeps the old one).

    Raises:
        InvalidInput: if the message is missing, blank, or not valid Unicode text.
    """
    check_commit_message(message, amend=amend)


def made_commit(res: FoldResult) -> bool:
    """True when ``res`` wrote a canonical commit: a fold, or only a merge of Git heads.

    A merge of several heads of refs/main is a canonical commit too, even with nothing to
    fold: Git must carry it with the pointer that names it.
    """
    return res.commit is not None or res.merge_commit is not None


def fold(store: Store, message: str | None, *, amend: bool = False, narrative: bool = True,
         allow_empty: bool = False, kind: str = "commit",
         progress: Callable[[int, int], None] | None = None) -> FoldResult:
    """``staging.commit_stage`` with what a commit carries: narrative snapshots and the file tree.

    Args:
        store: The store.
        message: The commit message (None with ``amend`` keeps the old one).
        amend: Replace HEAD's commit instead of adding a child of it.
        narrative: Snapshot changed narrative files into the commit.
        allow_empty: Create a commit even when nothing changed.
        kind: ``"commit"`` or ``"compact"`` (wording only).
        progress: Called with (work commits read, total) while the session is read.

    Returns:
        What was folded (``commit`` None when there was nothing to commit).

    Raises:
        InvalidInput: for a missing or blank message.
        StagingConflict, LockConflict, StorageIOError: if the commit cannot be made.
    """
    return commit_stage(store, message, amend=amend,
                        snapshot=snapshot_changes if narrative else None, tree=fold_tree,
                        allow_empty=allow_empty, kind=kind, progress=progress)


def commit(db: Session, message: str | None, *, amend: bool = False, narrative: bool = True,
           allow_empty: bool = False, progress: Callable[[int, int], None] | None = None
           ) -> CommitResult:
    """``ctx commit``: ingest narrative edits, fold STAGE into one canonical commit, follow up.

    Narrative edits are skipped when ``narrative`` is off. The ingestion and the fold run
    under one hold of the store lock; ``after_commit`` runs once it is released.

    Args:
        db: The open session.
        message: The commit message (None with ``amend`` keeps the old one).
        amend: Replace HEAD's commit instead of adding a child of it.
        narrative: Ingest and snapshot changed narrative files.
        allow_empty: Create a commit even when nothing changed.
        progress: Called with (work commits read, total) while the session is read.

    Returns:
        The fold, the narrative edits and what followed the commit.

    Raises:
        InvalidInput: a narrative file holds conflict markers, or the message is missing
            or blank; nothing changes.
        SecretRefused: (E025) if the message holds a secret; nothing changes.
        StagingConflict, LockConflict, StorageIOError: if the commit cannot be made.
    """
    check_commit_message(message, amend=amend)  # before ingestion stages anything
    store = db.store
    if message:  # a commit message is committed with .ctx/: an explicit write
        guard(store, "explicit", message, what="the commit message")
    with store.lock():
        edits = ingest_narrative_edits(db) if narrative else []
        res = fold(store, message, amend=amend, narrative=narrative, allow_empty=allow_empty,
                   progress=progress)
    return CommitResult(res, tuple(edits), after_commit(db, res))


def after_commit(db: Session, res: FoldResult | Sequence[FoldResult], *,
                 graph: bool = True) -> PostCommit:
    """The steps every canonical commit is followed by: graph view, then ``git add .ctx``.

    Nothing runs when no canonical commit was made. Never raises: each step that cannot
    run gives a notice (the next ``ctx rebuild`` retries the view; ``git add .ctx`` by
    hand stages the store).

    Args:
        db: The open session (its index is brought up to date with the commit).
        res: The fold (or folds) the caller made.
        graph: Rebuild the graph view and bring the Tantivy index up to date where it
            serves (False: the caller rebuilds them itself, ``ctx rebuild``).

    Returns:
        Whether the store was staged in Git, and the notices.
    """
    folds = [res] if isinstance(res, FoldResult) else list(res)
    if not any(made_commit(r) for r in folds):
        return PostCommit()
    from ctxstore.git import stage_in_git

    notices: tuple[str | None, ...] = ()
    if graph:
        from ctxstore.graph.scc import refresh_after_commit
        from ctxstore.search.tantivy_index import refresh_tantivy

        notices = (refresh_after_commit(db.store, db.index), refresh_tantivy(db))
    return PostCommit(git_staged=stage_in_git(db.root),
                      notices=tuple(n for n in notices if n))
