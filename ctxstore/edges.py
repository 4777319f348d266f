"""Edge writes between knowledge nodes: link and unlink (idempotent)."""

from __future__ import annotations

from ctxstore.clock import next_stamp
from ctxstore.errors import InvalidInput
from ctxstore.index import open_index
from ctxstore.index.read import edges_of, read_node
from ctxstore.model.knowledge import EdgeRemoved, KnowledgeRecord
from ctxstore.model.vocab import EDGE_TYPES
from ctxstore.nodes import WriteResult, edge_record, stage_write
from ctxstore.repo import Store

__all__ = ["normalize_edge_type", "link_nodes", "unlink_nodes"]


def normalize_edge_type(label: str) -> str:
    """Upper-case an edge type and check it (``depends_on`` → ``DEPENDS_ON``).

    Raises:
        InvalidInput: if it is not one of ``EDGE_TYPES``.
    """
    norm = label.strip().upper().replace("-", "_")
    if norm not in EDGE_TYPES:
        raise InvalidInput(f"unknown edge type {label!r}", hint="one of " + ", ".join(EDGE_TYPES))
    return norm


def link_nodes(store: Store, src_ref: str, dst_ref: str, label: str) -> WriteResult:
    """Create an edge src -label-> dst; an existing identical edge is a silent no-op.

    Raises:
        InvalidInput: for an unknown type or a self-loop.
        NodeNotFound, AmbiguousPrefix: if a node cannot be identified.
    """
    label = normalize_edge_type(label)
    with store.lock():
        conn = open_index(store)
        src, dst = read_node(conn, src_ref), read_node(conn, dst_ref)
        if src.id == dst.id:
            raise InvalidInput("an edge needs two different nodes")
        if any(e.to_kind == "node" and e.to_key == dst.id for e in edges_of(conn, src.id, "out", label)):
            return WriteResult((), None)
        return stage_write(store, [edge_record(src.id, dst.id, label)], f"link {src.id} {label} {dst.id}")


def unlink_nodes(store: Store, src_ref: str, dst_ref: str, label: str | None = None) -> WriteResult:
    """Remove the edges src -> dst (of one type, or all); none is a silent no-op.

    Raises:
        InvalidInput, NodeNotFound, AmbiguousPrefix: bad type or unknown node.
    """
    norm = normalize_edge_type(label) if label else None
    with store.lock():
        conn = open_index(store)
        src, dst = read_node(conn, src_ref), read_node(conn, dst_ref)
        records: list[KnowledgeRecord] = [
            EdgeRemoved(from_ref=("node", src.id), to_ref=("node", dst.id), label=e.label,
                        at=next_stamp(e.updated_at), prev=None)
            for e in edges_of(conn, src.id, "out", norm) if e.to_kind == "node" and e.to_key == dst.id]
        return stage_write(store, records, f"unlink {src.id} {dst.id}")
