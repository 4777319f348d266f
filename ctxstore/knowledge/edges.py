"""Edge operations between knowledge nodes: link and unlink, both idempotent.

Owns the edge-label check of spec 000 (``normalize_edge_type``) and the two writes of an
edge between knowledge nodes. Code-graph edges (spec 002 §9) are written by code ingest,
not here. It must not run SQL (reads go through ``ctxstore.index.read``) or print.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctxstore.clock import next_stamp
from ctxstore.errors import InvalidInput
from ctxstore.index.read import edges_of, read_node
from ctxstore.knowledge.nodes import WriteResult, edge_record, stage_write
from ctxstore.model.knowledge import EdgeRemoved, KnowledgeRecord
from ctxstore.model.vocab import EDGE_TYPES

if TYPE_CHECKING:
    from ctxstore.session import Session

__all__ = ["normalize_edge_type", "link_nodes", "unlink_nodes"]

def normalize_edge_type(label: str) -> str:
    """Upper-case an edge type and check it (``depends_on`` -> ``DEPENDS_ON``).

    Args:
        label: The type as typed (case and ``-``/``_`` do not matter).

    Returns:
        The canonical label, one of ``EDGE_TYPES``.

    Raises:
        InvalidInput: if it is not one of ``EDGE_TYPES``.
    """
    norm = label.strip().upper().replace("-", "_")
    if norm not in EDGE_TYPES:
        raise InvalidInput(f"unknown edge type {label!r}", hint="one of " + ", ".join(EDGE_TYPES))
    return norm


def link_nodes(db: Session, src_ref: str, dst_ref: str, label: str) -> WriteResult:
    """Create an edge src -label-> dst; an existing identical edge is a silent no-op.

    Args:
        db: The open session.
        src_ref: The source node (id or unique prefix).
        dst_ref: The target node (id or unique prefix).
        label: The edge type (normalised with ``normalize_edge_type``).

    Returns:
        The edge staged, or nothing when it existed.

    Raises:
        InvalidInput: for an unknown type or a self-loop.
        NodeNotFound, AmbiguousPrefix: if a node cannot be identified.
        LockConflict, StorageIOError: if it cannot be written (nothing changes).
    """
    store = db.store
    label = normalize_edge_type(label)
    with store.lock():
        conn = db.index()
        src, dst = read_node(conn, src_ref), read_node(conn, dst_ref)
        if src.id == dst.id:
            raise InvalidInput("an edge needs two different nodes")
        exists = any(e.to_kind == "node" and e.to_key == dst.id
                     for e in edges_of(conn, src.id, "out", label))
        if exists:
            return WriteResult((), None)
        return stage_write(store, [edge_record(src.id, dst.id, label)],
                           f"link {src.id} {label} {dst.id}")


def unlink_nodes(db: Session, src_ref: str, dst_ref: str, label: str | None = None) -> WriteResult:
    """Remove the edges src -> dst (of one type, or all); none is a silent no-op.

    Args:
        db: The open session.
        src_ref: The source node (id or unique prefix).
        dst_ref: The target node (id or unique prefix).
        label: Only edges of this type; every type when None.

    Returns:
        The edge tombstones staged, or nothing when there was no such edge.

    Raises:
        InvalidInput, NodeNotFound, AmbiguousPrefix: a bad type or an unknown node.
        LockConflict, StorageIOError: if it cannot be written (nothing changes).
    """
    store = db.store
    norm = normalize_edge_type(label) if label else None
    with store.lock():
        conn = db.index()
        src, dst = read_node(conn, src_ref), read_node(conn, dst_ref)
        records: list[KnowledgeRecord] = [
            EdgeRemoved(from_ref=("node", src.id), to_ref=("node", dst.id), label=e.label,
                        at=next_stamp(e.updated_at), prev=None)
            for e in edges_of(conn, src.id, "out", norm)
            if e.to_kind == "node" and e.to_key == dst.id]
        return stage_write(store, records, f"unlink {src.id} {dst.id}")
