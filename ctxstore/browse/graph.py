"""The graph page: the knowledge and code graph, with its cycles, small enough to draw.

The edges are ``ctx debug graph``'s (knowledge edges and code edges at HEAD and STAGE). Two
levels: ``files`` (the default) folds every module and item into the file that contains it
(``Contains`` edges), drops the structural edges inside a file, and leaves out endpoints that
lie in no indexed file (external modules); ``all`` keeps every endpoint. Cycles come from the
SCC view (spec 002 §9.5): the stored ``DERIVED/scc_latest`` when it is current, else the view
computed in memory and not stored (this page writes nothing). At most ``limit`` nodes are
returned: the cycle members first, then knowledge nodes, then the most connected; ``focus``
keeps the neighbourhood of one endpoint instead.
"""

from __future__ import annotations

import sqlite3
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from ctxstore.errors import InvalidInput
from ctxstore.graph.scc import compute_scc, cycles, load_scc, node_name, split_node
from ctxstore.index import read as index_read
from ctxstore.index.derived import graph_edges
from ctxstore.records import dataclass
from ctxstore.replay import state_heads

if TYPE_CHECKING:
    from ctxstore.model.derived import SccView
    from ctxstore.session import Session

__all__ = ["GraphNode", "GraphLink", "GraphPage", "read_graph", "LEVELS", "MAX_LIMIT"]

Level = Literal["files", "all"]
LEVELS: tuple[Level, ...] = ("files", "all")
MAX_LIMIT = 2000  # a force layout in a browser page stays interactive up to about this
_STRUCTURE = frozenset({"Contains", "Defines"})
_CONTAINER_DEPTH = 32  # Contains chains are short; a longer one is a loop in a hostile index
_FOCUS_DEPTH = 2
Edges = list[tuple[str, str, str, str, str]]
Shown = Callable[[str, str], "str | None"]  # an endpoint -> its name at the page's level


@dataclass(frozen=True, slots=True)
class GraphNode:
    """A node of the drawing.

    Attributes:
        id: The endpoint, ``kind:key`` (``node:ID``, ``file:PATH``, ...).
        kind: Its kind.
        key: Its key.
        label: A short label (a file's name, a node's first words).
        title: The long label (the path, the node's type and first line).
        type: A knowledge node's type (None for code).
        cycle: The index in ``GraphPage.cycles`` of the cycle it belongs to, or None.
        degree: Its number of links in the whole graph at this level.
    """

    id: str
    kind: str
    key: str
    label: str
    title: str
    type: str | None
    cycle: int | None
    degree: int


@dataclass(frozen=True, slots=True)
class GraphLink:
    """A link of the drawing, between two of its nodes (indexes into ``GraphPage.nodes``).

    Attributes:
        source: The index of the node it leaves.
        target: The index of the node it reaches.
        labels: The edge labels it stands for (several edges may fold into one link).
        cycle: True when both ends lie in the same cycle.
    """

    source: int
    target: int
    labels: tuple[str, ...]
    cycle: bool


@dataclass(frozen=True, slots=True)
class GraphPage:
    """The graph page.

    Attributes:
        level: ``files`` or ``all``.
        nodes: The nodes drawn.
        links: The links between them.
        cycles: Each cycle's members at this level (``kind:key``), those drawn or not.
        total_nodes: The nodes of the whole graph at this level.
        total_links: Its links.
        focus: The endpoint whose neighbourhood was asked for, if any.
        scc_view: The id (hex) of the stored SCC view used, or None when it was computed here.
    """

    level: Level
    nodes: tuple[GraphNode, ...]
    links: tuple[GraphLink, ...]
    cycles: tuple[tuple[str, ...], ...]
    total_nodes: int
    total_links: int
    focus: str | None
    scc_view: str | None


def read_graph(db: Session, *, level: str = "files", limit: int = 600,
               focus: str | None = None) -> GraphPage:
    """The graph to draw, with its cycles.

    Args:
        db: The open session.
        level: ``files`` (modules and items folded into their files) or ``all``.
        limit: The most nodes (1 to ``MAX_LIMIT``).
        focus: An endpoint (``kind:key``, or a node id): only the nodes within two links of it.

    Returns:
        The page.

    Raises:
        InvalidInput: (E011) for an unknown level, a limit out of range or a focus that is not
            in the graph.
        CtxError: a damaged store or index.
    """
    if level not in LEVELS:
        raise InvalidInput(f"level must be one of {', '.join(LEVELS)}, not {level!r}")
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit must be between 1 and {MAX_LIMIT}, not {limit}")
    conn = db.index()
    edges = graph_edges(conn)
    view, view_id = _scc_view(db, edges)
    fold = _folder(edges) if level == "files" else None

    def shown(kind: str, key: str) -> str | None:
        name = node_name(kind, key)
        return name if fold is None else fold(name)

    links: dict[tuple[str, str], list[str]] = {}
    names: set[str] = set()
    for fk, fkey, tk, tkey, label in edges:
        a, b = shown(fk, fkey), shown(tk, tkey)
        if a is None or b is None:
            continue
        names.update((a, b))
        if a == b or (fold is not None and label in _STRUCTURE):
            continue
        found = links.setdefault((a, b), [])
        if label not in found:
            found.append(label)
    cycle_sets = _cycles(view, shown)
    cycle_of = {name: i for i, members in enumerate(cycle_sets) for name in members}
    degree: dict[str, int] = dict.fromkeys(names, 0)
    for a, b in links:
        degree[a] += 1
        degree[b] += 1
    if focus is not None:
        focus = _focus_name(conn, focus, names, shown)
        chosen = _neighbourhood(focus, links, limit)
    else:
        order = sorted(names, key=lambda n: (n not in cycle_of, not n.startswith("node:"),
                                             -degree[n], n))
        chosen = order[:limit]
    keep = {name: i for i, name in enumerate(chosen)}
    nodes = _described(conn, chosen, cycle_of, degree)
    drawn = tuple(GraphLink(keep[a], keep[b], tuple(sorted(labels)),
                            a in cycle_of and cycle_of[a] == cycle_of.get(b))
                  for (a, b), labels in sorted(links.items()) if a in keep and b in keep)
    return GraphPage(level, nodes, drawn, tuple(tuple(sorted(c)) for c in cycle_sets),
                     len(names), len(links), focus, view_id)


def _scc_view(db: Session, edges: Edges) -> tuple[SccView, str | None]:
    """The stored SCC view when it was read at the current heads, else one computed here."""
    heads = tuple(sorted(set(state_heads(db.store))))
    found = load_scc(db.root)
    if found.view is not None and found.oid is not None and found.view.heads == heads:
        return found.view, found.oid.hex()
    return compute_scc(edges, heads), None


def _folder(edges: Edges) -> Callable[[str], str | None]:
    """``kind:key`` -> the file that contains it (``Contains`` edges), itself, or None."""
    parent: dict[str, str] = {}
    for fk, fkey, tk, tkey, label in edges:
        if label == "Contains":
            parent.setdefault(node_name(tk, tkey), node_name(fk, fkey))
    memo: dict[str, str | None] = {}

    def fold(name: str) -> str | None:
        if name in memo:
            return memo[name]
        at, steps = name, 0
        while at in parent and steps < _CONTAINER_DEPTH and not at.startswith("file:"):
            at, steps = parent[at], steps + 1
        kind = split_node(at)[0]
        # A module or item inside no indexed file is outside the project (an import of os).
        result = None if kind in ("module", "item") else at
        memo[name] = result
        return result

    return fold


def _cycles(view: SccView, shown: Shown) -> list[set[str]]:
    """The view's cycles at this level: members mapped, those that still join two nodes."""
    out = []
    for members in cycles(view):
        mapped = {m for m in (shown(*split_node(name)) for name in members) if m is not None}
        if len(mapped) > 1:
            out.append(mapped)
    return out


def _focus_name(conn: sqlite3.Connection, focus: str, names: set[str], shown: Shown) -> str:
    """The drawn name of the focus endpoint (a node id alone means ``node:ID``)."""
    kind, sep, key = focus.partition(":")
    if not sep:
        kind, key = "node", index_read.resolve_node_id(conn, focus)
    name = shown(kind, key)
    if name is None or name not in names:
        raise InvalidInput(f"{focus!r} is not in the graph at this level")
    return str(name)


def _neighbourhood(focus: str, links: dict[tuple[str, str], list[str]], limit: int) -> list[str]:
    """The nodes within ``_FOCUS_DEPTH`` links of ``focus``, nearest first."""
    around: dict[str, list[str]] = {}
    for a, b in links:
        around.setdefault(a, []).append(b)
        around.setdefault(b, []).append(a)
    seen = {focus: 0}
    queue = deque([focus])
    while queue and len(seen) < limit:
        at = queue.popleft()
        if seen[at] >= _FOCUS_DEPTH:
            continue
        for other in sorted(around.get(at, ())):
            if other not in seen and len(seen) < limit:
                seen[other] = seen[at] + 1
                queue.append(other)
    return list(seen)


def _described(conn: sqlite3.Connection, chosen: list[str], cycle_of: dict[str, int],
               degree: dict[str, int]) -> tuple[GraphNode, ...]:
    """The drawn nodes with their labels (a knowledge node's from its content)."""
    ids = [split_node(n)[1] for n in chosen if n.startswith("node:")]
    found = {n.id: n for n in index_read.nodes_by_ids(conn, ids)} if ids else {}
    out = []
    for name in chosen:
        kind, key = split_node(name)
        node = found.get(key) if kind == "node" else None
        if node is not None:
            first = next((x.strip() for x in node.content.splitlines() if x.strip()), "")
            label = first if len(first) <= 40 else first[:39] + "…"
            title = f"{node.type}: {first}"
        else:
            label = key.rsplit("/", 1)[-1] if kind == "file" else key
            label = label if len(label) <= 40 else "…" + label[-39:]
            title = name
        out.append(GraphNode(name, kind, key, label, title, node.type if node else None,
                             cycle_of.get(name), degree.get(name, 0)))
    return tuple(out)
