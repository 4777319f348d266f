"""``ctx compose --session-start`` prints what the SessionStart hook injects, changing nothing.

The preview is compared with the real hook (``ctx hook session-start`` run as a subprocess with a
real payload), and the hook state is compared before and after the preview.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from conftest import run_ctx

from ctxstore.claude.state import state_path
from ctxstore.repo import Store
from tests.claude.test_hooks import context, ctx, hook, payload


def _preview(store: Store, *args: str) -> str:
    res = run_ctx(["--ctx-dir", str(store.root), "compose", "--session-start", *args])
    assert res.returncode == 0, res.stderr
    return res.stdout


def _state_rows(store: Store) -> dict[str, list[tuple]]:
    """Every row of every table of the hook state (what a preview must not change)."""
    conn = sqlite3.connect(state_path(store.root).as_uri() + "?mode=ro", uri=True)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {t: sorted(conn.execute(f"SELECT * FROM {t}").fetchall(), key=repr) for t in tables}
    finally:
        conn.close()


def _stop(store: Store, reply: str, session: str = "s1") -> None:
    assert hook("stop", payload(store, session), args=("--response", reply)) == {}
    hook("prompt-submit", payload(store, session, prompt="and what comes next"))


def _populate(store: Store) -> None:
    ctx(store, "add", "decision", "Ship the hooks without networkx")
    ctx(store, "add", "task", "Implement rate limiting")
    ctx(store, "add", "--type", "fact", "--tag", "tier:reference", "Reference fact stays.")
    _stop(store, '<ctx:task name="auth" action="start"/> <ctx:remember type="fact" '
                 'tags="tier:working">Tokens expire after an hour.</ctx:remember>')
    # a result waiting for session s9 (its next prompt or a resume delivers it)
    assert hook("stop", payload(store, "s9"), args=("--response", "<ctx:status/>")) == {}


@pytest.mark.slow
def test_session_start_preview_equals_the_hook_and_changes_nothing(store: Store) -> None:
    _populate(store)
    hook("session-start", payload(store, "s0", source="startup"))  # the view is cached
    before = _state_rows(store)
    shown = _preview(store)
    assert _state_rows(store) == before  # no pending taken, no seen marks, no cache write
    real = context(hook("session-start", payload(store, "s2", source="startup")))
    assert shown == real
    assert "Current ctx task: auth" in shown and "Tokens expire after an hour." in shown
    assert "Ship the hooks without networkx" in shown and "ctx Status" not in shown
    as_json = json.loads(_preview(store, "--format", "json"))
    assert as_json["additional_context"] == real and as_json["source"] == "startup"


@pytest.mark.slow
def test_session_start_preview_of_a_resume_shows_its_pending_results_and_leaves_them(
        store: Store) -> None:
    _populate(store)
    hook("session-start", payload(store, "s0", source="startup"))
    before = _state_rows(store)
    shown = _preview(store, "--source", "resume", "--session", "s9")
    assert "ctx Status" in shown and _state_rows(store) == before
    assert _preview(store, "--source", "resume", "--session", "s9") == shown  # still waiting
    real = context(hook("session-start", payload(store, "s9", source="resume")))
    assert shown == real
    again = context(hook("session-start", payload(store, "s9", source="resume")))
    assert "ctx Status" not in again  # the hook delivered it once; the preview took nothing


def test_session_start_preview_creates_no_state(store: Store) -> None:
    ctx(store, "add", "decision", "Use Redis for the counters")
    assert not state_path(store.root).exists()
    shown = _preview(store)
    assert "Use Redis for the counters" in shown
    assert not (store.root / "local" / "state.sqlite").exists()


def test_session_start_preview_refuses_compose_options(store: Store, tmp_path: Path) -> None:
    res = run_ctx(["--ctx-dir", str(store.root), "compose", "--session-start", "--budget", "10"])
    assert res.returncode == 1 and res.stdout == ""
    assert res.stderr.startswith("ctx: error[E011]:") and res.stderr.count("\n") == 1
    res = run_ctx(["--ctx-dir", str(store.root), "compose", "--source", "resume"])
    assert res.returncode == 1 and res.stderr.startswith("ctx: error[E011]:")
    assert "Example" in run_ctx(["compose", "--help"]).stdout
