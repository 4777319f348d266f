"""Real Git: merges of .ctx/ with and without the merge driver, line-ending safety."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import run_ctx

from ctxstore.repo import open_store

pytestmark = pytest.mark.git


def git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=check)


def ctx(repo: Path, *args: str) -> str:
    r = run_ctx(list(args), cwd=repo)
    assert r.returncode == 0, r.stderr
    return r.stdout


def state(repo: Path) -> dict:
    return json.loads(ctx(repo, "--format", "json", "debug", "state"))


def node_contents(repo: Path) -> set[str]:
    return {r["record"]["content"] for r in state(repo)["records"] if r["record"].get("content")}


def two_branch_history(repo: Path, *, commit_main: bool = True, commit_side: bool = True) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "init ctx")
    git(repo, "checkout", "-qb", "side")
    ctx(repo, "add", "--type", "fact", "side fact")
    if commit_side:
        ctx(repo, "commit", "-m", "side work")
    git(repo, "add", "-A")
    # --allow-empty: staged work is per clone (.ctx/local), so an unfolded side gives Git nothing
    git(repo, "commit", "--allow-empty", "-qm", "side")
    git(repo, "checkout", "-q", "main")
    ctx(repo, "add", "--type", "fact", "main fact")
    if commit_main:
        ctx(repo, "commit", "-m", "main work")
    git(repo, "add", "-A")
    git(repo, "commit", "--allow-empty", "-qm", "main")


@pytest.mark.parametrize("driver", [False, True], ids=["plain-git", "driver"])
@pytest.mark.parametrize("sides", [(True, True), (True, False), (False, True), (False, False)],
                         ids=["both-committed", "side-staged", "main-staged", "both-staged"])
def test_git_merge_needs_no_manual_step(git_repo: Path, driver: bool, sides) -> None:
    ctx(git_repo, "init") if driver else ctx(git_repo, "init", "--no-git")
    two_branch_history(git_repo, commit_main=sides[0], commit_side=sides[1])
    merged = git(git_repo, "merge", "-q", "--no-edit", "side", check=False)
    assert merged.returncode == 0, merged.stdout + merged.stderr
    assert "<<<<<<<" not in (git_repo / ".ctx" / "refs" / "main").read_text()
    assert node_contents(git_repo) == {"side fact", "main fact"}
    digest = state(git_repo)["digest"]
    verify = json.loads(run_ctx(["--format", "json", "debug", "verify"], cwd=git_repo).stdout)
    assert verify["ok"], verify
    # the next write turns any multi-head pointer into a merge commit; nothing changes
    ctx(git_repo, "commit", "-m", "after merge")
    store = open_store(git_repo / ".ctx")
    assert not store.read_head().conflicted and not store.read_stage().conflicted
    assert state(git_repo)["digest"] == digest
    assert json.loads(run_ctx(["--format", "json", "debug", "verify"], cwd=git_repo).stdout)["problems"] == []
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "--allow-empty", "-qm", "record merge")
    assert git(git_repo, "status", "--porcelain").stdout == ""


def test_git_text_merge_conflict_markers_are_read_and_resolved(git_repo: Path) -> None:
    ctx(git_repo, "init", "--no-git")
    # Force Git's line merge on pointers (as an old or hand-edited attributes file would).
    (git_repo / ".git" / "info").mkdir(exist_ok=True)
    attributes = git_repo / ".git" / "info" / "attributes"
    attributes.write_text("/.ctx/refs/** merge=text\n/.ctx/STAGE merge=text\n")
    two_branch_history(git_repo)
    merged = git(git_repo, "merge", "--no-edit", "side", check=False)
    assert merged.returncode != 0
    assert "<<<<<<<" in (git_repo / ".ctx" / "refs" / "main").read_text()
    # readers see both sides while the markers are there
    assert node_contents(git_repo) == {"side fact", "main fact"}
    refs_out = ctx(git_repo, "debug", "refs")
    assert "several heads" in refs_out
    ctx(git_repo, "stage", "flush")  # any write resolves the markers
    assert "<<<<<<<" not in (git_repo / ".ctx" / "refs" / "main").read_text()
    assert node_contents(git_repo) == {"side fact", "main fact"}
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-qm", "merged")


def test_merge_ref_driver_three_way(tmp_path: Path) -> None:
    a, b, c = ("a" * 64, "b" * 64, "c" * 64)

    def run(o: str, ours: str, theirs: str) -> tuple[int, str]:
        for name, text in (("O", o), ("A", ours), ("B", theirs)):
            (tmp_path / name).write_text(text)
        r = run_ctx(["merge-ref", str(tmp_path / "O"), str(tmp_path / "A"), str(tmp_path / "B")],
                    cwd=tmp_path)
        return r.returncode, (tmp_path / "A").read_text()

    assert run(f"{a}\n", f"{a}\n", f"{b}\n") == (0, f"{b}\n")          # only theirs moved
    assert run(f"{a}\n", f"{b}\n", f"{a}\r\n") == (0, f"{b}\n")        # only ours moved
    assert run(f"{a}\n", f"{b}\n", f"{b}\n") == (0, f"{b}\n")          # same move
    assert run(f"{a}\n", f"{c}\n", f"{b}\n") == (0, f"{b}\n{c}\n")     # both moved: sorted
    assert run("", f"{c}\n", f"{b}\n") == (0, f"{b}\n{c}\n")           # added on both sides
    code, _ = run(f"{a}\n", "garbage\n", f"{b}\n")
    assert code == 1


def test_crlf_checkout_does_not_corrupt_objects(git_repo: Path, tmp_path: Path) -> None:
    (git_repo / ".gitattributes").write_text("* text eol=crlf\n")
    ctx(git_repo, "init")
    ctx(git_repo, "add", "--type", "fact", "line one\nline two\n")
    ctx(git_repo, "commit", "-m", "c")
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-qm", "with crlf attributes")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(git_repo), str(clone)], check=True)
    for path in (git_repo / ".ctx" / "objects").rglob("*"):
        if path.is_file():
            rel = path.relative_to(git_repo)
            assert (clone / rel).read_bytes() == path.read_bytes()
    r = run_ctx(["debug", "verify"], cwd=clone)
    assert r.returncode == 0, r.stdout
    assert node_contents(clone) == {"line one\nline two\n"}


def test_git_cherry_pick_names_the_missing_parent_and_the_branch_restores_it(
        git_repo: Path, tmp_path: Path) -> None:
    """A cherry-picked Git commit brings its ctx commit but not that commit's parents.

    ``ctx debug verify`` names the missing parent (E009) and nothing else: the parent is in no
    object area of this clone, so it is not reported as "only in the staging area" (W004).
    Checking out the source branch's objects (docs/git.md) repairs it.
    """
    ctx(git_repo, "init")
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-qm", "init ctx")
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(git_repo), str(other))
    git(git_repo, "checkout", "-qb", "side")
    for text in ("first side fact", "second side fact"):
        ctx(git_repo, "add", "--type", "fact", text)
        ctx(git_repo, "commit", "-m", text)
        git(git_repo, "commit", "-qm", text)
    git(other, "fetch", "-q", "origin")
    git(other, "cherry-pick", "origin/side")
    res = run_ctx(["--format", "json", "debug", "verify"], cwd=other)
    assert res.returncode == 3, res.stderr
    codes = [p["code"] for p in json.loads(res.stdout)["problems"]]
    assert "E009" in codes and "W004" not in codes, codes
    listed = run_ctx(["list"], cwd=other)
    assert listed.returncode == 3 and "git checkout BRANCH -- .ctx/objects" in listed.stderr
    assert listed.stderr.count("\n") == 1, listed.stderr
    git(other, "checkout", "origin/side", "--", ".ctx/objects")
    assert run_ctx(["debug", "verify"], cwd=other).returncode == 0
    assert {"first side fact", "second side fact"} <= node_contents(other)



@pytest.mark.parametrize("fmt", ["text", "json"])
def test_git_commit_with_nothing_staged_after_a_merge_reports_and_stages_the_merge_commit(
        git_repo: Path, fmt: str) -> None:
    """After a Git merge refs/main holds two heads; `ctx commit` writes the merge commit.

    It said "nothing to commit" and left the new commit object untracked and refs/main
    unstaged, so a `git commit -am` would publish a pointer to an object no clone has.
    """
    ctx(git_repo, "init")
    two_branch_history(git_repo)
    git(git_repo, "merge", "--no-edit", "side")
    assert len((git_repo / ".ctx" / "refs" / "main").read_text().split()) == 2
    out = ctx(git_repo, "--format", fmt, "commit", "-m", "after the merge")
    merge = (git_repo / ".ctx" / "refs" / "main").read_text().strip()
    assert len(merge) == 64
    if fmt == "json":
        doc = json.loads(out)
        assert doc["commit"] is None and doc["git_staged"] is True, doc
        assert doc["merge_commit"] == merge, doc
    else:
        assert out == f"merged 2 heads of refs/main into {merge}\n  git add .ctx\n", out
    status = git(git_repo, "status", "--porcelain", ".ctx").stdout.splitlines()
    assert status and all(line[0] in "AM" and line[1] == " " for line in status), status
    assert ctx(git_repo, "commit", "-m", "again") == "nothing to commit\n"
