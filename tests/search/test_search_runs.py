"""Stored runs of commands are found by the one search and by recall (kind ``run``).

Through the installed CLI, runs recorded with ``ctx add command --stdin``: a question about
the failure finds the failing run with what came after it, a question about something else
is not flooded with runs, a purge takes a run's text out of the search, and ``<ctx:recall>``
shows the run too.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import run_ctx, session_of

from ctxstore.claude.commands import CommandContext, execute, hook_key
from ctxstore.claude.state import open_state
from ctxstore.repo import open_store
from tests.security.secret_tokens import TOKENS

GH = next(t for t in TOKENS if t.name == "github-classic-pat")
FAILED = ("FAILED tests/test_calc.py::test_add_small - assert 0 == 4\n"
          "FAILED tests/test_calc.py::test_add_negative - assert -2 == 0\n"
          "2 failed in 0.01s\n")


def _ctx(root: Path, *args: str, stdin: str | None = None) -> str:
    done = run_ctx(list(args), cwd=root, stdin=stdin)
    assert done.returncode == 0, (args, done.stderr)
    return done.stdout


def _record(root: Path, name: str, output: str, exit_code: int, tool: str = "pytest") -> None:
    _ctx(root, "add", "command", "--stdin", "--name", name, "--tool", tool, "--exit-code",
         str(exit_code), stdin=output)


def _search(root: Path, text: str, *args: str) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = json.loads(_ctx(root, "search", text, *args, "--format",
                                                   "json"))["results"]
    return results


def _store(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    _ctx(root, "init", "--no-git")
    return root


@pytest.mark.slow
def test_search_a_question_about_code_is_not_flooded_with_runs(tmp_path: Path) -> None:
    root = _store(tmp_path)
    node = json.loads(_ctx(root, "add", "--type", "decision", "--format", "json",
                           "The calc module keeps integer arithmetic for money"))["id"]
    for name in ("tests", "mypy", "ruff", "lint", "build"):
        _record(root, name, f"calc.py:3: error: calc arithmetic on money  [{name}]\n", 1, "mypy")
    found = _search(root, "calc arithmetic money")
    assert found[0]["kind"] == "node" and found[0]["key"] == node
    assert len([r for r in found if r["kind"] == "run"]) <= 3
    # runs matched through their diagnostics alone weigh half: the node holding the words leads
    partly = _search(root, "integer money")
    assert partly[0]["key"] == node and all(r["score"] < partly[0]["score"] for r in partly[1:])
    # a question no run holds a word of finds no run
    assert not [r for r in _search(root, "why sqlite over postgres") if r["kind"] == "run"]
    # recall shows runs only when the question is about them
    recalled = json.loads(_ctx(root, "recall", "calc arithmetic money", "--format", "json"))
    assert recalled["runs"] == [] and recalled["nodes"][0]["id"] == node
    asked = json.loads(_ctx(root, "recall", "did the build fail", "--format", "json"))
    assert asked["runs"][0]["name"] == "build" and len(asked["runs"]) <= 3
    assert json.loads(_ctx(root, "recall", "type:decision", "--format", "json"))["runs"] == []


@pytest.mark.slow
def test_search_runs_newest_first_among_equals_and_one_hit_per_command(tmp_path: Path) -> None:
    root = _store(tmp_path)
    for name in ("older", "newer"):
        _record(root, name, FAILED, 1)
        time.sleep(0.01)
    _record(root, "newer", FAILED, 1)  # the same failure again: the command's newest run
    runs = _search(root, "tests failed", "--kind", "run")
    assert [r["run"]["name"] for r in runs] == ["newer", "older"]
    assert runs[0]["score"] == runs[1]["score"]
    history = json.loads(_ctx(root, "diagnostics", "--history", "--name", "newer", "--format",
                              "json"))["runs"]
    assert runs[0]["key"] == history[0]["snapshot"] != history[1]["snapshot"]
    assert runs[0]["run"]["then"] is None  # it still fails


@pytest.mark.slow
def test_search_run_status_words_and_transition_times(tmp_path: Path) -> None:
    root = _store(tmp_path)
    _record(root, "tests", FAILED, 1)
    _record(root, "tests", FAILED, 1)
    _record(root, "tests", "2 passed in 0.01s\n", 0)
    history = json.loads(_ctx(root, "diagnostics", "--history", "--format", "json"))["runs"]
    failing = _search(root, "why did the tests fail")
    run = failing[0]["run"]
    assert failing[0]["kind"] == "run" and run["status"] == "failed"
    assert run["run_at"] == history[1]["run_at"]  # the newest failing run
    assert run["then"] == {"status": "passed", "run_at": history[0]["run_at"]}
    assert "fail" in failing[0]["matched"]
    text = _ctx(root, "--format", "markdown", "search", "test failures", "--kind", "run")
    assert text.startswith("- tests failed at ") and " → passed at " in text
    assert "test_add_small" in text


@pytest.mark.slow
def test_purge_takes_a_runs_text_out_of_search(tmp_path: Path) -> None:
    root = _store(tmp_path)
    config = root / ".ctx" / "config.toml"
    config.write_text(config.read_text().replace('commands = "redact"', 'commands = "allow"'))
    _ctx(root, "trust")
    _record(root, "mypy", f"calc.py:2: error: token {GH.text} leaked  [misc]\n", 1, "mypy")
    run = _search(root, "leaked token")[0]
    assert run["kind"] == "run" and GH.text in run["run"]["diagnostics"][0]["message"]
    _ctx(root, "purge", run["key"], "--yes")
    after = _search(root, "leaked token")
    assert [r["run"]["name"] for r in after] == ["mypy"]
    assert GH.text not in json.dumps(after)
    index = (root / ".ctx" / "index" / "index.sqlite").read_bytes()
    assert GH.text.encode() not in index and GH.text.lower().encode() not in index
    done = run_ctx(["debug", "verify", "--index"], cwd=root)
    assert done.returncode == 0, done.stdout + done.stderr


def test_tag_recall_shows_the_failing_run(tmp_path: Path) -> None:
    root = _store(tmp_path)
    _record(root, "tests", FAILED, 1)
    _record(root, "tests", "2 passed\n", 0)
    store = open_store(root / ".ctx")
    raw = '<ctx:recall query="why did the tests fail"></ctx:recall>'
    command = {"name": "recall", "attrs": {"query": "why did the tests fail"}, "content": "",
               "raw": raw, "key": hook_key("s", raw), "aliases": []}
    state = open_state(store.root, create=True)
    assert state is not None
    with state:
        out = execute(CommandContext(session_of(store), state, "s"), command)
    assert out.pending is not None
    text = out.pending[1]
    assert "Command runs, 1:" in text and "- tests failed at " in text
    assert " → passed at " in text and "test_add_small" in text


def test_a_purge_applied_to_a_live_index_takes_the_run_out(tmp_path: Path) -> None:
    # A purge record met incrementally (a Git merge brings another clone's purge): the run's
    # row and search document leave with its version, as ``versions`` loses it.
    from ctxstore.code.runs import record_command
    from ctxstore.ids import new_ulid
    from ctxstore.index.apply import _apply_purge
    from ctxstore.model.knowledge import PurgeRecord
    from ctxstore.objects import ObjectId
    from ctxstore.search.search import search

    root = _store(tmp_path)
    store = open_store(root / ".ctx")
    db = session_of(store)
    record_command(db, "mypy", b"calc.py:2: error: zebrafish operand  [misc]\n", exit_code=1,
                   tool="mypy")
    conn = db.index()
    assert [h.kind for h in search(conn, "zebrafish", kinds=("run",))] == ["run"]
    (version,) = [bytes(r[0]) for r in conn.execute("SELECT version FROM runs")]
    with conn:
        _apply_purge(store, conn, PurgeRecord(id=new_ulid(), versions=(ObjectId(version),),
                                              objects=(), at=1))
    assert search(conn, "zebrafish", kinds=("run",)) == []
    assert conn.execute("SELECT count(*) FROM runs_fts").fetchone() == (0,)


@pytest.mark.slow
def test_mcp_recall_over_stdio_returns_the_failing_run(tmp_path: Path) -> None:
    from tests.mcp.describe_server import INITIALIZED, initialize, talk

    root = _store(tmp_path)
    _record(root, "tests", FAILED, 1)
    _record(root, "tests", "2 passed\n", 0)
    (_, called), err = talk(root / ".ctx", [
        initialize(1, "2025-06-18"), INITIALIZED,
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "recall", "arguments": {"query": "why did the tests fail"}}}])
    got = json.loads(called["result"]["content"][0]["text"])
    assert [(r["kind"], r["name"], r["status"], r["then"]["status"]) for r in got["runs"]] == \
        [("run", "tests", "failed", "passed")], err
    assert any("test_add_small" in d["message"] for d in got["runs"][0]["diagnostics"])
