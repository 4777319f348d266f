"""In-process tests of ``ctxstore.knowledge.edges``, ``views`` and ``status`` on real stores,
and of the old modules that re-export them."""

from __future__ import annotations

import pytest
from conftest import session_of, store_digest

from ctxstore.errors import InvalidInput, NodeNotFound
from ctxstore.index import open_index
from ctxstore.index.read import edges_of
from ctxstore.knowledge import edges as ke
from ctxstore.knowledge import status as ks
from ctxstore.knowledge import views as kv
from ctxstore.knowledge.nodes import add_node, supersede_node
from ctxstore.repo import Store


def labels(store: Store, node_id: str) -> list[str]:
    conn = open_index(store)
    try:
        return [e.label for e in edges_of(conn, node_id, "out")]
    finally:
        conn.close()


def test_link_and_unlink_are_idempotent(store: Store) -> None:
    a, b = (add_node(session_of(store), "fact", t).node.id for t in ("a", "b"))
    assert ke.link_nodes(session_of(store), a, b, "depends-on").changed
    assert not ke.link_nodes(session_of(store), a[:10], b[:10], "DEPENDS_ON").changed
    ke.link_nodes(session_of(store), a, b, "relates_to")
    assert labels(store, a) == ["DEPENDS_ON", "RELATES_TO"]
    assert len(ke.unlink_nodes(session_of(store), a, b, "DEPENDS_ON").records) == 1
    assert not ke.unlink_nodes(session_of(store), a, b, "DEPENDS_ON").changed
    assert ke.unlink_nodes(session_of(store), a, b).changed and labels(store, a) == []


def test_link_refuses_self_loops_and_unknown_types_writing_nothing(store: Store) -> None:
    a = add_node(session_of(store), "fact", "a").node.id
    before = store_digest(store.root)
    with pytest.raises(InvalidInput, match="two different nodes"):
        ke.link_nodes(session_of(store), a, a, "RELATES_TO")
    with pytest.raises(InvalidInput, match="unknown edge type"):
        ke.link_nodes(session_of(store), a, a, "Calls")
    assert store_digest(store.root) == before


def test_views_create_update_list_delete(store: Store) -> None:
    kv.create_view(session_of(store), "facts", "type:fact", 100, "all facts")
    with pytest.raises(InvalidInput, match="exists"):
        kv.create_view(session_of(store), "facts", "type:fact", 100)
    kv.update_view(session_of(store), "facts", budget=200)
    conn = open_index(store)
    try:
        got = kv.get_view(conn, "facts")
        assert (got.query, got.budget, got.description) == ("type:fact", 200, "all facts")
        assert [v.name for v in kv.list_views(conn)] == ["default", "facts"]
        assert kv.get_view(conn, "default", default_budget=7).budget == 7
    finally:
        conn.close()
    kv.delete_view(session_of(store), "facts")
    with pytest.raises(NodeNotFound):
        kv.delete_view(session_of(store), "facts")


def test_views_refuse_bad_names_budgets_and_queries(store: Store) -> None:
    before = store_digest(store.root)
    for args, match in ((("bad name", "x", 1), "invalid view name"), (("v", "x", 0), "budget"),
                        (("v", "(", 1), "query syntax error")):
        with pytest.raises(InvalidInput, match=match):
            kv.create_view(session_of(store), *args)
    with pytest.raises(InvalidInput, match="nothing to update"):
        kv.update_view(session_of(store), "default")
    assert store_digest(store.root) == before


def test_update_of_the_builtin_default_view_saves_it(store: Store) -> None:
    kv.update_view(session_of(store), "default", budget=123)
    conn = open_index(store)
    try:
        got = kv.get_view(conn, "default")
    finally:
        conn.close()
    assert (got.builtin, got.budget, got.query) == (False, 123, kv.DEFAULT_VIEW_QUERY)


def test_store_status_counts_nodes_types_tiers_edges_and_staged_work(store: Store) -> None:
    a = add_node(session_of(store), "fact", "alpha beta", tags=["tier:working", "x"]).node.id
    b = add_node(session_of(store), "decision", "gamma", tags=["tier:pinned"]).node.id
    supersede_node(session_of(store), a, b)
    conn = open_index(store)
    try:
        st = ks.store_status(store, conn, kind="project")
    finally:
        conn.close()
    assert (st.nodes, st.edges, st.tags, st.superseded, st.kind) == (2, 1, 3, 1, "project")
    assert st.by_type == {"decision": 1, "fact": 1}
    assert list(st.tiers) == ["pinned", "reference", "working", "off-context"]
    assert st.tiers["pinned"][0] == 1 and st.tiers["working"][0] == 1
    assert st.tiers["reference"] == (0, 0)
    assert st.tokens == st.tiers["pinned"][1] + st.tiers["working"][1] > 0
    assert st.staged_records == 4 and st.staged_work_commits >= 3
    assert st.concurrent == [] and st.size_bytes > 0
