"""Real Git: two branches index different files, merge, `ctx rebuild`: both sides, once each."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from _ingestlib import ctx, ctx_json, git, make_work, query, write
from conftest import run_ctx, store_digest

from ctxstore.model import Commit, CommitV2
from ctxstore.repo import open_store

PKG = {"src/pkg/__init__.py": "", "src/pkg/base.py": "def base():\n    return 0\n"}


def _commit(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message)


def _clone(origin: Path, dest: Path) -> Path:
    subprocess.run(["git", "clone", "-q", str(origin), str(dest)], check=True)
    git(dest, "config", "commit.gpgsign", "false")
    return dest / ".ctx"


def test_two_branches_index_different_files_then_merge(tmp_path: Path) -> None:
    origin_ctx = make_work(tmp_path / "origin", use_git=True)
    origin = origin_ctx.parent
    write(origin, PKG)
    ctx_json(origin_ctx, "index")
    ctx(origin_ctx, "commit", "-m", "base index")
    _commit(origin, "base")
    a_ctx, b_ctx = _clone(origin, tmp_path / "a"), _clone(origin, tmp_path / "b")
    a, b = a_ctx.parent, b_ctx.parent
    write(a, {"src/pkg/from_a.py": "def only_a():\n    return 1\n",
              "src/pkg/base.py": "def base():\n    return 0\n\n\ndef base_a():\n    return 1\n"})
    # A fresh clone has no code index (nothing of it is in Git): its first run indexes all.
    assert {"src/pkg/base.py", "src/pkg/from_a.py", "src/pkg/__init__.py"} <= set(
        ctx_json(a_ctx, "index")["written"])
    ctx(a_ctx, "commit", "-m", "a")
    _commit(a, "a")
    write(b, {"src/pkg/from_b.py": "from pkg.from_a import only_a\n\n\ndef only_b():\n"
                                   "    return only_a()\n"})
    assert "src/pkg/from_b.py" in ctx_json(b_ctx, "index")["written"]
    ctx(b_ctx, "commit", "-m", "b")
    _commit(b, "b")
    git(a, "fetch", "-q", str(b), "main")
    subprocess.run(["git", "merge", "--no-edit", "FETCH_HEAD"], cwd=a, capture_output=True)
    ctx(a_ctx, "rebuild")  # the knowledge of both sides; the code index stays this clone's
    assert ("src/pkg/from_b.py",) not in query(a_ctx, "SELECT path FROM files")
    # The merged work tree holds b's file: the next run indexes it, and only it.
    doc = ctx_json(a_ctx, "index")
    assert doc["written"] == ["src/pkg/from_b.py"] and doc["removed"] == []
    symbols = query(a_ctx, "SELECT path, qualname FROM symbols ORDER BY 1, 2")
    assert ("src/pkg/from_a.py", "pkg.from_a.only_a") in symbols
    assert ("src/pkg/from_b.py", "pkg.from_b.only_b") in symbols
    assert ("src/pkg/base.py", "pkg.base.base_a") in symbols
    assert len(symbols) == len(set(symbols))
    files = query(a_ctx, "SELECT path FROM files ORDER BY 1")
    assert [f[0] for f in files] == [".gitignore", "src/pkg/__init__.py", "src/pkg/base.py",
                                     "src/pkg/from_a.py", "src/pkg/from_b.py"] \
        or [f[0] for f in files] == ["src/pkg/__init__.py", "src/pkg/base.py",
                                     "src/pkg/from_a.py", "src/pkg/from_b.py"]
    edges = query(a_ctx, "SELECT count(*), count(DISTINCT path || from_key || to_key || label || "
                         "coalesce(line, '')) FROM code_edges")
    assert edges[0][0] == edges[0][1]
    assert ctx_json(a_ctx, "index")["written"] == []
    assert ctx_json(a_ctx, "debug", "verify")["problems"] == []
    # A fold on top of the merge names the merged code by its Git ids.
    write(a, {"src/pkg/after.py": "X = 1\n"})
    ctx_json(a_ctx, "index")
    ctx(a_ctx, "add", "note", "after the merge, `src/pkg/after.py` holds X")
    ctx(a_ctx, "commit", "-m", "after the merge")
    store = open_store(a_ctx)
    head = store.read_typed(store.read_head().single, Commit)
    assert isinstance(head, CommitV2) and head.git_commit == git(a, "rev-parse", "HEAD").strip()


def test_files_deleted_or_renamed_without_git_leave_the_index(tmp_path: Path) -> None:
    # `rm` and `mv`, not `git rm`/`git mv`: Git still lists the tracked old paths, and
    # `ctx index` must still drop them (and index the new name).
    ctx_dir = make_work(tmp_path / "w", use_git=True)
    root = ctx_dir.parent
    write(root, {"src/pkg/local.py": "class LocalProxy:\n    pass\n",
                 "src/pkg/feat.py": "def feat_fn():\n    return 1\n",
                 "src/pkg/ok.py": "def ok_fn():\n    return 1\n"})
    ctx_json(ctx_dir, "index")
    _commit(root, "base")
    (root / "src/pkg/local.py").unlink()
    (root / "src/pkg/feat.py").rename(root / "src/pkg/feat_renamed.py")
    doc = ctx_json(ctx_dir, "index")
    assert sorted(doc["removed"]) == ["src/pkg/feat.py", "src/pkg/local.py"]
    assert query(ctx_dir, "SELECT DISTINCT path FROM symbols ORDER BY 1") == [
        ("src/pkg/feat_renamed.py",), ("src/pkg/ok.py",)]
    assert query(ctx_dir, "SELECT count(*) FROM symbols WHERE name = 'LocalProxy'") == [(0,)]


def test_a_file_that_can_no_longer_be_indexed_leaves_the_index(tmp_path: Path) -> None:
    # Grown past max_file_bytes, or no longer UTF-8: the old version would otherwise stay
    # searchable forever, with a pack note asking for a `ctx index` that cannot help.
    ctx_dir = make_work(tmp_path / "w", use_git=True)
    root = ctx_dir.parent
    write(root, {"a.py": "def a_fn():\n    return 1\n", "b.py": "def b_fn():\n    return 1\n",
                 "c.py": "def c_fn():\n    return 1\n"})
    ctx_json(ctx_dir, "index")
    config = ctx_dir / "config.toml"
    config.write_text(config.read_text().replace("max_file_bytes = ", "max_file_bytes = 4096 #"))
    write(root, {"a.py": "def a_fn():\n    return 1\n" + "# pad\n" * 1000,
                 "b.py": b"def b_fn():\n    return '\xff'\n"})
    doc = ctx_json(ctx_dir, "index")
    assert sorted(doc["removed"]) == ["a.py", "b.py"]
    notes = {n["path"]: n["note"] for n in doc["notes"]}
    assert "max_file_bytes" in notes["a.py"] and "UTF-8" in notes["b.py"]
    assert query(ctx_dir, "SELECT path FROM files WHERE path LIKE '%.py' ORDER BY 1") == [("c.py",)]
    write(root, {"b.py": "def b_fn():\n    return 2\n"})  # readable again: back in the index
    assert ctx_json(ctx_dir, "index")["written"] == ["b.py"]


def test_checkout_of_another_branch_shows_only_that_branch(tmp_path: Path) -> None:
    # After `ctx commit`, local/STAGE names the fold's commit; `git checkout` moves
    # refs/main but not STAGE. The other branch's memory and code must not stay visible.
    ctx_dir = make_work(tmp_path / "w", use_git=True)
    root = ctx_dir.parent
    write(root, PKG)
    ctx_json(ctx_dir, "index")
    ctx(ctx_dir, "commit", "-m", "base index")
    _commit(root, "base")
    git(root, "checkout", "-qb", "feat")
    write(root, {"src/pkg/feat.py": "def feat_only_fn():\n    return 2\n"})
    ctx_json(ctx_dir, "index")
    ctx(ctx_dir, "add", "decision", "feature decision xyzzy")
    ctx(ctx_dir, "commit", "-m", "feat")
    _commit(root, "feat")
    git(root, "checkout", "-q", "main")
    assert "xyzzy" not in ctx(ctx_dir, "list")[0]
    # The code index follows the work tree at the next `ctx index`: feat's file leaves it.
    assert ctx_json(ctx_dir, "index")["removed"] == ["src/pkg/feat.py"]
    assert ctx_json(ctx_dir, "search", "feat_only_fn", "--kind", "symbol")["results"] == []
    subprocess.run(["git", "merge", "-q", "--no-edit", "feat"], cwd=root, check=True,
                   capture_output=True)
    assert "xyzzy" in ctx(ctx_dir, "list")[0]
    ctx_json(ctx_dir, "index")
    hits = ctx_json(ctx_dir, "search", "feat_only_fn", "--kind", "symbol")["results"]
    assert [h["key"] for h in hits] == ["pkg.feat.feat_only_fn"]
    out, _, code = ctx(ctx_dir, "debug", "verify")
    assert code == 0 and out.rstrip().endswith("ok")


def test_index_of_a_path_that_names_nothing_is_an_error(tmp_path: Path) -> None:
    ctx_dir = make_work(tmp_path / "w", use_git=True)
    root = ctx_dir.parent
    write(root, {"src/pkg/a.py": "def a():\n    return 1\n", "src/old/b.py": "def b():\n    return 2\n"})
    ctx_json(ctx_dir, "index")
    before = store_digest(ctx_dir)
    _, err, code = ctx(ctx_dir, "index", "src/nonexist", ok=False)
    assert code == 1 and err.startswith("ctx: error[E011]: src/nonexist: no such file")
    assert store_digest(ctx_dir) == before
    # a directory removed from disk but still indexed is a path to index: its files go
    shutil.rmtree(root / "src" / "old")
    assert ctx_json(ctx_dir, "index", "src/old")["removed"] == ["src/old/b.py"]


def test_index_without_a_project_store_is_an_error_and_creates_nothing(tmp_path: Path) -> None:
    # Without `ctx init`, `ctx index` used to "index" the user store's home (0 files) and
    # create ~/.ctx; the pack then asked for the `ctx index` just run.
    repo = tmp_path / "clone"
    repo.mkdir()
    git(repo, "init", "-q")
    home = tmp_path / "home"
    home.mkdir()
    res = run_ctx(["index"], cwd=repo, env={"HOME": str(home)})
    assert res.returncode == 1 and res.stdout == ""
    assert res.stderr.startswith("ctx: error[E012]: ctx index needs a project store")
    assert not (home / ".ctx").exists()
