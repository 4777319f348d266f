"""``export_document``: the store's live nodes, edges and views as one exchange document."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ctxstore.index.read import all_edges, all_node_ids, nodes_by_ids, read_views
from ctxstore.knowledge.exchange.document import EXPORT_FORMAT, EXPORT_VERSION, _iso_ms

if TYPE_CHECKING:
    import sqlite3

__all__ = ["export_document"]

# -- export ---------------------------------------------------------------------------------------

def export_document(conn: sqlite3.Connection, *, node_ids: list[str] | None = None
                    ) -> dict[str, Any]:
    """Build the export document of the whole store or of some nodes.

    Args:
        conn: A synced index connection (``ctxstore.index.open_index``).
        node_ids: Export only these live nodes (unknown ids are left out) and the edges
            between them; None exports every node, every node-to-node edge and every
            saved view.

    Returns:
        The document: ``version``, ``format``, and ``nodes`` (sorted by id), ``edges``
        (only those whose both ends are exported, sorted) and ``views`` (empty unless the
        export is complete), ready for ``json.dumps``.
    """
    if node_ids is None:
        ids = all_node_ids(conn)
    else:
        ids = sorted(set(node_ids))
    nodes = nodes_by_ids(conn, ids)
    exported = {n.id for n in nodes}
    node_docs = [{
        "id": n.id, "type": n.type, "content": n.content, "summary": n.summary,
        "tags": sorted(n.tags), "metadata": n.metadata, "status": n.status,
        "superseded_by": n.superseded_by, "created_at": _iso_ms(n.created_at),
        "updated_at": _iso_ms(n.updated_at), "author": n.author,
    } for n in nodes]
    edge_docs = [{
        "from": e.from_key, "to": e.to_key, "type": e.label, "weight": e.weight,
        "metadata": e.metadata, "created_at": _iso_ms(e.created_at),
        "updated_at": _iso_ms(e.updated_at),
    } for e in all_edges(conn)
        if e.from_kind == "node" and e.to_kind == "node"
        and e.from_key in exported and e.to_key in exported]
    edge_docs.sort(key=lambda d: (d["from"], d["to"], d["type"]))
    view_docs = [] if node_ids is not None else [{
        "name": v.name, "query": v.query, "budget": v.budget, "description": v.description,
        "created_at": _iso_ms(v.created_at), "updated_at": _iso_ms(v.updated_at),
    } for v in read_views(conn)]
    return {"version": EXPORT_VERSION, "format": EXPORT_FORMAT, "nodes": node_docs,
            "edges": edge_docs, "views": view_docs}
