"""``ctxstore.session.Session`` and the long-lived-process guarantees of ``Store``:
a bounded object cache, history that does not depend on it, one index connection
opened and closed by the session (issue 12)."""

from __future__ import annotations

import sqlite3

import pytest
from conftest import session_of

from ctxstore.knowledge.nodes import add_node
from ctxstore.repo import OBJECT_CACHE_SIZE, ObjectCache, Store
from ctxstore.session import Session
from ctxstore.staging import commit_stage


def test_session_opens_once_and_closes_its_index(store: Store) -> None:
    with Session.open(store.root) as db:
        assert db.root == store.root and db.config is db.store.config
        assert not db.index_open  # lazy: a write-only path never opens SQLite
        conn = db.index()
        assert db.index() is conn and db.index_open
    with pytest.raises(sqlite3.ProgrammingError):
        conn.execute("SELECT 1")  # closed by the session
    with pytest.raises(RuntimeError):
        db.index()
    db.close()  # idempotent


def test_session_index_catches_up_after_a_write_in_the_same_process(store: Store) -> None:
    with Session(store) as db:
        conn = db.index()
        assert conn.execute("SELECT count(*) FROM nodes").fetchone() == (0,)
        add_node(db, "fact", "written after the index was opened")
        assert db.index().execute("SELECT count(*) FROM nodes").fetchone() == (1,)


def test_session_lock_timeout_is_set_on_open(store: Store) -> None:
    with Session.open(store.root, lock_timeout=0.25) as db:
        assert db.store.lock_timeout == 0.25


def test_store_object_cache_is_bounded() -> None:
    cache = ObjectCache(3)
    for i in range(10):
        cache[bytes([i])] = object()  # type: ignore[assignment]
    assert len(cache) == 3 and bytes([9]) in cache and bytes([0]) not in cache
    cache.get(bytes([7]))  # used: kept over the older 8
    cache[b"new"] = object()  # type: ignore[assignment]
    assert bytes([7]) in cache and bytes([8]) not in cache
    assert 1_000 <= OBJECT_CACHE_SIZE <= 10_000


def test_store_cache_stays_bounded_over_many_writes(store: Store) -> None:
    store._cache = ObjectCache(8)
    for i in range(40):
        add_node(session_of(store), "fact", f"fact {i}")
    assert len(store._cache) <= 8


def test_store_iter_history_does_not_depend_on_the_cache(store: Store) -> None:
    for i in range(12):
        add_node(session_of(store), "fact", f"fact {i}")
        if i % 4 == 3:
            commit_stage(store, message=f"batch {i}")
    heads = list(store.read_head().heads) + store.staged_heads()
    want = [oid for oid, _ in store.iter_history(heads)]
    store._cache = ObjectCache(1)  # every entry is evicted before it is popped
    got = [oid for oid, _ in store.iter_history(heads)]
    assert got == want and len(got) >= 4  # init + three commits
