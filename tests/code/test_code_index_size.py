"""The code index stores each edge endpoint once (issue 30: the index at most 1.5x the tree).

Edges are rows of integers naming ``code_keys``, read through the ``code_edges`` view; an
endpoint no edge names any more leaves ``code_keys`` with the run that removed its last edge,
and ``ctx debug verify --index`` agrees with a re-derivation after every step.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

from conftest import run_ctx

from tests.code._ingestlib import ctx_json, make_work, write

CODE = Path("index") / "code.sqlite"


def _keys(ctx_dir: Path) -> list[tuple[str, str]]:
    with closing(sqlite3.connect(ctx_dir / CODE)) as conn:
        return sorted(conn.execute("SELECT kind, key FROM code_keys").fetchall())


def _edges(ctx_dir: Path, to_key: str) -> list[tuple[str, str, int]]:
    with closing(sqlite3.connect(ctx_dir / CODE)) as conn:
        return sorted(conn.execute("SELECT path, label, line FROM code_edges WHERE to_key = ?",
                                   (to_key,)).fetchall())


def _verify(ctx_dir: Path) -> None:
    r = run_ctx(["--ctx-dir", str(ctx_dir), "--format", "json", "debug", "verify", "--index"],
                cwd=ctx_dir.parent)
    assert r.returncode == 0, r.stdout + r.stderr
    assert [p for p in json.loads(r.stdout)["problems"] if p["severity"] == "error"] == []


def test_an_endpoint_is_stored_once_and_leaves_with_its_last_edge(tmp_path: Path) -> None:
    ctx_dir = make_work(tmp_path / "w")
    root = ctx_dir.parent
    write(root, {
        "pkg/__init__.py": "",
        "pkg/util.py": "def shared_helper():\n    return 1\n",
        "pkg/a.py": "from pkg.util import shared_helper\n\n\ndef a():\n    return shared_helper()\n",
        "pkg/b.py": "from pkg.util import shared_helper\n\n\n\ndef b():\n    return shared_helper()\n",
    })
    ctx_json(ctx_dir, "index")
    keys = _keys(ctx_dir)
    assert len(keys) == len(set(keys))  # each (kind, key) once
    assert ("item", "pkg.util.shared_helper") in keys
    calls = [e for e in _edges(ctx_dir, "pkg.util.shared_helper") if e[1] == "Calls"]
    assert calls == [("pkg/a.py", "Calls", 5), ("pkg/b.py", "Calls", 6)]  # the line of each
    _verify(ctx_dir)
    # b.py no longer calls it: a.py still does, the key stays.
    write(root, {"pkg/b.py": "def b():\n    return 2\n"})
    ctx_json(ctx_dir, "index")
    assert [e for e in _edges(ctx_dir, "pkg.util.shared_helper") if e[1] == "Calls"] == [
        ("pkg/a.py", "Calls", 5)]
    assert ("item", "pkg.b.b") in _keys(ctx_dir)
    _verify(ctx_dir)
    # a.py and b.py go: every key only their edges named goes with them.
    (root / "pkg" / "a.py").unlink()
    (root / "pkg" / "b.py").unlink()
    ctx_json(ctx_dir, "index")
    keys = _keys(ctx_dir)
    assert not [k for k in keys if k[1].startswith(("pkg.a", "pkg.b")) or k[1].endswith(("a.py", "b.py"))]
    assert ("item", "pkg.util.shared_helper") in keys  # util.py defines it: its own edge
    with closing(sqlite3.connect(ctx_dir / CODE)) as conn:
        named = {k for (k,) in conn.execute(
            "SELECT key FROM code_keys k WHERE EXISTS (SELECT 1 FROM code_edge_rows e"
            " WHERE e.src = k.id OR e.dst = k.id) OR EXISTS (SELECT 1 FROM symbol_rows s"
            " WHERE s.qualname = k.id)")}
    assert named == {k for _, k in keys}
    _verify(ctx_dir)


def test_a_term_is_stored_once_and_leaves_with_its_last_posting(tmp_path: Path) -> None:
    """The ranking postings name each term by an id (code schema 7), kept while a file uses it."""
    ctx_dir = make_work(tmp_path / "w")
    root = ctx_dir.parent
    write(root, {"pkg/a.py": "def zebrafish():\n    return quokka\n",
                 "pkg/b.py": "def zebrafish_b():\n    return quokka\n"})
    ctx_json(ctx_dir, "index")

    def terms() -> dict[str, int]:
        with closing(sqlite3.connect(ctx_dir / CODE)) as conn:
            rows = conn.execute("SELECT term, count(*) FROM terms GROUP BY term").fetchall()
            assert [r for r in rows if r[1] != 1] == []  # each term once
            return dict(conn.execute(
                "SELECT t.term, count(*) FROM terms t JOIN file_term_rows r ON r.term = t.id"
                " WHERE r.field = 0 GROUP BY t.term").fetchall())

    held = terms()
    assert held["quokka"] == 2 and held["zebrafish"] >= 1
    _verify(ctx_dir)
    write(root, {"pkg/a.py": "def other():\n    return 1\n"})
    ctx_json(ctx_dir, "index")
    held = terms()
    assert held["quokka"] == 1
    (root / "pkg" / "b.py").unlink()
    ctx_json(ctx_dir, "index")
    with closing(sqlite3.connect(ctx_dir / CODE)) as conn:
        left = {t for (t,) in conn.execute("SELECT term FROM terms")}
    assert "quokka" not in left and not any(t.startswith("zebrafish") for t in left)
    assert "other" in left
    _verify(ctx_dir)


def test_ctx_index_rebuilds_a_code_index_of_an_older_schema(tmp_path: Path) -> None:
    """After an upgrade, ``ctx index`` drops the older code index and makes it again.

    It used to stop with E006 after the lock timeout: the drop waited for the code index's
    lock, which the same ``ctx index`` already held.
    """
    ctx_dir = make_work(tmp_path / "w")
    write(ctx_dir.parent, {"pkg/util.py": "def shared_helper():\n    return 1\n"})
    ctx_json(ctx_dir, "index")
    with closing(sqlite3.connect(ctx_dir / CODE)) as conn:
        conn.execute("PRAGMA user_version = 1")
    r = run_ctx(["--ctx-dir", str(ctx_dir), "--format", "json", "index"], cwd=ctx_dir.parent,
                timeout=30)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["written"] == ["pkg/util.py"]
    assert "older" in r.stderr or "rebuilt" in r.stderr or "code schema version 1" in r.stderr
    assert ("item", "pkg.util.shared_helper") in _keys(ctx_dir)
    _verify(ctx_dir)


def test_a_symbol_names_its_qualified_name_by_its_endpoint(tmp_path: Path) -> None:
    """A symbol's qualified name is its endpoint's ``code_keys`` row (code schema 9), its parent
    a prefix of it: the ``symbols`` view reads them back as written, and a re-index keeps them
    right."""
    ctx_dir = make_work(tmp_path / "w")
    root = ctx_dir.parent
    write(root, {"pkg/__init__.py": "",
                 "pkg/shapes.py": "class Square:\n    def area(self):\n        return 4\n"})
    ctx_json(ctx_dir, "index")

    def symbols() -> list[tuple[str, str, str | None]]:
        with closing(sqlite3.connect(ctx_dir / CODE)) as conn:
            texts = [k for (k,) in conn.execute("SELECT key FROM code_keys")]
            assert len(texts) == len(set(texts))  # each qualified name's text once
            return sorted(conn.execute("SELECT s.qualname, s.kind, s.parent FROM symbols s"
                                       " WHERE s.path = 'pkg/shapes.py'").fetchall())

    assert symbols() == [("pkg.shapes", "module", None),
                         ("pkg.shapes.Square", "class", "pkg.shapes"),
                         ("pkg.shapes.Square.area", "method", "pkg.shapes.Square")]
    _verify(ctx_dir)
    write(root, {"pkg/shapes.py": "class Circle:\n    def area(self):\n        return 3\n"})
    ctx_json(ctx_dir, "index")
    assert symbols() == [("pkg.shapes", "module", None),
                         ("pkg.shapes.Circle", "class", "pkg.shapes"),
                         ("pkg.shapes.Circle.area", "method", "pkg.shapes.Circle")]
    assert not [k for k in _keys(ctx_dir) if "Square" in k[1]]  # gone with its symbol
    _verify(ctx_dir)


def test_a_damaged_term_list_is_named_and_the_next_index_mends_it(tmp_path: Path) -> None:
    """A file's postings are deleted through its term list (code schema 8): one that does not
    decompress fails the run with E007 naming the code index, and the next ``ctx index`` drops
    the code index and makes it again, with the file's new postings only."""
    ctx_dir = make_work(tmp_path / "w")
    root = ctx_dir.parent
    write(root, {"a.py": "def zebrafish():\n    return 1\n"})
    ctx_json(ctx_dir, "index")
    with closing(sqlite3.connect(ctx_dir / CODE)) as conn:
        conn.execute("UPDATE file_postings SET data = x'789c00ff'")
        conn.commit()
    write(root, {"a.py": "def quokka():\n    return 2\n"})
    argv = ["--ctx-dir", str(ctx_dir), "index"]
    res = run_ctx(argv, cwd=root)
    assert res.returncode != 0 and "Traceback" not in res.stderr
    assert "error[E007]" in res.stderr and "the postings of a.py are unreadable" in res.stderr
    again = run_ctx(argv, cwd=root)
    assert again.returncode == 0, again.stderr
    assert "the code index was damaged" in again.stderr
    with closing(sqlite3.connect(ctx_dir / CODE)) as conn:
        held = {t for (t,) in conn.execute("SELECT term FROM file_terms WHERE field = 0")}
    assert "quokka" in held and "zebrafish" not in held
    _verify(ctx_dir)


def test_tantivys_copy_reads_each_files_postings_from_its_term_list(tmp_path: Path) -> None:
    """``search.rows.file_terms_of`` (what Tantivy copies) gives each file's postings as the
    postings hold them; a damaged list is E007 naming the code index, marked for dropping."""
    from ctxstore.errors import IndexCorrupt
    from ctxstore.index import open_index
    from ctxstore.repo import open_store
    from ctxstore.search.rows import file_terms_of

    ctx_dir = make_work(tmp_path / "w")
    write(ctx_dir.parent, {"pkg/zoo.py": "def zebrafish():\n    return zebrafish_count + 1\n"})
    ctx_json(ctx_dir, "index")
    with closing(open_index(open_store(ctx_dir))) as conn:
        (file_id,) = conn.execute("SELECT rowid FROM files WHERE path = 'pkg/zoo.py'").fetchone()
        want: tuple[list[str], list[str]] = ([], [])
        for term, field, tf in conn.execute(
                "SELECT term, field, tf FROM file_terms WHERE file = ?", (file_id,)):
            want[field].extend([term] * tf)
        got = file_terms_of(conn, [file_id])[file_id]
        assert (sorted(got[0]), sorted(got[1])) == (sorted(want[0]), sorted(want[1]))
        assert got[0].count("zebrafish") == 2 and "zoo" in got[1]
        conn.execute("UPDATE file_postings SET data = x'0000'")
        try:
            file_terms_of(conn, [file_id])
        except IndexCorrupt as exc:
            assert exc.in_code_index and "term list" in str(exc)
        else:
            raise AssertionError("a damaged term list was read")
    assert (ctx_dir / "index" / "code.sqlite-damaged").is_file()


def _debug_index(ctx_dir: Path, key: str) -> dict[str, object]:
    r = run_ctx(["--ctx-dir", str(ctx_dir), "--format", "json", "debug", "index", key],
                cwd=ctx_dir.parent)
    assert r.returncode == 0, r.stderr
    return dict(json.loads(r.stdout))


def test_a_key_is_found_by_the_hash_of_its_text_and_then_its_text(tmp_path: Path) -> None:
    """``code_keys`` has no index on the key's text (code schema 11): a reader finds a key by
    a 64-bit hash of it and compares the text, so two keys sharing a hash are told apart."""
    from ctxstore.index.codedb import key_hash

    ctx_dir = make_work(tmp_path / "w")
    write(ctx_dir.parent, {
        "pkg/__init__.py": "",
        "pkg/util.py": "def shared_helper():\n    return 1\n",
        "pkg/a.py": "from pkg.util import shared_helper\n\n\ndef a():\n    return shared_helper()\n",
    })
    ctx_json(ctx_dir, "index")
    with closing(sqlite3.connect(ctx_dir / CODE)) as conn:
        rows = conn.execute("SELECT key, hash FROM code_keys").fetchall()
        assert rows and all(h == key_hash(k) for k, h in rows)
        assert [n for (n,) in conn.execute(
            "SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'code_keys'")] == [
            "code_keys_hash"]
    before = _debug_index(ctx_dir, "pkg.util.shared_helper")
    backward = before["adjacency"]["backward"]  # type: ignore[index]
    assert {(e["label"], e["key"]) for e in backward} >= {("Calls", "pkg.a.a"),
                                                           ("Imports", "pkg.a")}
    assert [s["qualname"] for s in before["stable_key_index"]] == [  # type: ignore[union-attr]
        "pkg.util.shared_helper"]
    # Another key given the same hash (a collision, forged): the answers stay the same.
    with closing(sqlite3.connect(ctx_dir / CODE)) as conn:
        conn.execute("UPDATE code_keys SET hash = ? WHERE key = 'pkg.a.a'",
                     (key_hash("pkg.util.shared_helper"),))
        conn.commit()
    assert _debug_index(ctx_dir, "pkg.util.shared_helper") == before
    # ... and ``ctx debug verify --index`` names the key whose hash is not its text's.
    r = run_ctx(["--ctx-dir", str(ctx_dir), "--format", "json", "debug", "verify", "--index"],
                cwd=ctx_dir.parent)
    assert "item:pkg.a.a: its hash is not its text's" in r.stdout, r.stdout


def test_a_chunk_names_its_qualified_name_by_its_files_symbol(tmp_path: Path) -> None:
    """A chunk's qualified name is its file's symbol's (``chunk_rows.symbol``, code schema
    12), not a copy of the text; ``chunks`` reads it back, and after a re-index too."""
    ctx_dir = make_work(tmp_path / "w")
    root = ctx_dir.parent
    write(root, {"pkg/__init__.py": "",
                 "pkg/shapes.py": "class Square:\n    def area(self):\n        return 4\n\n\n"
                                  "def make():\n    return Square()\n"})
    ctx_json(ctx_dir, "index")

    def chunks() -> list[tuple[str | None, str]]:
        from ctxstore.index.codedb import register_functions

        with closing(sqlite3.connect(ctx_dir / CODE)) as conn:
            register_functions(conn)
            assert conn.execute("SELECT count(*) FROM chunk_rows WHERE qualname IS NOT NULL"
                                ).fetchone() == (0,)  # every name is a symbol's
            return sorted(conn.execute("SELECT qualname, kind FROM chunks"
                                       " WHERE path = 'pkg/shapes.py'").fetchall(), key=str)

    got = chunks()
    assert ("pkg.shapes.make", "function") in got and any(q == "pkg.shapes.Square" for q, _ in got)
    _verify(ctx_dir)
    write(root, {"pkg/shapes.py": "def build():\n    return 3\n"})
    ctx_json(ctx_dir, "index")
    got = chunks()
    assert ("pkg.shapes.build", "function") in got
    assert not any(q and ("Square" in q or "make" in q) for q, _ in got)
    r = run_ctx(["--ctx-dir", str(ctx_dir), "--format", "json", "search", "build", "--kind", "chunk"],
                cwd=root)
    assert r.returncode == 0, r.stderr
    assert "pkg.shapes.build" in r.stdout
    _verify(ctx_dir)


def test_the_import_graph_finds_a_files_importers_by_the_hash_of_its_path(tmp_path: Path) -> None:
    """``import_edges`` asks which files import the given ones (a pack's neighbours): the
    imported file is an endpoint found by its path's hash and then its text (code schema 11),
    not by a scan of every edge, and a key sharing the hash is not taken for it."""
    from ctxstore.index import open_index
    from ctxstore.index.codedb import key_hash
    from ctxstore.index.retrieval import import_edges
    from ctxstore.repo import open_store

    ctx_dir = make_work(tmp_path / "w")
    write(ctx_dir.parent, {"pkg/__init__.py": "", "pkg/util.py": "def f():\n    return 1\n",
                           "pkg/a.py": "import pkg.util\n\n\ndef a():\n    return pkg.util.f()\n",
                           "pkg/b.py": "def b():\n    return 2\n"})
    ctx_json(ctx_dir, "index")
    with closing(open_index(open_store(ctx_dir))) as conn:
        assert conn.execute("SELECT count(*) FROM code_edges WHERE to_kind = 'file'"
                            " AND to_key = 'pkg/util.py'").fetchone()[0] >= 1
        assert import_edges(conn, ["pkg/util.py"]) == [("pkg/a.py", "pkg/util.py")]
        assert import_edges(conn, ["pkg/b.py"]) == []
    with closing(sqlite3.connect(ctx_dir / CODE)) as code:
        code.execute("UPDATE code_keys SET hash = ? WHERE kind = 'file' AND key = 'pkg/a.py'",
                     (key_hash("pkg/util.py"),))
        code.commit()
    with closing(open_index(open_store(ctx_dir))) as conn:
        assert import_edges(conn, ["pkg/util.py"]) == [("pkg/a.py", "pkg/util.py")]
