"""Progress on long work: drawn on stderr when it is a terminal, nothing in a pipe (issue 33).

``ctx rebuild``, ``ctx debug verify``, ``ctx import`` (the index catching up) and ``ctx
commit`` are checked in ``tests/cli/test_conventions.py``; here ``ctx index`` of a tree large
enough for a bar and ``ctx memory backfill`` of a transcript, through the installed CLI on a
pseudo-terminal and through a pipe.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ctxstore.repo import Store
from tests.cli.test_conventions import _on_pty
from tests.memory.test_memory_codelink import _talk


def _tree(root: Path, files: int) -> None:
    for i in range(files):
        folder = root / "src" / f"pkg{i % 10}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"mod{i}.py").write_text(f"def function_{i}(x):\n    return x + {i}\n")


def _piped(args: list[str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "ctxstore.cli", *args], capture_output=True,
                          timeout=300, stdin=subprocess.DEVNULL)


def test_progress_index_of_a_large_tree_draws_on_a_terminal_only(store: Store) -> None:
    _tree(store.worktree, 260)
    base = ["--ctx-dir", str(store.root)]
    code, tty, out = _on_pty([*base, "index"], which="stderr")
    assert code == 0 and b"260" in out, out
    assert b"indexing files" in tty and b"260/260" in tty, tty
    (store.worktree / "src" / "pkg0" / "mod0.py").write_text("def changed():\n    return 0\n")
    piped = _piped([*base, "index"])
    assert piped.returncode == 0, piped.stderr
    assert b"indexing files" not in piped.stderr and b"\r" not in piped.stderr


def test_progress_memory_backfill_draws_on_a_terminal_only(store: Store, tmp_path: Path) -> None:
    talk = _talk(tmp_path)
    base = ["--ctx-dir", str(store.root)]
    code, tty, _ = _on_pty([*base, "memory", "backfill", str(talk)], which="stderr")
    assert code == 0
    assert b"indexing transcripts" in tty, tty
    again = tmp_path / "again"
    again.mkdir()
    piped = _piped([*base, "memory", "backfill", str(_talk(again))])
    assert piped.returncode == 0, piped.stderr
    assert b"indexing transcripts" not in piped.stderr and b"\r" not in piped.stderr
