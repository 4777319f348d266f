"""``ctx upgrade``: the explicit step that brings an older store's layout up to date.

Before STAGE moved to ``local/STAGE`` it was committed as ``.ctx/STAGE``, so a clone of such
a store received other people's unfolded sessions (or its own, from an older ctx: the two
cannot be told apart). That work is kept and shared as one canonical commit, folded here
(with the file tree of what it ingested), and is nobody's staged session afterwards:
``local/STAGE`` names the commit and the legacy file is never read or written again.

Reading never writes, and neither does a write that did not ask for it: until this step
runs, every writer refuses the store with ``UpgradeRequired`` (E026) and a hint naming
``ctx upgrade`` (``repo.Store.lock``); ``ctx rebuild`` runs this step too, and says so. The
fold is a canonical commit like any other: ``commit.after_commit`` follows it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctxstore.history.commit import PostCommit, after_commit, fold
from ctxstore.model import WorkCommit
from ctxstore.records import dataclass
from ctxstore.staging import FoldResult

if TYPE_CHECKING:
    from ctxstore.session import Session

__all__ = ["UpgradeResult", "upgrade", "fold_received"]


@dataclass(frozen=True, slots=True)
class UpgradeResult:
    """What ``upgrade`` did.

    Attributes:
        fold: The fold of the staged work the legacy ``.ctx/STAGE`` named, or None when the
            store needed no upgrade.
        after: The steps that followed the fold.
    """

    fold: FoldResult | None = None
    after: PostCommit = PostCommit()

    @property
    def upgraded(self) -> bool:
        """True when the store was upgraded (the received work was folded)."""
        return self.fold is not None


def upgrade(db: Session) -> UpgradeResult:
    """Fold the staged work an older store's committed ``.ctx/STAGE`` names into one commit.

    Idempotent: a store whose layout is current (or whose legacy STAGE names no staged work)
    is left as it is. A damaged legacy STAGE is left to ``ctx stage recover``.

    Args:
        db: The open session.

    Returns:
        The fold (None when there was nothing to upgrade) and what followed it.

    Raises:
        LockConflict, StagingConflict, StorageIOError: if the fold cannot be made (the store
            is as it was).
        CtxError: (E001-E005) if HEAD is damaged.
    """
    res = fold_received(db)
    return UpgradeResult(res, after_commit(db, res) if res is not None else PostCommit())


def fold_received(db: Session) -> FoldResult | None:
    """``upgrade`` without the steps after the commit (for a caller that runs them once).

    Args:
        db: The open session.

    Returns:
        The fold, or None when the store needed no upgrade.

    Raises:
        As ``upgrade``.
    """
    store = db.store
    with store.upgrading(), store.lock():
        if not store.needs_upgrade():  # checked under the lock: one process folds
            return None
        works = store.staged_heads()
        session = store.read_typed(works[0], WorkCommit).session_id
        return fold(store, f"Fold staged work received through Git (session {session})",
                    narrative=False)
