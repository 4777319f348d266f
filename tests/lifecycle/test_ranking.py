"""Decay feeds compose's order within a tier (issue 16 item 1), from ``model.scoring``."""

from __future__ import annotations

from conftest import session_of, without_autolink
from hypothesis import given
from hypothesis import strategies as st

from ctxstore.index import open_index
from ctxstore.index.read import NodeRow, list_nodes
from ctxstore.knowledge.nodes import add_node
from ctxstore.model import scoring
from ctxstore.packs.compose import compose, compose_query
from ctxstore.repo import Store, now_ms

DAY = scoring.DAY_MS


def _orders(store: Store, at: int) -> tuple[list[str], list[str]]:
    """The node order of ``compose`` (a node list) and ``compose_query`` (a view's query)."""
    conn = open_index(store)
    try:
        listed = compose(conn, list_nodes(conn), 10_000, now_ms=at).nodes
        queried = compose_query(conn, "type:fact OR type:task OR type:decision", 10_000,
                                now_ms=at).nodes
        return [n.content for n in listed], [n.content for n in queried]
    finally:
        conn.close()


def test_ranking_decayed_memories_come_after_stable_ones_in_one_tier(store: Store) -> None:
    store = without_autolink(store)
    add_node(session_of(store), "fact", "the api listens on port 8443", tags=["tier:working"])
    add_node(session_of(store), "task", "rotate the signing keys", tags=["tier:working"])
    t0 = now_ms()
    # Fresh: scores tie, newest first.
    assert _orders(store, t0) == (["rotate the signing keys", "the api listens on port 8443"],) * 2
    # Twenty days on the task (half-life 7) has decayed below the stable fact.
    later = t0 + 20 * DAY
    assert _orders(store, later) == (["the api listens on port 8443", "rotate the signing keys"],) * 2


def test_ranking_priority_counts_and_tiers_still_come_first(store: Store) -> None:
    store = without_autolink(store)
    add_node(session_of(store), "decision", "use sqlite for the queue", tags=["tier:reference"],
             metadata={"priority": 2})
    add_node(session_of(store), "decision", "vendor the parser", tags=["tier:reference"],
             metadata={"priority": 9})
    add_node(session_of(store), "fact",
             "ci runs on every push", tags=["tier:working"], metadata={"priority": 10})
    listed, queried = _orders(store, now_ms())
    assert listed == queried == ["vendor the parser", "use sqlite for the queue",
                                 "ci runs on every push"]


@given(st.sampled_from(sorted(scoring.HALF_LIVES)), st.floats(0, 400), st.floats(0, 400))
def test_ranking_order_score_never_rises_with_age(node_type: str, a: float, b: float) -> None:
    young, old = sorted((a, b))
    n = NodeRow(id="01" + "A" * 24, type=node_type, content="x", content_blob=None, summary=None,
                status="active", superseded_by=None, created_at=0, updated_at=0, author=None,
                metadata={}, tokens=1, version=b"v", tags=[])
    assert scoring.order_score(n, now_ms=int(young * DAY)) >= scoring.order_score(n, now_ms=int(old * DAY))
