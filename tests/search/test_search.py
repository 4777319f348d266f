"""Ranked free-text search (issue 14 item 1): any text in, ranked nodes, narrative and code out."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from conftest import invoke, session_of, store_digest
from hypothesis import given
from hypothesis import strategies as st

from ctxstore.index import open_index
from ctxstore.knowledge.nodes import add_node
from ctxstore.knowledge.recall import recall_nodes
from ctxstore.narrative.entries import add_decision
from ctxstore.repo import Store
from ctxstore.search.fts5 import match_expression
from ctxstore.search.search import (
    _COVERAGE_CHARS,
    MAX_PHRASE_WORDS,
    MAX_TERMS,
    _matched,
    search,
    search_terms,
)
from ctxstore.search.tokenize import PROSE_STOP_WORDS, index_text
from ctxstore.search.tokenize import terms as words_of
from ctxstore.search.tokenize import words as written

FACTS = {
    "wal": "SQLite in WAL mode lets readers run while one writer commits",
    "retry": "Uploads retry with exponential backoff so a flaky network causes no retry storms",
    "lock": "The writer lock is a POSIX lock on .ctx/lock, released when the process dies",
    "cache": "The session start view is cached in local/state.sqlite until a pointer moves",
    "sqlite_only": "Postgres was considered and rejected",
}


@pytest.fixture
def ids(store: Store) -> dict[str, str]:
    return {name: add_node(session_of(store), "fact", text).node.id for name, text in FACTS.items()}


def _search(store: Store, text: str, **kw):  # type: ignore[no-untyped-def]
    conn = open_index(store)
    try:
        return search(conn, text, **kw)
    finally:
        conn.close()


def test_search_all_terms_outrank_one_term(store: Store, ids: dict[str, str]) -> None:
    one = add_node(session_of(store), "fact", "readers " * 3 + "are counted").node.id  # one term, repeated
    hits = _search(store, "readers writer sqlite")
    assert hits[0].key == ids["wal"] and one in [h.key for h in hits]
    assert hits[0].matched == ("readers", "writer", "sqlite")
    assert hits[0].score > next(h.score for h in hits if h.key == one)


def test_search_natural_language_question_finds_the_node(store: Store, ids: dict[str, str]) -> None:
    assert _search(store, "Why don't we get retry storms when the network is flaky?")[0].key \
        == ids["retry"]
    assert _search(store, "how is the session start view cached?")[0].key == ids["cache"]


def test_search_quoted_phrase_and_punctuation(store: Store, ids: dict[str, str]) -> None:
    assert [h.key for h in _search(store, '"exponential backoff"')] == [ids["retry"]]
    assert _search(store, '"backoff exponential"') == []  # a phrase keeps its order
    hits = _search(store, 'lock(); * - "unbalanced ( NOT OR AND')
    assert hits[0].key == ids["lock"]


def test_search_ten_kilobytes_of_text(store: Store, ids: dict[str, str]) -> None:
    filler = " ".join(f"word{i}" for i in range(1500))
    text = filler + " posix lock released " + filler
    assert len(text) > 10_000
    conn = open_index(store)
    try:
        terms = search_terms(text, conn)
        assert len(terms.terms) <= MAX_TERMS and {"posix", "lock", "released"} <= set(terms.terms)
        t0 = time.perf_counter()
        hits = search(conn, text)
        assert time.perf_counter() - t0 < 1.0
    finally:
        conn.close()
    assert hits[0].key == ids["lock"]


def test_search_pasted_log_with_stray_quotes(store: Store, ids: dict[str, str]) -> None:
    """Odd quotes in a pasted log pair up across lines: those spans are no phrases."""
    lines = [f'2026-01-01 INFO worker {i} said "job {i} started and is running' for i in range(200)]
    text = "\n".join(lines[:100] + ["ERROR posix lock released early"] + lines[100:])
    assert len(text) > 10_000
    terms = search_terms(text).terms
    assert {"posix", "lock", "released"} <= set(terms)
    assert all(len(t.split()) <= MAX_PHRASE_WORDS for t in terms)
    assert _search(store, text)[0].key == ids["lock"]
    # a short quoted phrase is still one
    assert search_terms('see "posix lock released" now').terms[0] == "posix lock released"


def test_search_kinds_narrow_and_narrative_is_labelled(store: Store, ids: dict[str, str]) -> None:
    added = add_decision(session_of(store), "Keep SQLite for the index", "Readers never block.")
    hits = _search(store, "sqlite readers")
    assert {h.kind for h in hits} == {"node", "narrative"}
    assert [h.key for h in _search(store, "sqlite readers", kinds=("narrative",))] == \
        [added.node.id]
    # A decision is a node: --kind node finds it, and its kind still says where it came from.
    assert [(h.key, h.kind) for h in _search(store, "sqlite readers", kinds=("node",))][:1] == \
        [(added.node.id, "narrative")]
    assert _search(store, "sqlite", kinds=("chunk", "symbol")) == []  # no code indexed


def test_search_terms_drop_stopwords_unless_nothing_is_left() -> None:
    assert search_terms("what is the WAL?").terms == ("wal",)
    assert search_terms("what is it").terms == ("what", "is", "it")
    assert search_terms('"Exponential  Backoff" café').terms == ("exponential backoff", "cafe")
    assert not search_terms('"" ( ) * - \0 ---')


def _matched_by_listing(terms: tuple[str, ...], text: str) -> tuple[str, ...]:
    """What ``search.search._matched`` computes, by listing every term of the text."""
    text = text[:_COVERAGE_CHARS]
    have = set(words_of(text))
    joined = f" {index_text(text)} "  # what the index holds: a phrase is adjacent there
    return tuple(t for t in terms if (t in have) if " " not in t) + \
        tuple(t for t in terms if " " in t and f" {t} " in joined)


_WORDY = st.text(alphabet=st.sampled_from("abcAB12_ -.\néÉ́ß²٠x"), max_size=80)


@given(_WORDY, st.lists(_WORDY, max_size=6), st.lists(_WORDY, max_size=3))
def test_search_matched_terms_are_those_the_text_lists(text: str, queries: list[str],
                                                       quoted: list[str]) -> None:
    """Finding a term among the words that contain it is listing the text's terms."""
    terms = search_terms(" ".join(queries) + "".join(f' "{q}"' for q in quoted)).terms
    terms += tuple(w for q in queries for w in words_of(q))  # stopwords and repeats too
    assert _matched(terms, text) == _matched_by_listing(terms, text)
    long = text * (_COVERAGE_CHARS // max(len(text), 1) + 2)  # cut at the coverage limit
    assert _matched(terms, long) == _matched_by_listing(terms, long)


@given(st.text(max_size=300))
def test_search_never_errors_on_arbitrary_text(text: str) -> None:
    terms = search_terms(text)
    assert len(terms.terms) <= MAX_TERMS
    assert all(t.strip() and '"' not in t for t in terms.terms)


def test_search_library_never_errors_on_arbitrary_text(store: Store, ids: dict[str, str]) -> None:
    conn = open_index(store)

    @given(st.text(max_size=200) | st.sampled_from(['"', "(", "NOT", "a*", "-x", "NEAR(a b)",
                                                    "col:val", "^x", "\0", "x" * 5000]))
    def check(text: str) -> None:
        hits = search(conn, text)
        assert all(h.score > 0 for h in hits)

    try:
        check()
    finally:
        conn.close()


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=120))
def test_search_cli_never_errors_on_arbitrary_text(tmp_path_factory: pytest.TempPathFactory,
                                                   text: str) -> None:
    from click.testing import CliRunner

    from ctxstore.init import init_store
    from ctxstore.repo import open_store

    root = _shared_store(tmp_path_factory, init_store, open_store)
    r = invoke(CliRunner(), root, "--format", "json", "search", "--", text)
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["count"] >= 0


_STORES: dict[int, Store] = {}


def _shared_store(factory, init_store, open_store) -> Store:  # type: ignore[no-untyped-def]
    """One store for every example of a Hypothesis test (fixtures are not reset per example)."""
    if id(factory) not in _STORES:
        work = factory.mktemp("shared") / "work"
        work.mkdir()
        init_store(work / ".ctx", git=False)
        store = open_store(work / ".ctx")
        add_node(session_of(store), "fact", FACTS["wal"])
        _STORES[id(factory)] = store
    return _STORES[id(factory)]


def test_search_cli_json_has_scores_and_kinds(store: Store, runner, ids: dict[str, str]) -> None:
    before = store_digest(store.root)
    r = invoke(runner, store, "--format", "json", "search", "readers writer", "--kind", "node")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["count"] == 2 and {r["kind"] for r in doc["results"]} == {"node"}  # any term
    assert doc["results"][0]["score"] > 0 and doc["results"][0]["matched"] == ["readers", "writer"]
    assert doc["nodes"][0]["id"] == ids["wal"] and doc["nodes"][0]["score"] > 0
    text = invoke(runner, store, "search", "writer lock posix").stdout
    assert text.splitlines()[0].startswith(ids["lock"])
    bad = invoke(runner, store, "search", "x", "--kind", "file")
    assert bad.exit_code != 0 and "Traceback" not in bad.output
    assert store_digest(store.root) == before  # searching writes nothing


def test_search_reads_code_tables_when_they_exist(store: Store, ids: dict[str, str]) -> None:
    """Chunks and symbols (docs/code.md) are searched once the index has them."""
    conn = open_index(store)
    try:
        have = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        if "chunks_fts" not in have:  # an index before code ingestion: make the tables
            conn.executescript(
                "CREATE TABLE chunks(rowid INTEGER PRIMARY KEY, path TEXT NOT NULL, qualname TEXT,"
                " kind TEXT NOT NULL, start_line INTEGER NOT NULL, end_line INTEGER NOT NULL,"
                " tokens INTEGER NOT NULL, text TEXT NOT NULL);"
                "CREATE VIRTUAL TABLE chunks_fts USING fts5(path, name, text);"
                "CREATE TABLE symbols(rowid INTEGER PRIMARY KEY, path TEXT NOT NULL,"
                " qualname TEXT NOT NULL, name TEXT NOT NULL, kind TEXT NOT NULL, visibility TEXT,"
                " parent TEXT, signature TEXT, start_byte INTEGER, end_byte INTEGER,"
                " start_line INTEGER, end_line INTEGER);")
        conn.execute("INSERT INTO chunks VALUES (90001, 'src/net.py', 'net.connect', 'function',"
                     " 10, 20, 30, 'def connect(host):\n    return retry_socket(host)')")
        conn.execute("INSERT INTO chunks_fts(rowid, path, name, text) VALUES (90001, 'src/net.py',"
                     " 'net.connect connect', 'def connect(host): return retry_socket(host)')")
        for i in range(5):  # other chunks, so that BM25 weighs the words
            conn.execute("INSERT INTO chunks_fts(rowid, path, name, text) VALUES (?, ?, ?, ?)",
                         (90002 + i, f"src/m{i}.py", f"m{i}.f", f"def f(): return {i}"))
        conn.execute("INSERT INTO symbols(path, qualname, name, kind, start_line) VALUES "
                     "('src/net.py', 'net.retry_socket', 'retry_socket', 'function', 30)")
        hits = search(conn, "connect(host) retry_socket()")
        assert [h.kind for h in hits][:1] == ["chunk"]
        assert {"chunk", "symbol"} <= {h.kind for h in hits}
        assert [h.key for h in search(conn, "retry_socket", kinds=("symbol",))] == \
            ["net.retry_socket"]
    finally:
        conn.rollback()
        conn.close()


def test_recall_free_text_fallback(store: Store, ids: dict[str, str]) -> None:
    conn = open_index(store)
    try:
        now = time.time()
        # Not the query language: searched as free text, ranked, never an error.
        assert recall_nodes(conn, "why does lock( fail?", limit=5, now=now)[0].id == ids["lock"]
        assert recall_nodes(conn, 'type:( "unbalanced', limit=5, now=now) == []
        # Plain words: any may match (the language would need every one).
        assert recall_nodes(conn, "how do readers interact with postgres", limit=5,
                            now=now)[0].id in (ids["wal"], ids["sqlite_only"])
        # The language still works.
        assert [n.id for n in recall_nodes(conn, "type:fact AND posix", limit=5, now=now)] == \
            [ids["lock"]]
        # from:/to: naming no node here are words too: searched, never an error
        assert recall_nodes(conn, "readers interact with postgres from:yesterday", limit=5,
                            now=now)[0].id in (ids["wal"], ids["sqlite_only"])
        for text in ("what changed to:main", "from:0", "to:ZZZZZZZZZZ posix lock"):
            recall_nodes(conn, text, limit=5, now=now)
        assert recall_nodes(conn, "to:ZZZZZZZZZZ posix lock", limit=5, now=now)[0].id == ids["lock"]
    finally:
        conn.close()


def test_recall_with_the_user_store_takes_an_id_only_the_project_has(tmp_path: Path) -> None:
    # `to:ID` of a project node: the user store, which lacks it, is skipped, not an error.
    from conftest import run_ctx

    root = tmp_path / "proj"
    root.mkdir()
    assert run_ctx(["init"], cwd=root).returncode == 0
    a = run_ctx(["add", "--type", "fact", "alpha fact"], cwd=root).stdout.strip()
    b = run_ctx(["add", "decision", "beta decision"], cwd=root).stdout.strip()
    assert run_ctx(["link", a, b, "--type", "RELATES_TO"], cwd=root).returncode == 0
    assert run_ctx(["add", "--global", "--type", "fact", "user fact"], cwd=root).returncode == 0
    for argv in (["recall", f"to:{b}"], ["recall", f"to:{b}", "--no-global"],
                 ["query", f"to:{b}", "--global"]):
        r = run_ctx([*argv, "--format", "json"], cwd=root)
        assert r.returncode == 0, (argv, r.stderr)
        assert a in r.stdout, argv


def _code_repo(store: Store, runner) -> None:  # type: ignore[no-untyped-def]
    """60 indexed files where ``anyio``, ``websocket`` and ``close`` fill long test chunks."""
    src = store.worktree / "src"
    src.mkdir()
    for i in range(60):
        body = "\n".join(
            f"def test_case_{i}_{j}(anyio_backend):\n"
            f"    ws = anyio.websocket.connect(anyio_backend, 'ws://h/{j}')\n"
            f"    anyio.run(ws.close)\n    ws.close()\n    assert ws.closed  # close anyio\n"
            for j in range(4))
        (src / f"test_m{i}.py").write_text(f"import anyio\n\n{body}\n")
    r = invoke(runner, store, "index", str(store.worktree))
    assert r.exit_code == 0, r.output


def test_search_memory_is_not_buried_under_code_chunks(store: Store, runner) -> None:  # type: ignore[no-untyped-def]
    """BM25 of short nodes and of long chunks is not comparable: memory shows by default."""
    _code_repo(store, runner)
    decision = invoke(runner, store, "--format", "json", "add", "decision",
                      "Use anyio for all async backends")
    task = invoke(runner, store, "--format", "json", "add", "task",
                  "Handle the websocket close frame before the reader exits")
    ids = [json.loads(decision.stdout)["id"], json.loads(task.stdout)["id"]]
    for query, node_id in zip(["anyio", "websocket close"], ids, strict=True):
        r = invoke(runner, store, "--format", "json", "search", query)
        results = json.loads(r.stdout)["results"]
        assert {x["kind"] for x in results} >= {"chunk", "narrative"}
        assert [x["key"] for x in results][:1] == [node_id], query
        # Among code alone, raw BM25 still ranks; the memory-only search is unchanged too.
        only = json.loads(invoke(runner, store, "--format", "json", "search", query,
                                 "--kind", "node").stdout)["results"]
        assert [x["key"] for x in only] == [node_id]


_MIXED = "日本語 サポート ルーティングは Straße 한국어 йогурт καλημέρα ＡＢＣ naïve"


def test_search_finds_every_word_stored_in_any_script(store: Store, runner) -> None:  # type: ignore[no-untyped-def]
    """The query folds as unicode61 stores: what `ctx query` finds, `ctx search` finds."""
    node_id = add_node(session_of(store), "fact", _MIXED).node.id
    for word in ["サポート", "ルーティングは", "Straße", "STRAßE", "한국어", "йогурт", "ЙОГУРТ",
                 "καλημέρα", "ＡＢＣ", "ａｂｃ", "日本語", "naïve", "naive", "NAÏVE"]:
        r = invoke(runner, store, "--format", "json", "search", word)
        assert [x["key"] for x in json.loads(r.stdout)["results"]] == [node_id], word
        assert json.loads(r.stdout)["results"][0]["matched"], word
        q = invoke(runner, store, "--format", "json", "query", word)
        assert [n["id"] for n in json.loads(q.stdout)["nodes"]] == [node_id], word
    # unicode61 keeps ß: neither command finds "strasse" (the index never stored it).
    assert json.loads(invoke(runner, store, "--format", "json", "search", "strasse").stdout)[
        "count"] == 0


def test_search_finds_a_one_word_row_for_any_word(store: Store) -> None:
    """For arbitrary Unicode, a node holding a text is found by searching that text."""
    conn = open_index(store)
    conn.execute("DELETE FROM nodes_fts")
    try:
        @given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1,
                       max_size=12))
        def check(text: str) -> None:
            text = text.replace("\0", " ").replace('"', " ")
            # each word as written in the text (an identifier's parts depend on its case)
            words = [w for w in written(text) if words_of(w) and w.lower() not in PROSE_STOP_WORDS]
            conn.execute("DELETE FROM nodes_fts")
            conn.execute("INSERT INTO nodes_fts(rowid, content, summary) VALUES (1, ?, '')",
                         (index_text(text),))  # what the index stores of it
            for word in words:  # typed as the user would: each word of the text, or all
                for typed in (word, text):
                    terms = search_terms(typed).terms
                    assert set(_matched(terms, text)) == set(terms), typed
                    found = conn.execute("SELECT rowid FROM nodes_fts WHERE nodes_fts MATCH ?",
                                         (match_expression(terms, "all"),)).fetchall()
                    assert found == [(1,)], typed

        check()
    finally:
        conn.rollback()
        conn.close()


@pytest.mark.parametrize("command", ["search", "query", "list"])
def test_search_cli_limit_out_of_range_is_one_line(store: Store, runner, command: str) -> None:  # type: ignore[no-untyped-def]
    """A limit past SQLite's 64-bit integers is refused as 0 is, not an internal error."""
    before = store_digest(store.root)
    args = [] if command == "list" else ["close"]
    for limit, shown in [("99999999999999999999", "99999999999999999999"), ("0", "0")]:
        r = invoke(runner, store, command, *args, "--limit", limit)
        assert (r.exit_code, r.stdout, store_digest(store.root)) == (2, "", before)
        assert r.stderr == (f"ctx: error: Invalid value for '--limit': {shown} is not in the "
                            f"range 1<=x<=1000000000. (see 'ctx {command} --help')\n")


@pytest.mark.parametrize("text", ["", "!!!", "🚀", '"" ( ) *'])
def test_search_cli_says_when_the_query_has_no_words(store: Store, runner, ids: dict[str, str],
                                                     text: str) -> None:
    r = invoke(runner, store, "search", "--", text)
    assert (r.exit_code, r.stdout) == (0, "")
    assert r.stderr == "ctx: no results (the query has no searchable words)\n"
    j = invoke(runner, store, "--format", "json", "search", "--", text)
    assert (j.exit_code, j.stderr) == (0, "")
    assert json.loads(j.stdout) == {"version": 1, "count": 0, "results": [], "nodes": []}


def test_search_markdown_lists_code_hits_as_markdown(store: Store, runner) -> None:  # type: ignore[no-untyped-def]
    _code_repo(store, runner)
    r = invoke(runner, store, "search", "websocket close", "--format", "markdown", "--limit", "5")
    lines = r.stdout.splitlines()
    assert r.exit_code == 0 and lines
    assert all(line.startswith("- ") for line in lines), r.stdout
    assert any(line.startswith("- `src/test_m") for line in lines)


def test_search_a_symbol_named_by_one_word_of_several_ranks_below_chunks_holding_them_all(
        store: Store, runner) -> None:  # type: ignore[no-untyped-def]
    src = store.worktree / "src"
    src.mkdir()
    for i, name in enumerate(["add", "new", "add", "new"]):
        (src / f"util{i}.py").write_text(f"def {name}(x):\n    return x\n")
    (src / "languages.py").write_text(
        'class Registry:\n    """To add a new language, write an extractor and register it."""\n\n'
        "    def register(self, language, extractor):\n        self.extractors[language] = extractor\n")
    assert invoke(runner, store, "index", str(store.worktree)).exit_code == 0
    r = invoke(runner, store, "--format", "json", "search", "add a new language extractor")
    results = json.loads(r.stdout)["results"]
    assert results[0]["kind"] == "chunk" and results[0]["path"] == "src/languages.py", results[:3]
    # a name that is the whole query still scores as the best other hit (its chunk)
    r = invoke(runner, store, "--format", "json", "search", "register")
    top = json.loads(r.stdout)["results"][:2]
    assert {x["kind"] for x in top} == {"chunk", "symbol"} and top[0]["score"] == top[1]["score"]


def test_search_with_no_result_says_so_on_stderr(store: Store, runner) -> None:  # type: ignore[no-untyped-def]
    r = invoke(runner, store, "search", "qqqzzzxx")
    assert (r.exit_code, r.stdout, r.stderr) == (0, "", "ctx: no results\n")
    r = invoke(runner, store, "--format", "json", "search", "qqqzzzxx")
    assert r.stderr == "" and json.loads(r.stdout)["count"] == 0
