"""The ``[memory]`` privacy switch and ``ctx memory forget`` (installed CLI and hooks as subprocesses)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from conftest import run_ctx

from ctxstore.memory.context import recall_section
from ctxstore.memory.db import memory_path, open_memory
from ctxstore.repo import Store
from tests.memory.memtx import SESSION, Transcript, conversation
from tests.memory.test_hooks_memory import hook
from tests.memory.test_memory_cli import cj, ctx

OTHER = "9b1c0d2e-0000-4000-8000-000000000001"
NOW_MS = 1_800_000_000_000  # 2027: every test turn is older than the context's recent window


def _set(store: Store, line: str) -> None:
    """Set one key of the ``[memory]`` table a new config.toml holds."""
    path = store.root / "config.toml"
    head, table = path.read_text().split("[memory]\n")
    key = line.split(" = ")[0]
    kept = [ln for ln in table.splitlines() if not ln.startswith(f"{key} = ")]
    path.write_text(head + "[memory]\n" + "\n".join([line, *kept]) + "\n")


def _payload(store: Store, path: Path) -> dict:
    return {"session_id": SESSION, "transcript_path": str(path), "cwd": str(store.root.parent),
            "hook_event_name": "Stop"}


def _two_sessions(tmp_path: Path) -> Path:
    folder = tmp_path / "projects"
    conversation().write(folder / f"{SESSION}.jsonl")
    other = Transcript(OTHER)
    other.prompt("Why is the zanzibar deploy script flaky?")
    other.say("The zanzibar deploy script races the health check; we decided to add a retry.")
    other.write(folder / f"{OTHER}.jsonl")
    side = Transcript(sidechain=True)
    side.prompt("Explore how the session cache is wired")
    side.say("The session cache is created in src/cache.py.")
    side.write(folder / SESSION / "subagents" / "agent-a1.jsonl")
    return folder


def test_privacy_off_stops_the_hooks_backfill_and_prompt_context(store: Store,
                                                                  tmp_path: Path) -> None:
    path = conversation().write(tmp_path / "s.jsonl")
    _set(store, "enabled = false")
    assert "systemMessage" not in hook("stop", _payload(store, path))
    assert not memory_path(store.root).exists()  # nothing read, nothing created
    err = ctx(store, "memory", "backfill", str(path), code=1)
    assert "transcript memory is off ([memory] enabled = false" in err
    assert not memory_path(store.root).exists()


def test_privacy_off_hides_existing_memory_from_context(store: Store, tmp_path: Path) -> None:
    cj(store, "memory", "backfill", str(_two_sessions(tmp_path)))
    assert "zanzibar" in recall_section(store.root, "zanzibar deploy script", now_ms=NOW_MS)
    _set(store, "enabled = false")
    assert recall_section(store.root, "zanzibar deploy script", now_ms=NOW_MS) == ""


def test_privacy_mistyped_switch_fails_closed(store: Store, tmp_path: Path) -> None:
    _set(store, 'enabled = "no"')  # invalid: the store's commands name it; memory stays off
    hook("stop", _payload(store, conversation().write(tmp_path / "s.jsonl")))
    assert not memory_path(store.root).exists()


def test_privacy_tool_output_off_keeps_no_tool_text(store: Store, tmp_path: Path) -> None:
    t = Transcript()
    t.prompt("Run the tests for the session cache")
    t.tool("Bash", {"command": "pytest"}, "SECRET_TOKEN=hunter2 3 passed")
    t.say("All three session cache tests pass.")
    path = t.write(tmp_path / "s.jsonl")
    _set(store, "index_tool_output = false")
    hook("stop", _payload(store, path))
    conn = sqlite3.connect(memory_path(store.root))
    try:
        assert conn.execute("SELECT tool_text, assistant_text FROM turns").fetchall() == [
            ("", "All three session cache tests pass.")]
    finally:
        conn.close()


def test_privacy_tool_output_budget(store: Store, tmp_path: Path) -> None:
    t = Transcript()
    t.prompt("Run the tests for the session cache")
    t.tool("Bash", {"command": "pytest"}, "x" * 1500)
    path = t.write(tmp_path / "s.jsonl")
    _set(store, "max_tool_output_chars = 100")
    cj(store, "memory", "backfill", str(path))
    conn = sqlite3.connect(memory_path(store.root))
    try:
        assert len(conn.execute("SELECT tool_text FROM turns").fetchone()[0]) == 100
    finally:
        conn.close()
    _set(store, "max_tool_output_chars = -1")
    err = ctx(store, "memory", "backfill", str(path), code=1)
    assert "[memory] max_tool_output_chars = -1 is outside 0..1000000" in err


def test_forget_a_session_removes_its_text_and_its_subagents(store: Store, tmp_path: Path) -> None:
    folder = _two_sessions(tmp_path)
    cj(store, "memory", "backfill", str(folder))
    assert cj(store, "memory", "stats")["sessions"] == 3
    out = cj(store, "memory", "forget", "--session", OTHER[:8], "--yes")
    assert (out["session"], out["all"], out["turns"]) == (OTHER, False, 1)
    assert cj(store, "memory", "search", "zanzibar")["results"] == []
    assert cj(store, "memory", "stats")["sessions"] == 2
    data = b"".join(p.read_bytes() for p in memory_path(store.root).parent.glob("memory.sqlite*"))
    assert b"zanzibar" not in data  # overwritten on disk, not only unlinked
    # a backfill of the same lines does not bring it back; the other session is untouched
    assert cj(store, "memory", "backfill", str(folder))["turns"] == 0
    assert cj(store, "memory", "search", "session cache")["results"]
    out = cj(store, "memory", "forget", "--session", SESSION, "--yes")
    assert out["turns"] == 6  # the session's 5 turns and its subagent's one
    assert cj(store, "memory", "stats")["turns"] == 0


def test_forget_all_and_confirmation(store: Store, tmp_path: Path) -> None:
    cj(store, "memory", "backfill", str(_two_sessions(tmp_path)))
    err = ctx(store, "memory", "forget", "--all", code=1)  # stdin is not a terminal
    assert "without confirmation" in err and cj(store, "memory", "stats")["turns"] == 7
    assert "give --session ID or --all" in ctx(store, "memory", "forget", code=1)
    assert "no session starts with" in ctx(store, "memory", "forget", "--session", "ffff",
                                           "--yes", code=1)
    assert ctx(store, "memory", "forget", "--all", "--yes").startswith("forgot every session: 7 turns")
    stats = cj(store, "memory", "stats")
    assert (stats["sessions"], stats["turns"], stats["ideas"], stats["entities"]) == (0, 0, 0, 0)


def test_forget_is_all_or_nothing(store: Store, tmp_path: Path) -> None:
    cj(store, "memory", "backfill", str(_two_sessions(tmp_path)))
    db = open_memory(store.root, create=False)
    assert db is not None
    with db:
        before = db.stats()
        # a real SQLite failure after turns, ideas and spans are already deleted
        db.conn.execute("CREATE TEMP TRIGGER fail BEFORE DELETE ON main.sessions "
                        "BEGIN SELECT RAISE(ABORT, 'disk gone'); END")
        with pytest.raises(sqlite3.IntegrityError, match="disk gone"):
            db.forget(OTHER)
        assert db.stats() == before
    assert cj(store, "memory", "search", "zanzibar")["results"]
    assert json.loads(run_ctx(["--ctx-dir", str(store.root), "--format", "json", "memory",
                               "forget", "--session", OTHER, "--yes"]).stdout)["turns"] == 1
