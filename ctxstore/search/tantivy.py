"""The Tantivy full-text engine: a second ``FullTextEngine``, outside SQLite.

Not on any hot path: nothing imports this module by default, and ``tantivy`` itself is
imported inside ``TantivyEngine.__init__`` (STYLE §2.2). Code intelligence will put it
behind the same protocol for large corpora; today it proves the protocol is not FTS5
in disguise, by passing ``tests/contracts/test_fulltext.py``.

Documents are indexed as their terms (``search.tokenize.index_text``, the terms every
engine holds) under Tantivy's whitespace tokenizer, and a phrase's terms are its
space-separated words, so a phrase always meets the terms it was indexed as. Queries are
built as objects, never parsed, so a term's text is never query syntax. The SQL
renderings run the search and hand the rowids to SQLite as one JSON parameter
(``json_each``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ctxstore.search.engine import NODE_FIELDS, MatchMode, SqlFragment
from ctxstore.search.tokenize import index_text

__all__ = ["TantivyEngine"]

_ANALYZER = "ctx_words"
_KEY = "rowid"
_HEAP_BYTES = 15_000_000  # tantivy's minimum per writer thread


class TantivyEngine:
    """Full-text search through Tantivy (implements ``FullTextEngine``).

    Writes are buffered and committed on the next search, so indexing many documents
    costs one commit.
    """

    name = "tantivy"

    def __init__(self, path: Path | None = None) -> None:
        """Open (or create) an index in ``path``, or in memory when it is None.

        Args:
            path: An existing directory for the index files, or None.
        """
        import tantivy

        self._tv: Any = tantivy
        builder = tantivy.SchemaBuilder()
        builder.add_integer_field(_KEY, stored=True, indexed=True, fast=True)
        for field in NODE_FIELDS:
            builder.add_text_field(field, stored=False, tokenizer_name=_ANALYZER,
                                   index_option="position")
        self._schema = builder.build()
        self._index = tantivy.Index(self._schema, path=None if path is None else str(path))
        self._index.register_tokenizer(
            _ANALYZER, tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).build())
        self._writer = self._index.writer(heap_size=_HEAP_BYTES, num_threads=1)
        self._dirty = False

    # -- writing -------------------------------------------------------------------------
    def index_document(self, rowid: int, fields: Mapping[str, str]) -> None:
        """Add a document; absent fields are indexed as empty text.

        Args:
            rowid: The document's key.
            fields: Text per field name.

        Raises:
            ValueError: for a field name outside ``NODE_FIELDS``.
        """
        unknown = set(fields) - set(NODE_FIELDS)
        if unknown:
            raise ValueError(f"unknown full-text fields {sorted(unknown)}")
        doc = self._tv.Document()
        doc.add_integer(_KEY, rowid)
        for field in NODE_FIELDS:
            doc.add_text(field, index_text(fields.get(field, "")))
        self._writer.add_document(doc)
        self._dirty = True

    def delete_document(self, rowid: int) -> None:
        """Remove a document (nothing happens if it is not there).

        Args:
            rowid: The document's key.
        """
        self._writer.delete_documents_by_term(_KEY, rowid)
        self._dirty = True

    def clear(self) -> None:
        """Remove every document."""
        self._searcher()  # commit pending adds first: delete_all does not reach them
        self._writer.delete_all_documents()
        self._dirty = True

    def _searcher(self) -> Any:
        if self._dirty:
            # Deletes in a commit apply to documents added before them, adds after: the
            # delete-then-index order of a replace survives into one commit.
            self._writer.commit()
            self._writer.wait_merging_threads()
            self._writer = self._index.writer(heap_size=_HEAP_BYTES, num_threads=1)
            self._index.reload()
            self._dirty = False
        return self._index.searcher()

    # -- searching -----------------------------------------------------------------------
    def _phrase(self, words: list[str]) -> Any:
        tv = self._tv
        per_field = []
        for field in NODE_FIELDS:
            if len(words) == 1:
                per_field.append(tv.Query.term_query(self._schema, field, words[0]))
            else:
                per_field.append(tv.Query.phrase_query(self._schema, field, words))
        return tv.Query.boolean_query([(tv.Occur.Should, q) for q in per_field])

    def _query(self, terms: Sequence[str], mode: MatchMode) -> Any | None:
        """The query object for ``terms``, or None when nothing can match."""
        tv = self._tv
        clauses = []
        for term in terms:
            words = term.split()
            if not words:
                if mode == "all":
                    return None  # a phrase without words matches no document
                continue
            clauses.append(self._phrase(words))
        if not clauses:
            return None
        occur = tv.Occur.Must if mode == "all" else tv.Occur.Should
        return tv.Query.boolean_query([(occur, q) for q in clauses])

    def search(self, terms: Sequence[str], *, mode: MatchMode = "all",
               limit: int | None = None) -> list[tuple[int, float]]:
        """Search the index; see ``FullTextEngine.search``.

        Args:
            terms: Phrases.
            mode: ``"all"`` or ``"any"``.
            limit: At most this many results.

        Returns:
            ``(rowid, score)`` pairs, best first (Tantivy's BM25; ties by rowid).
        """
        query = self._query(terms, mode)
        if query is None:
            return []
        searcher = self._searcher()
        total = searcher.num_docs
        if total == 0:
            return []
        # All hits, then the protocol's order: Tantivy breaks score ties by address.
        result = searcher.search(query, limit=total, count=False)
        hits = [(int(searcher.doc(addr)[_KEY][0]), float(score)) for score, addr in result.hits]
        hits.sort(key=lambda h: (-h[1], h[0]))
        return hits if limit is None else hits[:limit]

    def sql_rowids(self, terms: Sequence[str], mode: MatchMode = "all") -> SqlFragment:
        """Run the search; render its rowids as ``SELECT value FROM json_each(?)``.

        Args:
            terms: Phrases.
            mode: ``"all"`` or ``"any"``.

        Returns:
            The SELECT and its one JSON parameter.
        """
        rowids = [r for r, _ in self.search(terms, mode=mode)]
        return "SELECT value FROM json_each(?)", [json.dumps(rowids)]

    def sql_scores(self, terms: Sequence[str], mode: MatchMode = "all") -> SqlFragment:
        """Run the search; render ``r`` and ``score`` (negated: lower ranks first).

        Args:
            terms: Phrases.
            mode: ``"all"`` or ``"any"``.

        Returns:
            The SELECT and its one JSON parameter.
        """
        pairs = [[r, -s] for r, s in self.search(terms, mode=mode)]
        return ("SELECT json_extract(value, '$[0]') AS r, json_extract(value, '$[1]') AS score "
                "FROM json_each(?)", [json.dumps(pairs)])
