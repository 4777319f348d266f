"""``ctx stage compact`` and automatic compaction: fold the session with a summary in the log.

``compact`` ingests narrative edits, writes the session summary into today's log
(``narrative.summary``), then folds the session into one canonical commit that snapshots
that log, all under one hold of the store lock. ``compact_if`` is the same fold for a
caller that decides under that lock whether to fold at all (the compaction triggers of
spec 002 §15.2, ``history.triggers``): two processes that both see a trigger fold once.
Both run ``commit.after_commit`` once the lock is released, as every canonical commit does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ctxstore.history.commit import CommitResult, after_commit, fold
from ctxstore.narrative.ingest import ingest_narrative_edits
from ctxstore.narrative.summary import write_session_summary
from ctxstore.security.guard import guard
from ctxstore.staging import check_commit_message

if TYPE_CHECKING:
    from ctxstore.repo import Store
    from ctxstore.session import Session

__all__ = ["compact", "compact_if"]


def compact(db: Session, message: str) -> CommitResult:
    """``ctx stage compact``: narrative edits, the session summary, then one canonical commit.

    The log is written before the commit pointer moves. After a crash in between, running
    it again finds the summary (by its session marker) and only folds.

    Args:
        db: The open session.
        message: The commit message (also the summary's headline).

    Returns:
        The fold, what the narrative edits became, and what followed the commit
        (``fold.commit`` None when nothing was staged: no summary, no commit).

    Raises:
        InvalidInput: for a blank message (nothing changes) or conflict markers in a
            narrative file (see ``ingest_narrative_edits``).
        SecretRefused: (E025) if the message holds a secret; nothing changes.
        StagingConflict, LockConflict, StorageIOError: if the commit cannot be made.
    """
    check_commit_message(message)
    # the message is committed with .ctx/: an explicit write, refused with a secret (E025)
    guard(db.store, "explicit", message, what="the commit message")
    found = compact_if(db, lambda _store: message)
    assert found is not None  # the decision always gives the message
    return found


def compact_if(db: Session, decide: Callable[[Store], str | None]) -> CommitResult | None:
    """Compact when ``decide``, called under the store lock, gives a commit message.

    Args:
        db: The open session.
        decide: Called with the store while its lock is held; returns the commit message,
            or None to leave the session as it is.

    Returns:
        As ``compact``, or None when ``decide`` said no (nothing changed).

    Raises:
        As ``compact``; and whatever ``decide`` raises (nothing changed then).
    """
    store = db.store
    with store.lock():
        message = decide(store)
        if message is None:
            return None
        check_commit_message(message)  # before ingestion stages anything
        edits = ingest_narrative_edits(db)
        write_session_summary(store, message)
        res = fold(store, message, kind="compact")
    return CommitResult(res, tuple(edits), after_commit(db, res))
