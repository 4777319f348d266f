"""In-process tests of ``ctxstore.knowledge.tasks``: task start tags the untasked working
set, task end promotes decisions and moves the rest off-context (spec 000 "Task
Boundaries", spec 001 §6), and the current task has one owner here (``local/current-task``)."""

from __future__ import annotations

import os

import pytest
from conftest import session_of, store_digest

from ctxstore.errors import InvalidInput, UnsafePath
from ctxstore.index import open_index
from ctxstore.index.read import find_node
from ctxstore.knowledge.nodes import add_node
from ctxstore.knowledge.tasks import (
    current_task,
    end_task,
    read_current_task,
    set_current_task,
    start_task,
    task_tag,
)
from ctxstore.repo import Store
from ctxstore.session import Session


def tags_of(store: Store, node_id: str) -> list[str]:
    conn = open_index(store)
    try:
        got = find_node(conn, node_id)
        assert got is not None
        return got.tags
    finally:
        conn.close()


def add(store: Store, content: str, *tags: str, node_type: str = "observation") -> str:
    return add_node(session_of(store), node_type, content, tags=list(tags)).node.id


def test_start_task_tags_only_untasked_working_nodes(store: Store) -> None:
    free = add(store, "free", "tier:working")
    taken = add(store, "taken", "tier:working", "task:other")
    reference = add(store, "ref", "tier:reference")
    res = start_task(session_of(store), " t1 ")
    assert (res.name, res.action, res.changed) == ("t1", "start", True)
    assert [n.id for n in res.nodes] == [free]
    assert tags_of(store, free) == ["task:t1", "tier:working"]
    assert tags_of(store, taken) == ["task:other", "tier:working"]
    assert tags_of(store, reference) == ["tier:reference"]


def test_start_task_with_no_untasked_working_nodes_writes_nothing(store: Store) -> None:
    add(store, "ref", "tier:reference")
    before = store_digest(store.root)
    res = start_task(session_of(store), "t1")
    assert (res.changed, res.nodes, res.write.staged) == (False, (), None)
    assert store_digest(store.root) == before


def test_end_task_promotes_decisions_and_moves_the_rest_off_context(store: Store) -> None:
    obs = add(store, "obs", "tier:working", "task:t1", "project:x")
    dec = add(store, "dec", "tier:working", "task:t1", node_type="decision")
    other = add(store, "other task", "tier:working", "task:t2")
    done = add(store, "not working", "tier:pinned", "task:t1")
    res = end_task(session_of(store), "t1")
    assert (res.action, res.changed) == ("end", True)
    assert sorted(n.id for n in res.nodes) == sorted([obs, dec])
    assert all("tier:working" in n.tags for n in res.nodes)  # as they were before
    assert tags_of(store, obs) == ["project:x", "task:t1", "tier:off-context"]
    assert tags_of(store, dec) == ["task:t1", "tier:reference"]
    assert tags_of(store, other) == ["task:t2", "tier:working"]
    assert tags_of(store, done) == ["task:t1", "tier:pinned"]
    assert not end_task(session_of(store), "t1").changed  # nothing of t1 is working any more


def test_start_then_end_moves_the_whole_working_set_of_the_task(store: Store) -> None:
    a = add(store, "a", "tier:working")
    start_task(session_of(store), "build")
    b = add(store, "b", "tier:working", task_tag("build"))  # written during the task
    res = end_task(session_of(store), "build")
    assert sorted(n.id for n in res.nodes) == sorted([a, b])
    assert "tier:off-context" in tags_of(store, a) and "tier:off-context" in tags_of(store, b)


def test_task_names_are_tags_and_need_a_value(store: Store) -> None:
    assert task_tag("fix-123") == "task:fix-123"
    before = store_digest(store.root)
    assert task_tag("t" * 128) == "task:" + "t" * 128
    for bad in ("", "   ", "two words", "t" * 129, "T" + "x" * 50_000):
        with pytest.raises(InvalidInput):
            start_task(session_of(store), bad)
        with pytest.raises(InvalidInput):
            end_task(session_of(store), bad)
    assert store_digest(store.root) == before


def test_task_end_of_a_name_that_needs_quoting_in_a_query(store: Store) -> None:
    nid = add(store, "x", "tier:working", "task:a.b/c:d")
    assert [n.id for n in end_task(session_of(store), "a.b/c:d").nodes] == [nid]


def test_tags_are_at_most_200_characters(store: Store) -> None:
    from ctxstore.knowledge.nodes import add_node, validate_tag

    assert validate_tag("a:" + "x" * 198) == "a:" + "x" * 198
    before = store_digest(store.root)
    with pytest.raises(InvalidInput, match="at most 200 characters"):
        add_node(session_of(store), "fact", "content", tags=["a:" + "x" * 199])
    assert store_digest(store.root) == before


def test_the_longest_task_name_is_the_one_session_start_shows() -> None:
    # packs.session keeps its own pattern (the hook path does not import knowledge.tasks):
    # the two limits must agree.
    import re

    from ctxstore.knowledge.tasks import MAX_TASK_NAME
    from ctxstore.packs import session

    assert re.fullmatch(session._TASK_NAME, "t" * MAX_TASK_NAME)
    assert not re.fullmatch(session._TASK_NAME, "t" * (MAX_TASK_NAME + 1))


def test_current_task_is_set_by_start_and_cleared_by_its_end_only(store: Store) -> None:
    assert read_current_task(store.root) is None
    start_task(session_of(store), " build ")
    assert read_current_task(store.root) == "build"
    assert (store.root / "local" / "current-task").read_bytes() == b"build\n"
    assert current_task(Session(store)) == "build"
    end_task(session_of(store), "other")  # another task's end leaves the current one
    assert read_current_task(store.root) == "build"
    end_task(session_of(store), "build")
    assert read_current_task(store.root) is None
    assert not (store.root / "local" / "current-task").exists()


@pytest.mark.parametrize("content", [b"two words\n", b"", b"\xff\xfe\n", b"t" * 10_000,
                                     b"task\n\nmore\n"])
def test_current_task_file_that_names_no_task_gives_none(store: Store, content: bytes) -> None:
    """A committed or hand-written local/current-task is untrusted: never an error."""
    (store.root / "local" / "current-task").write_bytes(content)
    assert read_current_task(store.root) is None


def test_current_task_is_never_read_or_written_through_a_link(store: Store, out) -> None:  # type: ignore[no-untyped-def]
    target = out / "task"
    target.write_bytes(b"outside\n")
    (store.root / "local" / "current-task").symlink_to(target)
    assert read_current_task(store.root) is None
    with pytest.raises(UnsafePath):
        set_current_task(store.root, "build")
    assert target.read_bytes() == b"outside\n"
    fifo = store.root / "local" / "current-task"
    fifo.unlink()
    os.mkfifo(fifo)
    assert read_current_task(store.root) is None  # never blocks on a FIFO


def test_older_hook_state_task_moves_to_the_current_task_once(store: Store) -> None:
    """An older ctx kept the current task in the hook state: the first open moves it."""
    import sqlite3

    from ctxstore.claude.state import open_state

    with open_state(store.root, create=True) as state:
        pass
    conn = sqlite3.connect(store.root / "local" / "state.sqlite")
    with conn:
        conn.execute("INSERT INTO kv(key, value) VALUES ('current_task', 'parser')")
    conn.close()
    assert read_current_task(store.root) is None
    with open_state(store.root, create=True) as state:
        assert state.get("current_task") is None
    assert read_current_task(store.root) == "parser"


def test_current_task_is_one_for_the_mcp_server_the_hooks_and_pack(store: Store) -> None:
    """A task the MCP server starts tags the hooks' working memories, and ctx pack sees it."""
    import json

    from conftest import run_ctx

    from ctxstore.mcp.server import ToolBox

    with Session.open(store.root) as db:
        ToolBox(db, user_store=None).task_start("auth")
    res = run_ctx(["hook", "stop", "--response",
                   '<ctx:remember tags="tier:working">tokens expire hourly</ctx:remember>'],
                  stdin=json.dumps({"session_id": "s1", "cwd": str(store.worktree)}))
    assert res.returncode == 0, res.stderr
    listed = run_ctx(["--ctx-dir", str(store.root), "--format", "json", "list"])
    [node] = [n for n in json.loads(listed.stdout)["nodes"] if n["content"] == "tokens expire hourly"]
    assert "task:auth" in node["tags"]
    status = run_ctx(["hook", "stop", "--response", "<ctx:status/>"],
                     stdin=json.dumps({"session_id": "s1", "cwd": str(store.worktree)}))
    assert status.returncode == 0
    nxt = run_ctx(["hook", "prompt-submit"], stdin=json.dumps(
        {"session_id": "s1", "cwd": str(store.worktree), "prompt": "next"}))
    assert "Current task: auth" in json.loads(nxt.stdout)["hookSpecificOutput"]["additionalContext"]
    with Session.open(store.root) as db:
        assert ToolBox(db, user_store=None).status()["current_task"] == "auth"
    pack = json.loads(run_ctx(["--ctx-dir", str(store.root), "pack", "token expiry",
                               "--format", "json"]).stdout)
    assert [i["title"] for i in pack["retrieved"] if i["why"].get("active_task")] \
        == ["Active task auth: tokens expire hourly"]
