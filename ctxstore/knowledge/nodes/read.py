"""The index reads of node operations, imported inside the functions: ``ctx add`` never loads the index."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ctxstore.knowledge.nodes.checks import validate_type
from ctxstore.tagnames import validate_tag

if TYPE_CHECKING:
    import sqlite3

    from ctxstore.index.read import EdgeRow, NodeRow

__all__ = ["list_nodes"]

# -- index reads (imported lazily: ``ctx add`` never needs the index) ----------------------------

def _read_node(conn: sqlite3.Connection, ref: str) -> NodeRow:
    from ctxstore.index.read import read_node

    return read_node(conn, ref)


def _find_node(conn: sqlite3.Connection, node_id: str) -> NodeRow | None:
    from ctxstore.index.read import find_node

    return find_node(conn, node_id)


def _hook_write(conn: sqlite3.Connection, hook_key: str) -> NodeRow | None:
    """The live node whose metadata records ``hook_key`` (an agent write already done), or None."""
    from ctxstore.index.read import find_node_by_hook_key

    found = find_node_by_hook_key(conn, hook_key)
    return _find_node(conn, found) if found is not None else None


def _edges_of(conn: sqlite3.Connection, node_id: str, direction: str = "both",
              label: str | None = None) -> list[EdgeRow]:
    from ctxstore.index.read import edges_of

    return edges_of(conn, node_id, direction, label)


# -- reads ----------------------------------------------------------------------------------------

def list_nodes(conn: sqlite3.Connection, *, node_type: str | None = None,
               tags: Sequence[str] = (), created_since_ms: int | None = None,
               limit: int | None = None) -> list[NodeRow]:
    """Live nodes, newest first, filtered by type, tags (all of them) and creation time.

    Args:
        conn: A synced index connection.
        node_type: Only nodes of this type (checked).
        tags: Only nodes carrying every one of these tags (each checked).
        created_since_ms: Only nodes created at or after this time (ms since the epoch).
        limit: At most this many nodes; None for all.

    Returns:
        The nodes with their tags.

    Raises:
        InvalidInput: for a bad type or tag.
    """
    from ctxstore.index.read import list_nodes as select

    return select(conn, node_type=validate_type(node_type) if node_type else None,
                  tags=[validate_tag(t) for t in tags], created_since_ms=created_since_ms,
                  limit=limit)
