"""Task boundaries: task start and task end (spec 000 "Task Boundaries", spec 001 §6).

Owns what starting and ending a task does to the working set. Starting task NAME tags
every ``tier:working`` node that belongs to no task with ``task:NAME``. Ending it moves
that task's working nodes out of the working tier: decisions are promoted to
``tier:reference``, the rest go ``tier:off-context``. Each is one change batch written
under the store lock.

Which task is current is front-end state (the hook keeps it in ``local/state.sqlite``,
``claude/state.py``): these functions take the task name and return what they changed,
and the caller records the current task. This module must not read or write hook
state, run SQL (it selects with ``ctxstore.query``), render text or print.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from contextlib import closing
from dataclasses import field, replace
from typing import TYPE_CHECKING, Literal

from ctxstore.errors import InvalidInput
from ctxstore.index import open_index
from ctxstore.knowledge.nodes import WriteResult, retag_nodes, validate_tag, with_tier
from ctxstore.model.vocab import TIER_TAG_PREFIX
from ctxstore.records import dataclass
from ctxstore.repo import Store

if TYPE_CHECKING:
    import sqlite3

    from ctxstore.index.read import NodeRow

__all__ = ["TASK_TAG_PREFIX", "MAX_TASK_NAME", "TaskResult", "task_tag", "start_task", "end_task", "end_tier"]

TASK_TAG_PREFIX = "task:"
MAX_TASK_NAME = 128  # what session start's task pattern takes (``packs.session``)
_WORKING = TIER_TAG_PREFIX + "working"


@dataclass(frozen=True, slots=True)
class TaskResult:
    """What a task start or end did.

    Attributes:
        name: The task's name.
        action: ``start`` or ``end``.
        nodes: The nodes the boundary applies to, as they were before it: at a start,
            the untasked working nodes that joined the task; at an end, the task's
            working nodes that left the working tier.
        write: The new versions staged (empty when nothing had to change).
        tiers: At an end, the tier each node moved to, by node id (``reference`` for
            decisions, ``off-context`` for the rest); empty at a start.
    """

    name: str
    action: Literal["start", "end"]
    nodes: tuple[NodeRow, ...]
    write: WriteResult
    tiers: Mapping[str, str] = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        """True when the store changed."""
        return self.write.changed


def task_tag(name: str) -> str:
    """The tag of a task's nodes.

    Args:
        name: The task's name (surrounding spaces are dropped).

    Returns:
        ``task:<name>``.

    Raises:
        InvalidInput: for an empty name, or one that makes an invalid tag.
    """
    name = name.strip()
    if not name:
        raise InvalidInput("a task needs a name")
    if len(name) > MAX_TASK_NAME:  # session start shows a task of at most this many characters
        raise InvalidInput(f"a task name is at most {MAX_TASK_NAME} characters (this one has "
                           f"{len(name)})")
    return validate_tag(TASK_TAG_PREFIX + name)


def _select(conn: sqlite3.Connection, query: str) -> list[NodeRow]:
    # Imported here: a hook that runs no task command never loads the query engine.
    from ctxstore.query.executor import run_query

    return run_query(conn, query, now=time.time())


def _boundary(store: Store, name: str, action: Literal["start", "end"], query: str,
              keep: Callable[[NodeRow], bool], change: Callable[[NodeRow], set[str]]
              ) -> TaskResult:
    # Read and write under one hold of the lock: a node cannot change between the
    # query that picks it and the version built from it.
    with store.lock():
        with closing(open_index(store)) as conn:
            nodes = [n for n in _select(conn, query) if keep(n)]
        write = retag_nodes(store, nodes, change, f"task {action} {name.strip()}")
    return TaskResult(name=name.strip(), action=action, nodes=tuple(nodes), write=write)


def start_task(store: Store, name: str) -> TaskResult:
    """Start a task: working nodes that belong to no task join it (spec 001 §6).

    The caller records ``name`` as the current task (so that later working nodes are
    tagged with it, ``knowledge.remember``).

    Args:
        store: The store to write to.
        name: The task's name.

    Returns:
        The nodes tagged ``task:<name>`` and the write.

    Raises:
        InvalidInput: for an empty or invalid name.
        LockConflict, StorageIOError: if it cannot be written (nothing changes).
        QueryTooComplex, IndexCorrupt: if the index cannot be read.
    """
    tag = task_tag(name)
    return _boundary(
        store, name, "start", f"tag:{_WORKING}",
        keep=lambda n: not any(t.startswith(TASK_TAG_PREFIX) for t in n.tags),
        change=lambda n: set(n.tags) | {tag})


def end_task(store: Store, name: str) -> TaskResult:
    """End a task: decisions go to ``tier:reference``, the rest ``tier:off-context``.

    Applies to the task's ``tier:working`` nodes (spec 000 "Task Boundaries"). The
    caller clears its current task when it is ``name``. A summary of the nodes moved,
    if wanted, is a separate ``summarize_nodes`` call.

    Args:
        store: The store to write to.
        name: The task's name.

    Returns:
        The task's working nodes (as they were), the tier each moved to, and the write.

    Raises:
        InvalidInput: for an empty or invalid name.
        LockConflict, StorageIOError: if it cannot be written (nothing changes).
        QueryTooComplex, IndexCorrupt: if the index cannot be read.
    """
    tag = task_tag(name)

    def moved(n: NodeRow) -> set[str]:
        return set(with_tier(n.tags, end_tier(n.type)))

    res = _boundary(store, name, "end", f'tag:"{tag}" AND tag:{_WORKING}',
                    keep=lambda n: True, change=moved)
    return replace(res, tiers={n.id: end_tier(n.type) for n in res.nodes})


def end_tier(node_type: str) -> str:
    """The tier a working node of a task moves to when the task ends.

    Args:
        node_type: The node's type.

    Returns:
        ``reference`` for a decision, ``off-context`` for any other type.
    """
    return "reference" if node_type == "decision" else "off-context"
