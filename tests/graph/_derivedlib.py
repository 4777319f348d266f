"""Helpers of the derived-structure tests: a work tree with an import cycle, in-process CLI."""

from __future__ import annotations

import json
import os
import time
from contextlib import closing
from pathlib import Path

from click.testing import CliRunner

from ctxstore.cli import cli
from ctxstore.index import open_index
from ctxstore.init import init_store
from ctxstore.repo import open_store

# a imports b imports a (an import cycle, and f/g call each other); c imports a.
CYCLE_FILES = {
    "a.py": "import b\n\n\ndef f():\n    return b.g()\n",
    "b.py": "import a\n\n\ndef g():\n    return a.f()\n",
    "c.py": "import a\n\n\ndef parse_header(value):\n    return a.f() or value\n",
}
CODE_ROWS = {
    "files": "SELECT path, version, blob, language, byte_count, line_count, complete, note"
             " FROM files ORDER BY path",
    "symbols": "SELECT path, qualname, name, kind, start_line, end_line FROM symbols ORDER BY 1, 2, 5",
    "code_edges": "SELECT path, from_kind, from_key, to_kind, to_key, label, line FROM code_edges"
                  " ORDER BY 1, 2, 3, 4, 5, 6, 7",
    "chunks": "SELECT path, qualname, kind, start_line, end_line, text FROM chunks ORDER BY 1, 4, 3",
    "edges": "SELECT from_kind, from_key, to_kind, to_key, label FROM edges ORDER BY 1, 2, 3, 4, 5",
}


def make_cycle_repo(root: Path) -> Path:
    """A work tree with ``CYCLE_FILES`` and a store; returns the ``.ctx`` path."""
    root.mkdir(parents=True, exist_ok=True)
    init_store(root / ".ctx", git=False)
    past = time.time() - 10
    for rel, text in CYCLE_FILES.items():
        (root / rel).write_text(text)
        os.utime(root / rel, (past, past))
    return root / ".ctx"


def ctx(ctx_dir: Path, *args: str, ok: bool = True) -> tuple[str, str, int]:
    """Run the CLI in-process from the work tree; returns (stdout, stderr, exit code)."""
    old = os.getcwd()
    os.chdir(ctx_dir.parent)
    try:
        res = CliRunner().invoke(cli, ["--ctx-dir", str(ctx_dir), *args])
    finally:
        os.chdir(old)
    if ok:
        assert res.exit_code == 0, (res.output, res.stderr, res.exception)
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert "Traceback" not in res.stderr
    return res.stdout, res.stderr, res.exit_code


def ctx_json(ctx_dir: Path, *args: str) -> dict:
    out, _, _ = ctx(ctx_dir, "--format", "json", *args)
    return json.loads(out)


def indexed_and_committed(root: Path) -> Path:
    """``make_cycle_repo`` + ``ctx index`` + ``ctx commit``."""
    ctx_dir = make_cycle_repo(root)
    ctx(ctx_dir, "index")
    ctx(ctx_dir, "commit", "-m", "index the code")
    return ctx_dir


def code_rows(ctx_dir: Path) -> dict[str, list[tuple[object, ...]]]:
    """The code and edge rows of the index, synced with the store."""
    with closing(open_index(open_store(ctx_dir))) as conn:
        return {name: conn.execute(sql).fetchall() for name, sql in CODE_ROWS.items()}
