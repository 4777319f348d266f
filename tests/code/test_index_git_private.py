"""``ctx index`` asks ``git status`` on its own copy of Git's index (issue 30).

Git keeps its refreshed stat data and its untracked cache only in an index it writes, and
``ctx index`` never writes the user's ``.git/index``. On ctx's copy
(``.ctx/index/git-index``) Git keeps both from run to run: after a copy of the repository
(``cp -a``: every inode differs) the first run hashes the tree once, and the next ones do not.
These run the installed CLI (``python -m ctxstore.cli``) in real repositories.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from _ingestlib import dump, git, write
from conftest import run_ctx

TREE = {
    "pkg/__init__.py": "",
    "pkg/a.py": "from pkg.b import helper\n\n\ndef alpha():\n    return helper()\n",
    "pkg/b.py": "def helper():\n    return 1\n",
    "notes.md": "# Notes\n\nThe helper returns one.\n",
}


def _index(root: Path, *args: str, env: dict[str, str] | None = None) -> dict:
    res = run_ctx(["--format", "json", "index", *args], cwd=root, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def _repo(root: Path) -> Path:
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "commit.gpgsign", "false")
    (root / ".git" / "info" / "exclude").write_text(".ctx/\n")
    assert run_ctx(["init", "--no-git"], cwd=root).returncode == 0
    write(root, TREE)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "one")
    return root


def _stat_dirty(root: Path, index: Path | None = None) -> list[str]:
    """Tracked files whose stat data in the index differs from the file (``git diff-files``
    compares without refreshing: each such file is hashed again by the next ``git status``)."""
    env = dict(os.environ) | ({"GIT_INDEX_FILE": str(index)} if index else {})
    res = subprocess.run(["git", "diff-files", "--name-only"], cwd=root, env=env,
                         capture_output=True, text=True, check=True)
    return res.stdout.split()


def _settle(root: Path) -> None:
    now = time.time()
    for path in root.rglob("*"):
        if ".git" not in path.parts and ".ctx" not in path.parts and path.is_file():
            os.utime(path, (now - 10, now - 10))


def test_a_copied_repository_is_hashed_once_and_gits_index_left_alone(tmp_path: Path) -> None:
    first = _repo(tmp_path / "w")
    assert _index(first)["listing"] == "git"
    copy = tmp_path / "copy"
    shutil.copytree(first, copy, symlinks=True)  # as cp -a: times kept, every inode new
    index = copy / ".git" / "index"
    before = index.read_bytes(), index.stat().st_mtime_ns
    assert sorted(_stat_dirty(copy)) == sorted(TREE)  # Git's stat data is stale in the copy
    _settle(copy)
    # The code index names the other copy of the store: it is dropped and made again whole
    # from Git's listing (tests/index/test_code_index_identity.py).
    report = _index(copy)
    assert report["listing"] == "git" and sorted(report["written"]) == sorted(TREE)
    report = _index(copy)
    assert report["listing"] == "git status" and report["written"] == []
    # ctx's copy of Git's index now holds the refreshed stat data: the next run hashes
    # nothing again; the user's index is as it was, byte for byte.
    mine = copy / ".ctx" / "index" / "git-index"
    assert mine.is_file() and _stat_dirty(copy, mine) == []
    assert (index.read_bytes(), index.stat().st_mtime_ns) == before
    write(copy, {"pkg/b.py": "def helper():\n    return 2\n"})
    # Git compares whole seconds: the same size, dated (by ``write``) into the second the
    # settled tree was dated into, would look unchanged to Git itself. A real edit is dated now.
    dated = time.time() - 30
    os.utime(copy / "pkg" / "b.py", (dated, dated))
    assert _index(copy)["written"] == ["pkg/b.py"]
    assert (index.read_bytes(), index.stat().st_mtime_ns) == before
    # Git's index changes (a file staged): ctx's copy is taken again and follows it.
    git(copy, "rm", "-q", "--cached", "notes.md")
    (copy / ".gitignore").write_text("notes.md\n")
    _settle(copy)
    report = _index(copy)
    assert report["removed"] == ["notes.md"] and report["written"] == [".gitignore"]


@pytest.mark.parametrize("setting", [None, "false"])
def test_untracked_folders_are_listed_file_by_file(tmp_path: Path, setting: str | None) -> None:
    """``git status`` names a folder of untracked files whole; each of its files is indexed,
    ignored ones are not, and the result is the one a full listing gives. Git's untracked
    cache serves it, unless the repository's configuration says otherwise."""
    root = _repo(tmp_path / "w")
    if setting is not None:
        git(root, "config", "core.untrackedCache", setting)
    _index(root)
    write(root, {"tools/run.py": "def run():\n    return 1\n",
                 "tools/deep/more.py": "def more():\n    return 2\n",
                 "tools/deep/out.log": "log\n",
                 ".gitignore": "*.log\n"})
    _settle(root)
    report = _index(root)
    assert report["listing"] == "git status"
    assert sorted(report["written"]) == [".gitignore", "tools/deep/more.py", "tools/run.py"]
    quick = dump(root / ".ctx")
    cached = b"UNTR" in (root / ".ctx" / "index" / "git-index").read_bytes()
    assert cached == (setting is None)
    assert _index(root, "--full")["listing"] == "git"
    assert dump(root / ".ctx") == quick
    (root / "tools" / "deep" / "more.py").unlink()
    _settle(root)
    assert _index(root)["removed"] == ["tools/deep/more.py"]


def test_an_index_named_by_the_caller_is_the_one_asked(tmp_path: Path) -> None:
    """Run from a Git hook (``GIT_INDEX_FILE`` set), ctx asks about that index, not its copy."""
    root = _repo(tmp_path / "w")
    _index(root)
    other = tmp_path / "other-index"
    shutil.copy(root / ".git" / "index", other)
    subprocess.run(["git", "rm", "-q", "--cached", "notes.md"], cwd=root, check=True,
                   env=dict(os.environ) | {"GIT_INDEX_FILE": str(other)})
    (root / ".gitignore").write_text("notes.md\n")
    _settle(root)
    copy = root / ".ctx" / "index" / "git-index"
    mine = copy.read_bytes()
    report = _index(root, env={"GIT_INDEX_FILE": str(other)})
    assert "notes.md" in report["removed"]  # untracked in that index, and ignored
    assert copy.read_bytes() == mine


def test_a_link_in_place_of_the_copy_is_never_written_through(tmp_path: Path) -> None:
    """``index/git-index`` (or its stamp) planted as a link: Git's own index is asked, the
    link's target is left as it was, and the run finds what a full listing finds."""
    root = _repo(tmp_path / "w")
    _index(root)
    outside = tmp_path / "outside"
    outside.write_bytes(b"not an index\n")
    folder = root / ".ctx" / "index"
    for name in ("git-index", "git-index.stamp"):
        (folder / name).unlink()
        (folder / name).symlink_to(outside)
    write(root, {"pkg/b.py": "def helper():\n    return 5\n", "new.py": "n = 1\n"})
    _settle(root)
    report = _index(root)
    assert sorted(report["written"]) == ["new.py", "pkg/b.py"]
    assert outside.read_bytes() == b"not an index\n"
    assert (folder / "git-index").is_symlink()


def test_nested_repositories_and_submodules_list_as_a_full_listing(tmp_path: Path) -> None:
    """A repository inside the work tree (untracked) and a submodule: Git names them whole
    (``nested/``), never their files; the quick run leaves what a full listing leaves."""
    origin = _repo(tmp_path / "origin")
    root = _repo(tmp_path / "w")
    git(root, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(origin), "sub")
    git(root, "commit", "-qm", "a submodule")
    _index(root)
    nested = root / "nested"
    nested.mkdir()
    git(nested, "init", "-q")
    write(root, {"nested/inner.py": "def inner():\n    return 1\n",
                 "sub/pkg/b.py": "def helper():\n    return 9\n",
                 "pkg/b.py": "def helper():\n    return 2\n"})
    _settle(root)
    report = _index(root)
    assert report["listing"] == "git status" and report["written"] == ["pkg/b.py"]
    quick = dump(root / ".ctx")
    assert _index(root, "--full")["listing"] == "git"
    assert dump(root / ".ctx") == quick


def test_a_lock_left_by_a_killed_git_does_not_keep_the_copy_stale(tmp_path: Path) -> None:
    root = _repo(tmp_path / "w")
    _index(root)
    lock = root / ".ctx" / "index" / "git-index.lock"
    lock.write_bytes(b"")  # as a Git killed while it wrote the copy leaves it
    past = time.time() - 20
    for rel in TREE:  # touched, not changed: Git's stat data must be refreshed
        os.utime(root / rel, (past, past))
    assert sorted(_stat_dirty(root, root / ".ctx" / "index" / "git-index")) == sorted(TREE)
    assert _index(root)["written"] == []
    assert _stat_dirty(root, root / ".ctx" / "index" / "git-index") == []
    assert not lock.exists()
