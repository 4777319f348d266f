"""The Tantivy full-text engine: a second ``FullTextEngine``, outside SQLite.

Not on any hook path: nothing imports this module by default, and ``tantivy`` itself is
imported inside ``TantivyEngine.__init__`` (STYLE §2.2). It passes the contract suite
(``tests/contracts/test_fulltext.py``) beside FTS5, and ``search.tantivy_index`` keeps one
engine per corpus under ``.ctx/index/tantivy/`` that serves searches on a large index.

Documents are indexed as their terms (``search.tokenize.index_text``, the terms every
engine holds) under Tantivy's whitespace tokenizer, and a phrase's terms are its
space-separated words, so a phrase always meets the terms it was indexed as. Queries are
built as objects, never parsed, so a term's text is never query syntax. Each document's
key (the SQLite rowid) is a fast field, read for a whole page of hits at once; a document
may also carry a ``group`` (a file's path, say) by which it and its siblings are deleted
together. The SQL renderings run the search and hand the rowids to SQLite as one JSON
parameter (``json_each``).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ctxstore.search.engine import NODE_FIELDS, MatchMode, SqlFragment
from ctxstore.search.tokenize import index_text

__all__ = ["TantivyEngine", "HEAP_BYTES", "BUILD_HEAP_BYTES"]

_ANALYZER = "ctx_terms"
_KEY = "rowid"
_GROUP = "group"
_CHECK = "check"
HEAP_BYTES = 15_000_000  # tantivy's minimum per writer thread
# A build writes everything at once: a larger buffer makes fewer segments, and an index of
# one or two segments opens and searches faster than one of ten (9 ms against 1 ms to open
# 200,000 chunks).
BUILD_HEAP_BYTES = 256_000_000


class TantivyEngine:
    """Full-text search through Tantivy (implements ``FullTextEngine``).

    Writes are buffered and committed on the next search (or by ``commit``), so indexing
    many documents costs one commit.

    Args:
        path: An existing directory for the index files, or None for one in memory.
        fields: The text fields, in order.
        positions: Index term positions (phrases); without them a field holds term counts
            only (``index_terms``), which is all BM25 needs.
        weights: A boost per field (1 when absent): a field's BM25 is multiplied by it.
        checked: Keep a check value per document (``check`` of ``index_document``), which
            ``hits`` returns beside each rowid: the caller's proof that the row it reads
            for a rowid is the one indexed.
        heap_bytes: The writer's buffer (``BUILD_HEAP_BYTES`` for a whole build).
    """

    name = "tantivy"

    def __init__(self, path: Path | None = None, fields: Sequence[str] = NODE_FIELDS, *,
                 positions: bool = True, weights: Mapping[str, float] | None = None,
                 checked: bool = False, heap_bytes: int = HEAP_BYTES) -> None:
        import tantivy

        self._tv: Any = tantivy
        self.fields = tuple(fields)
        self._weights = dict(weights or {})
        builder = tantivy.SchemaBuilder()
        builder.add_integer_field(_KEY, stored=False, indexed=True, fast=True)
        builder.add_text_field(_GROUP, stored=False, tokenizer_name="raw", index_option="basic")
        self.checked = checked
        if checked:
            builder.add_integer_field(_CHECK, stored=False, indexed=False, fast=True)
        for field in self.fields:
            builder.add_text_field(field, stored=False, tokenizer_name=_ANALYZER,
                                   index_option="position" if positions else "freq")
        self._schema = builder.build()
        self._index = tantivy.Index(self._schema, path=None if path is None else str(path))
        self._index.register_tokenizer(
            _ANALYZER, tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).build())
        self._writer: Any = None
        self._reader: Any = None
        self._dirty = False
        self._heap = heap_bytes

    # -- writing -------------------------------------------------------------------------
    def _write(self) -> Any:
        if self._writer is None:
            self._writer = self._index.writer(heap_size=self._heap, num_threads=1)
        self._dirty = True
        return self._writer

    def index_document(self, rowid: int, fields: Mapping[str, str], *, group: str = "",
                       check: int = 0) -> None:
        """Add a document: the terms of each field (``tokenize.index_text``); absent ones empty.

        Args:
            rowid: The document's key.
            fields: Text per field name.
            group: What the document is deleted with (``delete_group``), if anything.
            check: Its check value (a ``checked`` engine).

        Raises:
            ValueError: for a field name the engine does not have.
        """
        unknown = set(fields) - set(self.fields)
        if unknown:
            raise ValueError(f"unknown full-text fields {sorted(unknown)}")
        self._add(rowid, {f: index_text(fields.get(f, "")) for f in self.fields}, group, check)

    def index_terms(self, rowid: int, terms: Mapping[str, Iterable[str]], *, group: str = "",
                    check: int = 0) -> None:
        """Add a document given as terms already (each field's terms, repeats counting).

        Args:
            rowid: The document's key.
            terms: Terms per field name (``search.tokenize`` output).
            group: What the document is deleted with, if anything.
            check: Its check value (a ``checked`` engine).
        """
        self._add(rowid, {f: " ".join(terms.get(f, ())) for f in self.fields}, group, check)

    def _add(self, rowid: int, texts: Mapping[str, str], group: str, check: int) -> None:
        doc = self._tv.Document()
        doc.add_integer(_KEY, rowid)
        if self.checked:
            doc.add_integer(_CHECK, check)
        if group:
            doc.add_text(_GROUP, group)
        for field, text in texts.items():
            doc.add_text(field, text)
        self._write().add_document(doc)

    def delete_document(self, rowid: int) -> None:
        """Remove a document (nothing happens if it is not there).

        Args:
            rowid: The document's key.
        """
        self._write().delete_documents_by_term(_KEY, rowid)

    def delete_group(self, group: str) -> None:
        """Remove every document added with ``group``.

        Args:
            group: The group (a file's path, say).
        """
        self._write().delete_documents_by_term(_GROUP, group)

    def clear(self) -> None:
        """Remove every document."""
        self.commit()  # commit pending adds first: delete_all does not reach them
        self._write().delete_all_documents()

    def commit(self) -> None:
        """Make every write so far durable and searchable."""
        if self._dirty:
            # Deletes in a commit apply to documents added before them, adds after: the
            # delete-then-index order of a replace survives into one commit.
            assert self._writer is not None
            self._writer.commit()
            self._writer.wait_merging_threads()
            self._writer = None
            self._dirty = False
        self._index.reload()
        self._reader = None

    def _searcher(self) -> Any:
        """The searcher of the last commit (one per commit, reused by every search)."""
        if self._dirty:
            self.commit()
        if self._reader is None:
            self._reader = self._index.searcher()
        return self._reader

    # -- searching -----------------------------------------------------------------------
    def _field_query(self, field: str, words: list[str]) -> Any:
        tv = self._tv
        query = tv.Query.term_query(self._schema, field, words[0]) if len(words) == 1 else \
            tv.Query.phrase_query(self._schema, field, words)
        weight = self._weights.get(field, 1.0)
        return query if weight == 1.0 else tv.Query.boost_query(query, weight)

    def _phrase(self, words: list[str]) -> Any:
        tv = self._tv
        return tv.Query.boolean_query([(tv.Occur.Should, self._field_query(field, words))
                                       for field in self.fields])

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
        return [(r, s) for r, s, _ in self.hits(terms, mode=mode, limit=limit)]

    def hits(self, terms: Sequence[str], *, mode: MatchMode = "all",
             limit: int | None = None) -> list[tuple[int, float, int]]:
        """``search``, each hit with its check value (0 in an engine that keeps none).

        Args:
            terms: Phrases.
            mode: ``"all"`` or ``"any"``.
            limit: At most this many results.

        Returns:
            ``(rowid, score, check)``, best first.
        """
        query = self._query(terms, mode)
        return [] if query is None else self._top(query, limit)

    def weighted(self, weights: Mapping[str, float], field_weights: Mapping[str, float],
                 limit: int, *, only: Mapping[str, Collection[str]] | None = None
                 ) -> list[tuple[int, float, int]]:
        """The best documents for weighted terms, as a fielded ranking scores them.

        A document scores the sum over fields and terms of ``field weight * term weight *
        BM25`` (Tantivy's: k1 1.2, b 0.75, IDF ``ln(1 + (N - df + 0.5) / (df + 0.5))``).

        Args:
            weights: Term -> weight.
            field_weights: Field -> weight (fields left out are not searched).
            limit: At most this many results.
            only: Field -> the terms scored in it (a field left out: every term of
                ``weights``); a ranking that reads the rarest terms only.

        Returns:
            ``(rowid, score, check)``, best first (ties by rowid).
        """
        tv = self._tv
        clauses = []
        for field, fw in field_weights.items():
            kept = None if only is None else only.get(field)
            for term, w in weights.items():
                if kept is not None and term not in kept:
                    continue
                if term and " " not in term and w * fw > 0:
                    q = tv.Query.term_query(self._schema, field, term)
                    clauses.append((tv.Occur.Should, tv.Query.boost_query(q, w * fw)))
        if not clauses:
            return []
        return self._top(tv.Query.boolean_query(clauses), limit)

    def _top(self, query: Any, limit: int | None) -> list[tuple[int, float, int]]:
        """The best hits of a query object, best first; ties by rowid, whatever the limit.

        Tantivy breaks a tie by where a document lies: enough hits are taken that every one
        tied with the last kept is among them, then they are ordered by rowid. Rowids (and
        check values) are read from fast fields, a page of hits at once.
        """
        searcher = self._searcher()
        total = searcher.num_docs
        if total == 0 or limit == 0:
            return []
        want = total if limit is None else min(total, limit + 1)
        while True:
            hits = searcher.search(query, limit=want, count=False).hits
            if limit is None or len(hits) < want or want >= total or len(hits) <= limit \
                    or hits[-1][0] != hits[limit - 1][0]:
                break  # every hit tied with the last kept is in
            want = min(total, want * 2)  # the last taken still ties with it: take more
        if limit is not None and len(hits) > limit:  # past the last kept, only its ties count
            end, edge = limit, hits[limit - 1][0]
            while end < len(hits) and hits[end][0] == edge:
                end += 1
            hits = hits[:end]
        addresses = [addr for _, addr in hits]
        rowids = searcher.fast_field_values(_KEY, addresses)
        checks = searcher.fast_field_values(_CHECK, addresses) if self.checked else [0] * len(hits)
        # (negated score, rowid, check): ordered in C, best first and ties by rowid (every
        # document has its rowid, and a checked one its check, so no None is compared)
        found = sorted(zip([-s for s, _ in hits], rowids, checks, strict=True))
        return [(r, -s, c) for s, r, c in (found if limit is None else found[:limit])]

    def doc_count(self) -> int:
        """How many documents the index holds (after a commit)."""
        return int(self._searcher().num_docs)

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
