"""``ctx debug verify --index`` over the code and build tables, the SCC view, and ``ctx
debug verify`` over code and build objects.

One project is built once (two Python files with semantics, a recorded Cargo workspace
through ``ctx add cargo --metadata``, a command run from stdin, a committed node, the SCC
view); each test tampers a copy directly, with sqlite3 or on the object files, and checks
the exact problem lines: corruption is detected and named (table and key), never ignored.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from conftest import adopt_index, run_ctx, store_digest

from ctxstore.cli.root import cli
from ctxstore.index.chunks import pack_text
from ctxstore.index.codedb import key_hash
from ctxstore.index.compare import (
    CODE_TABLES,
    MAX_PER_TABLE,
    REACHED_TABLES,
    STRICT_TABLES,
    compared_tables,
)
from ctxstore.index.schema import expected_schema
from ctxstore.objects import ObjectId
from ctxstore.repo import open_store

FIXTURES = Path(__file__).resolve().parent.parent / "code" / "fixtures" / "build"
INDEX = Path("index") / "index.sqlite"
CODE = Path("index") / "code.sqlite"  # this clone's code index (derived from the work tree)
A_PY = '''"""Module a."""
import os

from pkg.b import helper


class Greeter:
    """Greets."""

    def hello(self, name: str) -> str:
        return helper(name)


def main() -> None:
    print(Greeter().hello(os.getcwd()))
'''
B_PY = 'def helper(name: str) -> str:\n    return "hi " + name\n'
MYPY = "pkg/a.py:11: error: Returning Any  [no-any-return]\npkg/b.py:2: note: hello\n"


def _run(root: Path, *args: str, input: str | None = None) -> Result:
    old = os.getcwd()
    os.chdir(root.parent)  # `ctx add file` paths are relative to the work tree
    try:
        return CliRunner().invoke(cli, ["--ctx-dir", str(root), *args], input=input)
    finally:
        os.chdir(old)


def _ok(root: Path, *args: str, input: str | None = None) -> str:
    r = _run(root, *args, input=input)
    assert r.exit_code == 0, (args, r.output, r.stderr)
    return r.stdout


def _add_mypy(root: Path) -> None:
    res = run_ctx(["--ctx-dir", str(root), "add", "command", "--stdin", "--name", "mypy",
                   "--exit-code", "1"], cwd=root.parent, stdin=MYPY)  # a real stdin: a subprocess
    assert res.returncode == 0, res.stderr


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The project, its index synced and closed (no WAL), its SCC view current."""
    from ctxstore.init import init_store

    work = tmp_path_factory.mktemp("tpl") / "work"
    (work / "pkg").mkdir(parents=True)
    (work / "pkg" / "a.py").write_text(A_PY)
    (work / "pkg" / "b.py").write_text(B_PY)
    past = 1_700_000_000
    for name in ("a.py", "b.py"):
        os.utime(work / "pkg" / name, (past, past))
    root = work / ".ctx"
    init_store(root, git=False)
    ids: dict[str, str] = {}
    _ok(root, "add", "--type", "fact", "pkg/b.py holds the helper")
    _ok(root, "add", "file", "pkg/a.py", "pkg/b.py", "--extract-semantics")
    doc = json.loads(_ok(root, "--format", "json", "add", "cargo", "--metadata",
                         str(FIXTURES / "cargo_metadata_edge_cases.json")))
    ids["cargo"] = doc["snapshot"]
    _ok(root, "commit", "-m", "code")
    _add_mypy(root)  # staged
    _ok(root, "debug", "graph", "--scc")  # syncs the index and stores the view
    code = sqlite3.connect(root / CODE)
    for path, version, blob in code.execute("SELECT path, version, blob FROM files"):
        ids[f"version:{path}"], ids[f"blob:{path}"] = version.hex(), blob.hex()
    code.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    code.close()
    conn = sqlite3.connect(root / INDEX)
    ids["diagnostics"], ids["output"] = (v.hex() for v in conn.execute(
        "SELECT snapshot, output_blob FROM command_runs WHERE name = 'mypy'").fetchone())
    gc.collect()  # in-process commands leave connections for the collector to close
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return root, ids


def _copy(template: Path, dest: Path) -> Path:
    """A copy of the template whose index files stand for the copy's own (``adopt_index``)."""
    shutil.copytree(template.parent, dest / "work", symlinks=True)
    adopt_index(dest / "work" / ".ctx")
    return dest / "work" / ".ctx"


_CODE_WORDS = (" symbols", " chunks", "chunks_fts", " code_edges", " files", "file_terms",
               "file_lengths", "term_df", "corpus_cache", " code_keys", " code_edge_rows",
               " code_edge_kinds", "file_term_rows", " terms", "term_df_rows",
               " chunk_rows", " file_text", " symbol_rows", "file_postings")


def _sql(root: Path, *statements: str) -> None:
    """Run statements on the index file their tables live in (the code index or the other)."""
    db = CODE if any(w in statements[0] for w in _CODE_WORDS) else INDEX
    conn = sqlite3.connect(root / db, isolation_level=None)
    for s in statements:
        conn.execute(s)
    conn.close()


def _problems(r: Result) -> list[str]:
    return [ln for ln in r.stdout.splitlines() if ln.startswith(("error ", "warning "))]


# -- a clean index -----------------------------------------------------------------------------
def test_index_compare_covers_every_table_of_the_schema() -> None:
    from ctxstore.index.codedb import expected_code_schema

    tables = {name for kind, name, _, _ in expected_schema() | expected_code_schema()
              if kind == "table"}
    shadows = {t for t in tables if t.startswith(("nodes_fts_", "chunks_fts_", "runs_fts_"))}
    assert compared_tables() == tables - shadows - {"meta"}


def test_index_compare_clean_index_reports_nothing(
        template: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    root = _copy(template[0], tmp_path)
    r = _run(root, "debug", "verify", "--index")
    assert r.exit_code == 0, r.output
    assert _problems(r) == []
    doc = json.loads(_ok(root, "--format", "json", "debug", "verify", "--index"))
    assert doc["ok"] and doc["problems"] == []
    assert doc["index"]["tables"] == len(STRICT_TABLES) + len(REACHED_TABLES) + len(CODE_TABLES)
    conn = sqlite3.connect(root / INDEX)
    conn.execute("ATTACH DATABASE ? AS code", (str(root / CODE),))
    counts = conn.execute(
        "SELECT (SELECT count(*) FROM symbols), (SELECT count(*) FROM chunk_rows),"
        " (SELECT count(*) FROM packages), (SELECT count(*) FROM diagnostics),"
        " (SELECT count(*) FROM build_edges WHERE path = 'cmd:mypy')").fetchone()
    assert counts == (6, 4, 3, 2, 4)  # the fixture fills every kind of row


# -- tampered tables -------------------------------------------------------------------------
B_ID = "(SELECT rowid FROM files WHERE path = 'pkg/b.py')"
A_ID = "(SELECT rowid FROM files WHERE path = 'pkg/a.py')"
# the same size: a text of another size is refused whole (unreadable, as damage is)
FORGED_A_PY = A_PY.replace("print(Greeter().hello(os.getcwd()))", "forged('of the very same length!!')")
TAMPER: dict[str, tuple[str, list[str]]] = {
    "symbol-span": (
        "UPDATE symbol_rows SET start_line = 3, end_byte = 7 WHERE qualname ="
        " (SELECT id FROM code_keys WHERE key = 'pkg.a.Greeter.hello')",
        ["index:symbols: (pkg/a.py, pkg.a.Greeter.hello): end_byte is 7, the replay has 154; "
         "start_line is 3, the replay has 10"]),
    "extra-symbol": (
        f"INSERT INTO symbol_rows(file, qualname, name, kind) VALUES ({B_ID}, (SELECT id FROM"
        " code_keys WHERE key = 'pkg.b.helper'), 'x', 'function')",
        ["index:symbols: (pkg/b.py, pkg.b.helper): not in the replay"]),
    # a symbol names its qualified name by a code_keys id (code schema 9): the view hides a
    # symbol whose key is gone, so verify names it
    "symbol-of-no-key": (
        f"INSERT INTO symbol_rows(file, qualname, name, kind) VALUES ({B_ID}, 4242, 'y',"
        " 'function')",
        ["index:symbol_rows: file 2: symbols whose name code_keys lacks"]),
    # the parent is kept as the length of the qualified name's prefix it is
    "symbol-parent": (
        "UPDATE symbol_rows SET parent_len = 3 WHERE qualname ="
        " (SELECT id FROM code_keys WHERE key = 'pkg.a.Greeter.hello')",
        ["index:symbols: (pkg/a.py, pkg.a.Greeter.hello): parent is pkg, the replay has"
         " pkg.a.Greeter"]),
    "deleted-chunk": (
        f"DELETE FROM chunk_rows WHERE file = {B_ID}",
        ["index:chunks: (pkg/b.py, 1): missing (the replay has it)",
         "index:chunks_fts: (NULL, NULL): not in the replay",
         "index:chunks_fts: (pkg/b.py, 1): missing (the replay has it)",
         "index:file_text: file 2: the text of a file without chunks"]),
    # a chunk's text is cut from its file's text, kept once (code schema 4): a forged file
    # text is a forged chunk
    "chunk-text": (
        f"UPDATE file_text SET data = X'{pack_text(FORGED_A_PY).hex()}' WHERE file = {A_ID}",
        ["index:chunks: (pkg/a.py, 14): text is def main() -> None:\\n    forged('of th..., "
         "the replay has def main() -> None:\\n    print(Greeter..."]),
    "damaged-file-text": (
        f"UPDATE file_text SET data = X'00ff' WHERE file = {A_ID}",
        ["index:chunks: unreadable: user-defined function raised exception",
         "index:chunks_fts: unreadable: user-defined function raised exception"]),
    "symbols-of-no-file": (
        "INSERT INTO symbol_rows(file, qualname, name, kind) VALUES (4242, (SELECT min(id) FROM"
        " code_keys), 'y', 'function')",
        ["index:symbol_rows: file 4242: symbols of a file not indexed"]),
    "text-of-no-chunks": (
        "INSERT INTO file_text(file, data) VALUES (4242, X'00')",
        ["index:file_text: file 4242: the text of a file without chunks"]),
    # chunks_fts is contentless (code schema 3): a document no chunk has is found by its rowid
    "fts-extra-document": (
        "INSERT INTO chunks_fts(rowid, path, name, text) VALUES (99999, 'forged', 'forged', 'forged')",
        ["index:chunks_fts: (NULL, NULL): not in the replay"]),
    "extra-code-edge": (
        "INSERT INTO code_edge_rows(file, seq, src, dst, kind, line) SELECT"
        " f.rowid, 9999, (SELECT id FROM code_keys WHERE kind = 'file' AND key = 'pkg/b.py'),"
        " (SELECT id FROM code_keys WHERE kind = 'file' AND key = 'pkg/a.py'),"
        " (SELECT id FROM code_edge_kinds WHERE label = 'Imports' AND confidence = 'high'),"
        " NULL FROM files f WHERE f.path = 'pkg/b.py'",
        ["index:code_edges: (pkg/b.py, file, pkg/b.py, file, pkg/a.py, Imports): not in the replay",
         # the SCC view is checked against the code index's edges: the forged one makes a cycle
         "derived:scc_latest: names {scc}, which differs from the view the store gives "
         "(file:pkg/a.py is in component 8, the replay puts it in 9); "
         "`ctx rebuild --scc` rebuilds it"]),
    "orphan-code-key": (
        f"INSERT INTO code_keys(kind, key, hash) VALUES ('item', 'pkg.forged',"
        f" {key_hash('pkg.forged')})",
        ["index:code_keys: item:pkg.forged: named by no edge or symbol"]),
    # a key is found by the hash of its text (code schema 11): a wrong hash hides it from
    # every reader by key, a key stored twice splits its edges
    "code-key-hash-wrong": (
        "UPDATE code_keys SET hash = hash + 1 WHERE kind = 'item' AND key = 'pkg.b.helper'",
        ["index:code_keys: item:pkg.b.helper: its hash is not its text's"]),
    # a chunk's qualified name is its file's symbol's (code schema 12)
    "chunk-of-another-symbol": (
        "UPDATE chunk_rows SET symbol = 424242 WHERE rowid = (SELECT min(rowid) FROM chunk_rows"
        " WHERE symbol IS NOT NULL)",
        ["index:chunks: (pkg/a.py, 1): qualname is NULL, the replay has pkg.a",
         "index:chunk_rows: file 1: chunks naming no symbol of their file"]),
    "code-key-twice": (
        f"INSERT INTO code_keys(kind, key, hash) VALUES ('item', 'pkg.b.helper',"
        f" {key_hash('pkg.b.helper')})",
        ["index:code_keys: item:pkg.b.helper: named by no edge or symbol",
         "index:code_keys: item:pkg.b.helper: stored twice"]),
    "edge-of-no-file": (
        "INSERT INTO code_edge_rows(file, seq, src, dst, kind, line)"
        " VALUES (4242, 0, NULL, NULL, (SELECT min(id) FROM code_edge_kinds), 3)",
        ["index:code_edge_rows: file 4242: edges of a file not indexed"]),
    # an edge's label, confidence and tool are one id naming code_edge_kinds (code schema 6):
    # an edge naming none is read by no one, so verify names it
    "edge-of-no-kind": (
        f"INSERT INTO code_edge_rows(file, seq, src, dst, kind, line) VALUES ({B_ID}, 9999, NULL,"
        " NULL, 4242, 1)",
        ["index:code_edge_rows: kind 4242: edges of a kind code_edge_kinds lacks"]),
    "edge-kind-changed": (
        "UPDATE code_edge_kinds SET confidence = 'low' WHERE label = 'Imports'",
        ["index:code_edges: (pkg/a.py, module, pkg.a, item, pkg.b.helper, Imports): "
         "confidence is low, the replay has high",
         "index:code_edges: (pkg/a.py, module, pkg.a, module, os, Imports): "
         "confidence is low, the replay has high"]),
    "missing-build-edge": (
        "DELETE FROM build_edges WHERE path = 'cmd:mypy' AND to_kind = 'item'"
        " AND to_key = 'pkg.b.helper'",
        ["index:build_edges: (cmd:mypy, diagnostic, mypy#2, item, pkg.b.helper, References): "
         "missing (the replay has it)"]),
    "file-row": (
        "UPDATE files SET line_count = 99, language = NULL WHERE path = 'pkg/b.py'",
        ["index:files: pkg/b.py: language is NULL, the replay has python; "
         "line_count is 99, the replay has 2"]),
    "file-term": (
        "DELETE FROM file_term_rows WHERE term = (SELECT id FROM terms WHERE term = 'helper')"
        f" AND field = 0 AND file = {B_ID}",
        ["index:file_terms: (pkg/b.py, 0, helper): missing (the replay has it)",
         "index:file_postings: pkg/b.py: its term list holds 7 posting(s) that differ from the"
         " 6 of file_terms",
         "index:term_df: (helper, 0): df is 2, file_terms hold 1"]),
    # a file's postings are read by file from its term list (code schema 8: no index of the
    # postings by file), so a list that is damaged, missing or not the postings is named
    "term-list-damaged": (
        f"UPDATE file_postings SET data = x'789c' WHERE file = {B_ID}",
        ["index:file_postings: pkg/b.py: its term list is damaged (a file_postings value is"
         " truncated or too long)"]),
    "term-list-missing": (
        f"DELETE FROM file_postings WHERE file = {B_ID}",
        ["index:file_postings: pkg/b.py: postings without a term list"]),
    "term-list-of-no-file": (
        "INSERT INTO file_postings(file, data) SELECT 4242, data FROM file_postings LIMIT 1",
        ["index:file_postings: file 4242: the term list of a file not indexed"]),
    # postings and counts name their term by id (code schema 7): the views hide a row whose
    # term is gone, so verify names it, and a term no posting names
    "posting-of-no-term": (
        f"INSERT INTO file_term_rows(term, field, file, tf) VALUES (4242, 0, {B_ID}, 1)",
        ["index:file_term_rows: term 4242: postings of a term terms lacks",
         "index:file_postings: pkg/b.py: its term list holds 7 posting(s) that differ from the"
         " 8 of file_terms",
         "index:term_df: (4242, 0): df is 0, file_terms hold 1"]),
    "orphan-term": (
        "INSERT INTO terms(id, term) VALUES (4242, 'forged')",
        ["index:terms: term 4242: a term in no posting"]),
    "file-length": (
        f"UPDATE file_lengths SET body = 1000 WHERE file = {B_ID}",
        ["index:file_lengths: pkg/b.py: body is 1000, the replay has 8"]),
    "term-df": (
        "UPDATE term_df_rows SET df = 7 WHERE term = (SELECT id FROM terms WHERE term = 'helper')"
        " AND field = 0",
        ["index:term_df: (helper, 0): df is 7, file_terms hold 2"]),
    "missing-term-df": (
        "DELETE FROM term_df_rows WHERE term = (SELECT id FROM terms WHERE term = 'greeter')"
        " AND field = 0",
        ["index:term_df: (greeter, 0): df is 0, file_terms hold 1"]),
    "package": (
        "UPDATE packages SET version = '9.9.9' WHERE name = 'macros'",
        ["index:packages: (/tmp/fx/ws, path+file:///tmp/fx/ws/macros#0.1.0): version is 9.9.9, "
         "the replay has 0.1.0"]),
    "target": (
        "DELETE FROM targets WHERE name = 'demo'",
        ["index:targets: (/tmp/fx/ws, {demo}): missing (the replay has it)"]),
    "crate": (
        "UPDATE crates SET name = 'forged' WHERE crate_key = 'app@0.1.0/bin/app'",
        ["index:crates: (/tmp/fx/ws, app@0.1.0/bin/app): name is forged, the replay has app"]),
    "command-run": (
        "UPDATE command_runs SET exit_code = 0",
        ["index:command_runs: mypy: exit_code is 0, the replay has 1"]),
    "diagnostic": (
        "UPDATE diagnostics SET message = 'forged', line = 12 WHERE id = 'mypy#1'",
        ["index:diagnostics: mypy#1: message is forged, the replay has Returning Any; "
         "line is 12, the replay has 11"]),
    "extra-diagnostic": (
        "INSERT INTO diagnostics(id, command, tool, severity, message, run_at)"
        " VALUES ('mypy#3', 'mypy', 'mypy', 'error', 'planted', 0)",
        ["index:diagnostics: mypy#3: not in the replay"]),
}


@pytest.mark.parametrize("case", sorted(TAMPER))
def test_index_compare_names_each_tampered_code_row(
        template: tuple[Path, dict[str, str]], tmp_path: Path, case: str) -> None:
    root = _copy(template[0], tmp_path)
    sql, want = TAMPER[case]
    if "{demo}" in want[0]:  # a build table: in the index derived from objects
        tid = sqlite3.connect(root / INDEX).execute(
            "SELECT target_id FROM targets WHERE name = 'demo'").fetchone()[0]
        want = [w.replace("{demo}", tid) for w in want]
    want = [w.replace("{scc}", (root / "DERIVED" / "scc_latest").read_text()[:16]) for w in want]
    _sql(root, sql)
    before = store_digest(root)
    index_before = (root / INDEX).read_bytes(), (root / CODE).read_bytes()
    r = _run(root, "debug", "verify", "--index")
    assert r.exit_code == 3, r.output
    assert _problems(r) == [f"error E007 {w}" for w in want]
    assert ((root / INDEX).read_bytes(), (root / CODE).read_bytes()) == index_before
    assert store_digest(root) == before
    # The index is rebuilt from the objects, this clone's code index from the work tree.
    _ok(root, "rebuild")
    _ok(root, "index", "--full")
    assert _problems(_run(root, "debug", "verify", "--index")) == []


def _cached_corpus(root: Path) -> bytes:
    """Run a pack (it writes ``corpus_cache``) and return the packed value it wrote."""
    _ok(root, "pack", "helper greeter", "--format", "json")
    conn = sqlite3.connect(root / CODE)
    name, generation, data = conn.execute("SELECT name, generation, data FROM corpus_cache").fetchone()
    assert name == "files:markdown"
    assert generation == conn.execute(
        "SELECT value FROM code_meta WHERE key = 'generation'").fetchone()[0]
    conn.close()
    return bytes(data)


def test_index_compare_checks_the_corpus_cache_against_the_file_table(
        template: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    from ctxstore.index.retrieval import FileCorpus, decode_corpus, encode_corpus

    root = _copy(template[0], tmp_path)
    data = _cached_corpus(root)
    assert _problems(_run(root, "debug", "verify", "--index")) == []  # a true cache is fine
    corpus = decode_corpus(data)
    assert corpus is not None and sorted(corpus.paths) == ["pkg/a.py", "pkg/b.py"]
    assert list(corpus.tests) == []  # neither file is a test
    conn = sqlite3.connect(root / CODE)
    for forged in (FileCorpus(corpus.ids, corpus.paths, [n + 1 for n in corpus.body],
                              corpus.path_terms, corpus.split, corpus.tests),
                   FileCorpus(corpus.ids, corpus.paths, corpus.body, corpus.path_terms,
                              corpus.split, [1])):  # a source file taken for a test
        conn.execute("UPDATE corpus_cache SET data = ?", (encode_corpus(forged),))
        conn.commit()
        r = _run(root, "debug", "verify", "--index")
        assert r.exit_code == 3 and _problems(r) == [
            "error E007 index:corpus_cache: files:markdown: differs from the file table"]
    conn.execute("UPDATE corpus_cache SET data = x'00ff'")
    conn.commit()
    assert _problems(_run(root, "debug", "verify", "--index")) == [
        "error E007 index:corpus_cache: files:markdown: not a packed file table"]
    # a value of an older generation is never read: not a difference
    conn.execute("UPDATE corpus_cache SET generation = 'old'")
    conn.commit()
    conn.close()
    assert _problems(_run(root, "debug", "verify", "--index")) == []


def test_index_compare_bounds_the_lines_of_one_table(
        template: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    root = _copy(template[0], tmp_path)
    total = sqlite3.connect(root / CODE).execute("SELECT count(*) FROM file_terms").fetchone()[0]
    _sql(root, "DELETE FROM file_term_rows")
    doc = json.loads(_run(root, "--format", "json", "debug", "verify", "--index").stdout)
    lines = [p["message"] for p in doc["problems"] if p["subject"] == "index:file_terms"]
    assert len(lines) == MAX_PER_TABLE + 1
    assert lines[0] == "(pkg/a.py, 0, class): missing (the replay has it)"
    assert lines[-1] == f"{total - MAX_PER_TABLE} more row(s) differ from the replay"


# -- the SCC view ----------------------------------------------------------------------------
def _forge_view(root: Path) -> str:
    """Store an SCC view at the store's heads whose graph is not the index's; point at it."""
    from ctxstore.graph.scc import compute_scc
    from ctxstore.model import encode_typed
    from ctxstore.objects import KIND_TYPED, LooseObjectStore
    from ctxstore.replay import state_heads

    view = compute_scc([("file", "x.py", "file", "y.py", "Imports"),
                        ("file", "y.py", "file", "x.py", "Imports")], state_heads(open_store(root)))
    oid, _ = LooseObjectStore(root / "DERIVED" / "objects").write(KIND_TYPED, encode_typed(view))
    (root / "DERIVED" / "scc_latest").write_text(oid.hex() + "\n")
    return oid.hex()


def test_index_compare_checks_the_scc_view(
        template: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    root = _copy(template[0], tmp_path)
    real = (root / "DERIVED" / "scc_latest").read_text().strip()
    oid = _forge_view(root)
    r = _run(root, "debug", "verify", "--index")
    assert r.exit_code == 3, r.output
    [line] = _problems(r)
    assert line == (f"error E007 derived:scc_latest: names {oid[:16]}, which differs from the view "
                    "the store gives (2 node(s) not in the graph, first file:x.py); "
                    "`ctx rebuild --scc` rebuilds it")
    _ok(root, "rebuild", "--scc")
    assert (root / "DERIVED" / "scc_latest").read_text().strip() == real
    assert _problems(_run(root, "debug", "verify", "--index")) == []


def test_index_compare_names_a_garbage_scc_pointer(
        template: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    root = _copy(template[0], tmp_path)
    pointer = root / "DERIVED" / "scc_latest"
    pointer.write_text("not an id\n")
    r = _run(root, "debug", "verify", "--index")
    assert r.exit_code == 3, r.output
    assert _problems(r) == [f"error E007 derived:scc_latest: {pointer} does not hold an object id "
                            "(`ctx rebuild --scc` rebuilds it)"]


def test_index_compare_refuses_a_fifo_scc_pointer(
        template: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    root = _copy(template[0], tmp_path)
    pointer = root / "DERIVED" / "scc_latest"
    pointer.unlink()
    os.mkfifo(pointer)
    r = _run(root, "debug", "verify", "--index")  # never blocks on the FIFO
    assert r.exit_code == 3, r.output
    [line] = _problems(r)
    assert line.startswith("error E020 derived:scc_latest: ") and "scc_latest" in line[30:], line


def test_index_compare_leaves_an_out_of_date_scc_view_alone(
        template: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    root = _copy(template[0], tmp_path)
    _forge_view(root)  # wrong, but of the heads it was read at, which are no longer the store's
    _ok(root, "add", "--type", "fact", "a later fact")
    _ok(root, "list")  # the index catches up
    r = _run(root, "debug", "verify", "--index")  # normal: the next reader rebuilds it
    assert r.exit_code == 0, r.output
    assert _problems(r) == []


# -- ctx debug verify: code and build objects ------------------------------------------------
def _object(root: Path, hex_id: str) -> Path:
    return open_store(root).objects.path_for(ObjectId(bytes.fromhex(hex_id)))


OBJECTS = {  # which object, and what refers to it
    "file_version": "version:pkg/a.py",
    "file blob": "blob:pkg/b.py",
    "cargo_snapshot": "cargo",
    "diagnostics": "diagnostics",
    "command output": "output",
}


@pytest.mark.parametrize("what", sorted(OBJECTS))
def test_verify_names_a_missing_code_or_build_object(
        template: tuple[Path, dict[str, str]], tmp_path: Path, what: str) -> None:
    root = _copy(template[0], tmp_path)
    oid = template[1][OBJECTS[what]]
    for path in open_store(root).objects.paths_for(ObjectId(bytes.fromhex(oid))):
        path.unlink()  # every copy: a fold leaves a staging copy until `ctx gc`
    r = _run(root, "debug", "verify")
    assert r.exit_code == 3, r.output
    errors = [ln for ln in _problems(r) if ln.startswith("error ")]
    assert errors and all(ln.startswith(f"error E001 {oid}: missing (referenced by ") for ln in errors)


@pytest.mark.parametrize("what", sorted(OBJECTS))
def test_verify_names_a_corrupted_code_or_build_object(
        template: tuple[Path, dict[str, str]], tmp_path: Path, what: str) -> None:
    root = _copy(template[0], tmp_path)
    oid = template[1][OBJECTS[what]]
    path = _object(root, oid)
    os.chmod(path, 0o644)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    r = _run(root, "debug", "verify")
    assert r.exit_code == 3, r.output
    [line] = [ln for ln in _problems(r) if ln.startswith("error ")]
    assert line.startswith((f"error E002 {oid}: ", f"error E003 {oid}: ")), line
    assert "[unreachable" not in line  # reachable: an error, not a leftover


def test_index_compare_fold_of_files_and_a_run_replays_the_same_edges(tmp_path: Path) -> None:
    from ctxstore.init import init_store

    work = tmp_path / "work"
    (work / "pkg").mkdir(parents=True)
    (work / "pkg" / "b.py").write_text(B_PY)
    os.utime(work / "pkg" / "b.py", (1_700_000_000, 1_700_000_000))
    root = work / ".ctx"
    init_store(root, git=False)
    _ok(root, "add", "file", "pkg/b.py", "--extract-semantics")
    _add_mypy(root)
    _ok(root, "list")  # the index applies the session: the run after the file
    _ok(root, "commit", "-m", "fold")
    _ok(root, "list")
    assert _problems(_run(root, "debug", "verify", "--index")) == []
