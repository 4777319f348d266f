"""The active task is a started task that is not ended (spec 001 §6), never a task merely added.

``ctx add task`` makes a task node: a recent task (``why.recent_task``) for ``[retrieval]
narrative_days`` days, not the active one. ``<ctx:task action="start">`` makes a task active: its
nodes join ``ctx pack`` with ``why.active_task`` and session start names it, until it ends.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import jsonschema
import pytest
from conftest import run_ctx

from ctxstore.repo import Store
from tests.claude.test_hooks import context, hook, payload

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "docs" / "pack.schema.json").read_text())


def _ctx(store: Store, *args: str) -> str:
    res = run_ctx(["--ctx-dir", str(store.root), *args])
    assert res.returncode == 0, res.stderr
    return res.stdout


def _pack(store: Store, task: str) -> dict:
    pack = json.loads(_ctx(store, "pack", task, "--format", "json", "--include-narrative"))
    jsonschema.validate(pack, SCHEMA)
    return pack


def _why(pack: dict) -> dict[str, dict]:
    return {item["title"]: item["why"] for item in pack["retrieved"]}


def _stop(store: Store, reply: str) -> None:
    assert hook("stop", payload(store), args=("--response", reply)) == {}
    hook("prompt-submit", payload(store, prompt="and what comes next"))  # the next turn


def test_pack_a_task_merely_added_is_recent_not_active(store: Store) -> None:
    _ctx(store, "add", "task", "Implement rate limiting", "--body", "Token bucket per client")
    _ctx(store, "add", "decision", "Use Redis for the counters")
    why = _why(_pack(store, "redis counters"))
    [task] = [t for t in why if "rate limiting" in t]
    assert task.startswith("Task: ") and why[task] == {"recent_task": True}
    assert not any(w.get("active_task") for w in why.values())
    assert "recent task" in _ctx(store, "pack", "redis counters", "--format", "text",
                                 "--include-narrative")
    started = context(hook("session-start", payload(store, source="startup")))
    assert "Implement rate limiting" in started  # still shown, as a recent task
    assert "Current ctx task" not in started


@pytest.mark.slow
def test_pack_the_started_task_is_active_until_it_ends(store: Store) -> None:
    _ctx(store, "add", "task", "Implement rate limiting")
    _stop(store, '<ctx:task name="ratelimit" action="start"/> '
                 '<ctx:remember type="observation" tags="tier:working">Bucket refill is '
                 'per second</ctx:remember>')
    why = _why(_pack(store, "redis counters"))
    active = [t for t, w in why.items() if w.get("active_task")]
    assert active == ["Active task ratelimit: Bucket refill is per second"]
    assert "active task" in _ctx(store, "pack", "redis counters", "--format", "text",
                                 "--include-narrative")
    assert "Current ctx task: ratelimit" in context(
        hook("session-start", payload(store, "s2", source="startup")))
    _stop(store, '<ctx:task name="ratelimit" action="end"/>')
    why = _why(_pack(store, "redis counters"))
    assert not any(w.get("active_task") for w in why.values())
    assert "Current ctx task" not in context(
        hook("session-start", payload(store, "s3", source="startup")))


def test_pack_reads_the_hook_state_without_changing_it(store: Store) -> None:
    _stop(store, '<ctx:task name="ratelimit" action="start"/>')
    state = store.root / "local" / "state.sqlite"
    with sqlite3.connect(state) as conn:
        conn.execute("PRAGMA user_version = 1")  # an older ctx's state: a writer migrates it
    before = state.read_bytes()
    _pack(store, "redis counters")
    assert state.read_bytes() == before  # a read command neither migrated nor repaired it


def test_pack_a_task_node_the_search_finds_too_is_one_item_with_both_reasons(store: Store
                                                                            ) -> None:
    _ctx(store, "add", "task", "Implement rate limiting", "--body", "Token bucket per client")
    _stop(store, '<ctx:task name="ratelimit" action="start"/> '
                 '<ctx:remember type="decision" tags="tier:working">Bucket refill is '
                 'per second</ctx:remember>')
    pack = _pack(store, "rate limiting bucket refill")
    ids = [item["object_id"] for item in pack["retrieved"]]
    assert len(ids) == len(set(ids)), pack["retrieved"]  # each node once: the budget pays once
    why = _why(pack)
    assert why["Active task ratelimit: Bucket refill is per second"] == {
        "matched_terms": ["bucket", "refill"], "active_task": True}
    [task] = [t for t in why if "rate limiting" in t]
    assert task.startswith("Task: ") and why[task]["recent_task"] is True
    assert why[task]["matched_terms"]
    text = _ctx(store, "pack", "rate limiting bucket refill", "--format", "text",
                "--include-narrative")
    assert "why: matched bucket, refill; active task" in text
