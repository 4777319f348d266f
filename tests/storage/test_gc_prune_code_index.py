"""``ctx gc`` prunes the code index an older ctx committed, and nothing knowledge needs (issue 30).

End to end with the installed CLI and real Git, on a store as an older ctx left it
(``tests/storage/_oldindex.py``: ``file`` records, ``file_version`` objects, blobs and the
trees of ``root_tree``, in commits v1): ``ctx gc --dry-run`` counts what would go and deletes
nothing; ``ctx gc`` lists the ids under ``.ctx/pruned/`` and deletes them; ``ctx add file``
snapshots, ``ctx relate`` evidence, mentions, node content and narrative stay; verify,
rebuild, log, abort and a fresh clone work; a missing object no list names (or one knowledge
needs) is still corruption.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import object_files, run_ctx

from ctxstore.ids import ObjectId
from ctxstore.model import Tree, decode_typed
from ctxstore.objects import KIND_TYPED
from ctxstore.repo import open_store
from tests.storage._oldindex import old_index_commit

FILES = {"src/a.py": b"def a():\n    return 1\n", "src/b.py": b"def b():\n    return 2\n",
         "src/c.py": b"def c():\n    return 3\n", "src/d.py": b"def d():\n    return 4\n"}
BIG = "a fact long enough to be stored as a blob: " + "retries back off exponentially. " * 200


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                          text=True).stdout


def _ctx(root: Path, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    res = run_ctx(list(args), cwd=root, timeout=120)
    if ok:
        assert res.returncode == 0, res.stderr
    return res


def _json(root: Path, *args: str) -> dict:
    return json.loads(_ctx(root, "--format", "json", *args).stdout)


def _present(ctx: Path, oid: bytes) -> bool:
    return bool(object_files(ctx, oid.hex()))


def _old_store(repo: Path) -> dict:
    """A Git repository whose store holds an older ctx's code index, and what to expect."""
    for rel, data in FILES.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_bytes(data)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "code")
    _ctx(repo, "init")
    ctx = repo / ".ctx"
    decision = _ctx(repo, "add", "decision", "b.py keeps the helper").stdout.strip()
    big = _ctx(repo, "add", "--type", "fact", BIG).stdout.strip()
    _ctx(repo, "commit", "-m", "knowledge")
    first = old_index_commit(ctx, FILES, mentions={decision: "src/b.py"})
    second = old_index_commit(ctx, {"src/a.py": b"def a():\n    return 10\n"},
                              prev={"src/a.py": (first["src/a.py"][0], first["src/a.py"][3])})
    # The new ctx on top of it: a per-clone index, a relation and a snapshot of its own.
    _ctx(repo, "index")
    _ctx(repo, "relate", decision, "Mentions", "src/c.py")
    added = _json(repo, "add", "file", "src/d.py")
    _ctx(repo, "commit", "-m", "new ctx")
    third = old_index_commit(ctx, {"src/a.py": b"def a():\n    return 100\n"},
                             prev={"src/a.py": (second["src/a.py"][0], second["src/a.py"][3])})
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "old store")
    return {"first": first, "second": second, "third": third, "decision": decision,
            "big": big, "added": added}


def _trees(ctx: Path) -> list[bytes]:
    store = open_store(ctx)
    out = []
    for oid in store.objects.iter_ids():
        stored = store.objects.read(oid)
        if stored.kind == KIND_TYPED and isinstance(decode_typed(stored.payload, oid=oid), Tree):
            out.append(bytes(oid))
    return out


@pytest.mark.slow
def test_gc_prunes_an_older_ctx_code_index_and_keeps_what_knowledge_needs(git_repo: Path) -> None:
    repo = git_repo
    old = _old_store(repo)
    ctx = repo / ".ctx"
    first, second, third = old["first"], old["second"], old["third"]
    assert len(_trees(ctx)) > 3  # each old commit's root tree and its src/ tree, and init's
    objects_before = len(list(open_store(ctx).objects.iter_ids()))

    # --dry-run: counted, nothing deleted, no list written.
    dry = _json(repo, "gc", "--dry-run")
    assert dry["dry_run"] is True and dry["pruned"] > 0 and dry["pruned_bytes"] > 0
    assert dry["pruned_list"] is None and not (ctx / "pruned").exists()
    assert len(list(open_store(ctx).objects.iter_ids())) == objects_before
    text = _ctx(repo, "gc", "--dry-run").stdout
    assert f"would prune {dry['pruned']} objects" in text

    rep = _json(repo, "gc")
    assert rep["pruned"] == dry["pruned"] and rep["pruned_bytes"] == dry["pruned_bytes"]
    listed_file = ctx / rep["pruned_list"]
    lines = listed_file.read_text().splitlines()
    assert lines[0].startswith("#")
    listed = {bytes.fromhex(line) for line in lines[1:]}
    assert len(listed) == rep["pruned"] and lines[1:] == sorted(lines[1:])
    assert all(not _present(ctx, oid) for oid in listed)

    # Gone: every version of a.py the old index wrote (versions and blobs), every tree but
    # ctx init's empty one, and the versions and blobs of files nothing refers to.
    for commit in (first, second, third):
        for slot in (1, 2):
            assert not _present(ctx, commit["src/a.py"][slot])
        assert commit["__tree__"][0] in listed
    assert [bytes(t) for t in _trees(ctx)] and all(
        not decode_typed(open_store(ctx).objects.read(ObjectId(t)).payload).entries
        for t in _trees(ctx))
    # Kept: b.py as the decision's mention saw it, c.py as `ctx relate` saw it (same content
    # as the old index's), d.py's `ctx add file` snapshot (recorded again, not deduplicated
    # against the old index's record), the node's content blob, every commit and batch.
    for path in ("src/b.py", "src/c.py"):
        assert _present(ctx, first[path][1]) and _present(ctx, first[path][2]), path
    assert _present(ctx, first["src/d.py"][2])  # the blob the new snapshot names too
    # ... because `ctx add file` recorded it, not deduplicated against the old index's record
    assert old["added"]["written"] == ["src/d.py"] and old["added"]["deduplicated"] == 0
    assert old["added"]["work_commit"]
    for slot in ("__commit__",):
        for commit in (first, second, third):
            assert _present(ctx, commit[slot][0])
    assert _json(repo, "show", old["big"])["content"] == BIG

    # The store verifies; the pruned objects it meets are counted, not reported (a sub-tree
    # of a pruned tree is never met: nothing names it any more).
    ver = _json(repo, "debug", "verify")
    assert ver["ok"] is True and ver["problems"] == [] and 0 < ver["pruned"] <= rep["pruned"]
    assert "pruned" in _ctx(repo, "debug", "verify").stdout
    assert _ctx(repo, "log", "--oneline").stdout.count("\n") >= 5
    _ctx(repo, "rebuild", "--full")
    assert _json(repo, "debug", "verify", "--index")["ok"] is True
    _json(repo, "status")  # exit 0 on the pruned store (_json checks it)

    # Idempotent: a second gc finds nothing more to prune and writes no second list.
    again = _json(repo, "gc")
    assert again["pruned"] == 0 and again["pruned_list"] is None
    assert len(os.listdir(ctx / "pruned")) == 1

    # Writes that carry an old commit's root tree along (an abort on top of a commit v1)
    # never try to promote what was pruned.
    _ctx(repo, "add", "--type", "fact", "staged then aborted")
    _ctx(repo, "stage", "abort", "--yes")
    _ctx(repo, "add", "--type", "fact", "kept after the abort")
    _ctx(repo, "commit", "-m", "after gc")
    assert _json(repo, "debug", "verify")["ok"] is True

    # What Git sees: the deletions and one new list file; a fresh clone verifies too.
    _git(repo, "add", "-A", ".ctx")
    staged = _git(repo, "diff", "--cached", "--name-status", "--", ".ctx").splitlines()
    deleted = {line.split("\t")[1] for line in staged if line.startswith("D")}
    added = [line.split("\t")[1] for line in staged if line.startswith("A")]
    assert {f".ctx/objects/{oid.hex()[:2]}/{oid.hex()}" for oid in listed} <= deleted
    assert f".ctx/{rep['pruned_list']}" in added
    _git(repo, "commit", "-qm", "gc")
    clone = repo.parent / "clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
    cloned = _json(clone, "debug", "verify")
    assert cloned["ok"] is True and cloned["pruned"] == ver["pruned"]
    _ctx(clone, "index")
    assert _json(clone, "show", old["decision"])["id"] == old["decision"]


def test_a_missing_object_is_still_corruption_unless_pruned(git_repo: Path) -> None:
    repo = git_repo
    old = _old_store(repo)
    ctx = repo / ".ctx"
    _json(repo, "gc")
    # A blob knowledge needs (the mention's b.py), and a node's content: named E001.
    b_blob = old["first"]["src/b.py"][2]
    for path in object_files(ctx, b_blob.hex()):
        path.unlink()
    ver = json.loads(_ctx(repo, "--format", "json", "debug", "verify", ok=False).stdout)
    assert ver["ok"] is False
    assert [p["subject"] for p in ver["problems"] if p["code"] == "E001"] == [b_blob.hex()]
    # Even when a list names it: what knowledge needs is never excused.
    (ctx / "pruned" / ("f" * 64)).write_text(b_blob.hex() + "\n")
    ver = json.loads(_ctx(repo, "--format", "json", "debug", "verify", ok=False).stdout)
    assert [p["subject"] for p in ver["problems"] if p["code"] == "E001"] == [b_blob.hex()]
    res = _ctx(repo, "gc", ok=False)
    assert res.returncode == 3 and "E021" in res.stderr


def test_a_damaged_list_is_a_warning(git_repo: Path) -> None:
    repo = git_repo
    _old_store(repo)
    ctx = repo / ".ctx"
    _json(repo, "gc")
    (ctx / "pruned" / ("0" * 64)).write_text("not an id\n")
    ver = _json(repo, "debug", "verify")
    assert ver["ok"] is True
    assert [(p["code"], p["severity"]) for p in ver["problems"]] == [("W005", "warning")]


def test_pruned_lists_planted_in_a_clone_are_read_within_a_bound(git_repo: Path) -> None:
    # A cloned .ctx/pruned/ is untrusted: past MAX_LISTS files the rest is not read, and
    # verify says so instead of reading without end (the planted names sort first, so the
    # real list is among those left out: what it pruned is then named missing, not hidden).
    from ctxstore.prunedlist import MAX_LISTS, read_pruned

    repo = git_repo
    _old_store(repo)
    ctx = repo / ".ctx"
    _json(repo, "gc")
    real = read_pruned(ctx)
    for n in range(MAX_LISTS + 5):
        (ctx / "pruned" / f"{n:064x}").write_text(f"{n + 1:064x}\n")
    planted = read_pruned(ctx)
    assert planted.files == MAX_LISTS
    assert len(planted.ids) <= len(real.ids) + MAX_LISTS
    assert any(f"more than {MAX_LISTS}" in why for _, why in planted.problems)
    res = _ctx(repo, "--format", "json", "debug", "verify", ok=False)
    ver = json.loads(res.stdout)
    assert res.returncode != 0 and ver["ok"] is False
    codes = {(p["code"], p["severity"]) for p in ver["problems"]}
    assert codes == {("W005", "warning"), ("E001", "error")}


@pytest.mark.slow
def test_a_branch_made_before_the_gc_merges_after_it(git_repo: Path) -> None:
    """History that still names the pruned objects, merged in after the gc, reads and verifies."""
    repo = git_repo
    _old_store(repo)
    _git(repo, "branch", "before-gc")
    rep = _json(repo, "gc")
    assert rep["pruned"] > 0
    _git(repo, "add", "-A", ".ctx")
    _git(repo, "commit", "-qm", "gc")
    _git(repo, "checkout", "-q", "before-gc")  # the objects are back: this branch has them
    assert _json(repo, "debug", "verify")["pruned"] == 0
    side = _ctx(repo, "add", "--type", "fact", "written on the branch made before the gc").stdout.strip()
    _ctx(repo, "commit", "-m", "side")
    _git(repo, "add", "-A", ".ctx")
    _git(repo, "commit", "-qm", "side")
    _git(repo, "checkout", "-q", "main")
    _git(repo, "merge", "-q", "--no-edit", "before-gc")
    _ctx(repo, "rebuild")  # merges the two heads of refs/main
    ver = _json(repo, "debug", "verify")
    assert ver["ok"] is True and ver["problems"] == [] and ver["pruned"] > 0
    assert _json(repo, "show", side)["id"] == side
    assert "side" in _ctx(repo, "log", "--oneline").stdout
