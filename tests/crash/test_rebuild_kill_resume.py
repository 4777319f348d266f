"""``ctx rebuild`` killed part way goes on from where it stopped (docs/index.md, RELIABILITY.md).

The real CLI in a child on a generated tree: killed (SIGKILL) once the build has committed
its first slice, the index says it is partial (``meta`` ``build_state``, no ``synced``);
readers are told so instead of reading half an index; the next ``ctx rebuild`` applies only
what is missing, and the finished index equals a clean rebuild's, rowids included.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import run_ctx

from ctxstore.index.rebuild import BUILD_SLICE_RECORDS

FILES = 2 * BUILD_SLICE_RECORDS + 150
QUERIES = ("widget cache", "gadget_17 spline", "Thing42 method", "SQLite WAL")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A Git tree of FILES generated modules, indexed, and a store with FILES + 1 nodes.

    The code index is this clone's (``code.sqlite``), not rebuilt from objects: the records
    a rebuild applies are the imported nodes'.
    """
    from ctxstore.ids import new_ulid

    work = tmp_path / "work"
    (work / "pkg").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True)
    for i in range(FILES):
        (work / "pkg" / f"m{i}.py").write_text(
            f'"""Module {i}: widget cache number {i}."""\n\n'
            f"def gadget_{i}(x):\n    \"\"\"Reticulate spline {i}.\"\"\"\n    return x + {i}\n\n"
            f"class Thing{i}:\n    def method(self):\n        return gadget_{i}({i})\n")
    doc = {"version": 1, "format": "ctx-export", "nodes": [
        {"id": new_ulid(), "type": "fact",
         "content": f"Module {i}: widget cache number {i}. gadget_{i} reticulates spline {i};"
                    f" Thing{i} method calls it."} for i in range(FILES)]}
    (tmp_path / "nodes.json").write_text(json.dumps(doc))
    for args in (["init"], ["add", "--type", "fact", "The widget cache lives in SQLite WAL"],
                 ["import", str(tmp_path / "nodes.json")], ["index"]):
        res = run_ctx(args, cwd=work, timeout=120)
        assert res.returncode == 0, res.stderr
    return work / ".ctx"


def _ctx(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    res = run_ctx(["--ctx-dir", str(root), *args], timeout=120)
    assert res.returncode == 0, res.stderr
    return res


def _meta(root: Path) -> dict[str, str]:
    conn = sqlite3.connect(f"file:{root / 'index' / 'index.sqlite'}?mode=ro", uri=True, timeout=1)
    try:
        return dict(conn.execute("SELECT key, value FROM meta").fetchall())
    finally:
        conn.close()


def _kill_mid_build(root: Path) -> dict[str, object]:
    """Start ``ctx rebuild``, SIGKILL it once a slice is committed; the build state it left."""
    proc = subprocess.Popen([sys.executable, "-m", "ctxstore.cli", "--ctx-dir", str(root),
                             "rebuild"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                state = _meta(root).get("build_state")
            except sqlite3.Error:  # created or dropped under us: look again
                state = None
            if state is not None and json.loads(state)["records"] > 0:
                os.kill(proc.pid, signal.SIGKILL)
                break
            time.sleep(0.002)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the rebuild ended before it could be killed"
    meta = _meta(root)
    assert "synced" not in meta, meta  # never observed as complete while partial
    return dict(json.loads(meta["build_state"]))


def _answers(root: Path) -> dict[str, object]:
    """What a reader gets: nodes (with rowids), their full text, versions, searches."""
    conn = sqlite3.connect(root / "index" / "index.sqlite")
    try:
        tables = {
            "nodes": conn.execute("SELECT rowid, id, content FROM nodes ORDER BY id").fetchall(),
            "nodes_fts": conn.execute("SELECT rowid, content FROM nodes_fts ORDER BY rowid"
                                      ).fetchall(),
            "versions": conn.execute("SELECT key, version, stamp FROM versions ORDER BY 1, 2"
                                     ).fetchall(),
        }
    finally:
        conn.close()
    searches = {q: _ctx(root, "--format", "json", "search", q).stdout for q in QUERIES}
    return {**tables, "searches": searches}


@pytest.mark.slow
def test_rebuild_killed_part_way_resumes_and_equals_a_clean_rebuild(root: Path) -> None:
    full = json.loads(_ctx(root, "--format", "json", "rebuild").stdout)["records"]
    assert full["resumed"] == 0 and full["applied"] > FILES
    state = _kill_mid_build(root)
    assert 0 < int(str(state["records"])) < full["applied"]

    # A reader meanwhile: told to finish the rebuild, the half index never served as whole.
    prompt = {"session_id": "s1", "cwd": str(root.parent), "hook_event_name": "UserPromptSubmit",
              "prompt": "where does the widget cache live"}
    hook = run_ctx(["hook", "prompt-submit"], stdin=json.dumps(prompt))
    assert hook.returncode == 0
    assert json.loads(hook.stdout) == {
        "systemMessage": "ctx: the index is only partly built; run `ctx rebuild` to finish it"}
    assert json.loads(_meta(root)["build_state"]) == state  # the hook did not build

    resumed = json.loads(_ctx(root, "--format", "json", "rebuild").stdout)["records"]
    assert resumed["resumed"] == state["records"]
    assert resumed["applied"] + resumed["resumed"] == full["applied"]
    assert resumed["applied"] < full["applied"]  # fewer records processed than a full build
    assert "build_state" not in _meta(root)
    got = _answers(root)
    assert _ctx(root, "--format", "json", "debug", "verify", "--index").returncode == 0

    _ctx(root, "rebuild", "--full")
    assert got == _answers(root)


@pytest.mark.slow
def test_rebuild_text_output_names_a_resumed_build(root: Path) -> None:
    state = _kill_mid_build(root)
    out = _ctx(root, "rebuild").stdout
    assert out.startswith(f"finished an interrupted rebuild ({state['records']} records were "
                          "already in, "), out


@pytest.mark.slow
def test_rebuild_full_after_a_kill_starts_over(root: Path) -> None:
    _kill_mid_build(root)
    check = run_ctx(["--ctx-dir", str(root), "debug", "verify", "--index"])
    assert check.returncode == 3
    assert "error E024 index: partial: the index is only partly built (`ctx rebuild` finishes it)" \
        in check.stdout.splitlines(), check.stdout
    records = json.loads(_ctx(root, "--format", "json", "rebuild", "--full").stdout)["records"]
    assert records["resumed"] == 0 and records["applied"] > FILES
