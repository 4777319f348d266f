"""Hooks and agent read commands on an index that needs a full build (docs/index.md).

An index written by an older ctx, left partial by an interrupted rebuild, or being rebuilt by
another process: session-start and prompt-submit answer at once without it, with one note in
``systemMessage`` saying what to run, and never build it themselves (a build can outlast
Claude Code's hook timeout). ``ctx search`` builds in the foreground when it may, and says
``error[E024]`` when another process is building for longer than the lock timeout.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import run_ctx

from ctxstore.index import clone_id, open_index, pointer_snapshot
from ctxstore.index.rebuild import REBUILD_LOCK, start_build
from ctxstore.index.schema import INDEX_SCHEMA_VERSION
from ctxstore.repo import open_store

OLD_SCHEMA = INDEX_SCHEMA_VERSION - 1
FACT = "We keep widget caches in SQLite with WAL mode enabled"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A store with a fact node and a few indexed files, its index built and current."""
    work = tmp_path / "work"
    work.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(work)], check=True)
    for i in range(5):
        (work / f"w{i}.py").write_text(f'def widget_{i}():\n    return "widget cache {i}"\n')
    for args in (["init"], ["add", "--type", "fact", FACT], ["index"]):
        res = run_ctx(args, cwd=work)
        assert res.returncode == 0, res.stderr
    ctx = work / ".ctx"
    text = (ctx / "config.toml").read_text()
    assert "[lock]\ntimeout_seconds = 10.0\n" in text
    (ctx / "config.toml").write_text(text.replace("[lock]\ntimeout_seconds = 10.0\n",
                                                  "[lock]\ntimeout_seconds = 0.3\n"))
    assert run_ctx(["--ctx-dir", str(ctx), "list"]).returncode == 0  # the index is built
    return ctx


def _db(root: Path) -> sqlite3.Connection:
    return sqlite3.connect(root / "index" / "index.sqlite")


def _set_old_schema(root: Path) -> None:
    with _db(root) as conn:  # what an older ctx left: the version the code reads
        conn.execute(f"PRAGMA user_version = {OLD_SCHEMA}")
    conn.close()


def _index_state(root: Path) -> tuple[int, list[str]]:
    conn = _db(root)
    try:
        return (conn.execute("PRAGMA user_version").fetchone()[0],
                sorted(r[0] for r in conn.execute("SELECT key FROM meta")))
    finally:
        conn.close()


def _make_partial(root: Path) -> None:
    """What a rebuild killed right after it began leaves: the tables cleared, meta partial."""
    store = open_store(root)
    conn = open_index(store)
    try:
        start_build(conn, pointer_snapshot(store), clone_id(store.root) or "")
    finally:
        conn.close()


@pytest.fixture
def lock_holder(root: Path) -> Iterator[int]:
    """Another process holding ``index/rebuild.lock`` (as a running ``ctx rebuild`` does)."""
    code = ("import fcntl, os, sys, time\n"
            f"fd = os.open({str(root / 'index' / REBUILD_LOCK)!r}, os.O_RDWR | os.O_CREAT)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\n"
            "os.write(fd, str(os.getpid()).encode())\n"
            "print('held', flush=True)\n"
            "time.sleep(120)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def _hook(root: Path, event: str, **payload: str) -> tuple[dict, float]:
    """Run a hook as Claude Code does; its JSON output and how long it took."""
    data = {"session_id": "s1", "cwd": str(root.parent), "hook_event_name": event, **payload}
    start = time.monotonic()
    res = run_ctx(["hook", event], stdin=json.dumps(data))
    took = time.monotonic() - start
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("\n") == 1, res.stdout
    out = json.loads(res.stdout)
    assert isinstance(out, dict)
    return out, took


HOOK_CALLS = [("session-start", {"source": "startup"}),
              ("prompt-submit", {"prompt": "where do the widget caches live in SQLite"})]


@pytest.mark.parametrize(("event", "payload"), HOOK_CALLS)
def test_hook_on_older_schema_answers_at_once_with_a_note_and_does_not_rebuild(
        root: Path, event: str, payload: dict[str, str]) -> None:
    _set_old_schema(root)
    before = _index_state(root)
    out, took = _hook(root, event, **payload)
    assert out == {"systemMessage": "ctx: the index was built by an older ctx (schema version "
                                    f"{OLD_SCHEMA}, this ctx uses {INDEX_SCHEMA_VERSION}); run "
                                    "`ctx rebuild`"}
    # A Python start and a few file reads: a guard against waiting for a build (whether one
    # ran is checked below), generous for a loaded machine.
    assert took < 10, took
    assert _index_state(root) == before  # not rebuilt, not dropped


@pytest.mark.parametrize(("event", "payload"), HOOK_CALLS)
def test_hook_on_partial_index_says_to_finish_the_rebuild(
        root: Path, event: str, payload: dict[str, str]) -> None:
    _make_partial(root)
    before = _index_state(root)
    assert "build_state" in before[1]
    out, _ = _hook(root, event, **payload)
    assert out == {"systemMessage": "ctx: the index is only partly built; run "
                                    "`ctx rebuild` to finish it"}
    assert _index_state(root) == before  # the hook did not go on with the build


@pytest.mark.parametrize(("event", "payload"), HOOK_CALLS)
def test_hook_while_another_process_rebuilds_says_so_without_waiting(
        root: Path, lock_holder: int, event: str, payload: dict[str, str]) -> None:
    _make_partial(root)
    out, took = _hook(root, event, **payload)
    assert out == {"systemMessage": f"ctx: the index is being rebuilt by process {lock_holder}; "
                                    "retry when that rebuild has finished"}
    assert took < 10, took  # the rebuild holds on for 120 s, the index's busy wait is 30 s


def test_hook_while_another_process_repairs_an_older_index_says_so(
        root: Path, lock_holder: int) -> None:
    _set_old_schema(root)
    out, _ = _hook(root, "session-start", source="startup")
    assert out["systemMessage"].startswith(f"ctx: the index is being rebuilt by process {lock_holder}")
    assert _index_state(root)[0] == OLD_SCHEMA


def test_hook_reads_the_index_again_once_it_is_rebuilt(root: Path) -> None:
    _set_old_schema(root)
    _hook(root, "session-start", source="startup")
    assert run_ctx(["--ctx-dir", str(root), "rebuild"]).returncode == 0
    out, _ = _hook(root, "session-start", source="startup")
    assert "systemMessage" not in out  # the note was not cached with the view
    out, _ = _hook(root, *HOOK_CALLS[1][:1], **HOOK_CALLS[1][1])
    assert "systemMessage" not in out
    assert FACT in out["hookSpecificOutput"]["additionalContext"]


def test_search_on_older_schema_rebuilds_in_the_foreground(root: Path) -> None:
    _set_old_schema(root)
    res = run_ctx(["--ctx-dir", str(root), "search", "widget caches"])
    assert res.returncode == 0, res.stderr
    assert FACT in res.stdout
    assert res.stderr.startswith("ctx: index was written by another version of ctx (schema "
                                 f"version {OLD_SCHEMA}")
    # the code generation lives in code.sqlite now (index.codedb), not in meta
    assert _index_state(root) == (INDEX_SCHEMA_VERSION, ["clone", "synced"])


def test_search_while_another_process_rebuilds_is_one_error_line(
        root: Path, lock_holder: int) -> None:
    _make_partial(root)
    res = run_ctx(["--ctx-dir", str(root), "search", "widget caches"])
    assert (res.returncode, res.stdout) == (1, "")
    assert res.stderr.startswith(f"ctx: error[E024]: the index is being rebuilt by process "
                                 f"{lock_holder} (gave up after 0.3s)"), res.stderr
    assert res.stderr.count("\n") == 1


def test_search_on_partial_index_finishes_the_build(root: Path) -> None:
    _make_partial(root)
    res = run_ctx(["--ctx-dir", str(root), "search", "widget caches"])
    assert res.returncode == 0, res.stderr
    assert FACT in res.stdout
    assert "build_state" not in _index_state(root)[1]



def test_session_start_with_active_task_on_older_schema_injects_the_task_line_without_an_empty_frame(
        root: Path) -> None:
    started = run_ctx(["--ctx-dir", str(root), "hook", "stop", "--response",
                       'On it. <ctx:task name="widgets" action="start"/>'], stdin="{}")
    assert started.returncode == 0, started.stderr
    _set_old_schema(root)
    out, _ = _hook(root, "session-start", source="startup")
    assert out["hookSpecificOutput"]["additionalContext"] == "Current ctx task: widgets\n"
    assert out["systemMessage"].startswith("ctx: the index was built by an older ctx")


def test_session_start_preview_on_partial_index_does_not_say_the_store_is_empty(
        root: Path) -> None:
    _make_partial(root)
    res = run_ctx(["--ctx-dir", str(root), "compose", "--session-start"])
    assert (res.returncode, res.stdout) == (0, "")
    assert res.stderr == ("ctx: note: the hook would report: ctx: the index is only partly "
                          "built; run `ctx rebuild` to finish it\n"
                          "ctx: note: session start injects nothing\n")
