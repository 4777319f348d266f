"""A store shared through Git by a team, and `ctx init --template`.

Through the CLI (subprocess or CliRunner) and real git: where `ctx init` puts the store,
the one-time merge-driver warning of a fresh clone, `git add .ctx` after `ctx commit`,
the user-store notice, `ctx stage abort` (confirmation, narrative removed), gc keeping
the narrative of replaced commits, E009 for a missing parent, and the `ctx stage recover`
hint for a dangling STAGE.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import invoke, run_ctx, stage_file, store_digest

from ctxstore.model import Commit
from ctxstore.repo import open_store

pytestmark = pytest.mark.git


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout


def ok(args: list[str], cwd: Path, **kw: object) -> subprocess.CompletedProcess[str]:
    res = run_ctx(args, cwd=cwd, **kw)  # type: ignore[arg-type]
    assert res.returncode == 0, res.stderr
    return res


# -- item 6: where `ctx init` puts the store; the merge driver of a fresh clone ----------------

def test_init_in_subdirectory_creates_store_at_git_root(git_repo: Path) -> None:
    sub = git_repo / "src" / "pkg"
    sub.mkdir(parents=True)
    res = ok(["init"], cwd=sub)
    assert (git_repo / ".ctx" / "HEAD").is_file()
    assert not (sub / ".ctx").exists()
    assert f"Initialized ctx store in {git_repo.resolve() / '.ctx'}" in res.stdout
    # every command run from the subdirectory finds it
    ok(["add", "--type", "fact", "found from below"], cwd=sub)
    assert "1" in ok(["--format", "json", "status"], cwd=sub).stdout


def test_init_here_creates_store_in_current_directory(git_repo: Path) -> None:
    sub = git_repo / "tools"
    sub.mkdir()
    ok(["init", "--here"], cwd=sub)
    assert (sub / ".ctx" / "HEAD").is_file()
    assert not (git_repo / ".ctx").exists()


def test_init_outside_git_creates_store_in_current_directory(tmp_path: Path) -> None:
    work = tmp_path / "plain"
    work.mkdir()
    ok(["init"], cwd=work)
    assert (work / ".ctx" / "HEAD").is_file()


def _shared_repo(tmp_path: Path, git_repo: Path) -> Path:
    """``git_repo`` with a store committed to Git, and a fresh clone of it (returned)."""
    ok(["init"], cwd=git_repo)
    ok(["add", "--type", "fact", "shared fact"], cwd=git_repo)
    ok(["commit", "-m", "first"], cwd=git_repo)
    git(git_repo, "commit", "-q", "-m", "store")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(git_repo), str(clone)], check=True)
    return clone


WARNING = "ctx: warning: the ctx merge driver is not registered in this clone"


def test_fresh_clone_warns_once_about_missing_merge_driver(tmp_path: Path, git_repo: Path) -> None:
    clone = _shared_repo(tmp_path, git_repo)
    first = ok(["status"], cwd=clone)
    assert first.stderr.count(WARNING) == 1, first.stderr
    assert f"run `ctx init` once in {clone.resolve()}" in first.stderr
    assert WARNING not in ok(["status"], cwd=clone).stderr  # once per clone
    assert WARNING not in ok(["add", "--type", "fact", "x"], cwd=clone).stderr
    # remembered per clone in .ctx/local/, which Git ignores
    assert (clone / ".ctx" / "local" / "merge-driver-warned").is_file()
    assert git(clone, "check-ignore", ".ctx/local/merge-driver-warned").strip()


def test_fresh_clone_failing_command_prints_only_its_error(tmp_path: Path, git_repo: Path) -> None:
    clone = _shared_repo(tmp_path, git_repo)
    res = run_ctx(["show", "01AAAAAAAAAAAAAAAAAAAAAAAA"], cwd=clone)
    assert res.returncode == 1
    assert len(res.stderr.splitlines()) == 1 and res.stderr.startswith("ctx: error[E019]")
    assert ok(["status"], cwd=clone).stderr.count(WARNING) == 1  # said by the next success


def test_clone_after_ctx_init_registers_driver_no_warning(tmp_path: Path, git_repo: Path) -> None:
    clone = _shared_repo(tmp_path, git_repo)
    res = ok(["init"], cwd=clone)
    assert "only the merge driver was registered" in res.stdout
    assert WARNING not in ok(["status"], cwd=clone).stderr
    assert WARNING not in ok(["status"], cwd=git_repo).stderr  # where `ctx init` ran


def _logging_git(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """An environment whose ``git`` is the real one, each call logged to the returned file."""
    real = subprocess.run(["sh", "-c", "command -v git"], capture_output=True, text=True,
                          check=True).stdout.strip()
    bin_dir, log = tmp_path / "logbin", tmp_path / "git-calls.log"
    bin_dir.mkdir()
    shim = bin_dir / "git"
    shim.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\nexec "{real}" "$@"\n')
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    return env, log


def _git_calls(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def test_untracked_store_in_a_work_tree_asks_git_once_until_the_index_changes(
        tmp_path: Path, git_repo: Path) -> None:
    """A ``--no-git`` store is left alone, without two Git processes on every command."""
    ok(["init", "--no-git"], cwd=git_repo)
    env, log = _logging_git(tmp_path)
    ok(["status"], cwd=git_repo, env=env)
    assert any("ls-files" in call for call in _git_calls(log))  # asked once
    log.unlink()
    for _ in range(2):
        res = ok(["status"], cwd=git_repo, env=env)
        assert WARNING not in res.stderr
    assert _git_calls(log) == []  # the answer is remembered with Git's index stamp
    # Staging the store changes Git's index: the next command asks again and warns.
    git(git_repo, "add", ".ctx")
    res = ok(["status"], cwd=git_repo, env=env)
    assert res.stderr.count(WARNING) == 1, res.stderr
    assert any("ls-files" in call for call in _git_calls(log))


# -- item 7: `ctx commit` stages .ctx like `ctx init`; the user store is said -------------------

def test_commit_stages_store_in_git_like_init(git_repo: Path) -> None:
    ok(["init"], cwd=git_repo)
    git(git_repo, "commit", "-q", "-m", "store")
    ok(["add", "--type", "fact", "to be staged"], cwd=git_repo)
    res = ok(["commit", "-m", "one"], cwd=git_repo)
    assert res.stdout.rstrip().endswith("git add .ctx")
    # nothing of .ctx is left unstaged: Git's index holds the new commit
    assert git(git_repo, "status", "--porcelain", "--", ".ctx").splitlines()
    assert not [line for line in git(git_repo, "status", "--porcelain", "--", ".ctx").splitlines()
                if line[1] != " "]
    tracked = git(git_repo, "ls-files", "--", ".ctx/refs/main")
    assert tracked.strip() == ".ctx/refs/main"
    data = json.loads(ok(["--format", "json", "commit", "--allow-empty", "-m", "e"],
                         cwd=git_repo).stdout)
    assert data["git_staged"] is True


def test_add_with_a_commit_message_stages_store_in_git_like_commit(git_repo: Path) -> None:
    ok(["init"], cwd=git_repo)
    git(git_repo, "commit", "-q", "-m", "store")
    res = ok(["add", "decision", "Use X", "-m", "dec"], cwd=git_repo)
    assert res.stdout.rstrip().endswith("git add .ctx")
    # nothing of .ctx is left unstaged or untracked: a later `git commit -a` is whole
    assert not [line for line in git(git_repo, "status", "--porcelain", "--", ".ctx").splitlines()
                if line[1] != " "]
    data = json.loads(ok(["--format", "json", "add", "--type", "fact", "two", "--commit"],
                         cwd=git_repo).stdout)
    assert data["commit"] and data["git_staged"] is True


def test_commit_does_not_stage_store_made_with_no_git(git_repo: Path) -> None:
    ok(["init", "--no-git"], cwd=git_repo)
    ok(["add", "--type", "fact", "private"], cwd=git_repo)
    res = ok(["commit", "-m", "one"], cwd=git_repo)
    assert "git add" not in res.stdout
    assert git(git_repo, "ls-files", "--", ".ctx") == ""


def test_write_to_user_store_is_said_once_on_stderr(tmp_path: Path) -> None:
    nowhere = tmp_path / "nowhere"
    nowhere.mkdir()
    res = ok(["add", "--type", "fact", "lands in the user store"], cwd=nowhere)
    assert res.stderr.count("ctx: writing to the user store ~/.ctx") == 1, res.stderr
    assert (Path(os.environ["HOME"]) / ".ctx" / "HEAD").is_file()
    # a read that writes nothing says nothing; a project store says nothing
    assert "user store" not in ok(["status"], cwd=nowhere).stderr
    project = tmp_path / "proj"
    project.mkdir()
    ok(["init"], cwd=project)
    assert "user store" not in ok(["add", "--type", "fact", "p"], cwd=project).stderr


# -- item 8: `ctx stage abort` ----------------------------------------------------------------------

def _session_with_narrative(git_repo: Path) -> Path:
    ok(["init"], cwd=git_repo)
    ok(["add", "note", "kept note"], cwd=git_repo)
    ok(["commit", "-m", "base"], cwd=git_repo)
    ok(["add", "note", "aborted note"], cwd=git_repo)
    ok(["add", "decision", "Aborted decision", "--body", "why"], cwd=git_repo)
    ok(["add", "task", "Aborted task"], cwd=git_repo)
    ok(["add", "--type", "fact", "aborted fact"], cwd=git_repo)
    return git_repo / ".ctx"


def _narrative_text(root: Path) -> str:
    return "\n".join(p.read_text() for p in sorted((root / "narrative").rglob("*.md")))


def test_stage_abort_refuses_without_yes_when_stdin_is_not_a_terminal(git_repo: Path) -> None:
    root = _session_with_narrative(git_repo)
    before = store_digest(root)
    res = run_ctx(["stage", "abort"], cwd=git_repo, stdin="y\n")
    assert res.returncode == 1
    assert res.stdout == ""
    assert res.stderr.startswith("ctx: error[E011]: refusing to abort session ")
    assert "without confirmation: standard input is not a terminal (hint: pass --yes" in res.stderr
    assert len(res.stderr.splitlines()) == 1
    assert store_digest(root) == before


def test_stage_abort_yes_removes_narrative_and_nothing_comes_back(git_repo: Path) -> None:
    root = _session_with_narrative(git_repo)
    task_files = list((root / "narrative" / "tasks").glob("task_*.md"))
    assert len(task_files) == 1
    res = ok(["stage", "abort", "--yes", "--reason", "changed approach"], cwd=git_repo)
    lines = res.stdout.splitlines()
    assert lines[0].startswith("aborted session ")
    assert "dropped 4 work commits" in lines[0] and "4 new nodes, 4 narrative entries" in lines[0]
    assert sum(line.startswith("  removed entry ") for line in lines) == 3
    assert sum(line.startswith("  removed file ") for line in lines) == 1
    text = _narrative_text(root)
    assert "kept note" in text
    for gone in ("aborted note", "Aborted decision", "Aborted task", "task created"):
        assert gone not in text
    assert not task_files[0].exists()
    # the next commit brings none of it back
    ok(["commit", "-m", "after abort"], cwd=git_repo)
    status = json.loads(ok(["--format", "json", "status"], cwd=git_repo).stdout)
    found = json.loads(ok(["--format", "json", "query", "type:observation"], cwd=git_repo).stdout)
    contents = json.dumps(found) + json.dumps(status)
    assert "aborted" not in contents.lower()
    assert "kept note" in json.dumps(found)


def test_stage_abort_json_lists_removed_entries(git_repo: Path) -> None:
    _session_with_narrative(git_repo)
    data = json.loads(ok(["--format", "json", "stage", "abort", "-y"], cwd=git_repo).stdout)
    assert data["work_commits"] == 4 and len(data["nodes"]) == 4
    assert {e["kind"] for e in data["narrative_removed"]} == {"entry", "file"}


def _run_on_terminal(args: list[str], cwd: Path, answer: bytes) -> tuple[int, str]:
    """Run ctx with stdin on a pseudo-terminal, answering ``answer`` to the question."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "ctxstore.cli", *args], cwd=cwd, stdin=slave,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    os.close(slave)
    os.write(master, answer)
    out, err = proc.communicate(timeout=60)
    os.close(master)
    return proc.returncode, out.decode() + err.decode()


def test_stage_abort_asks_on_a_terminal(git_repo: Path) -> None:
    root = _session_with_narrative(git_repo)
    before = store_digest(root)
    code, text = _run_on_terminal(["stage", "abort"], git_repo, b"n\n")
    assert code == 1 and "Abort it?" in text and "narrative/tasks/task_" in text
    assert store_digest(root) == before
    code, text = _run_on_terminal(["stage", "abort"], git_repo, b"y\n")
    assert code == 0, text
    assert "aborted session" in text
    assert "aborted note" not in _narrative_text(root)


def test_stage_abort_with_nothing_staged_is_e018_before_asking(store, runner) -> None:
    res = invoke(runner, store, "stage", "abort")
    assert res.exit_code == 1
    assert "error[E018]" in res.output


# -- item 9: gc, E009, the STAGE recovery hint ---------------------------------------------------------

def test_gc_keeps_narrative_snapshots_of_replaced_commits(tmp_path: Path) -> None:
    work = tmp_path / "w"
    work.mkdir()
    ok(["init"], cwd=work)
    ok(["add", "note", "first version of the log"], cwd=work)
    ok(["commit", "-m", "one"], cwd=work)
    store = open_store(work / ".ctx")
    old = store.read_head().single
    old_blobs = [r.blob_id for r in store.read_typed(old, Commit).narrative_refs]
    assert old_blobs
    ok(["add", "note", "second entry"], cwd=work)
    ok(["commit", "--amend", "-m", "one, amended"], cwd=work)
    for _ in range(2):  # kept by the first gc, and still known as narrative by the next
        res = ok(["gc", "--aggressive"], cwd=work)
        assert "deleted" in res.stdout
        for blob in old_blobs:
            assert store.objects.path_for(blob).is_file(), res.stdout


def _commit_three(work: Path) -> list[str]:
    ok(["init"], cwd=work)
    for word in ("one", "two"):
        ok(["add", "--type", "fact", word], cwd=work)
        ok(["commit", "-m", word], cwd=work)
    data = json.loads(ok(["--format", "json", "log"], cwd=work).stdout)
    return [c["id"] for c in data["commits"]]


@pytest.mark.parametrize("command", [["log"], ["status"], ["query", "type:fact"]])
def test_missing_parent_commit_is_e009_exit_3(tmp_path: Path, command: list[str]) -> None:
    work = tmp_path / "w"
    work.mkdir()
    ids = _commit_three(work)
    root = work / ".ctx"
    parent = ids[1]
    for path in open_store(root).objects.paths_for(bytes.fromhex(parent)):
        path.unlink()  # every copy: a fold leaves a staging copy until `ctx gc`
    for index in (root / "index").iterdir():  # a fresh index must walk the history
        index.unlink()
    res = run_ctx(command, cwd=work)
    assert res.returncode == 3, res.stderr
    assert res.stdout == ""
    assert res.stderr.startswith(f"ctx: error[E009]: commit {parent} (a parent ")
    assert "is missing: the history is broken" in res.stderr


def test_missing_parent_commit_is_corruption_for_hooks(tmp_path: Path) -> None:
    work = tmp_path / "w"
    work.mkdir()
    ids = _commit_three(work)
    root = work / ".ctx"
    for path in open_store(root).objects.paths_for(bytes.fromhex(ids[1])):
        path.unlink()
    for index in (root / "index").iterdir():
        index.unlink()
    res = run_ctx(["hook", "session-start"], cwd=work, stdin=json.dumps({"cwd": str(work)}))
    # A corrupt store is named in systemMessage, exit 0 (Claude Code ignores a failing hook's output).
    assert res.returncode == 0, res.stderr
    assert "E009" in json.loads(res.stdout)["systemMessage"]


@pytest.mark.parametrize("command", [["status"], ["log"], ["add", "--type", "fact", "x"],
                                     ["commit", "-m", "c"], ["stage", "status"]])
def test_dangling_stage_error_points_at_stage_recover(tmp_path: Path, command: list[str]) -> None:
    work = tmp_path / "w"
    work.mkdir()
    ok(["init"], cwd=work)
    ok(["add", "--type", "fact", "staged one"], cwd=work)
    ok(["add", "--type", "fact", "staged two"], cwd=work)
    root = work / ".ctx"
    tip = stage_file(root).read_text().strip()
    open_store(root).objects.path_for(bytes.fromhex(tip)).unlink()  # what a crash can leave
    before = store_digest(root)
    res = run_ctx(command, cwd=work)
    assert res.returncode == 1
    assert res.stdout == ""
    assert res.stderr.startswith(f"ctx: error[E001]: object {tip} not found")
    assert "(hint: STAGE is damaged (an interrupted write?): run `ctx stage recover`" in res.stderr
    assert store_digest(root) == before
    ok(["stage", "recover"], cwd=work)
    ok(command if command[0] != "commit" else ["status"], cwd=work)


def test_unreadable_stage_pointer_points_at_stage_recover(tmp_path: Path) -> None:
    work = tmp_path / "w"
    work.mkdir()
    ok(["init"], cwd=work)
    stage_file(work / ".ctx").write_text("garbage\n")
    res = run_ctx(["status"], cwd=work)
    assert res.returncode == 1
    assert res.stderr.startswith("ctx: error[E005]: pointer STAGE")
    assert "run `ctx stage recover`" in res.stderr


# -- item 15: `ctx init --template` --------------------------------------------------------------------

def _config(root: Path) -> dict:
    return tomllib.loads((root / "config.toml").read_text())


def test_init_template_team_writes_its_settings(tmp_path: Path) -> None:
    work = tmp_path / "w"
    work.mkdir()
    res = ok(["init", "--template", "team"], cwd=work)
    assert "(template team)" in res.stdout.splitlines()[0]
    cfg = _config(work / ".ctx")
    assert cfg["gc"]["keep_days"] == 30 and cfg["lock"]["timeout_seconds"] == 30.0
    assert open_store(work / ".ctx").config.get("gc", "keep_days") == 30


def test_init_template_path_copies_another_config(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    ok(["init", "--template", "large"], cwd=first)
    ok(["init", "--template", str(first / ".ctx")], cwd=second)
    cfg = _config(second / ".ctx")
    assert cfg["storage"]["compression_level"] == 9
    assert cfg["repo"]["id"] == "b"


def test_init_unknown_template_is_e011_and_writes_nothing(tmp_path: Path) -> None:
    work = tmp_path / "w"
    work.mkdir()
    res = run_ctx(["init", "--template", "nope"], cwd=work)
    assert res.returncode == 1
    assert res.stdout == ""
    assert res.stderr == ("ctx: error[E011]: unknown template 'nope' (built-in: default, solo, "
                          "team, large; or the path of a config.toml)\n")
    assert not (work / ".ctx").exists()
