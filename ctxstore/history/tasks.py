"""Task boundaries as every front end runs them: the retagging, the current task, compaction.

``task_start`` and ``task_end`` are what ``<ctx:task>`` (the Stop hook) and the MCP server's
``task_start`` / ``task_end`` tools do, one function each: ``knowledge.tasks`` retags the
working set and records the current task (its one owner), and the staging session is
compacted when the trigger of spec 002 §15.2 holds (a different task starts: before the
start; the task ends: after the end; ``triggers.maybe_compact``, followed by the steps of
every canonical commit). A compaction that cannot run never fails the task command: it is
reported as ``problem``.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from ctxstore.clock import now_ms
from ctxstore.errors import CtxError
from ctxstore.history.triggers import Triggered, maybe_compact
from ctxstore.knowledge.tasks import TaskResult, current_task, end_task, start_task, task_tag
from ctxstore.records import dataclass

if TYPE_CHECKING:
    from ctxstore.session import Session

__all__ = ["TaskBoundary", "task_start", "task_end"]


@dataclass(frozen=True, slots=True)
class TaskBoundary:
    """What a task start or end did.

    Attributes:
        task: The retagging (``knowledge.tasks``).
        compaction: The automatic compaction the boundary triggered, if any.
        problem: Why the compaction could not run, if it could not (the task command
            itself succeeded).
    """

    task: TaskResult
    compaction: Triggered | None = None
    problem: str | None = None


def _compact(db: Session, *, started: str | None = None, ended: str | None = None,
             previous: str | None = None) -> tuple[Triggered | None, str | None]:
    """``maybe_compact`` at a task boundary; a store, lock or index problem is returned."""
    try:
        return maybe_compact(db, now_ms=now_ms(), task_started=started, task_ended=ended,
                             previous_task=previous), None
    except (CtxError, sqlite3.Error, OSError) as exc:
        return None, f"automatic compaction skipped: {exc}"


def task_start(db: Session, name: str) -> TaskBoundary:
    """Start task ``name``: compact the session if another task was current, then start it.

    Args:
        db: The open session.
        name: The task's name.

    Returns:
        The start, and the compaction it triggered.

    Raises:
        InvalidInput: for an empty or invalid name (nothing changes).
        LockConflict, StorageIOError: if the start cannot be written.
        QueryTooComplex, IndexCorrupt: if the index cannot be read.
    """
    task_tag(name)  # a bad name is refused before anything is read or folded
    compaction, problem = _compact(db, started=name, previous=current_task(db))
    return TaskBoundary(start_task(db, name), compaction, problem)


def task_end(db: Session, name: str) -> TaskBoundary:
    """End task ``name``, then compact the session (the task-completion trigger).

    Args:
        db: The open session.
        name: The task's name.

    Returns:
        The end, and the compaction it triggered.

    Raises:
        InvalidInput: for an empty or invalid name (nothing changes).
        LockConflict, StorageIOError: if the end cannot be written.
        QueryTooComplex, IndexCorrupt: if the index cannot be read.
    """
    task_tag(name)
    res = end_task(db, name)
    compaction, problem = _compact(db, ended=name)
    return TaskBoundary(res, compaction, problem)
