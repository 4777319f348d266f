"""Auto-linking on write (spec 003 table) and the extended edge vocabulary."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from conftest import invoke, session_of

from ctxstore.index import open_index
from ctxstore.index.read import edges_of
from ctxstore.knowledge.autolink import similarity, word_set
from ctxstore.knowledge.nodes import add_node
from ctxstore.knowledge.remember import remember
from ctxstore.repo import Store, open_store


@pytest.fixture
def store(store: Store) -> Store:
    """The conftest store with auto-linking turned on."""
    (store.root / "config.toml").write_text("[lifecycle]\nautolink = true\n")
    return open_store(store.root)


def _edges(store: Store, node_id: str):
    conn = open_index(store)
    try:
        return edges_of(conn, node_id, "out", "RELATES_TO")
    finally:
        conn.close()


def test_autolink_relates_a_new_memory_to_similar_ones(store: Store) -> None:
    old = add_node(session_of(store), "fact", "the http client retries with exponential backoff").node
    add_node(session_of(store), "fact", "the deploy pipeline runs on tuesdays")
    new = add_node(session_of(store), "observation",
                   "exponential backoff retries in the http client work").node
    [edge] = _edges(store, new.id)
    assert edge.to_key == old.id
    assert edge.evidence["tool"] == "Parser" and 0.1 <= edge.evidence["confidence"] <= 1.0
    assert edge.weight == edge.evidence["confidence"]


def test_autolink_leaves_orthogonal_memories_unlinked(store: Store) -> None:
    add_node(session_of(store), "fact", "the http client retries with exponential backoff")
    new = add_node(session_of(store), "fact", "tuesday deploys need a change ticket").node
    assert _edges(store, new.id) == []


def test_autolink_agent_remember_links_in_the_same_batch(store: Store) -> None:
    old = add_node(session_of(store), "decision", "cache entries expire after ten minutes").node
    got = remember(session_of(store), "cache entries expire after ten minutes unless pinned", session="s",
                   hook_key="k1")
    assert got.node is not None
    assert [e.to_key for e in _edges(store, got.node.id)] == [old.id]


def test_autolink_is_on_by_default_and_can_be_turned_off(tmp_path) -> None:
    from conftest import without_autolink

    from ctxstore.init import init_store

    init_store(tmp_path / ".ctx", git=False)
    plain = open_store(tmp_path / ".ctx")
    assert "\nautolink = true" in (plain.root / "config.toml").read_text()  # a new store's config
    old = add_node(session_of(plain), "fact", "the http client retries with exponential backoff").node
    new = add_node(session_of(plain), "fact", "the http client retries with exponential backoff always").node
    [edge] = _edges(plain, new.id)
    assert edge.to_key == old.id and edge.metadata["merge_candidate"] is True  # similarity > 0.5
    off = without_autolink(plain)
    later = add_node(session_of(off), "fact", "the http client retries with exponential backoff twice").node
    assert _edges(off, later.id) == []


def test_autolink_cli_add_links_in_a_default_store(runner: CliRunner, tmp_path) -> None:
    from ctxstore.init import init_store

    init_store(tmp_path / ".ctx", git=False)
    root = tmp_path / ".ctx"
    first = invoke(runner, root, "add", "--type", "fact", "uploads retry with backoff").output.strip()
    second = invoke(runner, root, "add", "--type", "observation",
                    "backoff for uploads retry").output.strip()
    got = json.loads(invoke(runner, root, "--format", "json", "edges", second).output)
    assert [(e["direction"], e["type"], e["node"]) for e in got["edges"]] == \
        [("out", "RELATES_TO", first)]


def test_autolink_similarity_follows_the_spec_table() -> None:
    a, b = word_set("alpha beta gamma delta"), word_set("alpha beta gamma epsilon")
    assert similarity(a, b) == 3 / 5
    assert similarity(a, word_set("zeta eta theta")) == 0.0
    assert similarity(frozenset(), a) == 0.0


def test_autolink_new_edge_types_are_accepted_by_link(runner: CliRunner, store: Store) -> None:
    a = invoke(runner, store, "add", "--type", "fact", "one").stdout.strip()
    b = invoke(runner, store, "add", "--type", "fact", "two").stdout.strip()
    for label in ("contradicts", "REFINES", "exemplifies", "source-of"):
        res = invoke(runner, store, "link", a, b, "--type", label)
        assert res.exit_code == 0, res.output
    res = invoke(runner, store, "--format", "json", "edges", a)
    labels = {e["type"] for e in json.loads(res.stdout)["edges"]}
    assert {"CONTRADICTS", "REFINES", "EXEMPLIFIES", "SOURCE_OF"} <= labels
