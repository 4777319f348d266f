"""``ctx index`` of a Git work tree looks only at what Git says changed (issue 30).

After a run over the whole tree, the next one asks ``git status`` (and ``git diff`` between
the two HEADs when HEAD moved) instead of listing and stat-ing every file. Whatever happened
in between — edits, adds, deletes, renames, a file newly ignored, a commit, a checkout, an
edit undone — the code index it leaves must be the one a full walk gives (``ctx index
--full``: every file listed and derived again).
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

from tests.code._ingestlib import ctx_json, dump, git, make_work, write

TREE = {
    "pkg/__init__.py": "",
    "pkg/a.py": "from pkg.b import helper\n\n\ndef alpha():\n    return helper()\n",
    "pkg/b.py": "def helper():\n    return 1\n",
    "pkg/c.py": "import pkg.a\n\n\ndef gamma():\n    return pkg.a.alpha()\n",
    "notes.md": "# Notes\n\nThe helper returns one.\n",
}


def _settle(root: Path) -> None:
    """Date files changed in the last seconds 10 s back (a run trusts only settled times)."""
    now = time.time()
    for path in root.rglob("*"):
        if ".git" not in path.parts and ".ctx" not in path.parts and path.is_file() \
                and path.stat().st_mtime > now - 5:
            os.utime(path, (now - 10, now - 10))


def _committed(tmp_path: Path, exclude: str = ".ctx/\n") -> Path:
    """A store in a Git work tree holding ``TREE``, committed (``exclude``: Git's own ignores)."""
    ctx_dir = make_work(tmp_path / "w", use_git=True)
    root = ctx_dir.parent
    (root / ".git" / "info" / "exclude").write_text(exclude)
    write(root, TREE)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "one")
    return ctx_dir


def _quick_equals_full(ctx_dir: Path, *, listing: str = "git status") -> dict:
    """Run ``ctx index``, check how it listed, and that ``--full`` finds nothing to change."""
    _settle(ctx_dir.parent)
    report = ctx_json(ctx_dir, "index")
    assert report["listing"] == listing, report
    quick = dump(ctx_dir)
    full = ctx_json(ctx_dir, "index", "--full")
    assert full["listing"] == "git"
    assert dump(ctx_dir) == quick
    return report


def test_index_after_git_changes_equals_a_full_walk(tmp_path: Path) -> None:
    ctx_dir = make_work(tmp_path / "w", use_git=True)
    root = ctx_dir.parent
    (root / ".git" / "info" / "exclude").write_text(".ctx/\n")  # the store stays as it is
    write(root, TREE)
    git(root, "add", "pkg", "notes.md")
    git(root, "commit", "-qm", "one")
    write(root, {"scratch.py": "def scratch():\n    return 0\n"})  # untracked, indexed
    first = ctx_json(ctx_dir, "index")
    assert first["listing"] == "git"  # no run over the whole tree before: Git lists every file
    assert "scratch.py" in first["written"]

    # Nothing changed: nothing is read, and every file is counted as a full listing counts it.
    report = _quick_equals_full(ctx_dir)
    assert report["read"] == 0 and report["written"] == [] and report["removed"] == []
    assert report["scanned"] == report["unchanged"] == first["scanned"] == 6

    # An edit, an add, a delete, a rename (staged) and an untracked file newly ignored.
    write(root, {"pkg/a.py": TREE["pkg/a.py"] + "\n\ndef beta():\n    return 2\n",
                 "pkg/new.py": "from pkg.b import helper\n",
                 ".gitignore": "scratch.py\n"})
    (root / "pkg" / "c.py").unlink()
    git(root, "mv", "pkg/b.py", "pkg/bee.py")
    report = _quick_equals_full(ctx_dir)
    assert sorted(report["written"]) == [".gitignore", "pkg/a.py", "pkg/bee.py", "pkg/new.py"]
    assert sorted(report["removed"]) == ["pkg/b.py", "pkg/c.py", "scratch.py"]
    paths = [row[0] for row in dump(ctx_dir)["files"]]
    assert "scratch.py" not in paths and "pkg/bee.py" in paths

    # Committed (HEAD moves), then an edit made and undone with Git.
    git(root, "add", "-A")
    git(root, "commit", "-qm", "two")
    _quick_equals_full(ctx_dir)
    write(root, {"notes.md": "# Notes\n\nThe helper returns twenty-two.\n"})
    assert _quick_equals_full(ctx_dir)["written"] == ["notes.md"]
    git(root, "checkout", "--", "notes.md")
    assert _quick_equals_full(ctx_dir)["written"] == ["notes.md"]
    assert [r for r in dump(ctx_dir)["chunks"] if r[0] == "notes.md"][0][-1].endswith("one.\n")

    # A checkout of the first commit: Git names what differs between the two HEADs.
    git(root, "checkout", "-q", "HEAD~1")
    report = _quick_equals_full(ctx_dir)
    assert "pkg/c.py" in report["written"] and "pkg/new.py" in report["removed"]


def test_index_falls_back_to_listing_every_file(tmp_path: Path) -> None:
    """Settings the listing depends on, or a HEAD Git no longer has: every file is listed."""
    ctx_dir = _committed(tmp_path)
    root = ctx_dir.parent
    ctx_json(ctx_dir, "index")
    config = ctx_dir / "config.toml"
    text = config.read_text()
    assert 'ignore_globs = ["' in text
    config.write_text(text.replace('ignore_globs = ["', 'ignore_globs = ["notes.md", "', 1))
    report = _quick_equals_full(ctx_dir, listing="git")
    assert report["removed"] == ["notes.md"]
    assert _quick_equals_full(ctx_dir)["read"] == 0  # the new settings recorded
    # History rewritten: the recorded HEAD is gone, Git cannot say what changed since.
    git(root, "commit", "-q", "--amend", "-m", "one, amended")
    git(root, "reflog", "expire", "--expire=now", "--all")
    git(root, "gc", "-q", "--prune=now")
    write(root, {"pkg/b.py": "def helper():\n    return 333\n"})
    git(root, "commit", "-qam", "three")
    assert _quick_equals_full(ctx_dir, listing="git")["written"] == ["pkg/b.py"]


def test_a_quick_run_reads_only_the_stat_rows_it_looks_at(tmp_path: Path) -> None:
    """Git's answer decides which stat rows a run loads; the files it must look at whatever
    Git says (added by name, a time too recent to trust) are still looked at."""
    from contextlib import closing

    from ctxstore.code.ingest.resolve import NO_SEMANTICS
    from ctxstore.index import open_index
    from ctxstore.index.code import indexed_paths, stat_rows
    from ctxstore.repo import open_store
    from tests.code._ingestlib import ctx

    ctx_dir = _committed(tmp_path, ".ctx/\nkept.py\n")
    root = ctx_dir.parent
    write(root, {"kept.py": "def kept():\n    return 1\n"})  # ignored by Git, added by name
    ctx(ctx_dir, "add", "file", "kept.py", "--extract-semantics")
    _quick_equals_full(ctx_dir, listing="git")
    _quick_equals_full(ctx_dir)
    with closing(open_index(open_store(ctx_dir))) as conn:
        indexed = indexed_paths(conn, NO_SEMANTICS)
        everything = stat_rows(conn)
        assert set(indexed.modules) == set(everything) and "kept.py" in everything
        assert indexed.named == {"kept.py"} and indexed.look == {"kept.py"}
        assert indexed.modules["pkg/a.py"] == everything["pkg/a.py"].module == "pkg.a"
        assert stat_rows(conn, ["pkg/b.py", "gone.py"]) == {"pkg/b.py": everything["pkg/b.py"]}
    # Git names pkg/b.py: its edit is found, and kept.py, which ctx index does not list, stays
    # (through --full too, which empties the code tables first).
    write(root, {"pkg/b.py": "def helper():\n    return 3\n"})
    assert _quick_equals_full(ctx_dir)["written"] == ["pkg/b.py"]
    assert "kept.py" in [row[0] for row in dump(ctx_dir)["files"]]
    # An edit within the racy window leaves the stat cache empty: the next run reads it.
    (root / "pkg" / "b.py").write_text("def helper():\n    return 4\n")  # dated now
    racy = ctx_json(ctx_dir, "index")
    assert racy["written"] == ["pkg/b.py"]
    with closing(open_index(open_store(ctx_dir))) as conn:
        assert "pkg/b.py" in indexed_paths(conn, NO_SEMANTICS).look


def test_a_quick_run_resolves_imports_against_every_indexed_file(tmp_path: Path) -> None:
    """A run of one changed file looks up the modules its imports name instead of mapping
    every indexed file; files indexed before module names were recorded are named then."""
    ctx_dir = _committed(tmp_path)
    root = ctx_dir.parent
    ctx_json(ctx_dir, "index")
    code = ctx_dir / "index" / "code.sqlite"
    with sqlite3.connect(code) as conn:  # as an older ctx left them: no module recorded
        conn.execute("UPDATE files SET module = NULL WHERE path = 'pkg/c.py'")
    write(root, {"pkg/a.py": TREE["pkg/a.py"] + "\n\nimport pkg.c\n",
                 "pkg/d.py": "from pkg.a import alpha\nimport pkg\n"})
    report = _quick_equals_full(ctx_dir)
    assert sorted(report["written"]) == ["pkg/a.py", "pkg/d.py"]
    edges = {(r[0], r[3], r[4]) for r in dump(ctx_dir)["code_edges"] if r[5] == "Imports"}
    # A name inside an indexed module is an item of it (unresolved: a module of that name).
    assert {("pkg/a.py", "item", "pkg.b.helper"), ("pkg/a.py", "file", "pkg/c.py"),
            ("pkg/d.py", "item", "pkg.a.alpha"), ("pkg/d.py", "file", "pkg/__init__.py")} <= edges


def _logging_git(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """An environment whose ``git`` logs each command line, then runs the real Git."""
    import shutil

    real = shutil.which("git")
    assert real is not None
    bin_dir, log = tmp_path / "bin", tmp_path / "git.log"
    bin_dir.mkdir()
    wrapper = bin_dir / "git"
    wrapper.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> "{log}"\nexec "{real}" "$@"\n')
    wrapper.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}, log


def _index_logged(ctx_dir: Path, env: dict[str, str], log: Path) -> tuple[dict, list[str]]:
    """One installed ``ctx index``: its report and the Git commands it ran."""
    import json

    from conftest import run_ctx

    log.write_text("")
    res = run_ctx(["--format", "json", "index"], cwd=ctx_dir.parent, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout), log.read_text().splitlines()


def test_a_file_skipped_every_run_is_not_asked_of_git_every_run(tmp_path: Path) -> None:
    """A tracked file over ``max_file_bytes`` is looked at every run (it may shrink); once Git
    has said it is in its index and unchanged, later runs take that from the recorded state
    and run no ``git ls-files``, until Git names it or a change of it between two HEADs."""
    ctx_dir = _committed(tmp_path)
    root = ctx_dir.parent
    config = ctx_dir / "config.toml"
    config.write_text(config.read_text().replace("max_file_bytes = ", "max_file_bytes = 200 #"))
    write(root, {"big.py": "x = 1\n" * 100, "pkg/b.py": TREE["pkg/b.py"]})
    git(root, "add", "big.py")
    git(root, "commit", "-qm", "big")
    env, log = _logging_git(tmp_path)
    _settle(root)
    first, _ = _index_logged(ctx_dir, env, log)
    assert first["listing"] == "git" and "big.py" in [n["path"] for n in first["notes"]]
    second, ran = _index_logged(ctx_dir, env, log)
    assert second["listing"] == "git status" and any("ls-files -c" in c for c in ran)
    for _ in range(2):
        report, ran = _index_logged(ctx_dir, env, log)
        assert report["listing"] == "git status" and report["read"] == 0
        assert report["scanned"] == first["scanned"]
        assert not any("ls-files" in c for c in ran), ran
    # Changed in a commit between two runs: Git names it between the two HEADs only, and it
    # is asked of Git again (still too large: left out with its note).
    write(root, {"big.py": "x = 2\n" * 120})
    git(root, "commit", "-qam", "bigger")
    report, ran = _index_logged(ctx_dir, env, log)
    assert any("ls-files -c" in c for c in ran), (report, ran)
    assert "big.py" in [n["path"] for n in report["notes"]]
    report, ran = _index_logged(ctx_dir, env, log)
    assert report["read"] == 0 and not any("ls-files" in c for c in ran), ran
    # Untracked and ignored, the deletion committed: it leaves the files the run counts, as
    # a full listing leaves it.
    git(root, "rm", "-q", "--cached", "big.py")
    write(root, {".gitignore": "big.py\n"})
    git(root, "add", ".gitignore")
    git(root, "commit", "-qm", "untrack big")
    report, ran = _index_logged(ctx_dir, env, log)
    assert report["scanned"] == first["scanned"]  # big.py left, .gitignore came
    assert "big.py" not in [n["path"] for n in report["notes"]]
    quick = dump(ctx_dir)
    full = ctx_json(ctx_dir, "index", "--full")
    assert full["listing"] == "git" and full["scanned"] == report["scanned"]
    assert dump(ctx_dir) == quick
