"""The FullTextEngine contract: one suite, run against every engine.

Each engine is built over a fresh index database (``ctxstore.index.schema``), so FTS5
runs against the very table the index uses. Documents are given as text and searched with
the terms of what a person typed (``search.tokenize``, one tokeniser for every engine).
The suite pins what callers rely on:
indexing and deleting, all-term and any-term searches, phrases, BM25 ranking, and the
SQL renderings the query executor composes. Exact FTS5 results (byte-identical to the
pre-engine SQL) are pinned in tests/property/test_index_rebuild.py and the CLI search
tests; this suite asserts only what every engine must share.
"""

from __future__ import annotations

import importlib.util
import sqlite3
from collections.abc import Callable, Iterator

import pytest

from ctxstore.index.schema import SCHEMA
from ctxstore.search.engine import FullTextEngine
from ctxstore.search.fts5 import Fts5Engine, default_engine, fts_literal, match_expression
from ctxstore.search.tokenize import phrase

Make = Callable[[sqlite3.Connection], FullTextEngine]


def _fts5(conn: sqlite3.Connection) -> FullTextEngine:
    return Fts5Engine(conn)


def _tantivy(conn: sqlite3.Connection) -> FullTextEngine:
    from ctxstore.search.tantivy import TantivyEngine

    return TantivyEngine()


ENGINES: dict[str, Make] = {"fts5": _fts5}
if importlib.util.find_spec("tantivy") is not None:
    ENGINES["tantivy"] = _tantivy

DOCS = {
    1: {"content": "the quick brown fox jumps over the lazy dog", "summary": "animals"},
    2: {"content": "a lazy afternoon with brown bread", "summary": ""},
    3: {"content": "fox fox fox: the fox den", "summary": "dens"},
    4: {"content": "quick thinking", "summary": "brown fox summary"},
    5: {"content": "nothing to see here", "summary": ""},
}


@pytest.fixture
def conn() -> Iterator[sqlite3.Connection]:
    db = sqlite3.connect(":memory:")
    db.executescript(SCHEMA)
    yield db
    db.close()


@pytest.fixture(params=sorted(ENGINES))
def engine(request: pytest.FixtureRequest, conn: sqlite3.Connection) -> FullTextEngine:
    return ENGINES[request.param](conn)


@pytest.fixture
def loaded(engine: FullTextEngine) -> FullTextEngine:
    for rowid, fields in DOCS.items():
        engine.index_document(rowid, fields)
    return engine


def _ids(hits: list[tuple[int, float]]) -> set[int]:
    return {r for r, _ in hits}


def _sql_ids(conn: sqlite3.Connection, engine: FullTextEngine, terms: list[str],
             mode: str) -> set[int]:
    sql, args = engine.sql_rowids(terms, mode)  # type: ignore[arg-type]
    return {r for (r,) in conn.execute(sql, args)}


def _phrases(typed: list[str]) -> list[str]:
    """Typed words or phrases as an engine takes them: their terms (``tokenize.phrase``)."""
    return [phrase(t) for t in typed]


def _find(engine: FullTextEngine, typed: list[str], **kw: object) -> list[tuple[int, float]]:
    return engine.search(_phrases(typed), **kw)  # type: ignore[arg-type]


class FullTextContract:
    """What every FullTextEngine does. The fixture picks the engine."""

    def test_fulltext_engine_implements_protocol(self, engine: FullTextEngine) -> None:
        assert isinstance(engine, FullTextEngine) and engine.name

    def test_fulltext_single_word(self, loaded: FullTextEngine) -> None:
        assert _ids(_find(loaded, ["fox"])) == {1, 3, 4}

    def test_fulltext_searches_every_field(self, loaded: FullTextEngine) -> None:
        assert _ids(_find(loaded, ["dens"])) == {3}
        assert _ids(_find(loaded, ["animals"])) == {1}

    def test_fulltext_is_case_insensitive(self, loaded: FullTextEngine) -> None:
        assert _ids(_find(loaded, ["QUICK"])) == {1, 4}

    def test_fulltext_all_mode_needs_every_term(self, loaded: FullTextEngine) -> None:
        assert _ids(_find(loaded, ["brown", "lazy"], mode="all")) == {1, 2}
        assert _ids(_find(loaded, ["brown", "nothing"], mode="all")) == set()

    def test_fulltext_any_mode_needs_one_term(self, loaded: FullTextEngine) -> None:
        assert _ids(_find(loaded, ["dens", "afternoon"], mode="any")) == {2, 3}

    def test_fulltext_phrase_needs_adjacent_words(self, loaded: FullTextEngine) -> None:
        assert _ids(_find(loaded, ["brown fox"])) == {1, 4}
        assert _ids(_find(loaded, ["fox brown"])) == set()
        assert _ids(_find(loaded, ["lazy dog"])) == {1}

    def test_fulltext_query_syntax_is_literal(self, loaded: FullTextEngine) -> None:
        # Operators and quotes in a term are text, never engine syntax.
        for term in ['fox AND', 'NOT fox', 'fox"', '"fox', 'fox*', 'fox:', '(fox)', 'OR']:
            hits = _find(loaded, [term])
            assert _ids(hits) <= {1, 3, 4}, term

    def test_fulltext_phrase_without_words_matches_nothing(self, loaded: FullTextEngine) -> None:
        assert _find(loaded, [""]) == [] and _find(loaded, ["  -  "]) == []
        assert _find(loaded, ["fox", ""], mode="all") == []
        assert _ids(_find(loaded, ["fox", ""], mode="any")) == {1, 3, 4}

    def test_fulltext_no_terms_matches_nothing(self, loaded: FullTextEngine,
                                               conn: sqlite3.Connection) -> None:
        assert _find(loaded, []) == []
        assert _sql_ids(conn, loaded, [], "all") == set()

    def test_fulltext_ranks_by_bm25_best_first(self, loaded: FullTextEngine) -> None:
        hits = _find(loaded, ["fox"])
        assert hits[0][0] == 3  # four occurrences in a short document
        scores = [s for _, s in hits]
        assert scores == sorted(scores, reverse=True)
        assert all(isinstance(s, float) and s > 0 for s in scores)

    def test_fulltext_limit(self, loaded: FullTextEngine) -> None:
        full = _find(loaded, ["fox"])
        assert _find(loaded, ["fox"], limit=2) == full[:2]

    def test_fulltext_delete_document(self, loaded: FullTextEngine) -> None:
        loaded.delete_document(3)
        loaded.delete_document(99)  # absent: nothing happens
        assert _ids(_find(loaded, ["fox"])) == {1, 4}

    def test_fulltext_reindex_after_delete_replaces(self, loaded: FullTextEngine) -> None:
        loaded.delete_document(5)
        loaded.index_document(5, {"content": "now a fox", "summary": ""})
        assert 5 in _ids(_find(loaded, ["fox"]))
        assert _find(loaded, ["nothing"]) == []

    def test_fulltext_clear(self, loaded: FullTextEngine) -> None:
        loaded.clear()
        assert _find(loaded, ["fox"]) == []

    def test_fulltext_unknown_field_is_refused(self, engine: FullTextEngine) -> None:
        with pytest.raises(ValueError):
            engine.index_document(1, {"title": "x"})

    def test_fulltext_identifiers_whole_and_in_parts(self, engine: FullTextEngine) -> None:
        engine.index_document(1, {"content": "call get_pager_file then HTTPServer", "summary": ""})
        engine.index_document(2, {"content": "the pager file", "summary": ""})
        assert _ids(_find(engine, ["get_pager_file"])) == {1}
        assert _ids(_find(engine, ["pager"])) == {1, 2}
        assert _ids(_find(engine, ["pager file"])) == {1, 2}  # the parts are adjacent terms
        assert _ids(_find(engine, ["server"])) == _ids(_find(engine, ["HttpServer"])) == {1}

    def test_fulltext_unicode_words(self, engine: FullTextEngine) -> None:
        engine.index_document(1, {"content": "café crème über", "summary": ""})
        assert _ids(_find(engine, ["café"])) == {1}
        assert _ids(_find(engine, ["über"])) == {1}

    @pytest.mark.parametrize("terms,mode", [(["fox"], "all"), (["brown", "lazy"], "all"),
                                            (["dens", "afternoon"], "any"), (["brown fox"], "all")])
    def test_fulltext_sql_rowids_agree_with_search(self, loaded: FullTextEngine,
                                                   conn: sqlite3.Connection,
                                                   terms: list[str], mode: str) -> None:
        assert _sql_ids(conn, loaded, _phrases(terms), mode) == _ids(_find(loaded, terms, mode=mode))  # type: ignore[arg-type]

    def test_fulltext_sql_scores_order_agrees_with_search(self, loaded: FullTextEngine,
                                                          conn: sqlite3.Connection) -> None:
        sql, args = loaded.sql_scores(_phrases(["fox", "lazy"]), "any")
        rows = conn.execute(f"SELECT r, score FROM ({sql}) ORDER BY score, r", args).fetchall()
        assert [r for r, _ in rows] == [r for r, _ in _find(loaded, ["fox", "lazy"], mode="any")]


class TestFullText(FullTextContract):
    """Runs the contract against each engine in ``ENGINES``."""


# -- FTS5 specifics: the exact SQL the executor composed before the engine existed -------

def test_fts5_literal_doubles_quotes() -> None:
    assert fts_literal('say "hi"') == '"say ""hi"""'
    assert match_expression(["a", "b c"], "all") == '"a" AND "b c"'
    assert match_expression(["a", "b"], "any") == '"a" OR "b"'


def test_fts5_sql_is_the_pre_engine_sql(conn: sqlite3.Connection) -> None:
    engine = Fts5Engine(conn)
    assert engine.sql_rowids(["x y"]) == (
        "SELECT rowid FROM nodes_fts WHERE nodes_fts MATCH ?", ['"x y"'])
    assert engine.sql_scores(["a", "b"], "any") == (
        "SELECT rowid AS r, bm25(nodes_fts) AS score FROM nodes_fts WHERE nodes_fts MATCH ?",
        ['"a" OR "b"'])


def test_fts5_is_the_default_engine(conn: sqlite3.Connection) -> None:
    assert isinstance(default_engine(conn), Fts5Engine)


def test_fts5_search_scores_are_negated_bm25(conn: sqlite3.Connection) -> None:
    engine = Fts5Engine(conn)
    for rowid, fields in DOCS.items():
        engine.index_document(rowid, fields)
    raw = dict(conn.execute("SELECT rowid, bm25(nodes_fts) FROM nodes_fts WHERE nodes_fts MATCH ?",
                            ['"fox"']).fetchall())
    assert dict(engine.search(["fox"])) == {r: -s for r, s in raw.items()}
