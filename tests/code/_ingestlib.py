"""Helpers of the code-ingestion tests: a work tree with a store, files, index dumps."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import time
from contextlib import closing
from pathlib import Path

from click.testing import CliRunner

from ctxstore.cli import cli
from ctxstore.index import open_index
from ctxstore.init import init_store
from ctxstore.repo import open_store

CODE_TABLES_SQL = {
    # stamp: when this clone indexed the file (the code index is derived, per clone)
    "files": "SELECT path, version, blob, language, byte_count, line_count, complete, note"
             " FROM files ORDER BY path",
    "symbols": "SELECT path, qualname, name, kind, visibility, parent, signature, start_byte,"
               " end_byte, start_line, end_line FROM symbols ORDER BY path, qualname, start_byte",
    "code_edges": "SELECT path, from_kind, from_key, to_kind, to_key, label, confidence, tool,"
                  " line FROM code_edges ORDER BY 1, 2, 3, 4, 5, 6, 9",
    "chunks": "SELECT path, qualname, kind, start_line, end_line, tokens, text FROM chunks"
              " ORDER BY path, start_line, kind",
    "edges": "SELECT from_kind, from_key, to_kind, to_key, label, evidence FROM edges ORDER BY 1, 2, 3, 4, 5",
}


def git(repo: Path, *args: str) -> str:
    res = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    return res.stdout


def make_work(root: Path, *, use_git: bool = False) -> Path:
    """A work tree at ``root`` with a store in ``root/.ctx``; returns the .ctx path."""
    root.mkdir(parents=True, exist_ok=True)
    if use_git:
        git(root, "init", "-q", "-b", "main")
        git(root, "config", "commit.gpgsign", "false")
    init_store(root / ".ctx", git=False)
    return root / ".ctx"


def write(root: Path, files: dict[str, str | bytes]) -> None:
    """Write files and date them 10 s back (a run caches only settled modification times)."""
    past = time.time() - 10
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode() if isinstance(content, str) else content)
        os.utime(path, (past, past))


def ctx(ctx_dir: Path, *args: str, ok: bool = True, input: str | None = None
        ) -> tuple[str, str, int]:
    """Run the CLI in-process from the work tree; returns (stdout, stderr, exit code)."""
    old = os.getcwd()
    os.chdir(ctx_dir.parent)
    try:
        res = CliRunner().invoke(cli, ["--ctx-dir", str(ctx_dir), *args], input=input)
    finally:
        os.chdir(old)
    if ok:
        assert res.exit_code == 0, (res.output, res.stderr, res.exception)
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res.stdout, res.stderr, res.exit_code


def ctx_json(ctx_dir: Path, *args: str) -> dict:
    out, _, _ = ctx(ctx_dir, "--format", "json", *args)
    return json.loads(out)


def dump(ctx_dir: Path) -> dict[str, list[tuple[object, ...]]]:
    """The code rows of the index (and knowledge edges), synced with the store."""
    store = open_store(ctx_dir)
    with closing(open_index(store)) as conn:
        return {name: conn.execute(sql).fetchall() for name, sql in CODE_TABLES_SQL.items()}


def query(ctx_dir: Path, sql: str, *args: object) -> list[tuple[object, ...]]:
    store = open_store(ctx_dir)
    with closing(open_index(store)) as conn:
        assert isinstance(conn, sqlite3.Connection)
        return conn.execute(sql, args).fetchall()


def tree_snapshot(root: Path) -> dict[str, bytes]:
    """Every file outside .ctx/ (nothing may be written there)."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if rel.split("/")[0] in (".ctx", ".git") or path.is_symlink() or not path.is_file():
            continue
        out[rel] = path.read_bytes()
    return out
