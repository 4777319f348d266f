"""The code index is derived, per clone (issue 30): Git never sees it, every clone builds its own.

End to end with the installed CLI and real Git: a repository whose ``.ctx/`` was committed
after ``ctx index`` holds no code objects; a fresh ``git clone`` has no code index until
``ctx index`` builds it from the work tree; a decision that mentions a file keeps the file's
content hash, so once the file changes the mention is flagged stale in both clones.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from _ingestlib import git
from conftest import run_ctx

from ctxstore.ids import ObjectId
from ctxstore.model import decode_typed
from ctxstore.objects import KIND_TYPED
from ctxstore.repo import open_store

PKG = {"src/pkg/__init__.py": "",
       "src/pkg/a.py": "from pkg.b import helper\n\n\ndef run():\n    return helper(1)\n",
       "src/pkg/b.py": "def helper(x):\n    return x\n"}


def _ctx(root: Path, *args: str) -> dict:
    res = run_ctx(["--format", "json", *args], cwd=root, timeout=60)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout) if res.stdout.strip() else {}


def _write(root: Path, files: dict[str, str]) -> None:
    past = time.time() - 10  # settled modification times: the stat cache keeps them
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        os.utime(path, (past, past))


def _commit(root: Path, message: str) -> None:
    git(root, "add", "-A", ".")
    git(root, "commit", "-qm", message)


def _tracked_ctx(root: Path) -> list[str]:
    return [p for p in git(root, "ls-files", ".ctx").splitlines() if p]


def _code_objects(ctx_dir: Path) -> list[str]:
    """Typed objects of the code index kinds (file_version, tree) under objects/."""
    store = open_store(ctx_dir)
    found = []
    for path in (ctx_dir / "objects").rglob("*"):
        if path.is_file():
            obj = store.objects.read(ObjectId(bytes.fromhex(path.name)))
            if obj.kind == KIND_TYPED:
                kind = type(decode_typed(obj.payload)).TYPE
                if kind in ("file_version", "tree") and path.name not in _init_tree(store):
                    found.append(kind)
    return found


def _init_tree(store: object) -> set[str]:
    """The empty tree of ``ctx init``'s first commit (a v1 commit keeps it)."""
    from ctxstore.model import Commit

    head = store.read_typed(store.read_head().single, Commit)  # type: ignore[attr-defined]
    first = head
    while first.parents:
        first = store.read_typed(first.parents[0], Commit)  # type: ignore[attr-defined]
    return {first.root_tree.hex()} if first.root_tree else set()


def _stale(root: Path, node: str) -> set[tuple[str, str, str]]:
    return {(s["kind"], s["key"], s["reason"]) for s in _ctx(root, "show", node)["stale_mentions"]}


def test_a_clone_gets_no_code_objects_builds_its_code_index_and_flags_stale_memory(
        tmp_path: Path) -> None:
    origin = tmp_path / "origin"
    origin.mkdir()
    git(origin, "init", "-q", "-b", "main")
    _write(origin, PKG)
    _ctx(origin, "init")
    _commit(origin, "code")
    indexed = _ctx(origin, "index")
    assert sorted(indexed["written"]) == sorted(PKG)
    node = _ctx(origin, "add", "decision", "helper stays pure: see `src/pkg/b.py`")["id"]
    _ctx(origin, "commit", "-m", "decision")
    _commit(origin, "ctx")

    # What Git sees: the store's own files, no copy of the code index.
    tracked = _tracked_ctx(origin)
    assert not any(p.startswith(".ctx/index/") for p in tracked)
    assert len([p for p in tracked if p.startswith(".ctx/objects/")]) <= 8, tracked
    assert _code_objects(origin / ".ctx") == []

    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(origin), str(clone)], check=True)
    assert not (clone / ".ctx" / "index").exists()  # nothing of the index came with it
    assert _ctx(clone, "search", "helper", "--kind", "symbol")["results"] == []
    built = _ctx(clone, "index")
    assert sorted(built["written"]) == sorted(PKG) and built["work_commit"] is None
    assert [h["key"] for h in _ctx(clone, "search", "helper", "--kind", "symbol")["results"]] \
        == ["pkg.b.helper"]
    pack = _ctx(clone, "pack", "run helper")
    assert {"src/pkg/a.py", "src/pkg/b.py"} <= set(pack["ranked_files"])
    assert _stale(clone, node) == set() and _stale(origin, node) == set()

    # The file changes after the mention: stale in the origin after its next index ...
    _write(origin, {"src/pkg/b.py": "def helper(x):\n    return x + 1\n"})
    _commit(origin, "change b")
    _ctx(origin, "index")
    assert _stale(origin, node) == {("file", "src/pkg/b.py", "changed")}
    # ... and in the clone once it pulls the change and indexes it.
    git(clone, "pull", "-q", "--no-rebase", "origin", "main")
    assert _stale(clone, node) == set()  # the clone's code index is of its work tree
    _ctx(clone, "index")
    assert _stale(clone, node) == {("file", "src/pkg/b.py", "changed")}
    assert {m["key"] for m in _ctx(clone, "status")["stale_memory"]} == {"src/pkg/b.py"}
