"""A pack's seeds: every indexed file ranked for the task (spec 002 §12, step 1).

``rank_files`` runs the method of ``search.rank`` over the index: BM25 over the
``file_terms`` postings of the task's terms (read rarest first under ``MAX_POSTINGS``), the
path field, definitions named in the task, the test prior, one import hop; source files and
prose ranked as separate corpora. On a large index (``search.tantivy_index``) Tantivy scores
the two fields from the same postings, every term at once. The best files are the seeds.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ctxstore.index.retrieval import (
    BODY,
    PATH,
    FileCorpus,
    document_counts,
    file_corpus,
    has_code,
    import_edges,
    postings,
    symbols_with_names,
)
from ctxstore.search.rank import Corpus, FieldStats, Hit, Params, TextScores, defined_names
from ctxstore.search.rows import terms_held
from ctxstore.search.tantivy_index import PROSE_LANGUAGES, TantivyUnusable
from ctxstore.search.task import Query, parse_query

if TYPE_CHECKING:
    import sqlite3

    from ctxstore.search.tantivy_index import Served

__all__ = ["MIN_TERMS", "MAX_POSTINGS", "TANTIVY_FILES", "Ranking", "has_search_terms",
           "rank_files", "rank_files_lazily", "hit_why"]

MIN_TERMS = 8              # terms whose body postings are always read (the rarest)
MAX_POSTINGS = 10_000      # more terms only while their postings stay under this (bench/pack.py --caps)
TANTIVY_FILES = 1000       # files Tantivy scores per group (the best; the rest score 0 by text;
                           # as many as a pack lists: bench/pack.py --caps MRR as with 2,000)


def has_search_terms(task: str) -> bool:
    """Whether the task holds a word to search for (not only punctuation, stop words, numbers).

    A task without one still gives a valid pack: no ranked files or matched memory, only
    the recent tasks and log when the narrative is included.

    Args:
        task: Any text.

    Returns:
        True when the cleaned query (``text.parse_query``) has a term.
    """
    return bool(parse_query(task).weights)


def _lookups(conn: sqlite3.Connection, query: Query, field: int) -> list[str]:
    """The query's terms worth reading postings of one field for, within a cost cap.

    Terms are taken rarest first while the postings they cost (their document counts) stay
    under ``MAX_POSTINGS``, at least ``MIN_TERMS`` of them: a long text of common words costs
    what a few rare ones do, and no loop runs over every file of a common word.
    """
    counts = document_counts(conn, list(query.weights), field)
    chosen: list[str] = []
    spent = 0
    for term in sorted(counts, key=lambda t: (counts[t], t)):
        if len(chosen) >= MIN_TERMS and spent + counts[term] > MAX_POSTINGS:
            break
        chosen.append(term)
        spent += counts[term]
    return chosen


def rank_files(conn: sqlite3.Connection, query: Query, params: Params | None = None,
               *, limit: int | None = None, matched_only: bool = False,
               explain: int | None = None, served: Served | None = None) -> list[Hit]:
    """Rank the indexed files for a query with ``rank.Corpus`` over the index.

    Body and path statistics come from ``file_terms`` (the same tokens as the in-process
    ranker, ``search.tokenize``), definitions from the ``symbols`` name index, the graph from
    ``code_edges``. Source files and the others (prose, configuration, files of no known
    language) are ranked as two corpora, each with its own statistics, and merged by score:
    a repository's documentation does not change how its code ranks (docs/retrieval.md).
    With ``served`` (a large index, ``search.tantivy_index``), Tantivy scores the two fields
    from the same postings, every term of the query at once, instead of the rarest terms'
    postings read here.

    Args:
        conn: A current index connection.
        query: The parsed task.
        params: Ranking weights (defaults: the tuned ones).
        limit: At most this many hits (None: every file).
        matched_only: Leave out the files that score 0.
        explain: Only the first this many hits list their matched terms (None: all).
        served: The Tantivy index serving this index, or None.

    Returns:
        Hits, best first; empty when the index has no code tables.
    """
    ranking = rank_files_lazily(conn, query, params, limit=limit, matched_only=matched_only,
                                explain=explain, served=served)
    ranking.explain(ranking.hits if explain is None else ranking.hits[:explain])
    return ranking.hits


class Ranking:
    """Ranked files whose matched terms are read when asked for (``explain``).

    The postings' ranking lists the terms of its first hits as it ranks (it holds their
    postings); Tantivy's lists none until asked, and then reads those of the hits asked
    about only, in one query (``search.rows.terms_held``): a pack asks for the files whose
    chunks it reads, not for every file it explains.

    Attributes:
        hits: The hits, best first.
    """

    __slots__ = ("hits", "_explain")

    def __init__(self, hits: list[Hit], explain: Callable[[Sequence[Hit]], None]) -> None:
        self.hits = hits
        self._explain = explain

    def explain(self, hits: Sequence[Hit]) -> None:
        """Fill ``terms`` of these hits (among the first ``explain`` the ranking was asked for).

        Args:
            hits: Some of ``self.hits``.
        """
        self._explain(hits)


def _explained(hits: Sequence[Hit]) -> None:
    """Nothing to read: the postings' ranking listed their terms already."""


def rank_files_lazily(conn: sqlite3.Connection, query: Query, params: Params | None = None,
                      *, limit: int | None = None, matched_only: bool = False,
                      explain: int | None = None, served: Served | None = None) -> Ranking:
    """``rank_files``, with the hits' matched terms read on request (``Ranking.explain``).

    Args:
        conn: A current index connection.
        query: The parsed task.
        params: Ranking weights (defaults: the tuned ones).
        limit: At most this many hits (None: every file).
        matched_only: Leave out the files that score 0.
        explain: Terms may be asked of the first this many hits only (None: of all).
        served: The Tantivy index serving this index, or None.

    Returns:
        The ranking; the first ``explain`` hits of the postings' ranking list their terms
        already, those of Tantivy's when asked (``Ranking.explain``).
    """
    if not has_code(conn):
        return Ranking([], _explained)
    files = file_corpus(conn, PROSE_LANGUAGES)
    p = params or Params()
    if served is not None and (p.k1, p.body_b, p.path_b) != (1.2, 0.75, 0.0):
        served = None  # Tantivy's BM25 has these constants (and every path is as long)
    spellings = {*query.spelled, *(s.strip("_") for s in query.spelled if s.strip("_"))}
    definitions = [(file, name.lower()) for file, qualname, name, kind
                   in symbols_with_names(conn, sorted(spellings))
                   if defined_names([(qualname, name, kind)])]
    # source files, then the others (prose, configuration, no known language)
    groups = ((0, files.split, "source"), (files.split, len(files.ids), "other"))
    # the terms whose postings are read, or that Tantivy scores: the rarest, under a cap
    chosen = {field: _lookups(conn, query, field) for field in (BODY, PATH)}
    at = dict(zip(files.paths, range(len(files.paths)), strict=True))
    if served is not None:
        try:
            # no group lists terms: those of the hits asked about are read at once (_explain)
            hits = [hit for lo, hi, corpus in groups if hi > lo
                    for hit in _rank_group(conn, files, at, lo, hi, None, definitions, query,
                                           p, limit, matched_only, 0,
                                           _TantivyText(served, corpus, files, lo, hi, conn, p,
                                                        chosen))]
        except (_Stale, TantivyUnusable):  # rowids Tantivy recorded name other files now, or
            # its files are damaged: the postings answer, and the next write rebuilds it
            from ctxstore.search.tantivy_index import forget_tantivy

            forget_tantivy(served.folder.parent.parent)
            return rank_files_lazily(conn, query, params, limit=limit,
                                     matched_only=matched_only, explain=explain)
    else:
        found = {field: postings(conn, terms, field) for field, terms in chosen.items()}
        hits = [hit for (lo, hi, _), postings_of in zip(groups, _split_postings(found, files),
                                                        strict=True)
                if hi > lo
                for hit in _rank_group(conn, files, at, lo, hi, postings_of, definitions, query,
                                       p, limit, matched_only, explain)]
    hits.sort(key=lambda h: (-h.score, h.path))
    hits = hits if limit is None else hits[:limit]
    if served is None:
        return Ranking(hits, _explained)
    return Ranking(hits, lambda asked: _explain(conn, files, at, asked, query, chosen))


class _Stale(Exception):
    """A Tantivy hit names a file that is not the one it indexed."""


class _TantivyText:
    """``rank.TextScores`` of one group of files, from the Tantivy index serving it.

    It scores the terms the postings would be read for (``chosen``: the rarest of each
    field, ``_lookups``), so both rankings weigh the same terms and list the same matches.
    """

    def __init__(self, served: Served, corpus: str, files: FileCorpus, lo: int, hi: int,
                 conn: sqlite3.Connection, params: Params, chosen: Mapping[int, Sequence[str]]
                 ) -> None:
        self.served, self.corpus, self.conn, self.params = served, corpus, conn, params
        self.ids = files.ids[lo:hi]
        self.paths = files.paths[lo:hi]
        self.where = dict(zip(self.ids, range(hi - lo), strict=True))
        self.body, self.path = set(chosen[BODY]), set(chosen[PATH])

    def scores(self, weights: Mapping[str, float]) -> dict[int, float]:
        from ctxstore.search.tantivy_index import check_of

        out: dict[int, float] = {}
        where, paths = self.where.get, self.paths
        for rowid, score, check in self.served.ranked_files(
                self.corpus, weights, self.params.path_weight, TANTIVY_FILES,
                body=self.body, path=self.path):
            i = where(rowid)
            if i is None or check != check_of(paths[i]):
                raise _Stale
            out[i] = score
        return out

    def holding(self, terms: Iterable[str], docs: set[int], into: dict[int, set[str]]) -> None:
        scored = self.body | self.path
        for file, term in terms_held(self.conn, [self.ids[i] for i in docs],
                                     [t for t in terms if t in scored]):
            into.setdefault(self.where[file], set()).add(term)


def _explain(conn: sqlite3.Connection, files: FileCorpus, at: Mapping[str, int],
             hits: Sequence[Hit], query: Query, chosen: Mapping[int, Sequence[str]]) -> None:
    """Fill each hit's ``terms``: the scored terms its postings hold, in the query's order.

    What the postings' ranking lists for its explained hits (``FieldStats.holding`` of the
    terms it read), read for the hits kept after both groups are merged: one query for
    ``explain`` files, not ``explain`` of each group.
    """
    scored = {*chosen[BODY], *chosen[PATH]}
    terms = [t for t in query.weights if t in scored]
    if not hits or not terms:
        return
    rowids = [files.ids[at[h.path]] for h in hits]
    held: dict[int, set[str]] = {}
    for file, term in terms_held(conn, rowids, terms):
        held.setdefault(file, set()).add(term)
    position = {t: k for k, t in enumerate(query.raw_terms)}
    for hit, rowid in zip(hits, rowids, strict=True):
        hit.terms = sorted(held.get(rowid, ()), key=position.__getitem__)


_Postings = dict[int, dict[str, list[tuple[int, int]]]]  # field -> term -> (document, tf)


def _split_postings(found: Mapping[int, Mapping[str, Sequence[tuple[int, int]]]],
                    files: FileCorpus) -> tuple[_Postings, _Postings]:
    """The postings of the two groups of ``files`` (source files, the others).

    Each is numbered by its own group's documents; one pass over every posting.
    """
    where = dict(zip(files.ids, range(len(files.ids)), strict=True))
    cut = files.split
    out: tuple[_Postings, _Postings] = ({field: {} for field in found},
                                        {field: {} for field in found})
    for field, terms in found.items():
        for term, rows in terms.items():
            first: list[tuple[int, int]] = []
            second: list[tuple[int, int]] = []
            for file, tf in rows:
                at = where.get(file)
                if at is None:
                    continue
                if at < cut:
                    first.append((at, tf))
                else:
                    second.append((at - cut, tf))
            out[0][field][term] = first
            out[1][field][term] = second
    return out


def _rank_group(conn: sqlite3.Connection, files: FileCorpus, at: Mapping[str, int], lo: int,
                hi: int, fields: _Postings | None, definitions: Sequence[tuple[str, str]],
                query: Query, params: Params, limit: int | None, matched_only: bool,
                explain: int | None, text: TextScores | None = None) -> list[Hit]:
    """Rank one group of files (``files[lo:hi]``) by ``fields`` (postings) or ``text``.

    ``at``: every file's position in ``files``, by path.
    """
    paths = files.paths[lo:hi]

    def local(path: str) -> int | None:
        i = at.get(path)
        return None if i is None or not lo <= i < hi else i - lo

    definers: dict[str, list[int]] = {}
    for path, name in definitions:
        holders = definers.setdefault(name, [])
        i = local(path)
        if i is not None and i not in holders:
            holders.append(i)

    def expand(sources: Sequence[int]) -> list[tuple[int, int, str]]:
        chosen = {paths[i] for i in sources}
        out: list[tuple[int, int, str]] = []
        for importer, imported in import_edges(conn, sorted(chosen)):
            a, b = local(importer), local(imported)
            if a is None or b is None:
                continue
            if imported in chosen:
                out.append((b, a, "ImportedBy"))
            if importer in chosen:
                out.append((a, b, "Imports"))
        return out

    tests = files.tests[bisect.bisect_left(files.tests, lo):bisect.bisect_left(files.tests, hi)]
    corpus = Corpus(paths,
                    None if fields is None else FieldStats(files.body[lo:hi], fields[BODY],
                                                           params.body_b),
                    None if fields is None else FieldStats(files.path_terms[lo:hi], fields[PATH],
                                                           params.path_b),
                    definers, expand if params.graph_weight else None, params,
                    [i - lo for i in tests], text)
    return corpus.rank(query, limit, matched_only=matched_only, explain=explain)


def hit_why(hit: Hit) -> dict[str, Any]:
    """``why`` of a ranked file: its matched terms, defined names, or the edge that raised it."""
    why: dict[str, Any] = {"matched_terms": list(hit.terms)} if hit.terms else {}
    if hit.defines:
        why["defines"] = list(hit.defines)
    if hit.named:
        why["named"] = list(hit.named)
    if hit.via is not None:
        why["edge_path"] = [hit.via[0], hit.via[1], hit.path]
    return why
