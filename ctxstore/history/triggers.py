"""Compaction triggers (spec 002 §15.2): when a staging session folds by itself.

Besides ``ctx stage compact`` (manual), a session is compacted automatically when

- its staged artifacts pass ``[staging] compact_token_threshold`` tokens (0 turns it off);
- it has run longer than ``[staging] compact_after_minutes`` (0 turns it off);
- its task ends (``[staging] compact_on_task_end``), or
- a different task starts (``[staging] compact_on_task_switch``).

The decision and the fold happen under one hold of the store lock (``maybe_compact``),
so two processes that both see a trigger fold the session once: the second finds
nothing staged, or a new session that does not meet the trigger. The fold is
``history.compact.compact_if`` (the same as ``ctx stage compact``, with the same steps
after the commit), whose message names the trigger, so each automatic compaction is
reported in today's log and in ``ctx log``. This module reads staging state through
``staging``'s public functions and never edits pointers itself; it must not print or run
on the prompt path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctxstore.config import Config
from ctxstore.history.commit import CommitResult
from ctxstore.history.compact import compact_if
from ctxstore.model import ChangeBatch
from ctxstore.model.knowledge import NodeRecord
from ctxstore.objects import ObjectId
from ctxstore.records import dataclass
from ctxstore.repo import Store
from ctxstore.staging import FoldResult, SessionStatus, session_status, stage_chain
from ctxstore.tokens import estimate_tokens

if TYPE_CHECKING:
    from ctxstore.session import Session

__all__ = ["Triggered", "staged_tokens", "due_triggers", "maybe_compact"]


@dataclass(frozen=True, slots=True)
class Triggered:
    """An automatic compaction.

    Attributes:
        reasons: Why (one phrase per trigger that held).
        result: The compaction (``result.fold.commit`` None when nothing was staged after
            all), with what followed the commit.
    """

    reasons: tuple[str, ...]
    result: CommitResult

    @property
    def fold(self) -> FoldResult:
        """What was folded (``commit`` None when nothing was staged after all)."""
        return self.result.fold


def staged_tokens(store: Store) -> int:
    """The estimated tokens of the node content staged in the open session.

    Args:
        store: The store.

    Returns:
        Tokens (characters / 4) of every node version staged; 0 when nothing is staged.
    """
    total = 0
    for _, work in stage_chain(store, store.staged_heads()):
        for bid in work.change_batches:
            for rec in store.read_typed(ObjectId(bid), ChangeBatch).records:
                if isinstance(rec, NodeRecord):
                    total += estimate_tokens(rec.content or "") + estimate_tokens(rec.summary or "")
    return total


def due_triggers(store: Store, status: SessionStatus, config: Config, *, now_ms: int,
                 task_started: str | None = None, task_ended: str | None = None,
                 previous_task: str | None = None) -> list[str]:
    """The compaction triggers that hold for the open session (none when nothing is staged).

    Args:
        store: The store.
        status: ``staging.session_status(store)``.
        config: The store's settings (``[staging]``).
        now_ms: The current time (ms since the epoch).
        task_started: A task that has just started, if any (the context-switch trigger).
        task_ended: A task that has just ended, if any.
        previous_task: The task current before ``task_started`` (the front end's); the
            session's own task (``ctx stage start TASK``) when None.

    Returns:
        One phrase per trigger that holds, in the order of spec 002 §15.2.
    """
    if not status.stage or status.started_at is None:
        return []
    reasons: list[str] = []
    limit = int(config.get("staging", "compact_token_threshold"))
    if limit > 0 and (tokens := staged_tokens(store)) >= limit:
        reasons.append(f"token budget ({tokens} staged tokens >= {limit})")
    minutes = float(config.get("staging", "compact_after_minutes"))
    age = (now_ms - status.started_at) / 60_000
    if minutes > 0 and age >= minutes:
        reasons.append(f"time ({age:.0f} minutes >= {minutes:g})")
    task = (previous_task or status.task or "").strip() or None
    if task_ended and config.get("staging", "compact_on_task_end"):
        reasons.append(f"task completion ({task_ended.strip()})")
    if (task_started and task and task_started.strip() != task
            and config.get("staging", "compact_on_task_switch")):
        reasons.append(f"context switch ({task} -> {task_started.strip()})")
    return reasons


def maybe_compact(db: Session, *, now_ms: int, task_started: str | None = None,
                  task_ended: str | None = None, previous_task: str | None = None
                  ) -> Triggered | None:
    """Compact the open session if a trigger holds, deciding and folding under one lock hold.

    The fold is ``history.compact.compact_if``: the same as ``ctx stage compact``, followed by
    the same steps as every canonical commit (graph view, ``git add .ctx``).

    Args:
        db: The open session (its config gives the ``[staging]`` settings).
        now_ms: The current time (ms since the epoch).
        task_started: A task that has just started, if any.
        task_ended: A task that has just ended, if any.
        previous_task: As ``due_triggers``.

    Returns:
        The compaction done, or None when no trigger held.

    Raises:
        LockConflict, StagingConflict, StorageIOError: if the fold cannot be made (the
            store is unchanged).
        InvalidInput: for narrative files with conflict markers (see ``history.compact``).
    """
    reasons: list[str] = []

    def decide(store: Store) -> str | None:
        reasons.extend(due_triggers(store, session_status(store), db.config, now_ms=now_ms,
                                    task_started=task_started, task_ended=task_ended,
                                    previous_task=previous_task))
        return "Automatic compaction: " + "; ".join(reasons) if reasons else None

    done = compact_if(db, decide)
    return None if done is None else Triggered(tuple(reasons), done)
