"""Graph questions answered in SQL over the index: provenance and neighbourhoods.

Hot-path graph questions stay in SQLite (an edge table with both direction indexes
answers a depth-2 question in microseconds); networkx is only for algorithms that
need it (SCC), imported inside the functions that use it.
"""

from __future__ import annotations

import sqlite3
from collections import deque

from ctxstore.index.read import edges_of
from ctxstore.records import dataclass

__all__ = ["PROVENANCE_LABELS", "TraceStep", "trace", "RelatedNode", "related"]

PROVENANCE_LABELS = ("DERIVED_FROM", "DEPENDS_ON")


@dataclass(frozen=True)
class TraceStep:
    """One node reached by ``trace``: its depth, the label and the node it came from."""

    node_id: str
    depth: int
    label: str
    parent: str


def trace(conn: sqlite3.Connection, node_id: str, *, reverse: bool = False,
          max_depth: int = 50) -> list[TraceStep]:
    """What ``node_id`` derives from (or, with ``reverse``, what derives from it).

    Recursively along DERIVED_FROM and DEPENDS_ON, depth first, each node once.
    """
    steps: list[TraceStep] = []
    seen = {node_id}

    def visit(current: str, depth: int) -> None:
        if depth > max_depth:
            return
        direction = "in" if reverse else "out"
        for edge in edges_of(conn, current, direction):
            if edge.label not in PROVENANCE_LABELS:
                continue
            kind, key = (edge.from_kind, edge.from_key) if reverse else (edge.to_kind, edge.to_key)
            if kind != "node" or key in seen:
                continue
            seen.add(key)
            steps.append(TraceStep(key, depth, edge.label, current))
            visit(key, depth + 1)

    visit(node_id, 1)
    return steps


@dataclass(frozen=True)
class RelatedNode:
    """A node within ``depth`` edges: its distance and the first edge that reached it."""

    node_id: str
    distance: int
    label: str
    direction: str
    via: str


def related(conn: sqlite3.Connection, node_id: str, *, depth: int = 2,
            limit: int = 200) -> list[RelatedNode]:
    """Breadth-first neighbours of a node over edges in both directions."""
    found: list[RelatedNode] = []
    seen = {node_id}
    queue = deque([(node_id, 0)])
    while queue and len(found) < limit:
        current, dist = queue.popleft()
        if dist >= depth:
            continue
        for edge in edges_of(conn, current):
            outgoing = edge.from_kind == "node" and edge.from_key == current
            kind, key = (edge.to_kind, edge.to_key) if outgoing else (edge.from_kind, edge.from_key)
            if kind != "node" or key in seen:
                continue
            seen.add(key)
            found.append(RelatedNode(key, dist + 1, edge.label, "out" if outgoing else "in", current))
            queue.append((key, dist + 1))
    return found[:limit]
