"""Staged work stays out of Git (issue 17 items 5 and 6; docs/git.md "Where objects live").

New objects land in this clone's ``.ctx/local/work/objects`` (ignored by Git); STAGE is
``.ctx/local/STAGE``; a transaction that moves ``refs/main`` promotes what the new commit
reaches into ``.ctx/objects``. Real Git, the installed CLI in subprocesses.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import run_ctx, stage_file

from ctxstore.model import decode_typed
from ctxstore.model.references import ABORTED_WORK, iter_references
from ctxstore.objects import KIND_TYPED, ObjectId
from ctxstore.repo import open_store

pytestmark = pytest.mark.git


def git(repo: Path, *args: str) -> str:
    res = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True)
    return res.stdout


def ctx(repo: Path, *args: str) -> str:
    res = run_ctx(list(args), cwd=repo)
    assert res.returncode == 0, res.stderr
    return res.stdout


def tracked_objects(repo: Path) -> set[str]:
    return {p for p in git(repo, "ls-files", ".ctx").split() if p.startswith(".ctx/objects/")}


def contents(repo: Path) -> set[str]:
    doc = json.loads(ctx(repo, "--format", "json", "debug", "state"))
    return {r["record"]["content"] for r in doc["records"] if r["record"].get("content")}


def canonical_closure(root: Path) -> set[bytes]:
    """Every object refs/main reaches, read from the committed area alone (what Git carries).

    An abort commit's aborted steps stay in the clone that aborted them: not followed.
    """
    store = open_store(root)
    canonical = store.objects.canonical
    todo = [bytes(store.read_head().single)]
    seen: set[bytes] = set()
    while todo:
        oid = todo.pop()
        if oid in seen:
            continue
        seen.add(oid)
        stored = canonical.read(ObjectId(oid))  # ObjectNotFound here: Git would lack it
        if stored.kind == KIND_TYPED:
            obj = decode_typed(stored.payload, oid=oid)
            todo.extend(ref for ref, want in iter_references(obj) if want is not ABORTED_WORK)
    return seen


@pytest.fixture
def repo(git_repo: Path) -> Path:
    ctx(git_repo, "init")
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-qm", "init ctx")
    return git_repo


def test_writes_stay_out_of_git_until_a_fold_adds_a_constant_number_of_files(repo: Path) -> None:
    before = tracked_objects(repo)
    for i in range(12):
        ctx(repo, "add", "--type", "fact", f"fact number {i}")
    git(repo, "add", "-A", ".ctx")
    assert tracked_objects(repo) == before  # staged work: nothing for Git
    assert git(repo, "ls-files", ".ctx/local", ".ctx/STAGE") == ""
    assert stage_file(repo / ".ctx").is_file()
    ctx(repo, "commit", "-m", "twelve facts")
    git(repo, "add", "-A", ".ctx")
    added = tracked_objects(repo) - before
    # The commit and its curated batch (node contents are inline records): O(1), not O(writes).
    assert 1 <= len(added) <= 4, sorted(added)
    git(repo, "commit", "-qm", "fold")
    second = tracked_objects(repo)
    for i in range(24):
        ctx(repo, "add", "--type", "fact", f"more {i}")
    ctx(repo, "commit", "-m", "twenty-four facts")
    git(repo, "add", "-A", ".ctx")
    assert 1 <= len(tracked_objects(repo) - second) <= 4  # twice the writes, the same cost


def test_a_fresh_clone_has_every_object_the_history_needs(repo: Path, tmp_path: Path) -> None:
    for i in range(5):
        ctx(repo, "add", "--type", "decision", f"decision {i}", "--tag", "area:db")
    ctx(repo, "add", "task", "tidy the cache", "--body", "narrative snapshot too")
    ctx(repo, "commit", "-m", "work")
    ctx(repo, "add", "--type", "fact", "left staged, never folded")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "ctx")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
    canonical_closure(clone / ".ctx")  # raises if a committed object names a missing one
    res = run_ctx(["--format", "json", "debug", "verify"], cwd=clone)
    assert res.returncode == 0 and json.loads(res.stdout)["problems"] == [], res.stdout
    got = contents(clone)
    assert {f"decision {i}" for i in range(5)} <= got
    # The other clone's staged session is not this clone's (and did not travel at all).
    assert "left staged, never folded" not in got
    status = json.loads(ctx(clone, "--format", "json", "stage", "status"))
    assert not status.get("work_commits"), status
    assert "left staged, never folded" in contents(repo)  # still staged where it was made


def test_verify_names_a_committed_object_missing_from_the_committed_area(repo: Path) -> None:
    root = repo / ".ctx"
    ctx(repo, "add", "--type", "fact", "promoted then lost")
    ctx(repo, "commit", "-m", "fold")
    store = open_store(root)
    head = store.read_head().single
    # What an interrupted promotion by an older ctx, or a hand copy, could leave.
    store.objects.canonical.path_for(head).unlink()
    assert store.objects.staging.exists(head)  # no gc ran: the fold's staging copy is there
    res = run_ctx(["--format", "json", "debug", "verify"], cwd=repo)
    problems = json.loads(res.stdout)["problems"]
    assert [(p["code"], p["subject"]) for p in problems] == [("W004", head.hex())]
    assert "ctx stage flush" in problems[0]["message"]
    ctx(repo, "stage", "flush")
    assert open_store(root).objects.is_canonical(head)
    res = run_ctx(["--format", "json", "debug", "verify"], cwd=repo)
    assert json.loads(res.stdout)["problems"] == []


def test_gc_removes_the_staging_copies_a_fold_left(repo: Path) -> None:
    root = repo / ".ctx"
    for i in range(4):
        ctx(repo, "add", "--type", "fact", f"gc fact {i}")
    ctx(repo, "commit", "-m", "fold")
    staged = [p for p in (root / "local" / "work" / "objects").rglob("*") if p.is_file()]
    assert staged  # work commits, per-write batches, promoted copies
    canonical_before = {p.name for p in (root / "objects").rglob("*") if p.is_file()}
    ctx(repo, "gc", "--keep-days", "0")
    left = [p.name for p in (root / "local" / "work" / "objects").rglob("*") if p.is_file()]
    # Only the fold's commit, which local/STAGE names: Git may remove its committed copy.
    assert left == [stage_file(root).read_text().strip()]
    assert {p.name for p in (root / "objects").rglob("*") if p.is_file()} == canonical_before
    assert {f"gc fact {i}" for i in range(4)} <= contents(repo)
    res = run_ctx(["--format", "json", "debug", "verify"], cwd=repo)
    assert json.loads(res.stdout)["problems"] == []


@pytest.mark.parametrize("git_op", [["revert", "--no-edit", "HEAD"], ["checkout", "-q", "HEAD~1"]],
                         ids=["revert", "checkout"])
def test_a_git_operation_that_removes_the_last_fold_after_gc_leaves_the_store_usable(
        repo: Path, git_op: list[str]) -> None:
    """local/STAGE names this clone's last fold, a canonical commit; Git may remove its file.

    After gc dropped the fold's staging copies, `git revert` of that Git commit (or a checkout
    of an older one) removed the only copy, and every command stopped with E001 naming STAGE.
    gc keeps the staging copy of what STAGE names, so reads and writes go on.
    """
    ctx(repo, "add", "--type", "fact", "kept fact")
    ctx(repo, "commit", "-m", "first")
    git(repo, "commit", "-qm", "first")
    ctx(repo, "add", "--type", "fact", "reverted fact")
    ctx(repo, "commit", "-m", "second")
    git(repo, "commit", "-qm", "second")
    ctx(repo, "gc", "--aggressive")
    git(repo, *git_op)
    assert contents(repo) >= {"kept fact"} and "reverted fact" not in contents(repo)
    ctx(repo, "add", "--type", "fact", "after the revert")
    ctx(repo, "commit", "-m", "third")
    assert run_ctx(["debug", "verify"], cwd=repo).returncode == 0
    assert "after the revert" in contents(repo)
