"""The hooks index the transcript into memory: Stop, PreCompact, SessionEnd (real subprocesses)."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

from conftest import run_ctx

from ctxstore.memory.db import memory_path
from ctxstore.repo import Store
from tests.memory.memtx import SESSION, Transcript, conversation


def hook(event: str, payload: dict | str | bytes) -> dict:
    """Run one hook; it must exit 0 and print exactly one JSON object."""
    stdin = payload if isinstance(payload, (str, bytes)) else json.dumps(payload)
    res = run_ctx(["hook", event], stdin=stdin)
    assert res.returncode == 0, (res.stdout, res.stderr)
    assert res.stdout.count("\n") == 1
    out = json.loads(res.stdout)
    assert isinstance(out, dict)
    return out


def _payload(store: Store, path: Path, **extra: object) -> dict:
    return {"session_id": SESSION, "transcript_path": str(path), "cwd": str(store.root.parent),
            "hook_event_name": "Stop", **extra}


def _turns(store: Store) -> list[tuple[int, str]]:
    conn = sqlite3.connect(memory_path(store.root))
    try:
        return conn.execute("SELECT seq, user_text FROM turns ORDER BY seq").fetchall()
    finally:
        conn.close()


def test_hooks_memory_stop_indexes_the_turn_then_the_next(store: Store, tmp_path: Path) -> None:
    t = Transcript()
    t.prompt("How should we store the session cache?")
    t.say("We decided to use SQLite for the session cache.")
    path = t.write(tmp_path / "s.jsonl")
    assert "systemMessage" not in hook("stop", _payload(store, path))
    assert _turns(store) == [(0, "How should we store the session cache?")]
    t.end_turn()
    t.prompt("And the login page?")
    t.say("The login page is fixed.")
    t.write(path)
    hook("stop", _payload(store, path))
    assert [seq for seq, _ in _turns(store)] == [0, 1]
    res = run_ctx(["--ctx-dir", str(store.root), "--format", "json", "memory", "stats"])
    assert json.loads(res.stdout)["turns"] == 2


def test_hooks_memory_pre_compact_and_session_end_index(store: Store, tmp_path: Path) -> None:
    path = conversation().write(tmp_path / "s.jsonl")
    hook("pre-compact", _payload(store, path, hook_event_name="PreCompact", trigger="auto"))
    assert len(_turns(store)) == 5
    hook("session-end", _payload(store, path, hook_event_name="SessionEnd", reason="exit"))
    assert len(_turns(store)) == 5


def test_hooks_memory_hostile_transcripts_still_print_json(store: Store, tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.jsonl"
    zero.symlink_to("/dev/zero")
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(os.urandom(200_000))
    huge = tmp_path / "huge.jsonl"
    huge.write_bytes(b'{"type": "user", "message": {"content": "' + b"x" * (10 << 20) + b'"}}\n')
    for path in (fifo, zero, binary, huge, tmp_path / "missing.jsonl"):
        assert "systemMessage" not in hook("stop", _payload(store, path))
    for raw in ("not json", "[]", json.dumps({"transcript_path": 5})):
        hook("stop", raw)


def test_hooks_memory_damaged_memory_is_named_and_kept(store: Store, tmp_path: Path) -> None:
    path = conversation().write(tmp_path / "s.jsonl")
    target = memory_path(store.root)
    target.parent.mkdir(exist_ok=True)
    target.write_bytes(b"garbage" * 1000)
    out = hook("stop", _payload(store, path))
    assert "memory.sqlite is damaged" in out["systemMessage"]
    assert target.read_bytes() == b"garbage" * 1000


def test_hooks_memory_no_store_writes_nothing(tmp_path: Path) -> None:
    path = conversation().write(tmp_path / "s.jsonl")
    work = tmp_path / "nostore"
    work.mkdir()
    assert hook("stop", {"session_id": "s", "transcript_path": str(path), "cwd": str(work)}) == {}
    assert not list(work.iterdir())


def _context(out: dict) -> str:
    return out.get("hookSpecificOutput", {}).get("additionalContext", "")


def test_hooks_memory_recall_and_prompt_context_include_past_sessions(store: Store,
                                                                      tmp_path: Path) -> None:
    from datetime import UTC, datetime, timedelta

    old = Transcript("0ld00000-0000-4000-8000-000000000001",
                     datetime.now(UTC) - timedelta(days=3))
    old.prompt("The deploy script fails on the staging server with a permission error.")
    old.say("The problem is that deploy.sh runs as the www user; the fix is sudo -u deploy.")
    old.end_turn()
    hook("stop", _payload(store, old.write(tmp_path / "old.jsonl")))
    now = Transcript("n3w00000-0000-4000-8000-000000000002", datetime.now(UTC))
    now.prompt("Why does the staging deploy fail?")
    now.say('Let me check. <ctx:recall query="deploy staging permission"/>')
    path = now.write(tmp_path / "new.jsonl")
    hook("stop", {**_payload(store, path), "session_id": now.session})
    got = _context(hook("prompt-submit", {**_payload(store, path), "session_id": now.session,
                                          "hook_event_name": "UserPromptSubmit",
                                          "prompt": "go on"}))
    assert "From past sessions" in got and "sudo -u deploy" in got
    fresh = _context(hook("prompt-submit", {**_payload(store, path), "session_id": "other",
                                            "hook_event_name": "UserPromptSubmit",
                                            "prompt": "the staging deploy permission error"}))
    assert "sudo -u deploy" in fresh and "0ld00000" in fresh
