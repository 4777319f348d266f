"""Staging, folding, aborting, recovery and multi-head resolution through the library."""

from __future__ import annotations

import pytest
from conftest import session_of, stage_file, store_digest

from ctxstore.errors import InvalidInput, NothingToDo, StagingConflict
from ctxstore.gc import collect_garbage
from ctxstore.knowledge.nodes import add_node
from ctxstore.model import ChangeBatch, Commit, WorkCommit
from ctxstore.model.knowledge import NodeRecord
from ctxstore.narrative.snapshot import snapshot_changes
from ctxstore.recover import recover
from ctxstore.replay import replay
from ctxstore.repo import Store
from ctxstore.staging import (
    abort_session,
    commit_stage,
    session_status,
    stage_chain,
    stage_records,
    start_session,
)
from ctxstore.verify import verify_store


def _node(nid: str, content: str, t: int) -> NodeRecord:
    return NodeRecord(id=nid, type="fact", content=content, content_blob=None, summary=None,
                      tags=(), metadata={}, status="active", superseded_by=None, created_at=1,
                      updated_at=t, author=None, prev=None)


def test_stage_records_is_visible_and_moves_stage(store: Store) -> None:
    head_before = store.read_head().single
    res = stage_records(store, [_node("N1", "hello", 10)])
    assert store.read_stage().single == res.work_commit
    work = store.read_typed(res.work_commit, WorkCommit)
    assert work.base == head_before and work.parents == ()
    assert replay(store).nodes["N1"].content == "hello"
    assert store.read_head().single == head_before  # HEAD moves only on commit
    res2 = stage_records(store, [_node("N2", "x", 11)])
    assert store.read_typed(res2.work_commit, WorkCommit).parents == (res.work_commit,)
    assert res2.session_id == res.session_id


def test_commit_folds_to_newest_version_per_key(store: Store) -> None:
    stage_records(store, [_node("N1", "v1", 10)])
    stage_records(store, [_node("N1", "v2", 20)])
    stage_records(store, [_node("N2", "other", 15)])
    before = replay(store).digest()
    res = commit_stage(store, "fold")
    assert res.records == 2 and res.work_commits == 3
    commit = store.read_typed(res.commit, Commit)
    (batch_id,) = commit.change_batches
    batch = store.read_typed(batch_id, ChangeBatch)
    assert sorted((r.id, r.content) for r in batch.records) == [("N1", "v2"), ("N2", "other")]
    assert store.read_head().single == res.commit
    assert store.read_stage().single == res.commit  # STAGE names the fold: nothing staged
    assert session_status(store).stage == ()
    assert replay(store).digest() == before  # folding never changes the state


def test_commit_with_nothing_staged_changes_nothing(store: Store) -> None:
    commit_stage(store, "narrative snapshot", snapshot=snapshot_changes)  # the README from init
    head = store.read_head().single
    res = commit_stage(store, "again", snapshot=snapshot_changes)
    assert res.commit is None
    assert store.read_head().single == head


def test_commit_amend_replaces_head(store: Store) -> None:
    stage_records(store, [_node("N1", "a", 10)])
    first = commit_stage(store, "first").commit
    parent = store.read_typed(first, Commit).parents
    stage_records(store, [_node("N2", "b", 11)])
    amended = commit_stage(store, None, amend=True)
    c = store.read_typed(amended.commit, Commit)
    assert c.parents == parent and c.message == "first"
    assert set(replay(store).nodes) == {"N1", "N2"}


@pytest.mark.parametrize("message,amend,error", [
    (None, False, "a commit message is required"),
    ("", False, "the commit message is empty"),
    (" \n\t", False, "the commit message is empty"),
    ("  ", True, "the commit message is empty"),
])
def test_commit_refuses_a_missing_or_blank_message(store: Store, message: str | None, amend: bool,
                                                    error: str) -> None:
    stage_records(store, [_node("N1", "a", 10)])
    before = store_digest(store.root)
    with pytest.raises(InvalidInput, match=error):
        commit_stage(store, message, amend=amend)
    assert store_digest(store.root) == before


def test_start_session_twice_is_a_staging_conflict(store: Store) -> None:
    start_session(store, "task one")
    with pytest.raises(StagingConflict):
        start_session(store, "task two")
    st = session_status(store)
    assert st.task == "task one" and st.work_commits == 1


def test_start_session_adopts_a_session_opened_by_writes(store: Store) -> None:
    """spec 002 A.5 steps 1-2: `ctx add task` then `ctx stage start` names that session."""
    first = stage_records(store, [_node("N1", "the task", 10)])
    stage_records(store, [_node("N2", "more", 11)])
    res = start_session(store, "Add retry")
    assert res.session_id == first.session_id
    st = session_status(store)
    assert st.task == "Add retry" and st.records == 2 and st.work_commits == 3
    assert [w.step_kind for _, w in stage_chain(store, [res.work_commit])][0] == "session_start"
    assert recover(store).unnamed == []  # the re-linked chain hides nothing
    with pytest.raises(StagingConflict):  # an explicitly started session is not adopted
        start_session(store, "another")
    folded = commit_stage(store, "retry")
    assert folded.records == 2 and {"N1", "N2"} <= set(replay(store).nodes)
    assert verify_store(store).ok


def test_abort_removes_changes_but_keeps_objects(store: Store) -> None:
    start_session(store, "doomed")
    res = stage_records(store, [_node("N1", "gone", 10)])
    aborted = abort_session(store, "changed approach")
    assert "N1" not in replay(store).nodes
    commit = store.read_typed(aborted.commit, Commit)
    assert commit.aborted_work == res.work_commit
    assert "changed approach" in commit.message
    collect_garbage(store, keep_days=0)
    assert store.objects.exists(res.work_commit)  # reachable from the abort commit
    with pytest.raises(NothingToDo):
        abort_session(store, None)


def test_gc_deletes_compacted_staging_chain(store: Store) -> None:
    w1 = stage_records(store, [_node("N1", "a", 10)]).work_commit
    commit_stage(store, "c")
    assert collect_garbage(store, keep_days=7).deleted == 0  # grace period
    rep = collect_garbage(store, keep_days=0)
    assert w1.hex() in rep.deleted_ids
    assert verify_store(store).ok
    assert replay(store).nodes["N1"].content == "a"


def _side_commit(store: Store, base: bytes, nid: str, text: str, ts: int) -> bytes:
    with store.transaction() as tx:
        batch = tx.put(ChangeBatch(created_at=ts, author=None, records=(_node(nid, text, ts),)))
        return tx.put(Commit(parents=(base,), timestamp_unix=ts, message=nid,
                             change_batches=(batch,)))


def test_multi_head_main_is_replayed_and_merged_on_next_write(store: Store) -> None:
    base = store.read_head().single
    a = _side_commit(store, base, "A", "left", 2_000_000_000)
    b = _side_commit(store, base, "B", "right", 2_000_000_100)
    (store.root / "refs" / "main").write_text(f"{a.hex()}\n{b.hex()}\n")  # Git's union merge
    store._cache.clear()
    state = replay(store)
    assert set(state.nodes) == {"A", "B"}
    stage_records(store, [_node("C", "after", 2_000_000_200)])
    head = store.read_head()
    assert not head.conflicted
    merge = store.read_typed(head.single, Commit)
    assert merge.parents == tuple(sorted([a, b]))
    assert merge.timestamp_unix == 2_000_000_100
    assert set(replay(store).nodes) == {"A", "B", "C"}
    assert verify_store(store).ok


def test_multi_head_main_fast_forwards_when_one_side_contains_the_other(store: Store) -> None:
    base = store.read_head().single
    a = _side_commit(store, base, "A", "left", 2_000_000_000)
    conflicted = f"<<<<<<< ours\n{base.hex()}\n=======\n{a.hex()}\n>>>>>>> theirs\n"
    (store.root / "refs" / "main").write_text(conflicted)
    commit_stage(store, "x", allow_empty=True)
    c = store.read_typed(store.read_head().single, Commit)
    assert c.parents == (a,)


def test_conflicted_stage_merges_both_chains_and_compacts(store: Store) -> None:
    base = store.read_head().single
    w1 = stage_records(store, [_node("L", "left", 10)]).work_commit
    with store.transaction() as tx:
        batch = tx.put(ChangeBatch(created_at=11, author=None, records=(_node("R", "right", 11),)))
        w2 = tx.put(WorkCommit(parents=(), base=base, session_id="other", created_at=11,
                               step_kind="change", change_batches=(batch,)))
    stage_file(store.root).write_text(f"{w1.hex()}\n{w2.hex()}\n")
    store._cache.clear()
    assert set(replay(store).nodes) == {"L", "R"}
    res = commit_stage(store, "both")
    assert res.work_commits == 3 and res.records == 2
    assert set(replay(store).nodes) == {"L", "R"}
    assert verify_store(store).ok


def test_add_node_large_content_goes_to_a_blob(store: Store) -> None:
    big = "line of text\n" * 1000
    added = add_node(session_of(store), "source", big, tags=["kind:file"])
    assert added.node.content is None and added.node.content_blob is not None
    assert store.read_blob(added.node.content_blob).decode() == big
    assert stage_chain(store, store.staged_heads())[-1][0] == added.staged.work_commit


def test_transaction_refuses_pointer_to_missing_or_wrong_type(store: Store) -> None:
    from ctxstore.errors import DeserializationFailed, ObjectNotFound

    before = (store.root / "refs" / "main").read_bytes()
    ptr = store.read_head()
    with pytest.raises(ObjectNotFound):
        with store.transaction() as tx:
            tx.move_pointer("refs/main", b"\x01" * 32, expected=ptr)
    with pytest.raises(DeserializationFailed):
        with store.transaction() as tx:
            blob = tx.put_blob(b"not a commit")
            tx.move_pointer("refs/main", blob, expected=ptr)
    assert (store.root / "refs" / "main").read_bytes() == before
    assert not list(store.root.rglob("*.tmp"))


def test_transaction_cas_detects_concurrent_move(store: Store) -> None:
    ptr = store.read_head()
    stage_records(store, [_node("X", "x", 1)])
    commit_stage(store, "moved")
    with pytest.raises(StagingConflict):
        with store.transaction() as tx:
            c = tx.put(Commit(parents=(ptr.single,), timestamp_unix=1, message="stale"))
            tx.move_pointer("refs/main", c, expected=ptr)


def test_session_ids_are_random_version_4_uuids() -> None:
    import uuid

    from ctxstore.staging import new_session_id

    ids = [new_session_id() for _ in range(200)]
    assert len(set(ids)) == 200
    for text in ids:
        parsed = uuid.UUID(text)
        assert str(parsed) == text and parsed.version == 4
        assert parsed.variant == uuid.RFC_4122
