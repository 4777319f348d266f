"""The relationship graph as use cases: ``ctx trace``, ``ctx related``, ``ctx debug graph|index``.

Each takes the ``Session`` and returns a record the front end renders: provenance and
neighbourhood walks with the nodes they reach (``graph.traverse``), the whole graph with its
endpoints named, the SCC view as lists (``graph.scc``: the stored view when current, else
rebuilt), and what each index holds for one key (``index.derived``). Reads only (the SCC view
rebuilt on the way is a derived object).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctxstore.errors import InvalidInput
from ctxstore.graph.scc import current_scc, members, node_name
from ctxstore.graph.traverse import RelatedNode, TraceStep, related, trace
from ctxstore.index.derived import IndexLookup, classify_key, graph_edges, lookup
from ctxstore.index.read import NodeRow, find_node, read_node, resolve_node_id
from ctxstore.records import dataclass

if TYPE_CHECKING:
    import sqlite3

    from ctxstore.session import Session

__all__ = ["ENDPOINT_KINDS", "TracedStep", "Trace", "RelatedHit", "Related", "NamedEdge",
           "SccReport", "KeyLookup", "trace_node", "related_nodes", "graph_export", "scc_report",
           "index_lookup"]

# The endpoint kinds ``ctx debug index`` takes written as ``kind:key``.
ENDPOINT_KINDS = ("file", "module", "item", "node", "diagnostic", "package", "target", "crate")


@dataclass(frozen=True, slots=True)
class TracedStep:
    """One step of a trace and the node it reached (None when that node is gone)."""

    step: TraceStep
    node: NodeRow | None


@dataclass(frozen=True, slots=True)
class Trace:
    """``ctx trace``: the node named, and what it derives from (or what derives from it)."""

    root: NodeRow
    reverse: bool
    steps: list[TracedStep]


@dataclass(frozen=True, slots=True)
class RelatedHit:
    """A node within reach, and the node itself (None when it is gone)."""

    found: RelatedNode
    node: NodeRow | None


@dataclass(frozen=True, slots=True)
class Related:
    """``ctx related``: the node named and its neighbours, nearest first."""

    root: NodeRow
    hits: list[RelatedHit]


@dataclass(frozen=True, slots=True)
class NamedEdge:
    """An edge of the relationship graph, its endpoints named ``kind:key``."""

    source: str
    target: str
    label: str


@dataclass(frozen=True, slots=True)
class SccReport:
    """The current SCC view as lists (``ctx debug graph --scc|--cycles``).

    Attributes:
        oid: The view's object id (hex).
        notices: A stale or damaged pointer that was rebuilt, named.
        heads: The commits the view is of (hex).
        groups: The members of each SCC, by SCC id, in topological order.
        cycles: The SCCs of more than one member.
        dag: The edges between SCCs (SCC ids).
        node_count: How many endpoints the graph has.
    """

    oid: str
    notices: list[str]
    heads: list[str]
    groups: list[list[str]]
    cycles: list[list[str]]
    dag: list[tuple[int, int]]
    node_count: int


@dataclass(frozen=True, slots=True)
class KeyLookup:
    """``ctx debug index KEY``: the endpoint KEY names and what each index holds for it."""

    kind: str
    value: str
    found: IndexLookup


def trace_node(session: Session, node_id: str, *, reverse: bool = False) -> Trace:
    """Provenance of a node: what it derives from (DERIVED_FROM, DEPENDS_ON), recursively.

    Args:
        session: The open session.
        node_id: A node id or a unique prefix.
        reverse: What derives from or depends on the node instead.

    Returns:
        The node and the steps, depth first.

    Raises:
        NodeNotFound: (E008) if no live node has that id; ``AmbiguousPrefix`` for a prefix
            of several.
    """
    conn = session.index()
    root = read_node(conn, node_id)
    steps = trace(conn, root.id, reverse=reverse)
    return Trace(root, reverse, [TracedStep(s, find_node(conn, s.node_id)) for s in steps])


def related_nodes(session: Session, node_id: str, *, depth: int = 2) -> Related:
    """The nodes within ``depth`` edges of a node, in either direction, nearest first.

    Args:
        session: The open session.
        node_id: A node id or a unique prefix.
        depth: Edge hops.

    Returns:
        The node and its neighbours with the nodes themselves.

    Raises:
        NodeNotFound: (E008) as ``trace_node``.
    """
    conn = session.index()
    root = read_node(conn, node_id)
    return Related(root, [RelatedHit(r, find_node(conn, r.node_id))
                          for r in related(conn, root.id, depth=depth)])


def graph_export(session: Session) -> list[NamedEdge]:
    """Every edge of the relationship graph (knowledge and code edges at HEAD and STAGE).

    Args:
        session: The open session.

    Returns:
        The edges, their endpoints named ``kind:key``, in the index's order.
    """
    return [NamedEdge(node_name(a, b), node_name(c, d), label)
            for a, b, c, d, label in graph_edges(session.index())]


def scc_report(session: Session) -> SccReport:
    """The SCC view of the graph as it is now: the stored one when current, else rebuilt.

    Args:
        session: The open session.

    Returns:
        The view as lists, with the notices of a pointer that was rebuilt.

    Raises:
        UnsafePath: (E020) for a hostile ``DERIVED``.
        CtxError: from the index or the object store.
    """
    found = current_scc(session.store, session.index())
    assert found.view is not None and found.oid is not None
    view = found.view
    groups = members(view)
    return SccReport(found.oid.hex(), list(found.notices), [h.hex() for h in view.heads], groups,
                     [m for m in groups if len(m) > 1],
                     list(zip(view.dag_from, view.dag_to, strict=True)), len(view.nodes))


def _endpoint(conn: sqlite3.Connection, key: str) -> tuple[str, str]:
    """KEY of ``ctx debug index`` as an endpoint (see ``index_lookup``)."""
    head, sep, rest = key.partition(":")
    if sep and head == "name":
        namespace, sep2, name = rest.partition(":")
        if not (sep2 and namespace and name):
            raise InvalidInput(f"{key!r}: write a name query as name:<namespace>:<name>")
        return f"name:{namespace}", name
    if sep and head in ENDPOINT_KINDS and rest:
        return head, rest
    found = classify_key(conn, key)
    if found is not None:
        return found
    try:
        return "node", resolve_node_id(conn, key)
    except InvalidInput:
        raise InvalidInput(f"{key!r} is not an indexed path, qualified name or node id",
                           hint="try name:item:<name> or kind:key (file:, module:, item:)") from None


def index_lookup(session: Session, key: str) -> KeyLookup:
    """What the path, name and stable-key indexes and the adjacency hold for ``key``.

    Args:
        session: The open session.
        key: A path, a qualified name, a node id (or unique prefix), an endpoint written
            ``kind:key``, or a name-index query ``name:<namespace>:<name>``.

    Returns:
        The endpoint and what each index holds for it.

    Raises:
        InvalidInput: if ``key`` names nothing indexed, or a name query is malformed.
    """
    conn = session.index()
    kind, value = _endpoint(conn, key)
    return KeyLookup(kind, value, lookup(conn, kind, value))
