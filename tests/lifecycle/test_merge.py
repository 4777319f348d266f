"""Lifecycle transitions are change records: two clones merge through real Git to one state."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import session_of

from ctxstore.lifecycle.policy import run_lifecycle
from ctxstore.model import scoring
from ctxstore.repo import now_ms, open_store
from tests.storage.test_git_merge import Side, clone_sides, git

pytestmark = pytest.mark.git


def _pull(side: Side, other: Side) -> None:
    git(side.repo, "fetch", "-q", str(other.repo), "main")
    res = git(side.repo, "merge", "--no-edit", "FETCH_HEAD", check=False)
    assert res.returncode == 0, res.stdout + res.stderr


def test_lifecycle_transitions_replay_identically_on_two_merged_branches(tmp_path: Path) -> None:
    runner = CliRunner()
    log: list[str] = []
    origin = tmp_path / "origin"
    origin.mkdir()
    git(origin, "init", "-q", "-b", "main")
    base = Side(origin, runner, "base", log)
    base.ctx("init", "--no-git")
    task = base.ctx("add", "--type", "task", "rotate the signing keys").strip()
    obs = base.ctx("add", "--type", "observation", "nightly job is flaky on arm").strip()
    base.ctx("commit", "-m", "base")
    base.git_commit("base")
    a, b = clone_sides(tmp_path, origin, runner, log)
    # a: the lifecycle archives both decayed memories (as ordinary node versions).
    rep = run_lifecycle(session_of(open_store(a.ctx_dir)), now_ms=now_ms() + 100 * scoring.DAY_MS)
    assert sorted(t.node_id for t in rep.transitions) == sorted([task, obs])
    a.ctx("commit", "-m", "lifecycle")
    a.git_commit("lifecycle on a")
    # b: unrelated work meanwhile, plus a tag on the task (a concurrent edit of one node).
    b.ctx("add", "--type", "fact", "keys live in the vault")
    b.ctx("tag", task, "area:security")
    b.ctx("commit", "-m", "work on b")
    b.git_commit("work on b")
    # Merge both ways; both clones must reach the same state, before and after rebuild.
    a2, b2 = tmp_path / "a2", tmp_path / "b2"
    git(tmp_path, "clone", "-q", str(a.repo), "a2")
    git(tmp_path, "clone", "-q", str(b.repo), "b2")
    sa, sb = Side(a2, runner, "a2", log), Side(b2, runner, "b2", log)
    _pull(sa, b)
    _pull(sb, a)
    assert sa.export() == sb.export()
    sa.ctx("rebuild")
    sb.ctx("rebuild")
    merged = sa.export()
    assert merged == sb.export()
    nodes = {n["id"]: n for n in merged["nodes"]}
    assert nodes[obs]["status"] == "archived"  # only a touched it: the archive stands
    # The task was edited on both sides: the newer version (b's tag, written after a's
    # archive in real time) wins on both clones alike, and the archive stays in history.
    assert nodes[task]["status"] == "active" and "area:security" in nodes[task]["tags"]


def test_lifecycle_restore_on_recall_replays_identically_on_two_merged_branches(
        tmp_path: Path) -> None:
    runner = CliRunner()
    log: list[str] = []
    origin = tmp_path / "origin"
    origin.mkdir()
    git(origin, "init", "-q", "-b", "main")
    base = Side(origin, runner, "base", log)
    base.ctx("init", "--no-git")
    obs = base.ctx("add", "--type", "observation", "nightly job is flaky on arm").strip()
    run_lifecycle(session_of(open_store(base.ctx_dir)), now_ms=now_ms() + 300 * scoring.DAY_MS)
    base.ctx("commit", "-m", "base, archived")
    base.git_commit("base")
    a, b = clone_sides(tmp_path, origin, runner, log)
    # Both clones recall the archived memory (each restores it), b also writes something.
    for side in (a, b):
        assert obs in side.ctx("recall", "--no-global", "nightly flaky")
        side.ctx("commit", "-m", "recall")
        side.git_commit("recall")
    b.ctx("add", "--type", "fact", "arm runners are shared")
    b.ctx("commit", "-m", "fact on b")
    b.git_commit("fact on b")
    a2, b2 = tmp_path / "a2", tmp_path / "b2"
    git(tmp_path, "clone", "-q", str(a.repo), "a2")
    git(tmp_path, "clone", "-q", str(b.repo), "b2")
    sa, sb = Side(a2, runner, "a2", log), Side(b2, runner, "b2", log)
    _pull(sa, b)
    _pull(sb, a)
    merged = sa.export()
    assert merged == sb.export()
    sa.ctx("rebuild")
    assert sa.export() == merged
    [node] = [n for n in merged["nodes"] if n["id"] == obs]
    assert node["status"] == "active" and "lifecycle_archived" not in node["metadata"]
