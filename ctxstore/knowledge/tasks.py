"""Task boundaries and the current task (spec 000 "Task Boundaries", spec 001 §6).

Owns what starting and ending a task does to the working set, and which task is current.
Starting task NAME tags every ``tier:working`` node that belongs to no task with
``task:NAME`` and makes NAME the current task. Ending it moves that task's working nodes
out of the working tier (decisions are promoted to ``tier:reference``, the rest go
``tier:off-context``) and clears the current task if it was NAME. Each write is one change
batch under the store lock.

The current task is per clone: ``local/current-task`` (never committed), one owner for
every front end. The hooks tag working memories with it, the MCP server's task tools set
it, and ``ctx pack`` and ``<ctx:status>`` read it (``read_current_task``, a bounded read of
one small file: the hooks call it on every prompt). The compaction a task boundary
triggers is ``history.tasks``'s. This module must not run SQL (it selects with
``ctxstore.query``), render text or print.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from ctxstore import fsio
from ctxstore.errors import CtxError, InvalidInput, StorageIOError
from ctxstore.records import dataclass, field
from ctxstore.tagnames import validate_tag

if TYPE_CHECKING:
    import sqlite3

    from ctxstore.index.read import NodeRow
    from ctxstore.knowledge.nodes import WriteResult
    from ctxstore.session import Session

__all__ = ["TASK_TAG_PREFIX", "MAX_TASK_NAME", "CURRENT_TASK_FILE", "TaskResult", "task_tag",
           "start_task", "end_task", "end_tier", "read_current_task", "current_task",
           "set_current_task"]

TASK_TAG_PREFIX = "task:"
MAX_TASK_NAME = 128  # what session start's task pattern takes (``packs.session``)
CURRENT_TASK_FILE = "local/current-task"
_WORKING = "tier:working"  # model.vocab.TIER_TAG_PREFIX: not imported on the hook path


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


def _boundary(db: Session, name: str, action: Literal["start", "end"], query: str,
              keep: Callable[[NodeRow], bool], change: Callable[[NodeRow], set[str]]
              ) -> TaskResult:
    # Imported here: the hooks read the current task on every prompt (``read_current_task``)
    # and must not load the write path for it.
    from ctxstore.knowledge.nodes import retag_nodes

    # Read and write under one hold of the lock: a node cannot change between the
    # query that picks it and the version built from it.
    store = db.store
    with store.lock():
        nodes = [n for n in _select(db.index(), query) if keep(n)]
        write = retag_nodes(store, nodes, change, f"task {action} {name.strip()}")
    return TaskResult(name=name.strip(), action=action, nodes=tuple(nodes), write=write)


def start_task(db: Session, name: str) -> TaskResult:
    """Start a task: working nodes that belong to no task join it (spec 001 §6).

    ``name`` becomes the current task (``read_current_task``), so that later working nodes
    are tagged with it (``knowledge.remember``).

    Args:
        db: The open session.
        name: The task's name.

    Returns:
        The nodes tagged ``task:<name>`` and the write.

    Raises:
        InvalidInput: for an empty or invalid name.
        LockConflict, StorageIOError: if it cannot be written (nothing changes).
        QueryTooComplex, IndexCorrupt: if the index cannot be read.
    """
    tag = task_tag(name)
    res = _boundary(
        db, name, "start", f"tag:{_WORKING}",
        keep=lambda n: not any(t.startswith(TASK_TAG_PREFIX) for t in n.tags),
        change=lambda n: set(n.tags) | {tag})
    set_current_task(db.root, res.name)
    return res


def end_task(db: Session, name: str) -> TaskResult:
    """End a task: decisions go to ``tier:reference``, the rest ``tier:off-context``.

    Applies to the task's ``tier:working`` nodes (spec 000 "Task Boundaries"). The current
    task is cleared when it is ``name``. A summary of the nodes moved, if wanted, is a
    separate ``summarize_nodes`` call.

    Args:
        db: The open session.
        name: The task's name.

    Returns:
        The task's working nodes (as they were), the tier each moved to, and the write.

    Raises:
        InvalidInput: for an empty or invalid name.
        LockConflict, StorageIOError: if it cannot be written (nothing changes).
        QueryTooComplex, IndexCorrupt: if the index cannot be read.
    """
    tag = task_tag(name)

    from ctxstore.knowledge.nodes import with_tier

    def moved(n: NodeRow) -> set[str]:
        return set(with_tier(n.tags, end_tier(n.type)))

    res = _boundary(db, name, "end", f'tag:"{tag}" AND tag:{_WORKING}',
                    keep=lambda n: True, change=moved)
    if read_current_task(db.root) == res.name:
        set_current_task(db.root, None)
    return TaskResult(name=res.name, action=res.action, nodes=res.nodes, write=res.write,
                      tiers={n.id: end_tier(n.type) for n in res.nodes})


def end_tier(node_type: str) -> str:
    """The tier a working node of a task moves to when the task ends.

    Args:
        node_type: The node's type.

    Returns:
        ``reference`` for a decision, ``off-context`` for any other type.
    """
    return "reference" if node_type == "decision" else "off-context"


def read_current_task(root: Path) -> str | None:
    """The current task of this clone: started and not ended, or None.

    A task added with ``ctx add task`` is not current until it is started. The file is read
    without following a link, at most a few KiB: a ``local/`` committed to a hostile clone
    (a link, a FIFO, a name that is no task) gives no current task, never an error.

    Args:
        root: The store's ``.ctx`` directory.

    Returns:
        The task's name, or None.
    """
    path = root / CURRENT_TASK_FILE
    try:
        fsio.check_under(root, path.parent)  # never through a linked local/
        data = fsio.read_regular(path, 4 * MAX_TASK_NAME + 8)
    except (OSError, CtxError):
        return None
    try:
        name = data.decode("utf-8").strip()
        task_tag(name)
    except (UnicodeDecodeError, InvalidInput):
        return None
    return name


def current_task(db: Session) -> str | None:
    """``read_current_task`` of the session's store.

    Args:
        db: The open session.

    Returns:
        The current task's name, or None.
    """
    return read_current_task(db.root)


def set_current_task(root: Path, name: str | None) -> None:
    """Record ``name`` as this clone's current task (None: no task is current).

    Args:
        root: The store's ``.ctx`` directory.
        name: The task's name, or None to clear it.

    Raises:
        InvalidInput: for an invalid name.
        UnsafePath: (E020) if ``local/`` or the file is a link or a special file.
        StorageIOError: if it cannot be written.
    """
    path = root / CURRENT_TASK_FILE
    if name is not None:
        task_tag(name)
    try:
        with fsio.open_dir(root) as store_dir:
            if name is None:
                store_dir.unlink(CURRENT_TASK_FILE)
            else:
                store_dir.replace_atomic(CURRENT_TASK_FILE, name.strip().encode("utf-8") + b"\n")
    except OSError as exc:
        raise StorageIOError(str(path), op="write", error=exc) from None
