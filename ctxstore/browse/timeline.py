"""The timeline page: knowledge nodes, canonical commits and transcript sessions, newest first.

Nodes are the decisions, tasks, notes (observations) and every other live node; commits are
the canonical commits of HEAD's history (a folded work session each, with its message);
sessions are the Claude Code sessions transcript memory holds (read-only: a memory file that
needs an upgrade, or is missing, gives a note instead). Nothing here writes.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Literal

from ctxstore.errors import CtxError
from ctxstore.knowledge.nodes import list_nodes
from ctxstore.memory.db import open_memory
from ctxstore.model import Commit
from ctxstore.records import dataclass

if TYPE_CHECKING:
    from ctxstore.session import Session

__all__ = ["TimelineEntry", "Timeline", "read_timeline", "TEXT_CHARS"]

EntryKind = Literal["node", "commit", "session"]
TEXT_CHARS = 2000  # the text an entry carries; the node page shows all of it
TITLE_CHARS = 160


@dataclass(frozen=True, slots=True)
class TimelineEntry:
    """One row of the timeline.

    Attributes:
        kind: ``node``, ``commit`` or ``session``.
        at_ms: When it happened: a node's creation, a commit's time, a session's last turn.
        id: The node id, the commit's hex id, or the session id.
        type: The node type (``decision``, ``task``, ``observation``, ...), ``commit`` or
            ``session``.
        title: Its first line, cut to ``TITLE_CHARS``.
        text: Its text, cut to ``TEXT_CHARS``.
        tags: A node's tags.
        updated_ms: A node's last update (None for the others).
        superseded_by: The node that superseded this one, if any.
        turns: A session's number of turns (None for the others).
    """

    kind: EntryKind
    at_ms: int
    id: str
    type: str
    title: str
    text: str
    tags: tuple[str, ...] = ()
    updated_ms: int | None = None
    superseded_by: str | None = None
    turns: int | None = None


@dataclass(frozen=True, slots=True)
class Timeline:
    """The timeline page.

    Attributes:
        entries: Newest first, at most the limit asked for.
        counts: How many of each type the entries hold.
        more: Whether older entries were left out by the limit.
        notes: What could not be read (transcript memory missing or at another schema).
    """

    entries: tuple[TimelineEntry, ...]
    counts: dict[str, int]
    more: bool
    notes: tuple[str, ...]


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


def _title(text: str) -> str:
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return _cut(first, TITLE_CHARS)


def read_timeline(db: Session, *, limit: int = 500) -> Timeline:
    """The newest ``limit`` entries of nodes, commits and transcript sessions together.

    Args:
        db: The open session.
        limit: The most entries.

    Returns:
        The timeline.

    Raises:
        CtxError: a damaged store or index (E001-E007); transcript memory's own problems
            become notes.
    """
    entries: list[TimelineEntry] = []
    for node in list_nodes(db.index(), limit=limit + 1):
        entries.append(TimelineEntry("node", node.created_at, node.id, node.type,
                                     _title(node.summary or node.content),
                                     _cut(node.content, TEXT_CHARS), tuple(node.tags),
                                     node.updated_at, node.superseded_by))
    entries += _commits(db, limit + 1)
    sessions, notes = _sessions(db, limit + 1)
    entries += sessions
    # Stable: entries of the same time keep their own order (commits are stamped to the second,
    # and two folded in one second stay in their history's order, the newer first).
    entries.sort(key=lambda e: -e.at_ms)
    shown = entries[:limit]
    counts: dict[str, int] = {}
    for entry in shown:
        counts[entry.type] = counts.get(entry.type, 0) + 1
    return Timeline(tuple(shown), counts, len(entries) > limit, tuple(notes))


def _commits(db: Session, limit: int) -> list[TimelineEntry]:
    """The canonical commits of HEAD's history, newest first."""
    store = db.store
    found = (
        (oid, obj) for oid, obj in store.iter_history(store.read_head().heads)
        if isinstance(obj, Commit))
    return [TimelineEntry("commit", obj.timestamp_unix * 1000, oid.hex(), "commit",
                          _title(obj.message) or "(no message)", _cut(obj.message, TEXT_CHARS))
            for oid, obj in itertools.islice(found, limit)]


def _sessions(db: Session, limit: int) -> tuple[list[TimelineEntry], list[str]]:
    """Transcript memory's sessions, read-only, and a note when memory cannot be read."""
    try:
        memory = open_memory(db.root, create=False, read_only=True)
    except CtxError as exc:
        return [], [f"transcript sessions are not shown: {exc}"]
    if memory is None:
        return [], []
    with memory:
        rows = memory.sessions(limit)
    out = []
    for session_id, first, last, turns, topic in rows:
        at = last if isinstance(last, int) else first if isinstance(first, int) else 0
        title = _title(topic or "") or "(no topic)"
        out.append(TimelineEntry("session", at, session_id, "session", title,
                                 _cut(topic or "", TEXT_CHARS), turns=turns))
    return out, []
