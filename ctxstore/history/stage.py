"""The staging session as ``ctx stage`` and ``ctx log`` see it: start, flush, status, recover.

One function per subcommand, each taking the ``Session``: ``start`` (a session for a task),
``flush`` (make the staging state durable and merge split STAGE heads), ``status`` (what is
staged), ``recover`` (repair STAGE after a crash, ``recover.py``) and ``needs_recover``
(whether an error came from a damaged STAGE). Folding the session is ``commit`` and
``compact``; dropping it is ``abort``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctxstore import recover as recover_mod
from ctxstore import staging
from ctxstore.errors import InvalidInput
from ctxstore.objects import ObjectId
from ctxstore.recover import RecoverReport
from ctxstore.staging import SessionStatus, StageResult

if TYPE_CHECKING:
    from ctxstore.repo import Store
    from ctxstore.session import Session

__all__ = ["SessionStatus", "StageResult", "RecoverReport", "start", "flush", "status",
           "recover", "needs_recover"]


def start(db: Session, task: str) -> StageResult:
    """Open a staging session for ``task`` (``ctx stage start``).

    Args:
        db: The open session.
        task: What the session is for (its first work commit's message).

    Returns:
        The ``session_start`` work commit and the session id.

    Raises:
        InvalidInput: for an empty task or one that is not valid Unicode text.
        StagingConflict: if a session started by ``ctx stage start`` is already open.
    """
    if not task.strip():
        raise InvalidInput("the task is empty")
    return staging.start_session(db.store, task)


def flush(db: Session) -> ObjectId | None:
    """Make the staging state durable and merge a STAGE or HEAD with several heads.

    Args:
        db: The open session.

    Returns:
        The staging head, or None when nothing is staged.

    Raises:
        LockConflict, StagingConflict, StorageIOError: if it cannot be written.
    """
    return staging.flush(db.store)


def status(db: Session) -> SessionStatus:
    """HEAD and the staging session (a read: takes no lock).

    Args:
        db: The open session.

    Returns:
        The session's task, base, counts and times (empty when nothing is staged).

    Raises:
        CtxError: (E001-E005) if a pointer or a staged object is damaged.
    """
    return staging.session_status(db.store)


def recover(db: Session, *, adopt: bool = False) -> RecoverReport:
    """``ctx stage recover``: repair STAGE after a crash (``recover.recover``).

    Args:
        db: The open session.
        adopt: Also re-attach staged work no pointer names while STAGE exists.

    Returns:
        What was found and done.

    Raises:
        LockConflict: if another writer holds the lock.
        StagingConflict: if STAGE moved while recovering.
    """
    return recover_mod.recover(db.store, adopt=adopt)


def needs_recover(store: Store) -> bool:
    """True if STAGE is unreadable or its staging chain has a missing or damaged work commit.

    What ``ctx stage recover`` repairs; asked after an E001/E004/E005/E009 error to point
    at it. Reads only. (Takes the store: the session may be what failed to open.)

    Args:
        store: The store.

    Returns:
        Whether ``ctx stage recover`` would repair something.
    """
    return recover_mod.stage_needs_recover(store)
