"""A pack's graph expansion (spec 002 §12, step 2): the files around its seeds.

The files in an import cycle with a seed (its strongly connected component, ``file_sccs``
kept by ``ctx index``: ``graph.cycles``), then breadth-first over ``Imports`` edges (both
directions) from the seed files, up to a depth and a number of files; each expanded file
keeps the edge path that reached it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ctxstore.index.retrieval import import_edges

if TYPE_CHECKING:
    import sqlite3


__all__ = ["components", "expand"]


def components(conn: sqlite3.Connection, seeds: Sequence[str]
               ) -> tuple[bool, dict[str, list[str]]]:
    """Files in an import cycle with a seed (its strongly connected component).

    Read from the code index's ``file_sccs`` (``graph.cycles``, kept by ``ctx index``): only
    the rows of the seeds' components. Returns whether the components were current (computed
    at the code index's generation) and file -> ``[seed, "SameComponent", file]``.
    """
    from ctxstore.index.retrieval import file_components, file_sccs_current

    found = {member: [seed, "SameComponent", member]
             for member, seed in file_components(conn, seeds).items() if member not in seeds}
    return file_sccs_current(conn), found


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
