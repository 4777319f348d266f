"""The records a node write makes: a node's next version, tombstones, edges; its results.

Pure builders over index rows (``record_of``, ``next_version``, ``edge_record``) and
``tombstones`` (the removals a delete makes, its edges included); a new version is stamped
after the version it replaces (``ctxstore.clock``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, TypedDict, Unpack

from ctxstore.clock import next_stamp
from ctxstore.ids import ObjectId
from ctxstore.knowledge.nodes.read import _edges_of
from ctxstore.model.codec import JsonValue
from ctxstore.model.knowledge import EdgeRecord, EdgeRemoved, KnowledgeRecord, NodeRecord, NodeRemoved
from ctxstore.records import dataclass
from ctxstore.staging import StageResult

if TYPE_CHECKING:
    import sqlite3

    from ctxstore.index.read import NodeRow

__all__ = ["AddedNode", "WriteResult", "NodeChanges", "record_of", "next_version", "tombstones",
           "edge_record"]

# -- records --------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class AddedNode:
    """A node written by ``add_node``.

    Attributes:
        node: The record written.
        staged: Where it was staged.
        evolves: ``(label, older node id)`` for each older node of the same type on the same
            subject that it refines or contradicts (``knowledge.evolution``): a proposal to
            supersede it, which a person confirms (``ctx supersede``).
    """

    node: NodeRecord
    staged: StageResult
    evolves: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class WriteResult:
    """What a write changed: the records staged (empty when it was a no-op).

    Attributes:
        records: The records staged, in order.
        staged: Where they were staged, or None when nothing was written.
    """

    records: tuple[KnowledgeRecord, ...]
    staged: StageResult | None

    @property
    def changed(self) -> bool:
        """False when the operation found nothing to change (idempotent no-op)."""
        return bool(self.records)


class NodeChanges(TypedDict, total=False):
    """The fields of a node that a new version may change (``next_version``)."""

    type: str
    content: str | None
    content_blob: ObjectId | None
    summary: str | None
    tags: tuple[str, ...]
    metadata: dict[str, JsonValue]
    status: str
    superseded_by: str | None
    author: str | None


def record_of(node: NodeRow) -> NodeRecord:
    """The record of a node's current version (its ``version`` becomes ``prev`` of the next).

    Args:
        node: A live node as the index holds it.

    Returns:
        The record, with ``prev`` None.
    """
    blob = ObjectId(node.content_blob) if node.content_blob else None
    return NodeRecord(id=node.id, type=node.type,
                      content=None if blob else node.content,
                      content_blob=blob, summary=node.summary,
                      tags=tuple(node.tags), metadata=dict(node.metadata), status=node.status,
                      superseded_by=node.superseded_by, created_at=node.created_at,
                      updated_at=node.updated_at, author=node.author, prev=None)


def next_version(node: NodeRow, **changes: Unpack[NodeChanges]) -> NodeRecord:
    """The record of ``node``'s next version with ``changes`` applied (stamped after it).

    Args:
        node: The current version.
        **changes: ``NodeRecord`` fields to change (``tags=``, ``status=``, ...).

    Returns:
        The new version's record, whose ``prev`` is ``node.version``.
    """
    return replace(record_of(node), updated_at=next_stamp(node.updated_at),
                   prev=ObjectId(node.version), **changes)


def tombstones(conn: sqlite3.Connection, node: NodeRow, seen_edges: set[tuple[str, ...]]
               ) -> list[KnowledgeRecord]:
    """The records that delete ``node`` and its edges.

    Args:
        conn: A synced index connection.
        node: The node to delete.
        seen_edges: Edges already removed by this batch, shared by the nodes deleted in
            one batch so an edge between two of them is removed once (updated in place).

    Returns:
        The node's tombstone followed by one per edge not seen yet.
    """
    out: list[KnowledgeRecord] = [NodeRemoved(id=node.id, at=next_stamp(node.updated_at),
                                              prev=ObjectId(node.version))]
    for e in _edges_of(conn, node.id):
        key = (e.from_kind, e.from_key, e.to_kind, e.to_key, e.label)
        if key not in seen_edges:
            seen_edges.add(key)
            out.append(EdgeRemoved(from_ref=(e.from_kind, e.from_key), to_ref=(e.to_kind, e.to_key),
                                   label=e.label, at=next_stamp(e.updated_at), prev=None))
    return out


def edge_record(src: str, dst: str, label: str, *, weight: float | None = None,
                metadata: dict[str, JsonValue] | None = None, prev_stamp: int = 0) -> EdgeRecord:
    """A new node-to-node edge record, made by a person (``evidence.tool = human``).

    Args:
        src: The source node id.
        dst: The target node id.
        label: The edge label (already normalised).
        weight: An optional weight.
        metadata: Optional metadata.
        prev_stamp: The stamp of the version it replaces, if any.

    Returns:
        The record, stamped after ``prev_stamp``.
    """
    stamp = next_stamp(prev_stamp)
    return EdgeRecord(from_ref=("node", src), to_ref=("node", dst), label=label, weight=weight,
                      metadata=dict(metadata or {}), evidence={"tool": "human"}, created_at=stamp,
                      updated_at=stamp, prev=None)
