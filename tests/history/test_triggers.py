"""Compaction triggers (spec 002 §15.2): token budget, time, task end, task switch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner
from conftest import invoke, run_ctx, session_of

from ctxstore.history.tasks import task_end, task_start
from ctxstore.history.triggers import maybe_compact
from ctxstore.knowledge.nodes import add_node
from ctxstore.knowledge.tasks import read_current_task
from ctxstore.lifecycle.upkeep import session_end_upkeep
from ctxstore.repo import Store, now_ms, open_store
from ctxstore.session import Session
from ctxstore.staging import session_status, start_session


def _config(store: Store, text: str) -> Store:
    (store.root / "config.toml").write_text(text)
    return open_store(store.root)


def _log_messages(runner: CliRunner, store: Store) -> list[str]:
    res = invoke(runner, store, "--format", "json", "log")
    doc = json.loads(res.stdout)
    commits = doc["commits"] if isinstance(doc, dict) else doc
    return [c["message"] for c in commits]


def test_triggers_token_budget_compacts_at_session_end(runner: CliRunner, store: Store) -> None:
    store = _config(store, "[staging]\ncompact_token_threshold = 20\n[lifecycle]\n"
                           "on_session_end = false\n")
    add_node(session_of(store), "fact", "short")
    assert session_end_upkeep(store.root).compaction is None  # 2 tokens: under the budget
    add_node(session_of(store), "fact", "a much longer memory " * 5)
    up = session_end_upkeep(store.root)
    assert up.compaction is not None and up.problems == []
    assert up.compaction.reasons[0].startswith("token budget (")
    assert not open_store(store.root).staged_heads()
    assert _log_messages(runner, store)[0].startswith("Automatic compaction: token budget")
    logs = list((store.root / "narrative" / "log").glob("*.md"))
    assert any("Automatic compaction: token budget" in p.read_text() for p in logs)


def test_triggers_time_limit(store: Store) -> None:
    store = _config(store, "[staging]\ncompact_after_minutes = 60.0\n")
    add_node(session_of(store), "fact", "staged work")
    started = session_status(store).started_at
    assert maybe_compact(Session(store), now_ms=started + 59 * 60_000) is None
    done = maybe_compact(Session(store), now_ms=started + 61 * 60_000)
    assert done is not None and done.reasons == ("time (61 minutes >= 60)",)
    assert done.fold.commit is not None


def test_triggers_task_switch_and_task_end(store: Store) -> None:
    start_session(store, "alpha")
    add_node(session_of(store), "fact", "work on alpha")
    assert task_start(Session(store), "alpha").compaction is None  # the same task
    done = task_start(Session(store), "beta").compaction
    assert done is not None and done.reasons == ("context switch (alpha -> beta)",)
    add_node(session_of(store), "fact", "work on beta")
    ended = task_end(Session(store), "beta")
    assert ended.compaction is not None and ended.problem is None
    assert ended.compaction.reasons == ("task completion (beta)",)
    assert task_end(Session(store), "beta").compaction is None  # nothing staged


def test_triggers_task_boundary_that_cannot_compact_still_moves_the_task(store: Store) -> None:
    start_session(store, "alpha")
    add_node(session_of(store), "fact", "work on alpha")
    (store.root / "narrative" / "decisions.md").write_text("<<<<<<< ours\na\n=======\nb\n>>>>>>> theirs\n")
    res = task_start(Session(store), "beta")  # a switch: compaction refused by the markers
    assert res.compaction is None and res.problem is not None
    assert res.problem.startswith("automatic compaction skipped: ")
    assert read_current_task(store.root) == "beta"
    assert open_store(store.root).staged_heads()  # nothing folded


def test_triggers_each_can_be_turned_off(store: Store) -> None:
    store = _config(store, "[staging]\ncompact_token_threshold = 0\ncompact_after_minutes = 0.0\n"
                           "compact_on_task_end = false\ncompact_on_task_switch = false\n")
    start_session(store, "alpha")
    add_node(session_of(store), "fact", "x " * 400_000)
    assert maybe_compact(Session(store), now_ms=now_ms() + 10**10, task_started="beta",
                         task_ended="alpha") is None


def test_triggers_hook_task_end_folds_the_session(store: Store) -> None:
    def stop(text: str) -> dict:
        res = run_ctx(["hook", "stop", "--response", text],
                      stdin=json.dumps({"session_id": "s1", "cwd": str(store.worktree)}))
        assert res.returncode == 0, res.stderr
        return json.loads(res.stdout)

    stop('<ctx:task action="start" name="keys"/>')
    stop('<ctx:remember tags="tier:working">rotate the signing keys</ctx:remember>')
    assert open_store(store.root).staged_heads()
    stop('<ctx:task action="end" name="keys"/>')
    assert not open_store(store.root).staged_heads()


def test_triggers_session_end_hook_runs_upkeep(store: Store) -> None:
    _config(store, "[staging]\ncompact_token_threshold = 1\n")
    stdin = json.dumps({"session_id": "s1", "cwd": str(store.worktree)})
    run_ctx(["hook", "stop", "--response", "<ctx:remember>a memory</ctx:remember>"], stdin=stdin)
    assert open_store(store.root).staged_heads()
    res = run_ctx(["hook", "session-end"], stdin=stdin)
    assert (res.returncode, res.stdout) == (0, "{}\n")
    assert not open_store(store.root).staged_heads()


_RACE = """
import sys
from ctxstore.repo import now_ms
from ctxstore.history.triggers import maybe_compact
from ctxstore.session import Session
with Session.open(__import__("pathlib").Path(sys.argv[1])) as db:
    r = maybe_compact(db, now_ms=now_ms())
print("compacted" if r is not None and r.fold.commit is not None else "none")
"""


def test_triggers_concurrent_writers_compact_once(runner: CliRunner, store: Store) -> None:
    store = _config(store, "[staging]\ncompact_token_threshold = 1\n")
    add_node(session_of(store), "fact", "staged for the race")
    procs = [subprocess.Popen([sys.executable, "-c", _RACE, str(store.root)],
                              stdout=subprocess.PIPE, text=True) for _ in range(3)]
    outs = sorted(p.communicate(timeout=60)[0].strip() for p in procs)
    assert outs == ["compacted", "none", "none"]
    msgs = _log_messages(runner, store)
    assert sum(m.startswith("Automatic compaction") for m in msgs) == 1


def test_triggers_config_range_is_checked(runner: CliRunner, store: Store) -> None:
    (store.root / "config.toml").write_text("[staging]\ncompact_after_minutes = -5.0\n")
    res = invoke(runner, store, "stage", "status")
    assert res.exit_code == 1 and "compact_after_minutes" in res.stderr
    assert Path(store.root / "config.toml").exists()
