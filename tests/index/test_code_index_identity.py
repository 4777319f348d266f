"""An index made for another copy of the store is never read, and the user is told once.

``.ctx/index/code.sqlite`` is derived from this clone's work tree. One that arrives with a
copied project, or committed with ``git add -f`` and cloned, describes another tree: its
files, symbols and chunks are not this one's. It records the copy it was made for
(``code_meta`` ``clone``); the first command that opens a code index naming another copy (or,
holding rows, none) drops it and says so once, and ``ctx index`` makes it again from this
work tree. ``index.sqlite`` records its copy the same way (``meta`` ``clone``); one naming
another copy is rebuilt from the objects, with the same notice. All through the installed CLI.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

from conftest import run_ctx

NOTE = ("ctx: the code index was not made for this copy of the store ({why}); it was dropped: "
        "run `ctx index` to rebuild it")
ANOTHER = "it names another copy: it was copied or cloned in"
INDEX_NOTE = ("ctx: the index was not made for this copy of the store ({why}); "
              "rebuilt from the store")


def _ctx(work: Path, *args: str) -> tuple[str, str]:
    res = run_ctx(list(args), cwd=work)
    assert res.returncode == 0, (args, res.stdout, res.stderr)
    return res.stdout, res.stderr


def _found(work: Path, text: str) -> tuple[list[str], str]:
    """The paths ``ctx search`` finds for ``text`` (code chunks and symbols), and its stderr."""
    out, err = _ctx(work, "--format", "json", "search", text)
    return sorted({r["path"] for r in json.loads(out)["results"] if "path" in r}), err


def _project(work: Path, name: str, body: str) -> Path:
    work.mkdir(parents=True)
    (work / f"{name}.py").write_text(body)
    _ctx(work, "init")
    _ctx(work, "index")
    return work


def test_a_copied_project_drops_the_code_index_it_brought_and_ctx_index_rebuilds_it(
        tmp_path: Path) -> None:
    first = _project(tmp_path / "first", "alpha", "def alpha_greeter():\n    return 'hi'\n")
    assert _found(first, "alpha_greeter") == (["alpha.py"], "")
    copy = tmp_path / "copy"
    shutil.copytree(first, copy, symlinks=True)
    (copy / "alpha.py").unlink()  # this tree no longer has what the copied code index says
    (copy / "beta.py").write_text("def beta_helper():\n    return 2\n")
    paths, err = _found(copy, "alpha_greeter")
    assert paths == []  # never read: the other tree's alpha.py is not offered
    # Both files came with the copy: each is said once, the code index first (it is checked
    # as the index opens, before the catch-up).
    assert err.splitlines() == [NOTE.format(why=ANOTHER), INDEX_NOTE.format(why=ANOTHER)]
    assert _found(copy, "alpha_greeter") == ([], "")  # said once
    out, err = _ctx(copy, "index")
    assert err == "" and "indexed 1 file" in out
    assert _found(copy, "beta_helper") == (["beta.py"], "")
    # The original keeps its own code index, untouched by the copy.
    assert _found(first, "alpha_greeter") == (["alpha.py"], "")


def test_ctx_index_drops_a_code_index_of_another_store_with_the_note_and_rebuilds(
        tmp_path: Path) -> None:
    other = _project(tmp_path / "other", "alpha", "def alpha_greeter():\n    return 'hi'\n")
    mine = _project(tmp_path / "mine", "gamma", "def gamma_worker():\n    return 3\n")
    _ctx(other, "status")  # closed cleanly: no write-ahead log left beside the file
    shutil.copyfile(other / ".ctx" / "index" / "code.sqlite", mine / ".ctx" / "index" / "code.sqlite")
    for side in ("-wal", "-shm"):
        (mine / ".ctx" / "index" / f"code.sqlite{side}").unlink(missing_ok=True)
    out, err = _ctx(mine, "index")
    assert err.splitlines() == [NOTE.format(why=ANOTHER)]
    assert "indexed 1 file" in out
    assert _found(mine, "alpha_greeter") == ([], "")
    assert _found(mine, "gamma_worker") == (["gamma.py"], "")


def test_a_code_index_that_names_no_copy_but_holds_rows_is_dropped(tmp_path: Path) -> None:
    """An older ctx's code index, or one made by hand, is not trusted either."""
    work = _project(tmp_path / "p", "alpha", "def alpha_greeter():\n    return 'hi'\n")
    conn = sqlite3.connect(work / ".ctx" / "index" / "code.sqlite", isolation_level=None)
    conn.execute("DELETE FROM code_meta WHERE key = 'clone'")
    conn.close()
    paths, err = _found(work, "alpha_greeter")
    assert paths == []
    assert err.splitlines() == [NOTE.format(
        why="it names none: an older ctx made it, or it came from elsewhere")]
    _ctx(work, "index")
    assert _found(work, "alpha_greeter") == (["alpha.py"], "")


def _store_and_copy(tmp_path: Path) -> tuple[Path, Path]:
    """A project with a store holding one fact and no code indexed, and a copy of it."""
    first = _fact_store(tmp_path / "first")
    copy = tmp_path / "copy"
    shutil.copytree(first, copy, symlinks=True)
    return first, copy


def _fact_store(work: Path) -> Path:
    work.mkdir()
    _ctx(work, "init")
    _ctx(work, "add", "--type", "fact", "the cache is SQLite")
    return work


def test_a_copied_store_that_never_indexed_code_says_nothing(tmp_path: Path) -> None:
    """An empty code index of another copy holds nothing to distrust: no note."""
    _, copy = _store_and_copy(tmp_path)
    out, err = _ctx(copy, "list")
    assert "the cache is SQLite" in out
    assert err.splitlines() == [INDEX_NOTE.format(why=ANOTHER)]  # index.sqlite's, no code note


def test_a_copied_store_rebuilds_the_index_it_brought_and_says_so_once(tmp_path: Path) -> None:
    """``index.sqlite`` of another copy: rebuilt from this copy's objects, with the notice."""
    first, copy = _store_and_copy(tmp_path)
    # The copy's objects gain a node the copied index does not hold.
    _ctx(first, "add", "--type", "fact", "only the first copy knows this")
    out, err = _ctx(copy, "list")
    assert "the cache is SQLite" in out and "only the first copy" not in out
    assert err.splitlines() == [INDEX_NOTE.format(why=ANOTHER)]
    assert _ctx(copy, "list") == (out, "")  # said once
    out, err = _ctx(first, "list")  # the original keeps its own index, and says nothing
    assert "only the first copy knows this" in out and err == ""


def test_an_index_that_names_no_copy_is_rebuilt_with_the_notice(tmp_path: Path) -> None:
    """A synced ``index.sqlite`` with no ``clone`` row (an older ctx's, or by hand)."""
    work = _fact_store(tmp_path / "p")
    conn = sqlite3.connect(work / ".ctx" / "index" / "index.sqlite", isolation_level=None)
    conn.execute("DELETE FROM meta WHERE key = 'clone'")
    conn.close()
    out, err = _ctx(work, "list")
    assert "the cache is SQLite" in out
    assert err.splitlines() == [INDEX_NOTE.format(
        why="it names none: an older ctx made it, or it came from elsewhere")]
    assert _ctx(work, "list") == (out, "")


def test_a_partial_index_of_another_copy_is_built_again_with_the_notice(tmp_path: Path) -> None:
    """A build another copy left part way (copied mid-rebuild) is never resumed here."""
    from ctxstore.index import open_index, pointer_snapshot
    from ctxstore.index.rebuild import start_build
    from ctxstore.repo import open_store

    work = _fact_store(tmp_path / "p")
    store = open_store(work / ".ctx")
    conn = open_index(store)
    try:
        start_build(conn, pointer_snapshot(store), "1:2")  # another copy's device and inode
    finally:
        conn.close()
    out, err = _ctx(work, "list")
    assert "the cache is SQLite" in out
    assert err.splitlines() == [INDEX_NOTE.format(why=ANOTHER)]
    assert _ctx(work, "list") == (out, "")
