"""Import cycles between files, kept beside the code index (``file_sccs`` in ``code.sqlite``).

A pack widens its seeds by the files in an import cycle with them (spec 002 §9.5's
strongly connected components, restricted to what a pack reads: files and their
``Imports``). Loading the whole SCC view (``graph.scc``: every node of the graph, knowledge
included) costs a pack more than the rest of its work on a large tree, so ``ctx index``
computes the components of the import graph between files when the imports changed and
stores them in the code index, one row per file in a cycle; a pack reads the rows of its
seeds' components only (``index.retrieval.file_components``).

Tarjan's algorithm here is iterative and pure Python (no networkx on this path: a run of
``ctx index`` would pay its import for one function); 10,000 files and their imports take
a few tens of milliseconds.

It must not print. SQL lives in ``index/``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

__all__ = ["strong_components", "refresh_file_cycles"]


def strong_components(edges: Iterable[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected components of a directed graph with more than one member.

    Args:
        edges: ``(from, to)`` pairs.

    Returns:
        Each non-trivial component's members, sorted; the components sorted by their
        first member.
    """
    graph: dict[str, list[str]] = {}
    for a, b in edges:
        graph.setdefault(a, []).append(b)
        graph.setdefault(b, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, int]] = [(start, 0)]
        while work:
            node, pos = work.pop()
            if pos == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            succ = graph[node]
            while pos < len(succ):
                nxt = succ[pos]
                pos += 1
                if nxt not in index:
                    work.append((node, pos))
                    work.append((nxt, 0))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                if low[node] == index[node]:
                    comp: list[str] = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        comp.append(member)
                        if member == node:
                            break
                    if len(comp) > 1:
                        found.append(sorted(comp))
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
    return sorted(found)


def refresh_file_cycles(conn: sqlite3.Connection) -> int:
    """Recompute ``file_sccs`` from the code index's import edges (its own transaction).

    Args:
        conn: An index connection with the code database attached.

    Returns:
        How many import cycles there are.
    """
    from ctxstore.index.code import replace_file_sccs
    from ctxstore.index.retrieval import all_import_edges

    comps = strong_components(all_import_edges(conn))
    replace_file_sccs(conn, comps)
    return len(comps)
