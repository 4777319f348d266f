"""Each E007 names the command that repairs what is damaged (docs/errors.md).

The index has two files: ``index.sqlite``, rebuilt from the objects by ``ctx rebuild``, and
this clone's ``code.sqlite``, which ``ctx rebuild --full`` leaves as it is and ``ctx index``
makes again from the work tree. Damage a query meets in the middle of a command (the open's
checks do not read every page) is told apart by file: the error's hint, the damage marker
left for the next command, and the repair that follows. Through the installed CLI. (The main
index's side: ``tests/index/test_index_damage.py``, mid-command corruption.)
"""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import run_ctx

from ctxstore.cli.root import cli

CODE = Path("index") / "code.sqlite"


def _ctx(work: Path, *args: str, code: int = 0) -> tuple[str, str]:
    res = run_ctx(list(args), cwd=work)
    assert res.returncode == code, (args, res.stdout, res.stderr)
    return res.stdout, res.stderr


def _paths(out: str) -> list[str]:
    return sorted({r["path"] for r in json.loads(out)["results"] if "path" in r})


def _garbage_table(path: Path, table: str) -> None:
    """Overwrite the root page of ``table`` (the file checkpointed first: no WAL left)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page = conn.execute("SELECT rootpage FROM sqlite_schema WHERE name = ?", (table,)).fetchone()[0]
    size = conn.execute("PRAGMA page_size").fetchone()[0]
    conn.close()
    with path.open("r+b") as fh:
        fh.seek((page - 1) * size)
        fh.write(random.Random(7).randbytes(size))


def test_damage_met_in_the_code_index_names_ctx_index_and_ctx_index_repairs_it(
        tmp_path: Path) -> None:
    work = tmp_path / "p"
    work.mkdir()
    (work / "alpha.py").write_text("def alpha_greeter():\n    return 'hi'\n")
    _ctx(work, "init")
    _ctx(work, "index")
    assert _paths(_ctx(work, "--format", "json", "search", "alpha_greeter")[0]) == ["alpha.py"]
    _garbage_table(work / ".ctx" / CODE, "chunk_rows")
    out, err = _ctx(work, "--format", "json", "search", "alpha_greeter", code=1)
    assert out == ""
    assert err.splitlines() == [
        "ctx: error[E007]: the code index is corrupt: database disk image is malformed (the next "
        "command drops it) (hint: run `ctx index`, which makes the code index again)"]
    assert (work / ".ctx" / "index" / "code.sqlite-damaged").is_file()
    assert not (work / ".ctx" / "index" / "index.sqlite-damaged").exists()  # not the main index
    out, err = _ctx(work, "--format", "json", "search", "alpha_greeter")
    assert err.splitlines() == ["ctx: the code index was damaged (database disk image is malformed);"
                                " it was dropped: run `ctx index` to rebuild it"]
    assert _paths(out) == []
    _ctx(work, "index")
    out, err = _ctx(work, "--format", "json", "search", "alpha_greeter")
    assert (_paths(out), err) == (["alpha.py"], "")


def test_a_code_index_damaged_again_right_after_it_was_made_names_ctx_index(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A disk that damages the code index as soon as it is made (simulated: its check always
    finds damage): the error names the code index and ``ctx index``, and the main index,
    which is sound, is not rebuilt for it."""
    from ctxstore.index import codedb

    work = tmp_path / "p"
    work.mkdir()
    _ctx(work, "init")
    _ctx(work, "add", "--type", "fact", "cache in SQLite")
    index_file = work / ".ctx" / "index" / "index.sqlite"
    before = index_file.stat().st_ino
    monkeypatch.setattr(codedb, "inspect_code", lambda conn, create=True: "a page is unreadable")
    res = CliRunner().invoke(cli, ["--ctx-dir", str(work / ".ctx"), "list"])
    assert res.exit_code == 1 and res.stdout == ""
    assert res.stderr.splitlines() == [
        "ctx: error[E007]: the code index is corrupt: a page is unreadable, right after making it "
        "again (is the disk failing?) (hint: run `ctx index`, which makes the code index again)"]
    assert index_file.stat().st_ino == before  # the main index was not dropped for it
