"""Rough edges of the A.5 walkthrough: log lines of `ctx add file|command`, `stage start`
after `ctx add task`, `-m` in the node form, the linear `#N` naming, the quiet re-index."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from _ingestlib import ctx, ctx_json, make_work, query, write
from conftest import session_of, stage_file

from ctxstore.code.python import PythonExtractor
from ctxstore.repo import open_store
from ctxstore.staging import session_status
from ctxstore.verify import verify_store


def _log(ctx_dir: Path) -> str:
    return "".join(p.read_text() for p in sorted((ctx_dir / "narrative" / "log").glob("*.md")))


def test_add_file_and_add_command_append_one_log_line(tmp_path: Path) -> None:
    ctx_dir = make_work(tmp_path / "w")
    write(ctx_dir.parent, {"pkg/a.py": "def f():\n    return 1\n"})
    ctx(ctx_dir, "add", "file", "pkg/a.py", "--extract-semantics")
    from conftest import run_ctx  # a real pipe: `add command --stdin` reads a file descriptor

    res = run_ctx(["--ctx-dir", str(ctx_dir), "add", "command", "--stdin", "--name", "pytest",
                   "--exit-code", "1"], cwd=ctx_dir.parent, stdin="pkg/a.py:1: error: boom\n")
    assert res.returncode == 0, res.stderr
    log = _log(ctx_dir)
    assert "file read" in log and "Read pkg/a.py (2 symbols, " in log
    assert "command run" in log and "Ran pytest: exit 1, " in log
    ctx(ctx_dir, "add", "file", "pkg/a.py")  # nothing new stored: no line
    assert _log(ctx_dir) == log
    ctx(ctx_dir, "commit", "-m", "steps")  # event lines are records, not nodes
    assert [r[0] for r in query(ctx_dir, "SELECT type FROM nodes")] == []
    assert verify_store(open_store(ctx_dir)).ok


def test_stage_start_after_add_task_adopts_the_session(tmp_path: Path) -> None:
    ctx_dir = make_work(tmp_path / "w")
    task = ctx_json(ctx_dir, "add", "task", "Add retry")
    ctx(ctx_dir, "stage", "start", "Add retry with backoff")
    status = session_status(open_store(ctx_dir))
    assert status.task == "Add retry with backoff" and status.records == 1
    _, err, _ = ctx(ctx_dir, "stage", "start", "another", ok=False)
    assert "already open" in err
    ctx(ctx_dir, "commit", "-m", "task")
    assert [r[0] for r in query(ctx_dir, "SELECT id FROM nodes")] == [task["id"]]


def test_message_option_of_the_node_form_is_not_content(tmp_path: Path) -> None:
    ctx_dir = make_work(tmp_path / "w")
    doc = ctx_json(ctx_dir, "add", "--type", "fact", "the text", "-m", "the message")
    assert query(ctx_dir, "SELECT content FROM nodes WHERE id = ?", doc["id"]) == [("the text",)]
    out, _, _ = ctx(ctx_dir, "log")
    assert "the message" in out


def test_same_named_definitions_are_numbered_in_linear_time() -> None:
    source = "def f():\n    pass\n" * 4000
    started = time.perf_counter()
    names = [s.qualname for s in PythonExtractor().extract("m.py", source).symbols]
    # Quadratic numbering took 3.6 s for 2,000, so about 14 s here; linear takes well under 1 s
    # (under 3 s on a loaded machine).
    assert time.perf_counter() - started < 6
    assert names[:3] == ["m", "m.f", "m.f#2"] and names[-1] == "m.f#4000"
    assert len(set(names)) == len(names)


def test_unchanged_tree_writes_nothing(tmp_path: Path) -> None:
    ctx_dir = make_work(tmp_path / "w")
    write(ctx_dir.parent, {f"m{i}.py": f"x = {i}\n" for i in range(5)})
    ctx_json(ctx_dir, "index")
    stage = stage_file(ctx_dir).read_bytes()
    doc = ctx_json(ctx_dir, "index")
    assert doc["written"] == [] and doc["work_commit"] is None and doc["read"] == 0
    assert stage_file(ctx_dir).read_bytes() == stage


@pytest.mark.slow
def test_a_run_turns_the_cycle_collector_off_and_gives_it_back(tmp_path: Path) -> None:
    """The cyclic GC is off while a run reads and keeps its extractions (docs/performance.md),
    and as it was after the run."""
    import gc

    from ctxstore.code.ingest import index_tree

    ctx_dir = make_work(tmp_path)
    write(tmp_path, {f"pkg/m{i}.py": "".join(f"def f{j}(x):\n    return [x] * {j}\n"
                                              for j in range(200)) for i in range(40)})
    during: list[bool] = []
    store = open_store(ctx_dir)
    report = index_tree(session_of(store), progress=lambda done, total: during.append(gc.isenabled()))
    assert report.read == 40 and report.symbols >= 40 * 200
    assert len(during) == 40 and not any(during)
    assert gc.isenabled()
    gc.disable()  # a caller that had it off keeps it off
    try:
        write(tmp_path, {"pkg/m0.py": "def g():\n    pass\n"})
        index_tree(session_of(store))
        assert not gc.isenabled()
    finally:
        gc.enable()
