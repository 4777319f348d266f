"""Recovery of STAGE after a crash (spec 002 §11.5): ``recover``, moved out of staging."""

from __future__ import annotations

import os

from conftest import stage_file

from ctxstore.model.knowledge import NodeRecord
from ctxstore.recover import recover
from ctxstore.replay import replay
from ctxstore.repo import Store
from ctxstore.staging import commit_stage, stage_records
from ctxstore.verify import verify_store


def _node(nid: str, content: str, t: int) -> NodeRecord:
    return NodeRecord(id=nid, type="fact", content=content, content_blob=None, summary=None,
                      tags=(), metadata={}, status="active", superseded_by=None, created_at=1,
                      updated_at=t, author=None, prev=None)


def test_recover_clean_and_idempotent(store: Store) -> None:
    stage_records(store, [_node("N1", "a", 10)])
    assert recover(store).state == "clean"
    assert recover(store).state == "clean"
    commit_stage(store, "c")
    assert recover(store).state == "no-session"


def test_recover_adopts_intact_parent_when_stage_object_is_missing(store: Store) -> None:
    stage_records(store, [_node("N1", "kept", 10)])
    w2 = stage_records(store, [_node("N2", "lost", 11)]).work_commit
    os.unlink(store.objects.path_for(w2))
    rep = recover(store)
    assert rep.state == "repaired"
    assert verify_store(store).ok
    state = replay(store)
    assert "N1" in state.nodes and "N2" not in state.nodes
    digest = state.digest()
    assert recover(store).state == "clean"
    assert replay(store).digest() == digest


def test_recover_relinks_around_a_damaged_middle_commit(store: Store) -> None:
    stage_records(store, [_node("N1", "one", 10)])
    w2 = stage_records(store, [_node("N2", "two", 11)]).work_commit
    stage_records(store, [_node("N3", "three", 12)])
    path = store.objects.path_for(w2)
    os.chmod(path, 0o644)
    path.write_bytes(b"")
    store._cache.clear()
    rep = recover(store)
    assert rep.state == "repaired" and rep.lost == [w2.hex()] and rep.kept == 2
    assert set(replay(store).nodes) == {"N1", "N3"}
    assert verify_store(store).ok


def test_recover_resets_unreadable_stage_with_nothing_to_adopt(store: Store) -> None:
    stage_file(store.root).write_bytes(b"garbage\n")
    rep = recover(store)
    assert rep.state == "reset"
    assert store.read_stage().single == store.read_head().single
    assert verify_store(store).ok
