"""``UpdatedIn`` (spec 002 §9): a node's canonical commits, derived from history by the index.

Through the installed CLI: the commits that changed a node, newest first, the same after an
incremental sync and after ``ctx rebuild --full``, shown by ``ctx show`` (JSON and text),
``ctx edges`` and ``ctx debug index``; no object is written for them.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from conftest import run_ctx


def ctx(root: Path, *args: str) -> str:
    res = run_ctx(["--ctx-dir", str(root / ".ctx"), *args])
    assert res.returncode == 0, res.stderr
    return res.stdout


def commit(root: Path, message: str) -> str:
    out = ctx(root, "commit", "-m", message)
    found = re.search(r"committed ([0-9a-f]{64})", out)
    assert found, out
    return found.group(1)


def updated_in(root: Path, node_id: str) -> list[tuple[str, str]]:
    doc = json.loads(ctx(root, "show", node_id, "--format", "json"))
    return [(c["commit"], c["message"]) for c in doc["updated_in"]]


def test_updated_in_lists_the_commits_that_changed_a_node_newest_first(tmp_path: Path) -> None:
    ctx(tmp_path, "init", "--no-git")
    node_id = ctx(tmp_path, "add", "--type", "fact", "the TTL is 300 s").strip()
    other = ctx(tmp_path, "add", "--type", "fact", "an unrelated fact").strip()
    ctx(tmp_path, "update", node_id, "--content", "the TTL is 120 s")
    first = commit(tmp_path, "set the ttl")
    ctx(tmp_path, "update", node_id, "--content", "the TTL is 60 s")
    second = commit(tmp_path, "shorter ttl")
    ctx(tmp_path, "update", node_id, "--content", "the TTL is 30 s")  # staged: in no commit yet
    want = [(second, "shorter ttl"), (first, "set the ttl")]
    assert updated_in(tmp_path, node_id) == want  # incrementally
    assert updated_in(tmp_path, other) == [(first, "set the ttl")]
    objects = sorted(p.name for p in (tmp_path / ".ctx" / "objects").rglob("*") if p.is_file())

    ctx(tmp_path, "rebuild", "--full")
    assert updated_in(tmp_path, node_id) == want
    shutil.rmtree(tmp_path / ".ctx" / "index")  # derived: a fresh index finds the same
    assert updated_in(tmp_path, node_id) == want
    # derived from history, never stored: no object was written for it
    assert sorted(p.name for p in (tmp_path / ".ctx" / "objects").rglob("*") if p.is_file()) \
        == objects

    edges = json.loads(ctx(tmp_path, "edges", node_id, "--format", "json"))["edges"]
    assert [(e["type"], e["kind"], e["node"]) for e in edges] == [
        ("UpdatedIn", "commit", second), ("UpdatedIn", "commit", first)]
    text = ctx(tmp_path, "show", node_id, "--history")
    assert "updated in (2 commits, newest first):\n" in text
    assert text.index(second[:12]) < text.index(first[:12])
    looked = json.loads(ctx(tmp_path, "debug", "index", node_id, "--format", "json"))
    assert {(a["label"], a["key"]) for a in looked["adjacency"]["forward"]} == {
        ("UpdatedIn", second), ("UpdatedIn", first)}

