"""Replay is order-independent: any order of the same batches gives the same state."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from ctxstore.model.knowledge import EdgeRecord, NodeRecord, NodeRemoved, ViewRecord, ViewRemoved
from ctxstore.replay import KnowledgeState, fold_records

ids = st.sampled_from(["N1", "N2", "N3"])
stamps = st.integers(0, 5)  # few stamps: ties are common and must break the same way


@st.composite
def records(draw):
    kind = draw(st.sampled_from(["node", "node_removed", "edge", "view", "view_removed"]))
    t = draw(stamps)
    if kind == "node":
        return NodeRecord(id=draw(ids), type="fact", content=draw(st.sampled_from(["a", "b", "c"])),
                          content_blob=None, summary=None, tags=(), metadata={}, status="active",
                          superseded_by=None, created_at=0, updated_at=t, author=None, prev=None)
    if kind == "node_removed":
        return NodeRemoved(id=draw(ids), at=t, prev=None)
    if kind == "edge":
        return EdgeRecord(from_ref=("node", draw(ids)), to_ref=("node", draw(ids)),
                          label="RELATES_TO", weight=None, metadata={}, evidence=None,
                          created_at=0, updated_at=t, prev=None)
    if kind == "view":
        return ViewRecord(name="v", query=draw(st.sampled_from(["q1", "q2"])), budget=100,
                          description=None, created_at=0, updated_at=t, prev=None)
    return ViewRemoved(name="v", at=t, prev=None)


batches = st.lists(st.lists(records(), max_size=4), min_size=1, max_size=5)


def _state(batch_list) -> str:
    s = KnowledgeState()
    for batch in batch_list:
        for rec in batch:
            s.offer(rec)
    return s.digest()


@given(batches)
def test_replay_every_batch_order_gives_the_same_state(batch_list) -> None:
    want = _state(batch_list)
    for order in itertools.islice(itertools.permutations(batch_list), 24):
        assert _state(order) == want


@given(batches, batches)
def test_replay_merge_is_commutative_and_idempotent(left, right) -> None:
    assert _state(left + right) == _state(right + left)
    assert _state(left + right + left) == _state(left + right)


@given(st.lists(records(), max_size=12))
def test_fold_keeps_exactly_the_winners(recs) -> None:
    folded = fold_records(recs)
    assert _state([folded]) == _state([recs])
    assert len(folded) == len({tuple(_key(r)) for r in recs})


def _key(r):
    from ctxstore.model.knowledge import record_key
    return record_key(r)


def test_replay_newer_stamp_wins_and_tombstone_counts() -> None:
    old = NodeRecord(id="N", type="fact", content="old", content_blob=None, summary=None, tags=(),
                     metadata={}, status="active", superseded_by=None, created_at=0, updated_at=1,
                     author=None, prev=None)
    new = NodeRecord(id="N", type="fact", content="new", content_blob=None, summary=None, tags=(),
                     metadata={}, status="active", superseded_by=None, created_at=0, updated_at=2,
                     author=None, prev=None)
    s = KnowledgeState()
    for rec in (new, old):
        s.offer(rec)
    assert s.nodes["N"].content == "new"
    s.offer(NodeRemoved(id="N", at=3, prev=None))
    assert "N" not in s.nodes
