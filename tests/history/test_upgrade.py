"""``ctx upgrade``: an older store's received staged work is folded by an explicit step (issue 29).

Before STAGE moved to ``local/STAGE`` it was committed as ``.ctx/STAGE``, so a clone could
receive somebody's unfolded session through Git. That work used to be folded silently by the
first write transaction of a process. Now reading never writes, a write refuses the store
(E026, nothing written) and points at ``ctx upgrade``, which folds the work once and says so;
``ctx rebuild`` runs the same step. Real Git, the installed CLI in subprocesses.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import run_ctx, stage_file, store_digest

from ctxstore.graph.scc import load_scc
from ctxstore.replay import state_heads
from ctxstore.repo import open_store

pytestmark = pytest.mark.git


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True,
                          check=True).stdout


def ctx(repo: Path, *args: str, stdin: str | None = None) -> str:
    res = run_ctx(list(args), cwd=repo, stdin=stdin)
    assert res.returncode == 0, res.stderr
    return res.stdout


def contents(repo: Path) -> set[str]:
    doc = json.loads(ctx(repo, "--format", "json", "debug", "state"))
    return {r["record"]["content"] for r in doc["records"] if r["record"].get("content")}


@pytest.fixture
def legacy(git_repo: Path) -> Path:
    """A Git work tree whose store has the older layout: its committed .ctx/STAGE names
    staged work (every object in objects/, no local/STAGE)."""
    ctx(git_repo, "init")
    root = git_repo / ".ctx"
    ctx(git_repo, "add", "--type", "fact", "staged by an older ctx")
    staging = root / "local" / "work" / "objects"
    for path in staging.rglob("*"):
        if path.is_file():
            dest = root / "objects" / path.relative_to(staging)
            dest.parent.mkdir(exist_ok=True)
            shutil.copyfile(path, dest)
    shutil.rmtree(staging)
    stage_file(root).rename(root / "STAGE")
    git(git_repo, "add", ".ctx")
    git(git_repo, "commit", "-qm", "an older ctx's store")
    return git_repo


def test_upgrade_folds_received_staged_work_once_and_says_so(legacy: Path) -> None:
    root = legacy / ".ctx"
    head_before = open_store(root).read_head().single
    out = ctx(legacy, "upgrade")
    assert out.startswith("upgraded the store's layout: folded 1 work commits (1 records) that "
                          "the committed .ctx/STAGE of an older ctx named into "), out
    assert out.rstrip().endswith("git add .ctx")  # a canonical commit: staged in Git
    assert "Fold staged work received through Git" in ctx(legacy, "log")
    store = open_store(root)
    assert store.read_head().single != head_before
    assert (root / "local" / "STAGE").is_file() and not store.staged_heads()
    view = load_scc(root).view  # the graph view follows the fold, as after every commit
    assert view is not None and view.heads == tuple(sorted(set(state_heads(store))))
    assert ctx(legacy, "upgrade") == "nothing to upgrade: the store's layout is current\n"
    ctx(legacy, "add", "--type", "fact", "new work")
    assert contents(legacy) >= {"staged by an older ctx", "new work"}
    status = json.loads(ctx(legacy, "--format", "json", "stage", "status"))
    assert status["work_commits"] == 1, status  # only "new work" is this clone's session
    ctx(legacy, "add", "--type", "fact", "third")
    assert ctx(legacy, "log").count("Fold staged work received through Git") == 1
    doc = json.loads(ctx(legacy, "--format", "json", "upgrade"))
    assert doc == {"version": 1, "upgraded": False, "commit": None, "records": 0, "work_commits": 0,
                   "session_id": None, "git_staged": False}


@pytest.mark.parametrize("args", [["add", "--type", "fact", "a new fact"],
                                  ["add", "note", "a new note"],
                                  ["commit", "-m", "fold"],
                                  ["stage", "start", "a task"]],
                         ids=["add", "add-note", "commit", "stage-start"])
def test_write_to_an_older_store_is_refused_with_a_hint_and_writes_nothing(
        legacy: Path, args: list[str]) -> None:
    root = legacy / ".ctx"
    before = store_digest(root)
    res = run_ctx(args, cwd=legacy)
    assert (res.returncode, res.stdout) == (1, "")
    assert res.stderr.startswith(f"ctx: error[E026]: {root / 'STAGE'} (the layout of an older "
                                 "ctx) names staged work that must be folded"), res.stderr
    assert "run `ctx upgrade` once" in res.stderr
    assert store_digest(root) == before
    assert not (root / "local" / "STAGE").exists()
    assert "Fold staged work" not in ctx(legacy, "log")


def test_reading_an_older_store_never_writes(legacy: Path) -> None:
    root = legacy / ".ctx"
    before = store_digest(root)
    for args in (["status"], ["list"], ["search", "older"], ["log"], ["stage", "status"],
                 ["compose"], ["debug", "verify"]):
        ctx(legacy, *args)
    assert store_digest(root) == before
    assert not (root / "local" / "STAGE").exists()
    assert "staged by an older ctx" in contents(legacy)  # the received work is read as staged


def test_rebuild_upgrades_an_older_store_and_says_so(legacy: Path) -> None:
    res = run_ctx(["rebuild"], cwd=legacy)
    assert res.returncode == 0, res.stderr
    assert "ctx: upgraded the store's layout: folded 1 work commits" in res.stderr
    assert "git add .ctx" in res.stdout
    assert not open_store(legacy / ".ctx").staged_heads()
    again = run_ctx(["--format", "json", "rebuild"], cwd=legacy)
    assert json.loads(again.stdout)["upgraded"] is False and "upgraded" not in again.stderr


def test_hook_defers_commands_on_an_older_store_until_upgrade(legacy: Path) -> None:
    root = legacy / ".ctx"
    payload = json.dumps({"session_id": "s1", "cwd": str(legacy)})
    out = json.loads(ctx(legacy, "hook", "stop", "--response",
                         "<ctx:remember>kept until the upgrade</ctx:remember>", stdin=payload))
    assert "ctx upgrade" in out["systemMessage"] and "1 command(s) deferred" in out["systemMessage"]
    assert "kept until the upgrade" not in contents(legacy)
    assert not (root / "local" / "STAGE").exists()
    ctx(legacy, "upgrade")
    ctx(legacy, "hook", "prompt-submit", stdin=json.dumps({"session_id": "s1", "cwd": str(legacy),
                                                           "prompt": "next"}))
    assert "kept until the upgrade" in contents(legacy)
