"""Identical Stop hooks at once (ctx installed at user and project level): exactly once.

Claude Code runs every matching hook in parallel, and runs a handler twice when it is
configured in two settings files under different spellings. Each ``<ctx:*>`` command of
the turn must still take effect once (RELIABILITY.md CC-05, HK-06, TR-12).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from pathlib import Path

import pytest
from conftest import run_ctx, session_of

from ctxstore.claude.state import open_state, state_path
from ctxstore.index import open_index
from ctxstore.index.read import node_versions
from ctxstore.knowledge.nodes import add_node
from ctxstore.repo import Store, open_store

ROUNDS = 20


def _line(entry: dict) -> str:
    return json.dumps({"isSidechain": False, **entry}) + "\n"


def _turn(path: Path, n: int, a: str, b: str) -> None:
    with path.open("w") as fh:
        fh.write(_line({"type": "user", "uuid": f"p{n}", "message": {"role": "user", "content": "go"}}))
        for i, text in enumerate([
            f'<ctx:remember type="fact" tags="tier:reference">fact of round {n}</ctx:remember>',
            f'<ctx:summarize nodes="{a}">summary of round {n}</ctx:summarize>',
            f'<ctx:link from="{a}" to="{b}" type="DEPENDS_ON"/>',
            f'<ctx:task name="round{n}" action="start"/>',
            f'<ctx:recall query="round {n}"/> <ctx:status/>',
        ]):
            fh.write(_line({"type": "assistant", "uuid": f"a{n}-{i}",
                            "message": {"id": f"m{n}", "role": "assistant",
                                        "content": [{"type": "text", "text": text}]}}))


def _concurrent_stops(store: Store, payload: dict, count: int) -> list[dict]:
    outs: list[dict] = [{}] * count
    barrier = threading.Barrier(count)

    def one(i: int) -> None:
        barrier.wait()
        res = run_ctx(["hook", "stop"], stdin=json.dumps(payload))
        assert res.returncode == 0, res.stderr
        assert res.stdout.count("\n") == 1
        outs[i] = json.loads(res.stdout)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outs


def _count(store: Store, sql: str, *args: object) -> int:
    conn = open_index(open_store(store.root))
    try:
        return int(conn.execute(sql, args).fetchone()[0])
    finally:
        conn.close()


@pytest.mark.slow
def test_stop_identical_concurrent_hooks_run_each_command_exactly_once(store: Store, tmp_path: Path) -> None:
    a = add_node(session_of(store), "fact", "source node A").node.id
    b = add_node(session_of(store), "fact", "target node B").node.id
    for n in range(ROUNDS):
        working = add_node(session_of(store), "observation",
                           f"working note {n}", tags=["tier:working"]).node.id
        transcript = tmp_path / f"t{n}.jsonl"
        _turn(transcript, n, a, b)
        session = f"round-{n}"
        payload = {"session_id": session, "cwd": str(store.worktree), "hook_event_name": "Stop",
                   "transcript_path": str(transcript), "prompt_id": f"prompt-{n}"}
        outs = _concurrent_stops(store, payload, 3 if n % 2 else 2)
        for out in outs:
            assert out.get("decision") != "block"
            assert "failed" not in out.get("systemMessage", ""), out
        if any("deferred to the next hook" in out.get("systemMessage", "") for out in outs):
            # Under load a hook may give up the 0.25 s lock wait and queue its claimed
            # commands; the next hook runs them (pre-compact drains without taking pending).
            drained = run_ctx(["hook", "pre-compact"], stdin=json.dumps({**payload,
                                                                          "hook_event_name": "PreCompact"}))
            assert drained.returncode == 0, drained.stderr
        assert _count(store, "SELECT count(*) FROM nodes WHERE content = ?", f"fact of round {n}") == 1, n
        assert _count(store, "SELECT count(*) FROM nodes WHERE content = ?", f"summary of round {n}") == 1, n
        assert _count(store, "SELECT count(*) FROM edges WHERE from_key = ? AND to_key = ? "
                             "AND label = 'DEPENDS_ON'", a, b) == 1, n
        conn = open_index(open_store(store.root))
        try:
            versions = node_versions(conn, working)
        finally:
            conn.close()
        assert len(versions) == 2, (n, versions)  # created, then tagged task:roundN once
        with sqlite3.connect(state_path(store.root)) as conn:
            kinds = sorted(k for (k,) in conn.execute("SELECT kind FROM pending WHERE session = ?",
                                                      (session,)))
        assert kinds == ["recall", "status"], (n, kinds)
    # Nothing is left claimed or queued once every hook has returned.
    state = open_state(store.root, create=False)
    assert state is not None
    with state:
        assert not state.has_queued()
        assert state.conn.execute("SELECT count(*) FROM claims").fetchone()[0] == 0
    assert os.path.isdir(store.root / "local")


def test_stop_a_claim_left_by_a_killed_hook_is_taken_over(store: Store, tmp_path: Path) -> None:
    import signal
    import subprocess

    from ctxstore.claude.hooks import turn_commands
    from ctxstore.claude.transcript import read_last_turn

    transcript = tmp_path / "t.jsonl"
    with transcript.open("w") as fh:
        fh.write(_line({"type": "user", "uuid": "p", "message": {"role": "user", "content": "go"}}))
        fh.write(_line({"type": "assistant", "uuid": "a", "message": {"id": "m", "role": "assistant",
                        "content": [{"type": "text", "text": '<ctx:remember type="fact">'
                                     "claimed by a hook that died</ctx:remember>"}]}}))
    payload = {"session_id": "s", "cwd": str(store.worktree), "transcript_path": str(transcript)}
    (cmd,), _ = turn_commands(read_last_turn(transcript).blocks, "s", "p")
    holder = subprocess.Popen(["sleep", "60"])  # stands for a hook still running the command
    state = open_state(store.root, create=True)
    assert state is not None
    with state:
        state.conn.execute("INSERT INTO claims VALUES (?, 's', ?, strftime('%s'))",
                           (cmd["key"], holder.pid))
    try:
        res = run_ctx(["hook", "stop"], stdin=json.dumps(payload))
        assert res.returncode == 0 and json.loads(res.stdout) == {}
        assert _count(store, "SELECT count(*) FROM nodes") == 0  # a live claim: not run here
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    for _ in range(2):  # its process is gone: the next Stop takes the claim over, once
        res = run_ctx(["hook", "stop"], stdin=json.dumps(payload))
        assert res.returncode == 0 and json.loads(res.stdout) == {}
    assert _count(store, "SELECT count(*) FROM nodes WHERE content = ?",
                  "claimed by a hook that died") == 1
