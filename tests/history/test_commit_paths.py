"""Every path that makes a canonical commit leaves the same derived state (issue 29).

``ctx commit``, ``ctx add --commit``, ``ctx stage compact``, ``ctx stage abort``, the
automatic compaction of the hooks (session end, a task's end) and of the MCP server, and
``ctx upgrade`` all go through ``history``: after each, the graph view
(``DERIVED/scc_latest``) reflects the new state, and the store is staged in Git where Git
tracks it (nothing of ``.ctx/`` left unstaged or untracked).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import run_ctx

from ctxstore.graph.scc import load_scc
from ctxstore.replay import state_heads
from ctxstore.repo import open_store


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout


def ctx(repo: Path, *args: str, stdin: str | None = None) -> str:
    res = run_ctx(list(args), cwd=repo, stdin=stdin)
    assert res.returncode == 0, res.stderr
    return res.stdout


def hook(repo: Path, event: str, *args: str) -> None:
    out = ctx(repo, "hook", event, *args,
              stdin=json.dumps({"session_id": "s1", "cwd": str(repo), "hook_event_name": event}))
    assert json.loads(out) is not None


def _commit(repo: Path) -> None:
    ctx(repo, "commit", "-m", "by ctx commit")


def _add_commit(repo: Path) -> None:
    ctx(repo, "add", "--type", "fact", "the last write, folded at once", "--commit")


def _compact(repo: Path) -> None:
    ctx(repo, "stage", "compact", "-m", "by ctx stage compact")


def _abort(repo: Path) -> None:
    ctx(repo, "stage", "abort", "--yes", "--reason", "dropped on purpose")


def _session_end(repo: Path) -> None:
    config = repo / ".ctx" / "config.toml"
    text = config.read_text()
    assert "compact_token_threshold = 50000" in text
    config.write_text(text.replace("compact_token_threshold = 50000", "compact_token_threshold = 1"))
    hook(repo, "session-start")  # a session of this clone: it has hook state
    hook(repo, "session-end")


def _task_end(repo: Path) -> None:
    hook(repo, "stop", "--response", '<ctx:task action="end" name="keys"/>')


def _mcp_task_end(repo: Path) -> None:
    from ctxstore.mcp.server import ToolBox
    from ctxstore.session import Session

    with Session.open(repo / ".ctx") as db:
        done = ToolBox(db, user_store=None).task_end("keys")
    assert done["compacted"] is not None


PATHS: dict[str, Callable[[Path], None]] = {
    "commit": _commit, "add-commit": _add_commit, "stage-compact": _compact,
    "stage-abort": _abort, "session-end-hook": _session_end, "stop-hook-task-end": _task_end,
    "mcp-task-end": _mcp_task_end,
}


@pytest.mark.git
@pytest.mark.parametrize("path", list(PATHS))
def test_commit_paths_leave_graph_view_current_and_store_staged_in_git(git_repo: Path,
                                                                       path: str) -> None:
    repo = git_repo
    ctx(repo, "init")
    git(repo, "commit", "-qm", "store")
    root = repo / ".ctx"
    # Staged work with an edge, so the graph view has something to show.
    a = json.loads(ctx(repo, "--format", "json", "add", "--type", "fact", "the cache is LRU",
                       "--tag", "tier:working", "--tag", "task:keys"))["id"]
    b = json.loads(ctx(repo, "--format", "json", "add", "--type", "decision",
                       "evict by age", "--tag", "tier:working", "--tag", "task:keys"))["id"]
    ctx(repo, "link", a, b, "--type", "DEPENDS_ON")
    head = open_store(root).read_head().single

    PATHS[path](repo)

    store = open_store(root)
    assert store.read_head().single != head, "the path made no canonical commit"
    assert not store.staged_heads(), "the session was not folded"
    loaded = load_scc(root)
    assert loaded.view is not None and loaded.notices == [], loaded.notices
    assert loaded.view.heads == tuple(sorted(set(state_heads(store))))  # current
    linked = {f"node:{a}", f"node:{b}"}
    # An abort drops the session's edge from the state; every other path keeps it.
    assert (linked <= set(loaded.view.nodes)) == (path != "stage-abort")
    unstaged = [line for line in git(repo, "status", "--porcelain", "--", ".ctx").splitlines()
                if line[1] != " "]
    assert unstaged == []
    assert git(repo, "diff", "--cached", "--name-only", "--", ".ctx/refs/main").strip() \
        == ".ctx/refs/main"


@pytest.mark.git
def test_rebuild_merging_heads_of_a_git_merge_leaves_the_same_derived_state(git_repo: Path) -> None:
    """``ctx rebuild`` after a Git merge writes a merge commit: staged in Git like a commit."""
    repo = git_repo
    ctx(repo, "init")
    git(repo, "commit", "-qm", "store")
    git(repo, "checkout", "-qb", "side")
    ctx(repo, "add", "--type", "fact", "made on the side branch", "--commit")
    git(repo, "commit", "-qm", "side")
    git(repo, "checkout", "-q", "main")
    ctx(repo, "add", "--type", "fact", "made on main", "--commit")
    git(repo, "commit", "-qm", "main")
    git(repo, "merge", "-q", "--no-edit", "side")
    root = repo / ".ctx"
    assert open_store(root).read_head().conflicted  # both sides' ids: a union merge
    doc = json.loads(ctx(repo, "--format", "json", "rebuild"))
    assert doc["merged_heads"] is True and doc["git_staged"] is True
    store = open_store(root)
    assert not store.read_head().conflicted
    loaded = load_scc(root)
    assert loaded.view is not None and loaded.view.heads == tuple(sorted(set(state_heads(store))))
    unstaged = [line for line in git(repo, "status", "--porcelain", "--", ".ctx").splitlines()
                if line[1] != " "]
    assert unstaged == []
