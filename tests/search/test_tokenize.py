"""The one tokeniser (``search.tokenize``): the same text gives the same terms everywhere."""

from __future__ import annotations

import sqlite3

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxstore.search import unicode61
from ctxstore.search.fts5 import TOKENIZE, Fts5Engine
from ctxstore.search.tokenize import (
    PROSE,
    PROSE_QUERY,
    Analyzer,
    index_text,
    is_significant,
    phrase,
    terms,
    tokenize,
    words,
)


def test_tokenize_identifier_gives_its_whole_and_its_parts() -> None:
    assert terms("get_pager_file") == ["get_pager_file", "get", "pager", "file"]
    assert terms("HTTPServer getPagerFile") == ["httpserver", "http", "server",
                                                "getpagerfile", "get", "pager", "file"]
    assert terms("__init__ a 42 utf8") == ["init", "a", "42", "utf8", "utf", "8"]


def test_tokenize_folds_as_unicode61() -> None:
    assert terms("Café Straße naïve_bayes ＡＢＣ") == ["cafe", "straße", "naive_bayes", "naive",
                                                      "bayes", "ａｂｃ"]
    assert terms("getÜbersicht") == ["getubersicht", "get", "ubersicht"]
    assert words("a—b «x» 東京") == ["a", "b", "x", "東京"]


def test_tokenize_significant_terms_drop_noise() -> None:
    assert tokenize("get_pager_file the a 42 x HTTP") == ["get_pager_file", "get", "pager", "file",
                                                          "http"]
    assert not is_significant("the") and not is_significant("42") and is_significant("db")


def test_tokenize_index_text_keeps_words_adjacent_then_parts() -> None:
    assert index_text("call get_pager_file now") == "call get_pager_file now get pager file"
    assert phrase("call get_pager_file NOW") == "call get_pager_file now"
    assert phrase("!!!") == index_text("") == ""


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="_"),
               max_size=40))
def test_tokenize_words_without_underscores_are_unicode61_words(text: str) -> None:
    """A text's whole terms are the tokens FTS5's unicode61 stores for it (checked there)."""
    assert phrase(text).split() == unicode61.words(text)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("abAB_ 1é—ßİ\u0301.xY")), max_size=40))
def test_tokenize_every_engine_stores_the_tokenisers_terms(text: str) -> None:
    """FTS5 under ``TOKENIZE`` keeps ``index_text`` term for term, whatever the text."""
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(x, {TOKENIZE})")
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, instance)")
    conn.execute("INSERT INTO t(rowid, x) VALUES (1, ?)", (index_text(text),))
    stored = [term for (term,) in conn.execute("SELECT term FROM v ORDER BY offset")]
    assert stored == index_text(text).split()
    assert sorted(stored) == sorted(terms(text))


def test_tokenize_schema_tables_use_the_tokenisers_clause() -> None:
    from ctxstore.index.codedb import expected_code_schema
    from ctxstore.index.schema import SCHEMA
    from ctxstore.memory.db.schema import _TURNS_FTS

    code = "\n".join(str(row) for row in expected_code_schema())
    assert SCHEMA.count(TOKENIZE) == 2  # nodes_fts, runs_fts
    assert code.count("ascii tokenchars") == 1  # chunks_fts, in this clone's code index
    assert _TURNS_FTS.count(TOKENIZE) == 1  # turns_fts, as schemas 3 and 4 make it
    assert "unicode61" not in SCHEMA + code + _TURNS_FTS


def test_tokenize_prose_stems_documents_and_queries_alike() -> None:
    """Transcript memory's terms: Snowball English stems; stop words judged before stemming."""
    assert PROSE.tokenize("retry") == PROSE.tokenize("retries") == PROSE.tokenize("retried")
    assert PROSE.tokenize("questions") == PROSE.tokenize("question")
    assert PROSE.tokenize("does it") == []  # `does` stems to `doe`, and is still a stop word
    assert PROSE.terms("get_headers") == ["get_headers", "get", "header"]  # identifiers kept
    assert PROSE.index_text("Retries failed") == " ".join(PROSE.terms("retry fails"))
    assert tokenize("retries") == ["retries"]  # the code index and knowledge search do not stem
    # A question asked of memory drops the words that say nothing of its subject; the same
    # words stay terms of the full text.
    assert PROSE_QUERY.tokenize("What happened after the retries?") == ["happen", "retri"]
    assert PROSE.tokenize("after") == ["after"] and "after" in PROSE_QUERY.terms("after")


def test_tokenize_a_stemmer_changes_every_index_and_query_alike() -> None:
    """Where a Snowball stemmer plugs in: one ``Analyzer`` for documents and queries."""
    def plural(word: str) -> str:  # a toy stemmer
        return word[:-1] if word.endswith("s") and len(word) > 3 else word

    stems = Analyzer(stem=plural)
    assert stems.terms("Retries parsers get_headers") == ["retrie", "parser", "get_headers", "get",
                                                         "header"]
    assert stems.phrase("parsers") == stems.phrase("parser") == "parser"
    assert stems.held_terms("the parsers", ["parser", "the"]) == ["parser", "the"]
    assert Analyzer().terms("parsers") == ["parsers"]  # off by default


def test_tokenize_the_engine_indexes_and_finds_the_same_terms() -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE nodes_fts USING fts5(content, summary, {TOKENIZE})")
    engine = Fts5Engine(conn)
    engine.index_document(1, {"content": "We call getPagerFile() in Straße.py"})
    for typed in ("pager", "getPagerFile", "STRAßE", "pager file", "get pager"):
        assert [r for r, _ in engine.search([phrase(typed)])] == [1], typed
    assert engine.search([phrase("strasse")]) == []  # unicode61 keeps ß: so does the tokeniser
