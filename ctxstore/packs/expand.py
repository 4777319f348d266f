"""A pack's graph expansion (spec 002 §12, step 2): the files around its seeds.

The files of a seed's strongly connected component when the SCC view exists
(``graph.scc.load_scc``, no networkx), then breadth-first over ``Imports`` edges (both
directions) from the seed files, up to a depth and a number of files; each expanded file
keeps the edge path that reached it.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ctxstore.index.retrieval import import_edges

if TYPE_CHECKING:
    import sqlite3

    from ctxstore.session import Session

__all__ = ["components", "expand"]


def components(session: Session, seeds: Sequence[str]) -> tuple[bool, dict[str, list[str]]]:
    """Files in a seed's strongly connected component (an import cycle), from the SCC view.

    Returns whether a view was read (``DERIVED/scc_latest``; none before ``ctx rebuild`` or a
    commit builds it) and file -> ``[seed, "SameComponent", file]``.
    """
    from ctxstore.graph.scc import load_scc

    view = load_scc(session.root).view
    if view is None:
        return False, {}
    wanted: dict[int, str] = {}
    for seed in seeds:
        at = bisect.bisect_left(view.nodes, f"file:{seed}")
        if at < len(view.nodes) and view.nodes[at] == f"file:{seed}":
            wanted.setdefault(view.scc_of[at], seed)
    found: dict[str, list[str]] = {}
    for name, scc in zip(view.nodes, view.scc_of, strict=True):
        origin = wanted.get(scc)
        if origin is not None and name.startswith("file:") and name[5:] not in seeds:
            found.setdefault(name[5:], [origin, "SameComponent", name[5:]])
    return True, found


def expand(conn: sqlite3.Connection, seeds: Sequence[str], depth: int, limit: int
            ) -> dict[str, list[str]]:
    """Breadth-first over import edges from the seeds: file -> edge path from its seed."""
    reached: dict[str, list[str]] = {s: [s] for s in seeds}
    frontier = list(seeds)
    for _ in range(depth):
        if not frontier or len(reached) >= limit + len(seeds):
            break
        step: list[str] = []
        current = set(frontier)
        for importer, imported in import_edges(conn, frontier):
            for here, there, label in ((imported, importer, "ImportedBy"),
                                       (importer, imported, "Imports")):
                if here in current and there not in reached \
                        and len(reached) < limit + len(seeds):
                    reached[there] = [*reached[here], label, there]
                    step.append(there)
        frontier = step
    return {f: p for f, p in reached.items() if f not in seeds}
