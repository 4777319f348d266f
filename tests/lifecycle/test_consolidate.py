"""Consolidation: proposals, apply (never loses a source), undo, and the CLI."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from conftest import invoke, session_of, store_digest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxstore.index import open_index
from ctxstore.index.read import edges_of, find_node, list_nodes
from ctxstore.init import init_store
from ctxstore.knowledge.autolink import similarity, word_set
from ctxstore.knowledge.nodes import add_node
from ctxstore.lifecycle.consolidate import apply_proposals, propose, undo_last
from ctxstore.repo import Store, open_store

WORDS = ["retry", "backoff", "jitter", "cache", "eviction", "sqlite", "wal", "index", "lock",
         "timeout", "budget", "merge", "clock", "ulid", "blob", "shard"]


def _brute_force_groups(nodes) -> set[tuple[str, ...]]:
    """Every pair scored: connected components of Jaccard >= 0.5 within one type."""
    words = {n.id: word_set(n.content) for n in nodes}
    parent = {n.id: n.id for n in nodes}

    def root(x: str) -> str:
        while parent[x] != x:
            x = parent[x]
        return x

    for a in nodes:
        for b in nodes:
            if a.id < b.id and a.type == b.type and similarity(words[a.id], words[b.id]) >= 0.5:
                parent[root(b.id)] = root(a.id)
    groups: dict[str, list[str]] = {}
    for n in nodes:
        groups.setdefault(root(n.id), []).append(n.id)
    return {tuple(sorted(g)) for g in groups.values() if len(g) > 1}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["fact", "pattern"]),
                          st.lists(st.sampled_from(WORDS), min_size=2, max_size=5, unique=True)),
                min_size=2, max_size=12))
@pytest.mark.slow
def test_consolidate_never_loses_a_source(tmp_path_factory, texts) -> None:
    root = tmp_path_factory.mktemp("c") / ".ctx"
    init_store(root, git=False)
    store = open_store(root)
    ids = [add_node(session_of(store), t, " ".join(words)).node.id for t, words in texts]
    conn = open_index(store)
    try:
        proposals = propose(conn)
        live = list_nodes(conn)
    finally:
        conn.close()
    assert {p.members for p in proposals} == _brute_force_groups(live)
    applied = apply_proposals(session_of(store), [p.id for p in proposals]) if proposals else []
    conn = open_index(store)
    try:
        for a in applied:
            summary = find_node(conn, a.summary_id)
            assert summary is not None and summary.type == "summary"
            derived = {e.to_key for e in edges_of(conn, a.summary_id, "out", "DERIVED_FROM")}
            assert derived == set(a.proposal.members)
        merged = {m for a in applied for m in a.proposal.members}
        for nid in ids:
            node = find_node(conn, nid)
            assert node is not None  # nothing deleted, nothing superseded
            assert node.superseded_by is None
            if nid in merged:
                assert node.status == "archived"
                assert any(e.label == "DERIVED_FROM" for e in edges_of(conn, nid, "in"))
            for p in proposals:  # a proposal holds one type only
                assert len({find_node(conn, m).type for m in p.members}) == 1
    finally:
        conn.close()


def test_consolidate_apply_then_undo_restores_the_sources(store: Store) -> None:
    a = add_node(session_of(store), "fact",
                 "retries use exponential backoff with jitter", tags=["tier:reference"]).node
    b = add_node(session_of(store), "fact", "exponential backoff with jitter for retries").node
    add_node(session_of(store), "fact", "the index lives in sqlite")
    conn = open_index(store)
    try:
        [proposal] = propose(conn)
    finally:
        conn.close()
    assert proposal.members == tuple(sorted([a.id, b.id]))
    [done] = apply_proposals(session_of(store), [proposal.id[:6]], content="Retries back off exponentially.")
    conn = open_index(store)
    try:
        assert find_node(conn, done.summary_id).content == "Retries back off exponentially."
        assert find_node(conn, a.id).status == "archived"
        assert propose(conn) == []
    finally:
        conn.close()
    removed, _ = undo_last(session_of(store))
    assert removed == done.summary_id
    conn = open_index(store)
    try:
        assert find_node(conn, done.summary_id) is None
        back = find_node(conn, a.id)
        assert back.status == "active" and "tier:reference" in back.tags
        assert find_node(conn, b.id).status == "active"
    finally:
        conn.close()


def test_consolidate_cli_lists_applies_and_undoes(runner: CliRunner, store: Store) -> None:
    invoke(runner, store, "add", "--type", "pattern", "wrap sqlite writes in one transaction")
    invoke(runner, store, "add", "--type", "pattern", "wrap sqlite writes in a single transaction")
    res = invoke(runner, store, "--format", "json", "consolidate", "--dry-run")
    assert res.exit_code == 0, res.output
    [p] = json.loads(res.stdout)["proposals"]
    assert p["type"] == "pattern" and len(p["members"]) == 2
    res = invoke(runner, store, "consolidate", "--apply", p["id"])
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith("consolidated 2 pattern nodes into summary ")
    assert invoke(runner, store, "consolidate").stdout == "no merge proposals\n"
    res = invoke(runner, store, "consolidate", "--undo")
    assert res.exit_code == 0 and res.stdout.startswith("undid consolidation ")


def test_consolidate_cli_unknown_id_is_an_error_and_changes_nothing(runner: CliRunner,
                                                                    store: Store) -> None:
    invoke(runner, store, "add", "--type", "fact", "alpha beta gamma")
    before = store_digest(store.root)
    res = invoke(runner, store, "consolidate", "--apply", "ffffffffffff")
    assert (res.exit_code, res.stdout) == (1, "")
    assert res.stderr.startswith("ctx: error[E011]: unknown consolidation proposal 'ffffffffffff'")
    res = invoke(runner, store, "consolidate", "--undo")
    assert (res.exit_code, res.stdout) == (1, "")
    assert res.stderr.startswith("ctx: error[E")
    assert "no consolidation to undo" in res.stderr
    assert store_digest(store.root) == before
