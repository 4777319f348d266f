"""Failures remembered: every run of a command is kept, its pass/fail transition logged, and a
pack about the failure shows the failing run and its diagnostics once the tests pass.

Through the installed CLI: a real pytest run fails, the code is fixed, the run passes.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from conftest import run_ctx

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "docs" / "pack.schema.json").read_text())

CALC = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
TESTS = ("from calc import add\n\n\n"
         "def test_add_small():\n    assert add(2, 2) == 4\n\n\n"
         "def test_add_negative():\n    assert add(-1, 1) == 0\n")


def _ctx(root: Path, *args: str) -> str:
    done = run_ctx(list(args), cwd=root, timeout=120)
    assert done.returncode == 0, (args, done.stderr)
    return done.stdout


def _run_tests(root: Path) -> None:
    _ctx(root, "add", "command", "--name", "tests", "--", sys.executable, "-m", "pytest", "-q",
         "-p", "no:cacheprovider", "test_calc.py")


def _log(root: Path) -> str:
    return "".join(p.read_text() for p in sorted((root / ".ctx" / "narrative" / "log").glob("*.md")))


def _failed_then_passed(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    (root / "calc.py").write_text(CALC)
    (root / "test_calc.py").write_text(TESTS)
    _ctx(root, "init", "--no-git")
    _ctx(root, "index")
    _run_tests(root)
    (root / "calc.py").write_text(FIXED)
    # The fix has the bug's size: within the same second Python would take the bytecode cached
    # by the first run (it checks a source's size and mtime in whole seconds) and fail again.
    made = (root / "calc.py").stat().st_mtime
    os.utime(root / "calc.py", (made + 2, made + 2))
    _ctx(root, "index")
    _run_tests(root)
    return root


@pytest.mark.slow
def test_a_failing_then_passing_run_is_remembered_logged_and_packed(tmp_path: Path) -> None:
    root = _failed_then_passed(tmp_path)

    # the log says what changed, in one line
    lines = [line for line in _log(root).splitlines() if "→" in line]
    assert len(lines) == 1, _log(root)
    assert "tests: failed (2 errors in test_calc.py) → passed" in lines[0]

    # the latest run alone is what `ctx diagnostics` shows; --history keeps both, newest first
    latest = json.loads(_ctx(root, "diagnostics", "--format", "json"))
    assert [r["exit_code"] for r in latest["runs"]] == [0] and latest["diagnostics"] == []
    runs = json.loads(_ctx(root, "diagnostics", "--history", "--format", "json"))["runs"]
    assert [(r["name"], r["status"]) for r in runs] == [("tests", "passed"), ("tests", "failed")]
    failed = runs[1]
    assert failed["exit_code"] == 1 and len(failed["diagnostics"]) == 2
    assert {d["spans"][0]["path"] for d in failed["diagnostics"]} == {"test_calc.py"}
    text = _ctx(root, "diagnostics", "--history")
    assert text.index("passed") < text.index("failed")
    assert "test_add_small" in text

    # a pack about the failure shows the failing run, what followed, and its diagnostics
    pack: dict[str, Any] = json.loads(_ctx(root, "pack", "why did the tests fail initially",
                                           "--format", "json", "--budget", "4000"))
    jsonschema.validate({"version": 1, **pack}, SCHEMA)
    past = [i for i in pack["retrieved"] if i["why"].get("command_run")]
    assert len(past) == 1, [i["title"] for i in pack["retrieved"]]
    item = past[0]
    assert item["chunk_kind"] == "DiagnosticOutput"
    assert "tests failed" in item["title"] and "then passed" in item["title"]
    assert item["why"]["command_run"]["name"] == "tests"
    assert item["why"]["command_run"]["then"] == "passed"
    assert "test_add_small" in item["snippet"] and "test_calc.py" in item["snippet"]
    assert item in pack["retrieved"][:3]  # it ranks with the best of the code


@pytest.mark.slow
def test_a_task_not_about_the_failure_gets_no_past_run(tmp_path: Path) -> None:
    root = _failed_then_passed(tmp_path)
    pack = json.loads(_ctx(root, "pack", "rename the add function", "--format", "json"))
    assert not [i for i in pack["retrieved"] if i["why"].get("command_run")]
    # a task naming what the failing run reported finds it without a failure word
    named = json.loads(_ctx(root, "pack", "test_add_small test_add_negative", "--format", "json"))
    assert [i for i in named["retrieved"] if i["why"].get("command_run")]


def test_history_of_a_name_and_of_none(tmp_path: Path) -> None:
    root = tmp_path / "work"
    root.mkdir()
    _ctx(root, "init", "--no-git")
    assert "no command output stored" in _ctx(root, "diagnostics", "--history")
    assert json.loads(_ctx(root, "diagnostics", "--history", "--format", "json"))["runs"] == []
    done = run_ctx(["add", "command", "--stdin", "--name", "mypy", "--exit-code", "1"], cwd=root,
                   stdin="calc.py:2: error: Unsupported operand  [operator]\n")
    assert done.returncode == 0, done.stderr
    runs = json.loads(_ctx(root, "diagnostics", "--history", "--name", "mypy", "--format",
                           "json"))["runs"]
    assert [(r["name"], r["status"], len(r["diagnostics"])) for r in runs] == [("mypy", "failed", 1)]
    assert json.loads(_ctx(root, "diagnostics", "--history", "--name", "other", "--format",
                           "json"))["runs"] == []
    assert "Ran mypy: exit 1, 1 diagnostics; mypy: failed (1 error in calc.py)" in _log(root)


@pytest.mark.slow
def test_search_and_recall_find_the_failing_run_after_it_passed(tmp_path: Path) -> None:
    root = _failed_then_passed(tmp_path)
    for question in ("why did the tests fail", "test failures", "pytest failed"):
        found = json.loads(_ctx(root, "search", question, "--format", "json"))["results"]
        runs = [r for r in found if r["kind"] == "run"]
        assert len(runs) == 1, (question, found)  # the command's runs are one hit
        run = runs[0]["run"]
        assert (run["name"], run["status"], run["exit_code"]) == ("tests", "failed", 1), question
        # JSON times are to the second; the two runs may fall in one
        assert run["then"]["status"] == "passed" and run["then"]["run_at"] >= run["run_at"]
        assert {d["path"] for d in run["diagnostics"]} == {"test_calc.py"}
        assert any("test_add_small" in d["message"] for d in run["diagnostics"])
    text = _ctx(root, "search", "why did the tests fail")
    assert "tests failed at " in text and " → passed at " in text and "test_add_small" in text

    recalled = json.loads(_ctx(root, "recall", "why did the tests fail", "--format", "json"))
    assert [(r["kind"], r["name"], r["status"], r["then"]["status"]) for r in recalled["runs"]] \
        == [("run", "tests", "failed", "passed")]
    assert "tests failed at " in _ctx(root, "recall", "why did the tests fail")
    # asked whether they pass now, the passing run answers
    passing = json.loads(_ctx(root, "search", "did the tests pass", "--kind", "run",
                              "--format", "json"))["results"]
    assert [(r["run"]["status"], r["run"]["then"]) for r in passing] == [("passed", None)]

    # the same search across stores: --global finds the run too, labelled with its store
    wide = json.loads(_ctx(root, "search", "--global", "why did the tests fail", "--format",
                           "json"))
    assert [(r["kind"], r["store"], r["name"], r["status"], r["then"]["status"])
            for r in wide["runs"]] == [("run", "project", "tests", "failed", "passed")]
    assert "tests failed at " in _ctx(root, "search", "--global", "why did the tests fail")
    only_runs = json.loads(_ctx(root, "search", "--global", "--kind", "run", "test failures",
                                "--format", "json"))
    assert only_runs["count"] == 0 and [r["name"] for r in only_runs["runs"]] == ["tests"]
    refused = run_ctx(["search", "--global", "--kind", "chunk", "add"], cwd=root)
    assert refused.returncode != 0 and "not chunks or symbols" in refused.stderr

    # derived: a full rebuild gives the same answer, and the index verifies against a replay
    before = json.loads(_ctx(root, "search", "why did the tests fail", "--format", "json"))
    _ctx(root, "rebuild", "--full")
    assert json.loads(_ctx(root, "search", "why did the tests fail", "--format", "json")) == before
    done = run_ctx(["debug", "verify", "--index"], cwd=root, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
