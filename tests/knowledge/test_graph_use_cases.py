"""In-process tests of ``ctxstore.knowledge.graph``: the use cases behind ``ctx trace``,
``ctx related``, ``ctx debug graph`` and ``ctx debug index``, on real stores."""

from __future__ import annotations

import pytest
from conftest import session_of

from ctxstore.errors import InvalidInput, NodeNotFound
from ctxstore.knowledge.edges import link_nodes
from ctxstore.knowledge.graph import (
    graph_export,
    index_lookup,
    related_nodes,
    scc_report,
    trace_node,
)
from ctxstore.knowledge.nodes import add_node
from ctxstore.repo import Store


def _chain(store: Store) -> tuple[str, str, str]:
    """a DERIVED_FROM b DEPENDS_ON c, and c RELATES_TO a (a cycle of three)."""
    a, b, c = (add_node(session_of(store), "fact", t).node.id for t in ("alpha", "beta", "gamma"))
    link_nodes(session_of(store), a, b, "DERIVED_FROM")
    link_nodes(session_of(store), b, c, "DEPENDS_ON")
    link_nodes(session_of(store), c, a, "RELATES_TO")
    return a, b, c


def test_trace_walks_provenance_with_the_nodes_it_reaches(store: Store) -> None:
    a, b, c = _chain(store)
    found = trace_node(session_of(store), a[:10])
    assert found.root.id == a and not found.reverse
    assert [(t.step.node_id, t.step.depth, t.step.label, t.step.parent) for t in found.steps] == [
        (b, 1, "DERIVED_FROM", a), (c, 2, "DEPENDS_ON", b)]
    assert [t.node.content for t in found.steps if t.node] == ["beta", "gamma"]
    back = trace_node(session_of(store), c, reverse=True)
    assert [t.step.node_id for t in back.steps] == [b, a]  # RELATES_TO is not provenance
    with pytest.raises(NodeNotFound):
        trace_node(session_of(store), "01ZZZZZZZZZZZZZZZZZZZZZZZZ")


def test_related_is_nearest_first_in_both_directions(store: Store) -> None:
    a, b, c = _chain(store)
    found = related_nodes(session_of(store), b, depth=1)
    assert found.root.id == b
    assert sorted((h.found.node_id, h.found.distance, h.found.direction, h.node.content)
                  for h in found.hits if h.node) == sorted(
        [(a, 1, "in", "alpha"), (c, 1, "out", "gamma")])


def test_graph_export_names_endpoints_and_the_scc_report_finds_the_cycle(store: Store) -> None:
    a, b, c = _chain(store)
    edges = {(e.source, e.label, e.target) for e in graph_export(session_of(store))}
    assert edges == {(f"node:{a}", "DERIVED_FROM", f"node:{b}"),
                     (f"node:{b}", "DEPENDS_ON", f"node:{c}"),
                     (f"node:{c}", "RELATES_TO", f"node:{a}")}
    report = scc_report(session_of(store))
    assert report.cycles == [sorted(f"node:{n}" for n in (a, b, c))]
    assert report.groups == report.cycles and report.dag == [] and report.node_count == 3
    assert len(report.oid) == 64 and report.notices == [] and report.heads


def test_index_lookup_resolves_a_key_or_says_what_to_write(store: Store) -> None:
    a, b, _ = _chain(store)
    found = index_lookup(session_of(store), a[:10])
    assert (found.kind, found.value) == ("node", a)
    assert [r["key"] for r in found.found.forward] == [b]
    assert index_lookup(session_of(store), "name:item:connect").kind == "name:item"
    with pytest.raises(InvalidInput, match="name:<namespace>:<name>"):
        index_lookup(session_of(store), "name:item")
    with pytest.raises(InvalidInput, match="is not an indexed path"):
        index_lookup(session_of(store), "no/such/file.py")
