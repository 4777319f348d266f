"""Compose never exceeds its budget and puts pinned nodes first."""

from __future__ import annotations

import sqlite3

from hypothesis import given
from hypothesis import strategies as st

from ctxstore.index.read import NodeRow
from ctxstore.index.schema import SCHEMA
from ctxstore.pack import compose, tier_of
from ctxstore.tokens import estimate_tokens

TIERS = ["tier:pinned", "tier:reference", "tier:working", "tier:off-context", None]
TYPES = ["fact", "decision", "pattern", "observation"]


@st.composite
def nodes(draw):
    count = draw(st.integers(0, 25))
    out = []
    for i in range(count):
        content = draw(st.text(min_size=1, max_size=600).filter(lambda s: s.strip()))
        tier = draw(st.sampled_from(TIERS))
        out.append(NodeRow(id=f"{i:08d}ABCDEFGHJKMNPQRS", type=draw(st.sampled_from(TYPES)),
                           content=content, content_blob=None, summary=None, status="active",
                           superseded_by=None, created_at=1, updated_at=draw(st.integers(0, 10**12)),
                           author=None, metadata={}, tokens=estimate_tokens(content), version=b"",
                           tags=[tier] if tier else []))
    return out


def _conn() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.executescript(SCHEMA)
    return conn


@given(nodes(), st.integers(40, 3000))
def test_compose_never_exceeds_budget_and_orders_tiers(items, budget) -> None:
    comp = compose(_conn(), items, budget, now_ms=1_700_000_000_000)
    assert estimate_tokens(comp.text) <= budget
    assert comp.tokens == estimate_tokens(comp.text)
    assert comp.text.startswith(f"<!-- ctx: {len(comp.nodes)} nodes, {comp.tokens} tokens")
    rank = {"pinned": 0, "reference": 1, "working": 2, None: 3, "off-context": 4}
    positions = [(rank[tier_of(n)], comp.text.index(f":{n.id[:8]}] ")) for n in comp.nodes] \
        if len({n.id[:8] for n in comp.nodes}) == len(comp.nodes) else []
    # sections appear in tier order: every pinned item precedes every reference item, ...
    for (r1, p1) in positions:
        for (r2, p2) in positions:
            if r1 < r2:
                assert p1 < p2
    assert len(comp.nodes) + comp.skipped == len(items)


@given(nodes())
def test_compose_with_ample_budget_includes_everything(items) -> None:
    comp = compose(_conn(), items, 10**7, now_ms=1_700_000_000_000)
    assert comp.skipped == 0 and len(comp.nodes) == len(items)
