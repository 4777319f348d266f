"""Glob matching in time linear in the path (issue 34 item 2), through the installed CLI.

A committed ``[ingestion] ignore_globs`` or ``.gitignore`` is untrusted: ``*a*a*a...b`` made
Python's backtracking ``re`` take minutes on one 60-character name (146 s for 40 characters
and 12 stars), so ``ctx index`` never finished. The bound is the process timeout.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from _bounded import run_bounded
from _ingestlib import git, make_work, write

from ctxstore.code.walk import GlobSet, glob_source

EVIL = "*a" * 14 + "*b"
LONG = "a" * 60 + ".py"  # no "b": every way of placing the stars is tried, and fails
CAUGHT = "a" * 20 + "b"  # matches: the glob still works


def _set_globs(ctx_dir: Path, globs: list[str]) -> None:
    config = ctx_dir / "config.toml"
    text = config.read_text(encoding="utf-8")
    text = re.sub(r"(?m)^ignore_globs = .*$", "ignore_globs = " + json.dumps(globs), text)
    config.write_text(text, encoding="utf-8")


@pytest.mark.parametrize("use_git", [True, False], ids=["git", "plain"])
def test_index_with_a_pathological_ignore_glob_finishes(tmp_path: Path, use_git: bool) -> None:
    ctx_dir = make_work(tmp_path / "w", use_git=use_git)
    _set_globs(ctx_dir, [EVIL, "target/**"])
    write(ctx_dir.parent, {LONG: "x = 1\n", CAUGHT: "y\n", "keep.py": "def f():\n    pass\n",
                           "target/out.py": "z = 2\n"})
    res = run_bounded(["--format", "json", "index"], cwd=ctx_dir.parent, seconds=20)
    assert res.returncode == 0, res.stderr
    assert sorted(json.loads(res.stdout)["written"]) == sorted([LONG, "keep.py"])


def test_gitignore_outside_git_with_a_pathological_pattern_finishes(tmp_path: Path) -> None:
    ctx_dir = make_work(tmp_path / "w")
    write(ctx_dir.parent, {".gitignore": f"{EVIL}\n!keep*\nsub/\n", LONG: "x = 1\n",
                           "d/" + LONG: "x = 1\n", CAUGHT: "y\n", "keep.py": "k = 1\n",
                           "sub/x.py": "s = 1\n", "d/sub/y.py": "s = 1\n"})
    res = run_bounded(["--format", "json", "index"], cwd=ctx_dir.parent, seconds=20)
    assert res.returncode == 0, res.stderr
    assert sorted(json.loads(res.stdout)["written"]) == sorted(
        [".gitignore", LONG, "d/" + LONG, "keep.py"])


def test_walk_reads_a_gitignore_as_git_does(tmp_path: Path) -> None:
    """Outside Git, the walk's reading of a .gitignore gives the files Git lists in a work tree."""
    tree = {".gitignore": "*.log\n!keep.log\nbuild/\n/top.txt\ndoc/**/gen\n*.t?t\n!x/*.txt\n",
            "a.log": "", "keep.log": "", "x/b.log": "", "build/o.py": "", "x/build/p.py": "",
            "top.txt": "", "x/top.txt": "", "doc/gen": "", "doc/a/b/gen": "", "doc/a/gen.py": "",
            "src/m.py": "", "src/n.tzt": ""}
    found = {}
    for use_git in (True, False):
        ctx_dir = make_work(tmp_path / str(use_git), use_git=use_git)
        write(ctx_dir.parent, tree)
        res = run_bounded(["--format", "json", "index"], cwd=ctx_dir.parent, seconds=30)
        assert res.returncode == 0, res.stderr
        found[use_git] = sorted(json.loads(res.stdout)["written"])
    listed = git(tmp_path / "True", "ls-files", "-co", "--exclude-standard").split()
    assert found[True] == sorted(p for p in listed if not p.startswith(".ctx/"))
    assert found[False] == found[True]


def test_glob_set_semantics() -> None:
    globs = GlobSet(["target/**", "*.min.js", "docs/*.md", "**/gen/*.py", "a?c", "q**z"])
    assert globs.last("target/a/b.rs") == 0 and globs.last("crates/target/a.rs") is None
    assert globs.last("web/x/app.min.js") == 1
    assert globs.last("docs/a.md") == 2 and globs.last("docs/sub/a.md") is None
    assert globs.last("a/b/gen/x.py") == 3 and globs.last("gen/x.py") == 3
    assert globs.last("q/abc") == 4 and globs.last("a/c") is None
    assert globs.last("q/w/z") == 5
    # literal metacharacters of RE2 and Python are literal in a glob
    odd = GlobSet(["a+(b)|[c].{2}$^\\"])
    assert odd.any("a+(b)|[c].{2}$^\\") and not odd.any("aa(b)")
    # a name that is not UTF-8 (bytes kept by surrogateescape): "?" is one byte
    assert GlobSet(["bad?.py"]).any("bad\udcff.py") and GlobSet(["*.py"]).any("x/\udcff.py")
    assert "\\x{2e}" in glob_source("*.py")
    # a glob RE2 refuses, or one too long, matches nothing and spoils nothing
    assert GlobSet(["x" * 10_000, "*.py"]).any("a.py")
    assert not GlobSet(["x" * 10_000]).any("x" * 10_000)
