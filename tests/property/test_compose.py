"""Compose never exceeds its budget and puts pinned nodes first."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxstore.errors import BudgetExceeded
from ctxstore.index.read import NodeRow
from ctxstore.index.schema import SCHEMA
from ctxstore.packs.compose import compose, tier_of
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


def test_compose_query_ranks_in_sql_as_compose_does(store) -> None:
    """compose_query ranks and orders candidates in SQLite; the result must be the text,
    skipped count and edges that ``compose`` gives for the same rows: several tier tags on
    one node (the best wins), a ``tier:`` tag that is no tier, untiered nodes, equal
    ``updated_at`` (ties broken by id), superseded nodes, expanded (forced) nodes."""
    import random

    from ctxstore.index import open_index
    from ctxstore.model.knowledge import EdgeRecord, NodeRecord
    from ctxstore.packs.compose import compose_query
    from ctxstore.query.executor import run_query
    from ctxstore.staging import stage_records

    rnd = random.Random(11)
    tag_sets = [["tier:pinned"], ["tier:reference"], ["tier:working"], ["tier:off-context"], [],
                ["tier:working", "tier:pinned"], ["tier:off-context", "tier:reference"],
                ["tier:archive"], ["tier:archive", "tier:working"], ["project:x", "tier:working"]]
    records: list = []
    for i in range(150):
        node_id = f"01J{i:04d}" + "".join(rnd.choice("0123456789ABCDEFGHJKMNPQRSTVWXYZ")
                                          for _ in range(19))
        stamp = 1_700_000_000_000 + rnd.randint(0, 20) * 1000  # many equal stamps
        records.append(NodeRecord(
            id=node_id, type=rnd.choice(TYPES), content=" word" * rnd.randint(1, 80) + f" n{i} ",
            content_blob=None, summary=None, tags=tuple(sorted(rnd.choice(tag_sets))),
            metadata={"rationale": "because"} if i % 7 == 0 else {}, status="active",
            superseded_by=records[-1].id if i % 31 == 30 else None, created_at=stamp,
            updated_at=stamp, author=None, prev=None))
    ids = [r.id for r in records]
    edges = [EdgeRecord(from_ref=("node", ids[i]), to_ref=("node", ids[(i * 7) % len(ids)]),
                        label=rnd.choice(["DEPENDS_ON", "DERIVED_FROM"]), weight=None, metadata={},
                        evidence=None, created_at=1_700_000_000_000, updated_at=1_700_000_000_000,
                        prev=None) for i in range(0, 150, 3) if (i * 7) % len(ids) != i]
    stage_records(store, [*records, *edges], message="compose ranking")
    conn = open_index(store)
    forced = frozenset(rnd.sample(ids, 12))
    for query in ("tag:tier:pinned OR tag:tier:reference OR tag:tier:working", "word",
                  "NOT tag:tier:working", "type:fact OR tag:tier:archive"):
        rows = run_query(conn, query, now=1_700_000_000)
        assert rows, query
        for budget in (45, 120, 700, 3000, 10**6):
            for force in (frozenset(), forced):
                sql = compose_query(conn, query, budget, now_ms=1_700_000_000_000, force_ids=force)
                full = compose(conn, rows, budget, now_ms=1_700_000_000_000, force_ids=force)
                assert (sql.text, sql.skipped, sql.edges) == (full.text, full.skipped, full.edges), \
                    (query, budget, bool(force))
                assert [n.id for n in sql.nodes] == [n.id for n in full.nodes]


@given(nodes(), st.integers(1, 600))
@pytest.mark.slow
def test_compose_shows_a_node_whenever_one_fits_with_its_frame(items, budget) -> None:
    now = 1_700_000_000_000
    empty = compose(_conn(), [], 10**7, now_ms=now).tokens
    if budget < empty:  # below the frame itself: refused (E010)
        with pytest.raises(BudgetExceeded):
            compose(_conn(), items, budget, now_ms=now)
        return
    comp = compose(_conn(), items, budget, now_ms=now)
    assert estimate_tokens(comp.text) == comp.tokens <= budget
    alone = [compose(_conn(), [n], 10**7, now_ms=now).tokens for n in items]
    if alone and min(alone) <= budget:  # the frame is charged at the numbers it prints
        assert comp.nodes
