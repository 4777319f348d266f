"""Moved to ``ctxstore.knowledge.edges`` (issue 12); this module re-exports it.

It keeps the callers not yet rewired working; the lead deletes it once they are.
"""

from __future__ import annotations

from ctxstore.knowledge.edges import link_nodes, normalize_edge_type, unlink_nodes

__all__ = ["normalize_edge_type", "link_nodes", "unlink_nodes"]
