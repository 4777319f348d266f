"""``HasVersion`` and ``UpdatedIn`` of files (spec 002 §9), derived from history by the index.

Through the installed CLI: each content of a file that a canonical commit recorded (a ``ctx add
file`` snapshot, or a ``Mentions`` edge's evidence of the blob it read) is a version of the
file, and the file is UpdatedIn the commit that first recorded each version; ``ctx debug index``
shows both, the same after ``ctx rebuild --full``, a purge takes a purged snapshot's version
out, and no object is written for them.
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest
from conftest import run_ctx

from ctxstore.objects import KIND_BLOB, object_id_of


def ctx(root: Path, *args: str) -> str:
    res = run_ctx(list(args), cwd=root, timeout=120)
    assert res.returncode == 0, (args, res.stderr)
    return res.stdout


def commit(root: Path, message: str) -> str:
    found = re.search(r"committed ([0-9a-f]{64})", ctx(root, "commit", "-m", message))
    assert found
    return found.group(1)


def write(root: Path, text: str) -> str:
    """Write src/a.py; return its content's blob id."""
    (root / "src" / "a.py").write_bytes(text.encode())
    return object_id_of(KIND_BLOB, text.encode()).hex()


def history(root: Path, key: str = "src/a.py") -> tuple[set[str], set[str]]:
    """The file's versions and the commits it is UpdatedIn, as ``ctx debug index`` shows them."""
    doc = json.loads(ctx(root, "debug", "index", key, "--format", "json"))
    forward = doc["adjacency"]["forward"]
    assert all(e["source"] == "history" for e in forward if e["label"] in ("HasVersion",
                                                                           "UpdatedIn"))
    versions = {e["key"] for e in forward if e["label"] == "HasVersion"}
    assert all(e["kind"] == "version" for e in forward if e["label"] == "HasVersion")
    commits = {e["key"] for e in forward if e["label"] == "UpdatedIn" and e["kind"] == "commit"}
    return versions, commits


@pytest.mark.slow
def test_file_versions_from_snapshots_and_mentions_with_the_commits_that_recorded_them(
        tmp_path: Path) -> None:
    root = tmp_path / "work"
    (root / "src").mkdir(parents=True)
    v1 = write(root, "def a():\n    return 1\n")
    ctx(root, "init", "--no-git")
    ctx(root, "add", "file", "src/a.py")  # a snapshot
    first = commit(root, "first")
    v2 = write(root, "def a():\n    return 2\n")
    ctx(root, "add", "file", "src/a.py")
    ctx(root, "add", "file", "src/a.py")  # unchanged: no new version
    second = commit(root, "second")
    ctx(root, "index")
    ctx(root, "add", "note", "Looked at src/a.py today")  # a mention of a version known already
    third = commit(root, "third")
    v3 = write(root, "def a():\n    return 3\n")
    ctx(root, "index")
    ctx(root, "add", "note", "src/a.py now returns 3")  # a mention of a new version
    fourth = commit(root, "fourth")

    write(root, "def a():\n    return 4\n")
    ctx(root, "add", "file", "src/a.py")  # staged: in no commit yet, so no version yet
    want = ({v1, v2, v3}, {first, second, fourth})
    assert history(root) == want  # incrementally; the third commit recorded no new version
    assert third not in want[1]
    objects = sorted(p.name for p in (root / ".ctx" / "objects").rglob("*") if p.is_file())
    ctx(root, "rebuild", "--full")
    assert history(root) == want
    verify = run_ctx(["debug", "verify", "--index"], cwd=root, timeout=120)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert sorted(p.name for p in (root / ".ctx" / "objects").rglob("*") if p.is_file()) \
        == objects  # derived: nothing stored for them


def test_file_versions_of_a_file_no_longer_in_the_work_tree_are_found_by_path(
        tmp_path: Path) -> None:
    root = tmp_path / "work"
    (root / "src").mkdir(parents=True)
    v1 = write(root, "x = 1\n")
    ctx(root, "init", "--no-git")
    ctx(root, "add", "file", "src/a.py")
    first = commit(root, "first")
    (root / "src" / "a.py").unlink()
    ctx(root, "index")
    assert history(root) == ({v1}, {first})


@pytest.mark.slow
def test_file_versions_a_purged_snapshot_leaves_no_version_of_its_content(tmp_path: Path) -> None:
    """``ctx purge --whole`` of a snapshot's blob: the version it named leaves the index."""
    root = tmp_path / "work"
    (root / "src").mkdir(parents=True)
    leaked = write(root, "PASSWORD = 'hunter2-not-a-real-one'\n")
    ctx(root, "init", "--no-git")
    ctx(root, "add", "file", "src/a.py")
    commit(root, "first")
    versions, _ = history(root)
    assert versions == {leaked}
    ctx(root, "purge", leaked, "--whole", "--yes")
    versions, commits = history(root)
    assert leaked not in versions and len(versions) == 1  # the [PURGED] content instead
    assert len(commits) == 1
    verify = run_ctx(["debug", "verify", "--index"], cwd=root, timeout=120)
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_file_updated_in_names_one_first_commit_when_commits_share_a_second(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A commit's time has whole seconds: of two commits recording a content in one second,
    the earlier in history (fewer commits from the root) is the one that first recorded it."""
    from click.testing import CliRunner

    import ctxstore.staging
    from ctxstore.cli.root import cli

    root = tmp_path / "work"
    (root / "src").mkdir(parents=True)
    monkeypatch.chdir(root)
    ticks = itertools.count(ctxstore.staging.now_ms() // 1000 * 1000)
    # every commit in one second; each batch still gets its own millisecond
    monkeypatch.setattr(ctxstore.staging, "now_ms", lambda: next(ticks))

    def run(*args: str) -> str:
        res = CliRunner().invoke(cli, list(args))
        assert res.exit_code == 0, res.output
        return res.output

    def commit_id(message: str) -> str:
        found = re.search(r"committed ([0-9a-f]{64})", run("commit", "-m", message))
        assert found
        return found.group(1)

    v1 = write(root, "def a():\n    return 1\n")
    run("init", "--no-git")
    run("add", "file", "src/a.py")
    first = commit_id("first")
    run("index")
    run("add", "note", "Looked at src/a.py today")  # the same content, mentioned again
    again = commit_id("again")
    assert first != again
    assert history(root) == ({v1}, {first})
    run("rebuild", "--full")
    assert history(root) == ({v1}, {first})
