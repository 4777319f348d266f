"""Idempotent agent writes: ``remember`` a node once per hook key (RELIABILITY CO-11, TR-12).

Owns what an agent's "remember this" does: the content limits of agent writes, the
task tag a working node gets while a task is current (spec 001 §6), and the hook key
stored in the node's metadata, which makes the write happen once even when the same
tag is processed twice (a replayed transcript, lost per-clone state). Nodes written
here have ``author: agent``.

The key itself is the front end's (``claude.state.key_of`` hashes the session and the
tag text); here it is an opaque string, looked up with ``index.read.find_node_by_hook_key``
(an indexed column). This module must not parse tag syntax, read hook state, run SQL or print.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ctxstore.index.read import find_node_by_hook_key
from ctxstore.knowledge.nodes import add_node, check_content_limit, validate_tag
from ctxstore.knowledge.nodes.provenance import Origin, relative_files
from ctxstore.knowledge.tasks import TASK_TAG_PREFIX
from ctxstore.model.knowledge import NodeRecord
from ctxstore.model.vocab import TIER_TAG_PREFIX
from ctxstore.records import dataclass

if TYPE_CHECKING:
    from ctxstore.session import Session

__all__ = ["LARGE_CONTENT", "MAX_CONTENT", "DEFAULT_TYPE", "Remembered", "remember"]

LARGE_CONTENT = 50_000  # spec 001 §11: warn above this many characters
# Refuse above this: a flood of huge tags must not fill the store (PI-12). Not in the spec
# (it has no hard limit); the hooks take it from config [claude] max_remember_chars.
MAX_CONTENT = 200_000
DEFAULT_TYPE = "observation"


@dataclass(frozen=True, slots=True)
class Remembered:
    """What ``remember`` did.

    Attributes:
        hook_key: The key the write is known by.
        node: The node written, or None when a node with that key existed.
        existing: The id of the node that already had the key, when nothing was written.
        warning: ``large content (N characters)`` above ``LARGE_CONTENT``, else None;
            the front end says where (``in <ctx:remember>``).
    """

    hook_key: str
    node: NodeRecord | None = None
    existing: str | None = None
    warning: str | None = None

    @property
    def changed(self) -> bool:
        """True when a node was written."""
        return self.node is not None


def _origin(db: Session, source: str, session: str, files: Sequence[str]) -> Origin:
    """The provenance origin of an agent write: ``mcp`` for the MCP server, else ``conversation``."""
    kind = "mcp" if source == "mcp" else "conversation"
    return Origin(kind, session or None, relative_files(db.store.worktree, files))


def remember(db: Session, content: str, *, type: str | None = None, tags: Sequence[str] = (),
             session: str, hook_key: str, current_task: str | None = None,
             source: str = "claude-code", max_content: int = MAX_CONTENT,
             files: Sequence[str] = ()) -> Remembered:
    """Write an agent's node once per hook key.

    Nothing is written when a live node already records ``hook_key``. The lookup and
    the write happen under one hold of the store lock, so two processes handling the
    same tag write it once. A working node (``tier:working``) written while a task is
    current also gets ``task:<current_task>``.

    Args:
        db: The open session.
        content: The node's text (at most ``MAX_CONTENT`` characters).
        type: The node type; ``observation`` when None or empty.
        tags: Its tags (already split; each is checked).
        session: The agent session it comes from (kept in metadata).
        hook_key: The identity of this write (kept in metadata as ``hook_key``).
        current_task: The task current in the front end, or None.
        source: The front end, kept in metadata as ``source``.
        max_content: The most characters allowed (the front end's configured limit,
            ``MAX_CONTENT`` by default).
        files: Files the session touched (any form; ``knowledge.nodes.provenance.relative_files``
            keeps those of the repository), for the node's provenance.

    Returns:
        The node written, or the node that already had the key.

    Raises:
        InvalidInput: for a bad tag or type, empty content, or content over
            ``max_content`` characters.
        SecretRefused: (E025) if the content or a tag holds a secret.
        LockConflict, StorageIOError: if it cannot be written (nothing changes).
    """
    store = db.store
    clean = [validate_tag(t) for t in tags]
    if current_task and TIER_TAG_PREFIX + "working" in clean:
        clean.append(validate_tag(TASK_TAG_PREFIX + current_task))  # spec 001 §6
    with store.lock():
        conn = db.index()
        existing = find_node_by_hook_key(conn, hook_key)
        if existing is not None:
            return Remembered(hook_key=hook_key, existing=existing)
        check_content_limit(content, max_content)
        warning = f"large content ({len(content)} characters)" \
            if len(content) > LARGE_CONTENT else None
        # An agent's write is explicit: one that holds a secret is refused (no override).
        added = add_node(db, type or DEFAULT_TYPE, content, tags=clean, author="agent",
                         metadata={"source": source, "session": session, "hook_key": hook_key},
                         channel="remember", origin=_origin(db, source, session, files))
    return Remembered(hook_key=hook_key, node=added.node, warning=warning)
