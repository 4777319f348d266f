"""Code ingestion on hostile trees and files: a note per file, the rest indexed (issue 34).

Item 4: a cycle of symbolic links and a file name that is not UTF-8 (Git commits both) made
``ctx index`` and ``ctx add file`` fail with an internal error and index nothing. Item 6: a work
budget per file for the extractors and linear chunking. Everything runs through the installed
CLI; the assertion is the process timeout, not a timed unit test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _bounded import run_bounded
from _ingestlib import git, make_work, write

BAD = "bad\udcff.py"  # the name b"bad\xff.py", as Python sees it (surrogateescape)


def _hostile_tree(root: Path, *, use_git: bool) -> None:
    write(root, {"good.py": "def f():\n    return 1\n", BAD: "x = 1\n"})
    os.symlink("loop_b", root / "loop_a")
    os.symlink("loop_a", root / "loop_b")
    if use_git:
        git(root, "add", "-A")  # Git takes both: a clone hands them to ctx
        git(root, "commit", "-qm", "hostile")


def _notes(doc: dict) -> dict[str, str]:
    return {n["path"]: n["note"] for n in doc["notes"]}


@pytest.mark.parametrize("use_git", [True, False], ids=["git", "plain"])
def test_index_notes_link_loops_and_undecodable_names(tmp_path: Path, use_git: bool) -> None:
    ctx_dir = make_work(tmp_path / "w", use_git=use_git)
    _hostile_tree(ctx_dir.parent, use_git=use_git)
    res = run_bounded(["--format", "json", "index"], cwd=ctx_dir.parent, seconds=60)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["written"] == ["good.py"]
    notes = _notes(doc)
    assert notes["loop_a"] == notes["loop_b"] == "symbolic link in a loop: not followed"
    assert notes["bad\\xff.py"] == "file name is not valid UTF-8: skipped"
    text = run_bounded(["index"], cwd=ctx_dir.parent, seconds=60)  # the text form prints too
    assert text.returncode == 0 and "loop_a" in text.stderr


def test_add_file_notes_link_loops_and_undecodable_names(tmp_path: Path) -> None:
    ctx_dir = make_work(tmp_path / "w", use_git=True)
    _hostile_tree(ctx_dir.parent, use_git=True)
    argv = [sys.executable, "-m", "ctxstore.cli", "--format", "json", "add", "file",
            "loop_a", os.fsencode(BAD), "good.py"]
    proc = subprocess.run(argv, cwd=ctx_dir.parent, capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert b"internal error" not in proc.stderr and b"Traceback" not in proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["written"] == ["good.py"]
    assert set(_notes(doc)) == {"loop_a", "bad\\xff.py"}


# -- item 6: a work budget per file, linear post-processing ---------------------------------
PATHOLOGICAL = {
    # before: the calls query walked a 100,000-deep chain (64-74 s for 200 KB)
    "chain.js": "f" + "()" * 100_000 + ";\n",
    # before: the calls query over an error tree, quadratic (36 s for 200,000)
    "unclosed.rs": "fn main() " + "{" * 200_000 + "\n",
    "brackets.go": "package x\n\nvar a = " + "[" * 200_000 + "\n",
    "brackets.ts": "let a = " + "[" * 200_000 + ";\n",
    # before: each section scanned every later heading for its end, and each repeated title
    # tried #2, #3, ... from the start
    "headings.md": "".join(f"{'#' * (1 + i % 6)} t{i}\n" for i in range(100_000)),  # 47 s
    "repeated.md": "# a\n" + "## same\n" * 30_000,  # 248 s
}


@pytest.mark.parametrize("name", sorted(PATHOLOGICAL))
@pytest.mark.slow
def test_index_of_a_pathological_file_is_bounded(tmp_path: Path, name: str) -> None:
    ctx_dir = make_work(tmp_path / "w")
    write(ctx_dir.parent, {name: PATHOLOGICAL[name], "ok.py": "def g():\n    return 1\n"})
    res = run_bounded(["--format", "json", "index"], cwd=ctx_dir.parent, seconds=20)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert sorted(doc["written"]) == sorted([name, "ok.py"])
    if not name.endswith(".md"):  # the first read (an outline of 100,000 takes a while)
        res = run_bounded(["--format", "json", "search", "g"], cwd=ctx_dir.parent, seconds=20)
        assert res.returncode == 0, res.stderr


@pytest.mark.slow
def test_first_read_after_indexing_many_small_functions_is_linear(tmp_path: Path) -> None:
    """30,000 one-line functions: chunking scanned every symbol for each one's children."""
    ctx_dir = make_work(tmp_path / "w")
    write(ctx_dir.parent, {"many.py": "".join(f"def f{i}(): return {i}\n" for i in range(30_000))})
    res = run_bounded(["--format", "json", "index"], cwd=ctx_dir.parent, seconds=30)
    assert res.returncode == 0, res.stderr
    res = run_bounded(["--format", "json", "search", "f12345"], cwd=ctx_dir.parent, seconds=20)
    assert res.returncode == 0, res.stderr
    assert "many.f12345" in res.stdout


def test_a_file_over_its_work_budget_is_incomplete_with_a_note(monkeypatch: pytest.MonkeyPatch) -> None:
    from ctxstore.code import _treesitter
    from ctxstore.code.languages import extractor_for

    source = "fn a() { b(); }\n" * 2_000
    whole = extractor_for("x.rs").extract("x.rs", source)
    assert whole.complete and whole.note is None and whole.relations
    monkeypatch.setattr(_treesitter, "WORK_SECONDS", 0.0)
    cut = extractor_for("x.rs").extract("x.rs", source)
    assert not cut.complete and cut.note == _treesitter.OVER_BUDGET
    again = extractor_for("x.rs").extract("x.rs", "fn a() {}\n")  # the parser was reset
    assert again.note == _treesitter.OVER_BUDGET or again.symbols


def test_markdown_outline_is_unchanged_by_the_linear_pass() -> None:
    from ctxstore.code.markdown import MarkdownExtractor

    doc = "# A\n## B\ntext\n### C\n## B\n# A\n## B #\n   # D ##\n####### no\n```\n# not\n```\n"
    got = MarkdownExtractor().extract("d.md", doc)
    assert [(s.qualname, s.span.start_line, s.span.end_line) for s in got.symbols] == [
        ("d.md#A", 1, 5), ("d.md#A/B", 2, 4), ("d.md#A/B/C", 4, 4), ("d.md#A/B#2", 5, 5),
        ("d.md#A#2", 6, 7), ("d.md#A#2/B", 7, 7), ("d.md#D", 8, 12)]


# -- item 11: detecting the tool of `ctx add command --stdin` is linear -----------------------
@pytest.mark.parametrize("output", [
    "\n" * 200_000 + "done\n",  # ruff's "^\s*\[" (re.M) scanned the rest of the run from each line
    "error: x\n" + " \n" * 100_000 + "error: y\n",
], ids=["blank-lines", "blank-runs-after-an-error"])
def test_add_command_stdin_detects_the_tool_in_linear_time(tmp_path: Path, output: str) -> None:
    ctx_dir = make_work(tmp_path / "w")
    res = run_bounded(["--format", "json", "add", "command", "--stdin", "--name", "build"],
                      cwd=ctx_dir.parent, stdin=output, seconds=20)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["tool"] in ("custom", "cargo")
