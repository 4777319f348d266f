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
