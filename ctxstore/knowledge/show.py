"""Reads of the graph as front ends show them: a node, its edges, short ids, tag counts.

``ctx show``, ``ctx edges``, ``ctx tags``, the MCP ``show`` tool and every listing that
prints short ids call one function here each, with the ``Session``; the rows come from the
index (``index.read``: every SELECT lives there). Nothing here writes, renders or prints.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal

from ctxstore.code.stale import StaleMention, stale_mentions
from ctxstore.errors import CtxError
from ctxstore.ids import ObjectId
from ctxstore.index import read as index_read
from ctxstore.index.read import EdgeRow, NodeRow
from ctxstore.model import Commit
from ctxstore.records import dataclass

if TYPE_CHECKING:
    from ctxstore.session import Session

__all__ = ["NodeView", "CommitRef", "commits_of", "EdgeView", "show_node", "read_node", "node_edges",
           "short_ids",
           "tag_counts"]


@dataclass(frozen=True, slots=True)
class NodeView:
    """A node as ``ctx show`` shows it.

    Attributes:
        node: The node's current version.
        edges: Its edges, in and out (None when not asked for).
        versions: Every version, oldest first, object ids as hex (None when not asked for).
        stale: Its mentions of code that changed since (``code.stale``).
        updated_in: The canonical commits that changed it, newest first (``UpdatedIn``,
            derived from history by the index; staged changes are in none yet).
    """

    node: NodeRow
    edges: tuple[EdgeRow, ...] | None
    versions: tuple[dict[str, Any], ...] | None
    stale: tuple[StaleMention, ...]
    updated_in: tuple[CommitRef, ...] = ()


@dataclass(frozen=True, slots=True)
class CommitRef:
    """A canonical commit a node was changed in.

    Attributes:
        commit: Its id (64 hex).
        at_ms: Its time, ms since the epoch.
        message: Its message ("" when the commit cannot be read).
    """

    commit: str
    at_ms: int
    message: str


def commits_of(db: Session, node_id: str) -> tuple[CommitRef, ...]:
    """The canonical commits that changed a node, newest first (``UpdatedIn``).

    Args:
        db: The open session.
        node_id: The node's full id.

    Returns:
        Each commit with its time and message.
    """
    out = []
    for oid, stamp in index_read.updated_in(db.index(), node_id):
        try:
            message = db.store.read_typed(ObjectId(oid), Commit).message
        except CtxError:  # a commit gc or a damaged file took: the edge still stands
            message = ""
        out.append(CommitRef(oid.hex(), stamp, message))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class EdgeView:
    """One edge of a node, seen from it.

    Attributes:
        direction: ``out`` (from the node) or ``in`` (to it).
        label: The edge type.
        kind: The other endpoint's kind (``node``, ``file``, ``item``, ...).
        key: The other endpoint's key (a node id for ``node``).
        other: The other endpoint's node, when it is a live node.
    """

    direction: Literal["in", "out"]
    label: str
    kind: str
    key: str
    other: NodeRow | None


def read_node(db: Session, ref: str) -> NodeRow:
    """The live node ``ref`` (an id or a unique prefix) names.

    Args:
        db: The open session.
        ref: The node's id, or a prefix of 4 or more characters.

    Returns:
        Its current version.

    Raises:
        NodeNotFound: (E019), AmbiguousPrefix (E016), InvalidInput (E011) for a bad id.
    """
    return index_read.read_node(db.index(), ref)


def show_node(db: Session, ref: str, *, edges: bool = False, history: bool = False) -> NodeView:
    """A node with, as asked, its edges and its versions, and its stale code mentions.

    Args:
        db: The open session.
        ref: The node's id or a unique prefix.
        edges: Also its edges.
        history: Also every version of it (``ctx show --history``).

    Returns:
        The view.

    Raises:
        NodeNotFound: (E019), AmbiguousPrefix (E016), InvalidInput (E011) for a bad id.
    """
    conn = db.index()
    node = index_read.read_node(conn, ref)
    found = tuple(index_read.edges_of(conn, node.id)) if edges else None
    versions = None
    if history:
        versions = []
        for v in index_read.node_versions(conn, node.id):
            rec = v["record"]
            versions.append({**v, "record": {k: (val.hex() if isinstance(val, bytes) else val)
                                             for k, val in rec.items()}})
    stale = tuple(stale_mentions(conn, [node.id]).get(node.id, []))
    return NodeView(node, found, tuple(versions) if versions is not None else None, stale,
                    commits_of(db, node.id))


def node_edges(db: Session, ref: str, direction: Literal["in", "out", "both"] = "both"
               ) -> tuple[NodeRow, list[EdgeView]]:
    """A node's edges, each with the node at its other end.

    Besides the stored edges, ``UpdatedIn`` to each canonical commit that changed the node
    (kind ``commit``, newest first), which the index derives from history.

    Args:
        db: The open session.
        ref: The node's id or a unique prefix.
        direction: Edges into the node, out of it, or both.

    Returns:
        The node and its edges.

    Raises:
        NodeNotFound: (E019), AmbiguousPrefix (E016), InvalidInput (E011) for a bad id.
    """
    conn = db.index()
    node = index_read.read_node(conn, ref)
    out: list[EdgeView] = []
    for e in index_read.edges_of(conn, node.id, direction):
        outgoing = e.from_kind == "node" and e.from_key == node.id
        kind, key = (e.to_kind, e.to_key) if outgoing else (e.from_kind, e.from_key)
        other = index_read.find_node(conn, key) if kind == "node" else None
        out.append(EdgeView("out" if outgoing else "in", e.label, kind, key, other))
    if direction in ("out", "both"):  # derived from history, newest first (spec 002 §9)
        out += [EdgeView("out", "UpdatedIn", "commit", commit.hex(), None)
                for commit, _ in index_read.updated_in(conn, node.id)]
    return node, out


def short_ids(db: Session, ids: Iterable[str]) -> dict[str, str]:
    """The shortest unique prefix (8 characters at least) of each node id, in this store.

    Args:
        db: The open session.
        ids: Node ids.

    Returns:
        Each id's short form, which ``ctx show`` takes back.
    """
    return index_read.short_ids(db.index(), list(ids))


def tag_counts(db: Session, prefix: str | None = None) -> list[tuple[str, int]]:
    """The tags of live nodes with their counts.

    Args:
        db: The open session.
        prefix: Only tags starting with it.

    Returns:
        ``(tag, count)`` pairs, as ``ctx tags`` lists them.
    """
    return index_read.tag_counts(db.index(), prefix)
