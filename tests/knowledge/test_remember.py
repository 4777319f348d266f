"""In-process tests of ``ctxstore.knowledge.remember``: one node per hook key, whatever
happens to the front end's state, the task tag of working nodes, the content limits;
and of the indexed hook-key lookup ``ctxstore.index.read.find_node_by_hook_key``."""

from __future__ import annotations

import json

import pytest
from conftest import no_git_provenance, session_of, store_digest

from ctxstore.errors import InvalidInput
from ctxstore.index import open_index
from ctxstore.index.read import find_node, find_node_by_hook_key
from ctxstore.knowledge.nodes import add_node, delete_node
from ctxstore.knowledge.remember import LARGE_CONTENT, MAX_CONTENT, remember
from ctxstore.repo import Store, open_store


def count_nodes(store: Store) -> int:
    conn = open_index(store)
    try:
        return conn.execute("SELECT count(*) FROM nodes").fetchone()[0]
    finally:
        conn.close()


def lookup(store: Store, key: str) -> str | None:
    conn = open_index(store)
    try:
        return find_node_by_hook_key(conn, key)
    finally:
        conn.close()


def test_remember_writes_an_agent_node_with_its_hook_key(store: Store) -> None:
    res = remember(session_of(store), "We deploy on Tuesdays.", type="fact", tags=["tier:reference"],
                   session="s1", hook_key="k1")
    assert res.changed and res.node is not None and res.warning is None
    conn = open_index(store)
    got = find_node(conn, res.node.id)
    conn.close()
    assert got is not None
    assert (got.type, got.content, got.author, got.tags) == ("fact", "We deploy on Tuesdays.",
                                                             "agent", ["tier:reference"])
    assert got.metadata == {"source": "claude-code", "session": "s1", "hook_key": "k1",
                            "provenance": no_git_provenance("conversation", "s1")}


def test_remember_is_a_no_op_for_a_key_already_written(store: Store) -> None:
    first = remember(session_of(store), "once", session="s", hook_key="k")
    before = store_digest(store.root)
    again = remember(session_of(store), "once", session="s", hook_key="k")
    assert (again.changed, again.node, again.existing) == (False, None, first.node.id)
    assert store_digest(store.root) == before
    assert remember(session_of(store), "once", session="s", hook_key="k2").changed  # another tag
    assert count_nodes(store) == 2


def test_remember_is_idempotent_across_processes_with_no_front_end_state(store: Store) -> None:
    """The key lives in the store: a fresh handle (lost hook state, another clone of the
    same store after a pull) still finds it."""
    remember(session_of(store), "once", session="s", hook_key="k")
    fresh = open_store(store.root)
    assert not remember(session_of(fresh), "once", session="s", hook_key="k").changed
    assert count_nodes(fresh) == 1


def test_remember_writes_again_after_the_keyed_node_is_deleted(store: Store) -> None:
    first = remember(session_of(store), "x", session="s", hook_key="k")
    assert first.node is not None
    delete_node(session_of(store), first.node.id)
    assert remember(session_of(store), "x", session="s", hook_key="k").changed


@pytest.mark.parametrize("tags,task,expected", [
    (["tier:working"], "t1", ["task:t1", "tier:working"]),
    (["tier:reference"], "t1", ["tier:reference"]),
    (["tier:working"], None, ["tier:working"]),
])
def test_remember_tags_working_nodes_with_the_current_task(store: Store, tags: list[str],
                                                           task: str | None,
                                                           expected: list[str]) -> None:
    res = remember(session_of(store), "x", tags=tags, session="s", hook_key="k", current_task=task)
    assert res.node is not None and list(res.node.tags) == expected


def test_remember_defaults_to_an_observation(store: Store) -> None:
    for i, node_type in enumerate((None, "")):
        res = remember(session_of(store), "x", type=node_type, session="s", hook_key=f"k{i}")
        assert res.node is not None and res.node.type == "observation"


def test_remember_refuses_content_over_the_limit_and_bad_tags_writing_nothing(store: Store) -> None:
    before = store_digest(store.root)
    with pytest.raises(InvalidInput, match=f"over the limit of {MAX_CONTENT}"):
        remember(session_of(store), "x" * (MAX_CONTENT + 1), session="s", hook_key="big")
    with pytest.raises(InvalidInput, match="invalid tag"):
        remember(session_of(store), "x", tags=["not a tag!"], session="s", hook_key="bad")
    with pytest.raises(InvalidInput, match="unknown node type"):
        remember(session_of(store), "x", type="nope", session="s", hook_key="type")
    assert store_digest(store.root) == before


def test_remember_warns_about_large_content_but_writes_it(store: Store) -> None:
    res = remember(session_of(store), "x" * (LARGE_CONTENT + 1), session="s", hook_key="large")
    assert res.changed
    assert res.warning == f"large content ({LARGE_CONTENT + 1} characters)"


def test_hook_key_lookup_matches_the_whole_key_only(store: Store) -> None:
    node = add_node(session_of(store), "fact", "x", metadata={"hook_key": "abc"}).node.id
    add_node(session_of(store), "fact", "y", metadata={"note": '"hook_key": "abcd"'})  # JSON escapes it
    assert lookup(store, "abc") == node
    assert lookup(store, "ab") is None
    assert lookup(store, "abcd") is None
    assert lookup(store, "") is None


def test_hook_key_lookup_finds_keys_that_json_escapes(store: Store) -> None:
    key = 'quote " back \\ é'
    node = add_node(session_of(store), "fact", "x", metadata={"hook_key": key}).node.id
    assert lookup(store, key) == node
    assert json.dumps({"hook_key": key})  # the index stores it escaped, as this writes


def test_remember_hook_key_lookup_uses_the_index_not_a_scan(store: Store) -> None:
    remember(session_of(store), "Indexed.", session="s1", hook_key="k-indexed")
    conn = open_index(store)
    try:
        row = conn.execute("SELECT hook_key FROM nodes").fetchone()
        plan = " ".join(str(r[-1]) for r in conn.execute(
            "EXPLAIN QUERY PLAN SELECT id FROM nodes WHERE hook_key = ? LIMIT 1", ("k-indexed",)))
    finally:
        conn.close()
    assert row[0] == "k-indexed"
    assert "USING INDEX nodes_hook_key" in plan or "USING COVERING INDEX nodes_hook_key" in plan
    assert lookup(store, "k-indexed") is not None


def test_remember_hook_key_found_after_an_old_schema_index_is_rebuilt(store: Store) -> None:
    import sqlite3

    from ctxstore.index import INDEX_FILE, index_dir

    remember(session_of(store), "Before the upgrade.", session="s1", hook_key="k-old")
    # An index written by a ctx whose schema had no hook_key column: user_version 3.
    raw = sqlite3.connect(index_dir(store) / INDEX_FILE)
    raw.execute("PRAGMA user_version = 3")
    raw.commit()
    raw.close()
    assert lookup(store, "k-old") is not None  # dropped and rebuilt, column filled
    again = remember(session_of(store), "Before the upgrade.", session="s1", hook_key="k-old")
    assert not again.changed and count_nodes(store) == 1
