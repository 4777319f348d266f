"""Every idea of transcript memory records where it was said: its Git branch and the code's commit.

Spec 003 Phase 4 (provenance). The hooks extract while the session happens, so the work tree's
``HEAD`` (read from the files under ``.git``, no process) is the code of that moment; a backfill
reads past sessions, so each idea takes its branch's newest commit at the line's time. Shown by
``ctx memory search`` (text and JSON), the memory browser, and kept by ``ctx memory promote``.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest
from conftest import run_ctx

from ctxstore.git import head_position, read_head_position
from ctxstore.memory.db import memory_path
from ctxstore.repo import Store
from tests.memory.memtx import SESSION, Transcript

pytestmark = pytest.mark.git

NOW = "2026-02-13T12:00:00Z"


def _git(work: Path, *args: str, when: str | None = None) -> str:
    env = {**os.environ, **({"GIT_COMMITTER_DATE": when, "GIT_AUTHOR_DATE": when} if when else {})}
    return subprocess.run(["git", *args], cwd=work, check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


def _commit(work: Path, name: str, when: str) -> str:
    (work / name).write_text(f"{name}\n")
    _git(work, "add", name)
    _git(work, "commit", "-q", "-m", name, when=when)
    return _git(work, "rev-parse", "HEAD")


@pytest.fixture
def repo(store: Store) -> tuple[Store, str, str]:
    """The store's work tree under Git: one commit before the session (T0 is 16:00), one after."""
    work = store.root.parent
    _git(work, "init", "-q", "-b", "main")
    before = _commit(work, "a.py", "2026-02-12T15:00:00Z")
    after = _commit(work, "b.py", "2026-02-12T18:00:00Z")
    return store, before, after


def _talk(path: Path, branch: str = "main", session: str = SESSION) -> Path:
    t = Transcript(session, branch=branch)
    t.prompt("How should we store the session cache?")
    t.say("We decided to use SQLite for the session cache because it needs no server.")
    t.end_turn()
    return t.write(path)


def _search(store: Store, text: str) -> list[dict]:
    res = run_ctx(["--ctx-dir", str(store.root), "--format", "json", "memory", "search", text,
                   "--now", NOW])
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)["results"]


def _decision(hits: list[dict]) -> dict:
    return next(i for h in hits for i in h["ideas"] if i["intent"] == "decision")


def test_memory_provenance_backfill_records_the_branch_commit_of_the_time(
        repo: tuple[Store, str, str], tmp_path: Path) -> None:
    store, before, after = repo
    res = run_ctx(["--ctx-dir", str(store.root), "memory", "backfill", str(_talk(tmp_path / "s.jsonl"))])
    assert res.returncode == 0, res.stderr
    hits = _search(store, "session cache sqlite")
    idea = _decision(hits)
    # the code as it was when the decision was said, not HEAD now (committed two hours later)
    assert (idea["branch"], idea["commit"]) == ("main", before)
    hit = next(h for h in hits if idea in h["ideas"])
    assert hit["provenance"] == {"session": SESSION, "branch": "main", "commit": before,
                                 "files": []}
    text = run_ctx(["--ctx-dir", str(store.root), "memory", "search", "session cache sqlite",
                    "--now", NOW]).stdout
    assert f"from: branch main at {before[:8]}" in text and after[:8] not in text


def test_memory_provenance_a_branch_this_clone_lacks_keeps_its_name_and_no_commit(
        repo: tuple[Store, str, str], tmp_path: Path) -> None:
    store, _, _ = repo
    run_ctx(["--ctx-dir", str(store.root), "memory", "backfill",
             str(_talk(tmp_path / "s.jsonl", branch="gone/feature"))])
    idea = _decision(_search(store, "session cache sqlite"))
    assert (idea["branch"], idea["commit"]) == ("gone/feature", None)


def test_memory_provenance_the_stop_hook_records_head_as_the_session_happens(
        repo: tuple[Store, str, str], tmp_path: Path) -> None:
    store, _, after = repo
    path = _talk(tmp_path / "s.jsonl")
    res = run_ctx(["hook", "stop"], stdin=json.dumps({
        "session_id": SESSION, "transcript_path": str(path), "cwd": str(store.root.parent),
        "hook_event_name": "Stop"}))
    assert res.returncode == 0 and "systemMessage" not in json.loads(res.stdout), res.stdout
    idea = _decision(_search(store, "session cache sqlite"))
    assert (idea["branch"], idea["commit"]) == ("main", after)


def test_memory_provenance_without_git_an_idea_keeps_the_recorded_branch_only(
        store: Store, tmp_path: Path) -> None:
    run_ctx(["--ctx-dir", str(store.root), "memory", "backfill", str(_talk(tmp_path / "s.jsonl"))])
    hits = _search(store, "session cache sqlite")
    idea = _decision(hits)
    assert (idea["branch"], idea["commit"]) == ("main", None)


def test_memory_provenance_promote_keeps_where_the_idea_was_said(
        repo: tuple[Store, str, str], tmp_path: Path) -> None:
    store, before, _ = repo
    run_ctx(["--ctx-dir", str(store.root), "memory", "backfill", str(_talk(tmp_path / "s.jsonl"))])
    idea = _decision(_search(store, "session cache sqlite"))
    res = run_ctx(["--ctx-dir", str(store.root), "--format", "json", "memory", "promote",
                   str(idea["id"])])
    assert res.returncode == 0, res.stderr
    node_id = json.loads(res.stdout)["id"]
    shown = json.loads(run_ctx(["--ctx-dir", str(store.root), "--format", "json", "show",
                                node_id]).stdout)
    prov = shown["provenance"]
    assert (prov["source"], prov["session"], prov["branch"], prov["commit"]) == (
        "promotion", SESSION, "main", before)


def test_memory_provenance_older_ideas_have_none(repo: tuple[Store, str, str],
                                                  tmp_path: Path) -> None:
    """An idea stored before the columns existed (NULL) shows no provenance, not a guess."""
    store, _, _ = repo
    run_ctx(["--ctx-dir", str(store.root), "memory", "backfill", str(_talk(tmp_path / "s.jsonl"))])
    conn = sqlite3.connect(memory_path(store.root))
    conn.execute("UPDATE ideas SET branch = NULL, git_commit = NULL")
    conn.commit()
    conn.close()
    hits = _search(store, "session cache sqlite")
    assert all(h["provenance"]["branch"] is None and h["provenance"]["commit"] is None
               for h in hits)
    text = run_ctx(["--ctx-dir", str(store.root), "memory", "search", "session cache sqlite",
                    "--now", NOW]).stdout
    assert "from:" not in text


def test_memory_provenance_head_read_from_files_agrees_with_git(tmp_path: Path) -> None:
    """Loose refs, packed refs, a linked worktree and a detached HEAD, as ``git rev-parse`` says."""
    work = tmp_path / "w"
    work.mkdir()
    assert read_head_position(work) == (None, None)  # outside Git
    _git(work, "init", "-q", "-b", "main")
    assert read_head_position(work) == head_position(work) == (None, None)  # no commit yet
    first = _commit(work, "a.py", "2026-02-12T15:00:00Z")
    assert read_head_position(work) == head_position(work) == ("main", first)
    _git(work, "tag", "v1")
    _git(work, "pack-refs", "--all")
    assert not (work / ".git" / "refs" / "heads" / "main").exists()
    assert read_head_position(work) == ("main", first)
    _git(work, "worktree", "add", "-q", "-b", "topic/x", str(tmp_path / "linked"))
    second = _commit(tmp_path / "linked", "b.py", "2026-02-12T16:00:00Z")
    assert read_head_position(tmp_path / "linked" / "sub") == ("topic/x", second)
    assert read_head_position(tmp_path / "linked") == head_position(tmp_path / "linked")
    _git(work, "checkout", "-q", "--detach", first)
    assert read_head_position(work) == head_position(work) == (None, first)
