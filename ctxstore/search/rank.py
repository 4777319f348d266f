"""File ranking for free-text tasks: fielded BM25, definitions, a test prior, the import graph.

The ranker works on abstract inputs: ``Document`` (a path, its text tokens, the names it
defines and the paths it imports), so the same method runs in-process over a tree
(``bench/retrieval.py``) and over the index (``ctx pack``). Scoring, for one query:

1. **Fields.** BM25 over the body (k1 1.2, b 0.75) plus ``path_weight`` times BM25 over the
   path's directories and stem (``path_b`` 0: a path is short, its length says little).
   IDF is ``ln(1 + (N - df + 0.5) / (df + 0.5))``, which never reaches zero (FTS5 floors it
   for terms in half the rows, which erases common identifiers in small repositories).
2. **Definitions.** A code-like name in the query (``Client``, ``get_host``, ``a::b``) adds
   ``symbol_boost`` times the best score so far to each file defining it, split among them
   (names defined in more than ``max(3, N/20)`` files are too common to point anywhere).
3. **Test prior.** Test, benchmark and example files are multiplied by ``test_prior``.
4. **Graph.** Each file gains ``graph_weight`` times the best score among the files it
   imports or is imported by (one hop), with the edge recorded as the reason.

Pure Python, no NumPy or networkx: a hook may call it. Weights were chosen by
leave-one-repository-out on the development set (docs/retrieval.md).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from heapq import nlargest
from itertools import compress
from operator import itemgetter
from typing import Protocol

from ctxstore.records import dataclass, field
from ctxstore.search.task import Query
from ctxstore.search.tokenize import cached_is_test_path, path_tokens

__all__ = ["Document", "Params", "Hit", "FieldStats", "TextScores", "Expander", "Corpus",
           "DEFINITION_KINDS", "defined_names"]

# Symbol kinds whose names a query may mention to point at the defining file.
DEFINITION_KINDS = frozenset({"class", "function", "method", "struct", "enum", "trait", "interface",
                              "type_alias", "macro", "const", "static"})
_TEST_SCOPE = re.compile(r"(^|[.:])tests?([.:]|$)")


def defined_names(symbols: Iterable[tuple[str, str, str]]) -> list[str]:
    """The names a file defines that a query may mention, from its symbols.

    Args:
        symbols: ``(qualname, name, kind)`` per symbol.

    Returns:
        Names of definitions (``DEFINITION_KINDS``) outside test modules (``mod tests``).
    """
    return [name for qualname, name, kind in symbols
            if kind in DEFINITION_KINDS and not _TEST_SCOPE.search(qualname)]


@dataclass(frozen=True, slots=True)
class Document:
    """One file to rank.

    Attributes:
        path: Repository-relative POSIX path (its identity).
        tokens: The body's tokens (``text.tokenize`` of its content).
        defs: Bare names the file defines (functions, classes, items).
        imports: Paths of files this one imports (resolved; unknown ones left out).
    """

    path: str
    tokens: Sequence[str]
    defs: Sequence[str] = ()
    imports: Sequence[str] = ()


@dataclass(frozen=True, slots=True)
class Params:
    """Ranking weights (defaults: the leave-one-repository-out choice, docs/retrieval.md).

    Attributes:
        k1: BM25 term saturation, every field.
        body_b: Length normalisation of the body.
        path_weight: Weight of the path field.
        path_b: Length normalisation of the path field.
        symbol_boost: Share of the top score given to files defining a named symbol.
        file_boost: Share of the top score given to a file the query names (``websockets.py``):
            1, so a named file that matches any word of the query ranks first.
        test_prior: Multiplier for test, benchmark and example files.
        graph_weight: Share of the best import neighbour's score a file gains.
        max_seeds: How many of the best files spread score over the graph (20: the
            development set ranks the same from 10 to 50; its items ranked inside a
            10,000-file index rank best at 20, ``bench/pack.py --caps``).
    """

    k1: float = 1.2
    body_b: float = 0.75
    path_weight: float = 2.0
    path_b: float = 0.0
    symbol_boost: float = 0.5
    file_boost: float = 1.0
    test_prior: float = 0.3
    graph_weight: float = 0.2
    max_seeds: int = 20


@dataclass(slots=True)
class Hit:
    """A ranked file and why it ranks.

    Attributes:
        path: The file.
        score: Its final score (higher is better).
        terms: Query terms it matched (body, path or definitions).
        defines: Query names it defines.
        named: The query's file names that name it (``websockets.py``).
        via: ``(neighbour, label)`` when a graph edge from that neighbour raised it (the
            label read neighbour -> this file), else None.
    """

    path: str
    score: float
    terms: list[str] = field(default_factory=list)
    defines: list[str] = field(default_factory=list)
    via: tuple[str, str] | None = None
    named: list[str] = field(default_factory=list)


class FieldStats:
    """One field's BM25 statistics: every document's length, the postings of the query's terms.

    A source may hold postings for every term (``from_bags``) or only for the terms of the
    query at hand (the index loads just those): scoring reads nothing else.

    Args:
        lengths: Token count of the field in each document (by document number).
        postings: Term -> ``(document, term frequency)`` pairs.
        b: Length normalisation.
    """

    __slots__ = ("length", "avg", "postings", "n", "b")

    def __init__(self, lengths: Sequence[float], postings: Mapping[str, Sequence[tuple[int, int]]],
                 b: float) -> None:
        self.length = lengths
        self.n = len(lengths)
        self.avg = (sum(lengths) / self.n) if self.n else 1.0
        self.postings = postings
        self.b = b

    @classmethod
    def from_bags(cls, bags: Sequence[Counter[str]], b: float) -> FieldStats:
        """Statistics of documents given as term counts.

        Args:
            bags: Term counts per document.
            b: Length normalisation.

        Returns:
            The statistics, with postings for every term.
        """
        postings: dict[str, list[tuple[int, int]]] = {}
        for i, bag in enumerate(bags):
            for term, f in bag.items():
                postings.setdefault(term, []).append((i, f))
        return cls([sum(c.values()) for c in bags], postings, b)

    def scores(self, weights: Mapping[str, float], k1: float) -> dict[int, float]:
        """BM25 of every document containing a query term (sparse, over postings).

        Args:
            weights: Query term -> weight.
            k1: Term saturation.

        Returns:
            Document -> score, for documents with at least one term.
        """
        out: dict[int, float] = {}
        avg = self.avg or 1.0
        # norm = k1 * (1 - b + b * length / avg), as base + slope * length
        base, slope, length = k1 * (1 - self.b), k1 * self.b / avg, self.length
        get = out.get
        for term, qw in weights.items():
            posting = self.postings.get(term)
            if not posting:
                continue
            df = len(posting)
            idf = math.log(1 + (self.n - df + 0.5) / (df + 0.5)) * qw * (k1 + 1)
            for i, f in posting:
                out[i] = get(i, 0.0) + idf * f / (f + base + slope * length[i])
        return out

    def holding(self, terms: Iterable[str], docs: set[int], into: dict[int, set[str]]) -> None:
        """Add to ``into`` the terms each of ``docs`` contains (for the explained hits only).

        Args:
            terms: Query terms.
            docs: The documents asked about.
            into: Document -> its terms, added to.
        """
        for term in terms:
            posting = self.postings.get(term)
            if posting:
                for i in docs.intersection(map(itemgetter(0), posting)):
                    into.setdefault(i, set()).add(term)


class TextScores(Protocol):
    """Both text fields scored elsewhere (an engine that holds the postings: Tantivy).

    ``scores`` gives each document's body BM25 plus ``path_weight`` times its path BM25, as
    ``FieldStats.scores`` of the two fields would, for at least the best documents.
    """

    def scores(self, weights: Mapping[str, float]) -> dict[int, float]:
        """Document -> text score, for the documents holding a query term (the best of them).

        Args:
            weights: Query term -> weight.

        Returns:
            The scores.
        """
        ...

    def holding(self, terms: Iterable[str], docs: set[int], into: dict[int, set[str]]) -> None:
        """Add to ``into`` the terms each of ``docs`` holds, in either field (``FieldStats.holding``).

        Args:
            terms: Query terms.
            docs: The documents asked about.
            into: Document -> its terms, added to.
        """
        ...


# Graph edges from source documents: (source, neighbour, label read source -> neighbour:
# "Imports" when the source imports the neighbour, "ImportedBy" when the neighbour imports it).
Expander = Callable[[Sequence[int]], Iterable[tuple[int, int, str]]]


class Corpus:
    """Files prepared for ranking: field statistics, definitions and the import graph.

    Args:
        paths: The files, by document number.
        body: Statistics of the body field.
        path: Statistics of the path field.
        definers: Lower-cased defined name -> documents defining it (at least the query's names).
        expand: The import graph around given documents, or None for no graph.
        params: Weights; the defaults are the tuned ones.
        tests: The test, benchmark and example files among them (``text.is_test_path``),
            when already known (the index keeps them); None: judged here from the paths.
        text: Both fields scored by an engine instead of ``body`` and ``path`` (which are
            then not read).
    """

    def __init__(self, paths: Sequence[str], body: FieldStats | None, path: FieldStats | None,
                 definers: Mapping[str, Sequence[int]], expand: Expander | None,
                 params: Params | None = None, tests: Sequence[int] | None = None,
                 text: TextScores | None = None) -> None:
        self.paths = paths
        self.body = body
        self.path = path
        self.text = text
        self.definers = definers
        self.expand = expand
        self.params = params or Params()
        if tests is None:
            is_test = cached_is_test_path()
            tests = [i for i, path in enumerate(paths) if is_test(path)]
        self.tests = tests

    @classmethod
    def from_documents(cls, docs: Iterable[Document], params: Params | None = None) -> Corpus:
        """A corpus held in memory.

        Args:
            docs: The files (paths unique; later duplicates are ignored).
            params: Weights.

        Returns:
            The corpus.
        """
        p = params or Params()
        seen: dict[str, Document] = {}
        for doc in docs:
            seen.setdefault(doc.path, doc)
        kept = list(seen.values())
        index = {doc.path: i for i, doc in enumerate(kept)}
        definers: dict[str, list[int]] = {}
        for i, doc in enumerate(kept):
            for name in {n.lower() for n in doc.defs}:
                definers.setdefault(name, []).append(i)
        adjacent: list[list[tuple[int, str]]] = [[] for _ in kept]
        for i, doc in enumerate(kept):
            for target in dict.fromkeys(doc.imports):
                j = index.get(target)
                if j is not None and j != i:
                    adjacent[i].append((j, "Imports"))
                    adjacent[j].append((i, "ImportedBy"))

        def expand(sources: Sequence[int]) -> Iterable[tuple[int, int, str]]:
            return [(j, i, label) for j in sources for i, label in adjacent[j]]

        return cls([d.path for d in kept],
                   FieldStats.from_bags([Counter(d.tokens) for d in kept], p.body_b),
                   FieldStats.from_bags([Counter(path_tokens(d.path)) for d in kept], p.path_b),
                   definers, expand, p)

    def rank(self, query: Query, limit: int | None = None, *, matched_only: bool = False,
             explain: int | None = None) -> list[Hit]:
        """Rank the files for ``query``, best first (ties by path).

        Args:
            query: A parsed query (``text.parse_query``).
            limit: Return only this many (None: every file; unmatched ones score 0).
            matched_only: Leave out the files that score 0.
            explain: Only the first this many hits list the terms they matched (``terms``
                is empty after them); None: every hit.

        Returns:
            The hits.
        """
        p = self.params
        n = len(self.paths)
        score = [0.0] * n
        fields = [(f, w) for f, w in ((self.body, 1.0), (self.path, p.path_weight))
                  if w and f is not None and self.text is None]
        for fld, weight in fields:
            for i, s in fld.scores(query.weights, p.k1).items():
                score[i] += weight * s
        if self.text is not None:
            for i, s in self.text.scores(query.weights).items():
                score[i] += s
        top = max(score, default=0.0) or 1.0
        defines: dict[int, list[str]] = {}
        tests = set(self.tests) if query.names else set()
        for name in sorted(query.names):
            holders = self.definers.get(name, ())
            # A test double of the name (a fixture's own `Store`) is not what the task means
            # while the product defines it too.
            holders = [i for i in holders if i not in tests] or holders
            if holders and len(holders) <= max(3, n // 20):
                for i in holders:
                    score[i] += p.symbol_boost * top / len(holders)
                    defines.setdefault(i, []).append(name)
        named = self._named(query.files) if query.files and p.file_boost else {}
        for i, names in named.items():
            score[i] += p.file_boost * top * sum(share for _, share in names)
        if p.test_prior != 1.0:
            for i in self.tests:
                score[i] *= p.test_prior
        via = self._graph(score) if p.graph_weight and self.expand is not None else {}
        order = self._order(score, limit, matched_only)
        told = len(order) if explain is None else explain
        matched: dict[int, set[str]] = {}  # the terms of the hits that list them, read after
        for fld, _ in fields:              # ranking from the postings (not kept for every file)
            fld.holding(query.weights, set(order[:told]), matched)
        if self.text is not None:
            self.text.holding(query.weights, set(order[:told]), matched)
        position = {t: k for k, t in enumerate(query.raw_terms)}
        return [Hit(self.paths[i], score[i],
                    sorted(matched.get(i, ()), key=position.__getitem__) if k < told else [],
                    defines.get(i, []), via.get(i), [name for name, _ in named.get(i, ())])
                for k, i in enumerate(order)]

    def _named(self, files: Iterable[str]) -> dict[int, list[tuple[str, float]]]:
        """The files each name in ``files`` points at, with its share of the boost.

        A name matches a path that is it or ends with ``/`` and it; without an exact match,
        the same ignoring case. A name that fits more than ``max(3, N/20)`` files (``__init__.py``)
        points nowhere, as for defined names.
        """
        n = len(self.paths)
        out: dict[int, list[tuple[str, float]]] = {}
        for name in sorted(files):
            holders = _paths_ending(self.paths, name) \
                or _paths_ending([path.lower() for path in self.paths], name.lower())
            if holders and len(holders) <= max(3, n // 20):
                for i in holders:
                    out.setdefault(i, []).append((name, 1 / len(holders)))
        return out

    def _order(self, score: list[float], limit: int | None, matched_only: bool) -> list[int]:
        """Documents by score descending, ties by path; the first ``limit`` of them.

        Sorted by score alone (a C key) first; only the head that ``limit`` keeps, with
        every document tied with its last, is sorted again with the path.
        """
        pool = list(compress(range(len(score)), score)) if matched_only else range(len(score))
        ranked = sorted(pool, key=score.__getitem__, reverse=True)
        if limit is not None and len(ranked) > limit:
            end = limit
            if limit > 0:
                edge = score[ranked[limit - 1]]
                while end < len(ranked) and score[ranked[end]] == edge:
                    end += 1
            ranked = ranked[:end]
        paths = self.paths
        ranked.sort(key=lambda i: (-score[i], paths[i]))
        return ranked if limit is None else ranked[:limit]

    def _graph(self, score: list[float]) -> dict[int, tuple[str, str]]:
        """Add to each file a share of its best import neighbour's score (in place).

        Only the ``max_seeds`` best files spread score. Returns the files the graph raised
        above their own score, with the neighbour and label that did it.
        """
        p = self.params
        assert self.expand is not None
        # the best max_seeds, ties by document number (nlargest is sorted(reverse=True)[:k])
        sources = nlargest(p.max_seeds, compress(range(len(score)), score), key=score.__getitem__)
        best: dict[int, tuple[float, int, str]] = {}
        for j, i, label in self.expand(sources):
            if i != j and (i not in best or (score[j], -j) > (best[i][0], -best[i][1])):
                best[i] = (score[j], j, label)
        via: dict[int, tuple[str, str]] = {}
        for i, (s, j, label) in best.items():
            gain = p.graph_weight * s
            if gain > score[i]:
                via[i] = (self.paths[j], label)
            score[i] += gain
        return via


def _paths_ending(paths: Sequence[str], name: str) -> list[int]:
    """Positions of the paths that are ``name`` or end with ``/name``."""
    tail = "/" + name
    return [i for i, path in enumerate(paths) if path.endswith(tail) or path == name]
