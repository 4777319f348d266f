"""knowledge.recall: what <ctx:recall> and <ctx:expand> return."""

from __future__ import annotations

import time

import pytest
from conftest import session_of

from ctxstore.errors import InvalidInput, NodeNotFound
from ctxstore.index import open_index
from ctxstore.knowledge.nodes import add_node, forget_node, summarize_nodes
from ctxstore.knowledge.recall import expand_summary, parse_recall_limit, recall_nodes
from ctxstore.repo import Store


def test_recall_leaves_out_forgotten_nodes_and_honours_the_limit(store: Store) -> None:
    ids = [add_node(session_of(store), "fact", f"retry policy number {i}").node.id for i in range(5)]
    forget_node(session_of(store), ids[0])
    conn = open_index(store)
    found = [n.id for n in recall_nodes(conn, "retry", limit=10, now=time.time())]
    assert set(found) == set(ids[1:])
    assert len(recall_nodes(conn, "retry", limit=2, now=time.time())) == 2


def test_recall_refuses_a_blank_query(store: Store) -> None:
    with pytest.raises(InvalidInput):
        recall_nodes(open_index(store), "  ", limit=5, now=time.time())


@pytest.mark.parametrize("text, want", [(None, 20), ("1", 1), ("100", 100)])
def test_recall_limit_parses_the_attribute(text: str | None, want: int) -> None:
    assert parse_recall_limit(text) == want


@pytest.mark.parametrize("text", ["0", "101", "-1", "ten", ""])
def test_recall_limit_refuses_out_of_range(text: str) -> None:
    with pytest.raises(InvalidInput):
        parse_recall_limit(text)


def test_expand_returns_the_live_sources_of_a_summary(store: Store) -> None:
    a = add_node(session_of(store), "fact", "alpha").node.id
    b = add_node(session_of(store), "fact", "beta").node.id
    s = summarize_nodes(session_of(store), [a, b], "alpha and beta")[0].id
    got = expand_summary(open_index(store), s)
    assert got.summary.id == s and {n.id for n in got.sources} == {a, b}


def test_expand_refuses_a_node_that_is_not_a_summary(store: Store) -> None:
    a = add_node(session_of(store), "fact", "alpha").node.id
    with pytest.raises(InvalidInput):
        expand_summary(open_index(store), a)
    with pytest.raises(NodeNotFound):
        expand_summary(open_index(store), "01ZZZZZZZZZZZZZZZZZZZZZZZZ")
