"""Decay math against spec 003's formula (property tests) and the shared rank formula."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from ctxstore.index.read import NodeRow
from ctxstore.model import scoring

TYPES = st.sampled_from(sorted(scoring.HALF_LIVES))
DAYS = st.floats(min_value=0, max_value=3650, allow_nan=False)
CONF = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


def node(node_type: str, *, updated_at: int = 0, confidence: float | None = None,
         tags: list[str] | None = None, metadata: dict | None = None) -> NodeRow:
    meta = dict(metadata or {})
    if confidence is not None:
        meta["confidence"] = confidence
    return NodeRow(id="01" + "A" * 24, type=node_type, content="x", content_blob=None,
                   summary=None, status="active", superseded_by=None, created_at=updated_at,
                   updated_at=updated_at, author=None, metadata=meta, tokens=1, version=b"v",
                   tags=list(tags or []))


def spec_half_life(node_type: str, pinned: bool, access: int, centrality: float) -> float | None:
    """Spec 003's table and modifiers, written out independently of the module."""
    table = {"fact": None, "decision": None, "pattern": 60, "open-question": 45,
             "hypothesis": 45, "task": 7, "observation": 30, "summary": None, "source": None}
    half = table[node_type]
    if half is None or pinned:
        return None
    return half * (2 if access > 10 else 1) * (2 if centrality > 0.5 else 1)


@given(TYPES, DAYS, CONF, st.booleans(), st.integers(0, 50), st.floats(0, 1))
def test_scoring_node_confidence_is_the_spec_formula(node_type: str, days: float, initial: float,
                                                     pinned: bool, access: int,
                                                     centrality: float) -> None:
    n = node(node_type, confidence=initial, tags=["tier:pinned"] if pinned else [])
    now = int(days * scoring.DAY_MS)
    got = scoring.node_confidence(n, now_ms=now, access_count=access, centrality=centrality)
    half = spec_half_life(node_type, pinned, access, centrality)
    # confidence = initial_confidence * (0.5 ^ (days_since_update / half_life))
    want = initial if half is None else initial * 0.5 ** ((now / scoring.DAY_MS) / half)
    assert math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12)
    assert 0.0 <= got <= initial


@given(TYPES, CONF, st.integers(0, 50), st.floats(0, 1))
def test_scoring_days_until_below_is_where_the_curve_crosses(node_type: str, initial: float,
                                                             access: int, centrality: float) -> None:
    n = node(node_type, confidence=initial)
    days = scoring.days_until_below(n, 0.3, access_count=access, centrality=centrality)
    if initial < 0.3:
        assert days == 0.0
        return
    if spec_half_life(node_type, False, access, centrality) is None:
        assert days is None
        return
    assert days is not None
    at = int(days * scoring.DAY_MS)
    conf = scoring.node_confidence(n, now_ms=at + scoring.DAY_MS, access_count=access,
                                   centrality=centrality)
    assert conf < 0.3 or initial == 0.3
    before = scoring.node_confidence(n, now_ms=max(at - scoring.DAY_MS, 0), access_count=access,
                                     centrality=centrality)
    assert before >= 0.3 or days < 1


def test_scoring_half_life_doubles_for_access_and_centrality() -> None:
    assert scoring.effective_half_life(30.0) == 30.0
    assert scoring.effective_half_life(30.0, access_count=11) == 60.0
    assert scoring.effective_half_life(30.0, access_count=10) == 30.0
    assert scoring.effective_half_life(30.0, centrality=0.6, access_count=11) == 120.0
    assert scoring.effective_half_life(30.0, pinned=True) is None
    assert scoring.effective_half_life(None) is None


def test_scoring_spec_memory_type_metadata_decides_the_half_life() -> None:
    n = node("fact", metadata={"memory_type": "progress"})
    assert math.isclose(scoring.node_confidence(n, now_ms=7 * scoring.DAY_MS), 0.5)


def test_scoring_bad_metadata_counts_as_defaults() -> None:
    n = node("task", metadata={"confidence": "nan", "priority": [1]})
    assert scoring.initial_confidence(n) == 1.0
    assert scoring.priority_of(n) == 5


@given(CONF, st.integers(1, 10), st.floats(0, 1), st.integers(0, 1000))
def test_scoring_rank_is_the_spec_formula(conf: float, priority: int, centrality: float,
                                          access: int) -> None:
    max_log = math.log(1001)
    want = (conf * 0.5 + priority / 10 * 0.2 + centrality * 0.15
            + math.log(access + 1) / max_log * 0.15)
    assert math.isclose(scoring.rank_score(conf, priority, centrality, access, max_log), want)
