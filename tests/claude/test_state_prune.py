"""The hook state does not grow with every session: idle sessions' values are pruned."""

from __future__ import annotations

import json
import sqlite3
import time

import pytest
from click.testing import CliRunner

from ctxstore.claude.state import (
    EXECUTED_KEEP_DAYS,
    NOTICE_KEY,
    PROMPTS_PREFIX,
    STATE_FILE,
    HookState,
    open_state,
)
from ctxstore.cli import cli
from ctxstore.repo import Store

OLD = int(time.time()) - (EXECUTED_KEEP_DAYS + 1) * 86400


def _state(store: Store) -> HookState:
    state = open_state(store.root, create=True)
    assert state is not None
    return state


def _kv(store: Store) -> dict[str, str]:
    conn = sqlite3.connect(store.root / "local" / STATE_FILE)
    try:
        return dict(conn.execute("SELECT key, value FROM kv").fetchall())
    finally:
        conn.close()


def test_prune_forgets_idle_sessions_and_keeps_the_rest(store: Store) -> None:
    with _state(store) as state:
        state.count_prompt("live")
        state.put_session("injected:", "live", '["n1"]')
        state.put_session("recent_prompts:", "live", '["fix the parser"]')
        state.put_session("injected:", "new", '["n2"]')  # a session start, no prompt yet
        for prefix in ("injected:", "recent_prompts:", "compacted:"):
            state.put_session(prefix, "idle", "[]")
        state.put(PROMPTS_PREFIX + "idle", f"4\t{OLD}")  # its last write, long ago
        state.put("injected:legacy", '["n3"]')  # an older ctx's value: no time kept
        state.put("current_task", "parser")
        state.put(NOTICE_KEY, "a notice")
        state.put("recentXprompts:idle", "not a session key")  # LIKE's `_` would match it
        with state.write() as conn:
            conn.executemany("INSERT INTO executed(key, session, at) VALUES (?, ?, ?)",
                             [("old-command", "idle", OLD), ("new-command", "live", int(time.time()))])
        state.prune()
        assert state.prompt_count("live") == 1 and state.prompt_count("new") == 0
        with state.write() as conn:
            executed = [k for (k,) in conn.execute("SELECT key FROM executed")]
    assert executed == ["new-command"]
    assert sorted(_kv(store)) == sorted([
        "prompts:live", "injected:live", "recent_prompts:live", "prompts:new", "injected:new",
        "current_task", NOTICE_KEY, "recentXprompts:idle"])


def test_put_session_keeps_the_prompt_count_and_refuses_other_keys(store: Store) -> None:
    with _state(store) as state:
        state.count_prompt("s")
        state.count_prompt("s")
        state.put(PROMPTS_PREFIX + "s", f"2\t{OLD}")
        state.put_session("recent_prompts:", "s", '["again"]')  # the session is back
        assert state.prompt_count("s") == 2
        state.prune()
        assert state.get("recent_prompts:s") == '["again"]'
        with pytest.raises(ValueError):
            state.put_session("view_cache", "s", "{}")


def _hook(store: Store, event: str, session: str, **extra: str) -> None:
    payload = {"session_id": session, "cwd": str(store.worktree), "prompt": "", "source": "startup",
               "reason": "other", **extra}
    res = CliRunner().invoke(cli, ["--ctx-dir", str(store.root), "hook", event],
                             input=json.dumps(payload))
    assert res.exit_code == 0 and json.loads(res.stdout) is not None, res.output


def test_session_end_prunes_the_values_of_idle_sessions(store: Store) -> None:
    _hook(store, "session-start", "old")
    _hook(store, "prompt-submit", "old", prompt="where is the config parser kept")
    assert {"injected:old", "recent_prompts:old", "prompts:old"} <= set(_kv(store))
    conn = sqlite3.connect(store.root / "local" / STATE_FILE)
    conn.execute("UPDATE kv SET value = ? WHERE key = 'prompts:old'", (f"1\t{OLD}",))
    conn.commit()
    conn.close()
    _hook(store, "session-start", "today")
    _hook(store, "session-end", "today")
    keys = set(_kv(store))
    assert not {k for k in keys if k.endswith(":old")}, keys
    assert {"injected:today", "prompts:today"} <= keys
