"""Ranked free-text search: any text in, the best matching memory, code and runs out (issue 14).

``ctx search``, recall's free-text fallback and the hooks' relevant context all rank here.
The text is tokenised by ctx (``search.tokenize``: the terms every index holds), never handed
to FTS5's query syntax: ``"quoted phrases"`` stay phrases, everything else (quotes,
parentheses, ``*``, ``-``, operators, code punctuation) separates words. Common English words
are dropped when something else is left, and a long text keeps its ``MAX_TERMS`` rarest terms
(by FTS5's own document counts), so 10 KB of text costs what a sentence does.

Ranking: any term may match (a question or a commit message still finds the node that holds
its key words); each candidate's BM25 score (SQLite's, negated so higher is better) is
multiplied by ``1 + coverage`` (the share of the query's terms the document holds) and by
``ALL_TERMS_BOOST`` when it holds every term. A symbol whose name is a query word scores as
the best other hit does: typing a function's name finds it first. Reads only; no SQL here
(``search.ranked``).

Stored runs of commands (kind ``run``, ``index.runs``: every ``ctx add command`` run, not only
the latest) are searched by their name, command line, status and diagnostics, stemmed as prose
(``tokenize.PROSE``: "why did the tests fail" finds a run whose status is ``failed`` and whose
diagnostics name ``tests/test_calc.py``). A command's runs come back as one hit, its best run
(the newest among equals), with what the command did next (``failed`` then ``passed``, and
when). A run the query asks about (a word of its name, command line or status, or ``run``,
``test``, ``build``, ``check``, ``lint``, ``exit``) scores as the best other hit does; one matched
through its diagnostics only, half that; and among other kinds at most ``MIXED_RUNS`` runs are
shown, so a question about code is not flooded with old test output.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Literal

from ctxstore.records import dataclass
from ctxstore.search.engine import SearchSession
from ctxstore.search.ranked import (
    ChunkRow,
    NodeText,
    SymbolRow,
    document_frequencies,
    ranked_chunks,
    ranked_nodes,
    symbols_named,
)
from ctxstore.search.rows import chunks_at, nodes_at
from ctxstore.search.tokenize import PROSE_STOP_WORDS, held_terms, index_text, phrase
from ctxstore.search.tokenize import terms as terms_of
from ctxstore.search.tokenize import words as words_of

if TYPE_CHECKING:
    from ctxstore.embed.engine import Embedder
    from ctxstore.index.read import NodeRow
    from ctxstore.index.runs import RunRow
    from ctxstore.search.tantivy_index import Served

__all__ = ["KINDS", "FULL_MATCH", "MAX_TERMS", "MAX_PHRASE_WORDS", "ALL_TERMS_BOOST", "MIXED_RUNS",
           "SearchTerms", "Hit", "RunHit", "SearchSession", "search_terms", "search",
           "failing_runs"]

KINDS = ("node", "narrative", "chunk", "symbol", "run")
# Runs shown at most among other kinds of hit (each command's best run is one hit).
MIXED_RUNS = 3
# A run matched only through its diagnostics weighs this much of one the query asks about.
_UNASKED_RUN = 0.5
# Words that ask about runs whatever the command is named (stems, ``tokenize.PROSE``).
_RUN_WORDS = frozenset({"run", "ran", "test", "build", "check", "lint", "exit", "command"})
# A hit holding this many of the query's terms (all of them, for a shorter query) is as
# relevant as can be: long prompts and tasks are not penalised for their many words (the
# prompt hook's memory, ``packs.session``; a pack's memory items, ``packs.pack``).
FULL_MATCH = 4
MAX_TERMS = 24
# A quoted span of more words than this is not taken as a phrase (``search_terms``).
MAX_PHRASE_WORDS = 8
ALL_TERMS_BOOST = 2.0
# Metadata key of a node made from a narrative entry (``narrative.entries.META_PATH``; not
# imported from there, which would load the narrative writer on the hook path).
_NARRATIVE_KEY = "narrative_path"
# A document's text is tokenised up to this many characters to find the terms it holds.
_COVERAGE_CHARS = 20_000
_NODE_KINDS = frozenset({"node", "narrative"})
_NAME = re.compile(r"\w+")  # a symbol's name as written: read_config, ReadConfig
_PHRASE = re.compile(r'"([^"]*)"')
@dataclass(frozen=True, slots=True)
class SearchTerms:
    """What a text searches for: phrases of terms (a single term is one) and names as written.

    Names are identifiers as typed (``retry_socket``), looked up as symbol names.
    """

    terms: tuple[str, ...]
    names: tuple[str, ...]

    def __bool__(self) -> bool:
        """Whether there is anything to search for."""
        return bool(self.terms)


def search_terms(text: str, conn: sqlite3.Connection | None = None,
                 max_terms: int = MAX_TERMS) -> SearchTerms:
    """Tokenise any text into search terms; never fails.

    Args:
        text: Anything a user or a prompt may hold.
        conn: An index connection, to keep the rarest words of a long text (else the longest).
        max_terms: At most this many terms.

    Returns:
        The terms (phrases first, then words in order), possibly none.
    """
    text = text.replace("\0", " ")
    spans = [m.group(1) for m in _PHRASE.finditer(text)]
    # A quoted span of a few words is a phrase; a longer one is a pasted text's stray quotes
    # pairing up (a log, code), whose words are searched one by one.
    counts = [len(words_of(span)) for span in spans]
    phrases = [phrase(span) for span, n in zip(spans, counts, strict=True)
               if 1 < n <= MAX_PHRASE_WORDS]
    singles = [t for span, n in zip(spans, counts, strict=True)
               if n == 1 or n > MAX_PHRASE_WORDS for t in terms_of(span)]
    found = list(dict.fromkeys(singles + terms_of(_PHRASE.sub(" ", text))))
    kept = [t for t in found if t not in PROSE_STOP_WORDS] or found
    phrases = list(dict.fromkeys(phrases))[:max(1, max_terms // 2)]  # words keep room too
    room = max_terms - len(phrases)
    if len(kept) > room:
        kept = _rarest(kept, room, conn)
    names = [n for n in dict.fromkeys(_NAME.findall(text)) if n.casefold() not in PROSE_STOP_WORDS]
    return SearchTerms(tuple(phrases + kept), tuple(names[:max_terms * 2]))


def _rarest(words: list[str], room: int, conn: sqlite3.Connection | None) -> list[str]:
    """The ``room`` words of ``words`` fewest nodes hold (longest first without an index).

    Words no node holds come last (they may still match code), longest first among them.
    """
    freq = document_frequencies(conn, words) if conn is not None else {}
    order = sorted(range(len(words)), key=lambda i: (
        words[i] not in freq, freq.get(words[i], 0), -len(words[i]), i))
    chosen = sorted(order[:room])  # keep the text's order
    return [words[i] for i in chosen]


@dataclass(frozen=True, slots=True)
class RunHit:
    """A stored run of a command found by search, and what the command did next.

    Attributes:
        row: The run (``index.runs.RunRow``).
        then: ``(status, run_at)`` of the first later run of the command whose status
            differs (the failed run's ``passed``), None when there is none.
        asked: Whether the query asks about it (its name, command line or status, or a word
            such as ``test`` or ``build``) rather than matching its diagnostics only.
    """

    row: RunRow
    then: tuple[str, int] | None
    asked: bool


@dataclass(frozen=True, slots=True)
class Hit:
    """One search result: a node (``node``/``narrative``), a chunk, a symbol or a run."""

    kind: str
    key: str
    score: float
    matched: tuple[str, ...]
    node: NodeRow | None = None
    chunk: ChunkRow | None = None
    symbol: SymbolRow | None = None
    run: RunHit | None = None


def _matched(query: Sequence[str], text: str) -> tuple[str, ...]:
    """The phrases of ``query`` that ``text`` holds (a phrase: its terms adjacent, in order).

    A single term is looked for among the words that contain it (``tokenize.held_terms``):
    listing every term of 80 candidates' texts was most of the cost of re-ranking them.
    """
    text = text[:_COVERAGE_CHARS]
    found = tuple(held_terms(text, [t for t in query if " " not in t]))
    phrases = [t for t in query if " " in t]
    if not phrases:
        return found
    joined = f" {index_text(text)} "
    return found + tuple(t for t in phrases if f" {t} " in joined)


def _boosted(score: float, matched: int, total: int) -> float:
    """BM25 times ``1 + coverage``, times ``ALL_TERMS_BOOST`` when every term matched."""
    coverage = matched / total if total else 0.0
    boost = ALL_TERMS_BOOST if total > 1 and matched == total else 1.0
    return score * (1.0 + coverage) * boost


class _Stale(Exception):
    """Tantivy cannot be trusted here: a hit names another row, or its files cannot be read."""


def _node_hits(conn: sqlite3.Connection, served: Served | None, terms: Sequence[str],
               kinds: frozenset[str], pool: int, include_superseded: bool, relative: bool
               ) -> list[Hit]:
    """Candidate nodes re-ranked by coverage (full rows are loaded for the best only).

    With ``relative``, BM25 is divided by the best candidate's (the first: best first).
    """
    if not kinds & _NODE_KINDS:
        return []
    flag = f"$.{_NARRATIVE_KEY}"
    cands = _tantivy_nodes(conn, served, terms, pool, include_superseded, flag) \
        if served is not None else \
        ranked_nodes(conn, terms, limit=pool, include_superseded=include_superseded, flag=flag)
    scale = _scale(cands[0].score if cands else 0.0, relative)
    hits = []
    for cand in cands:
        kind = "narrative" if cand.flagged else "node"
        if kind in kinds:
            matched = _matched(terms, cand.text)
            hits.append(Hit(kind, cand.id, _boosted(cand.score / scale, len(matched), len(terms)),
                            matched))
    return hits


def _fused_nodes(conn: sqlite3.Connection, hits: list[Hit], near: Sequence[tuple[int, float]],
                 terms: Sequence[str], kinds: frozenset[str], include_superseded: bool
                 ) -> list[Hit]:
    """Node hits by words and by meaning, fused by reciprocal rank (``node_vectors.fuse``).

    The fused order keeps the words' scale, so nodes still rank against chunks and runs: the
    j-th fused node takes the j-th best score by words; those past the last take the last's,
    lowered as their fused value is.
    """
    from ctxstore.search.node_vectors import fuse

    rows = nodes_at(conn, [r for r, _ in near], flag=f"$.{_NARRATIVE_KEY}",
                    include_superseded=include_superseded)
    found = {rows[r].id: rows[r] for r, _ in near if r in rows}
    by_key = {h.key: h for h in hits}
    near_keys = [rows[r].id for r, _ in near if r in rows and
                 ("narrative" if rows[r].flagged else "node") in kinds]
    order = fuse([h.key for h in sorted(hits, key=_order)], near_keys)
    scores = sorted((h.score for h in hits), reverse=True)
    out = []
    for j, (key, value) in enumerate(order):
        if j < len(scores):
            score = scores[j]
        elif scores:
            score = scores[-1] * value / order[len(scores) - 1][1]
        else:
            score = value / order[0][1]
        hit = by_key.get(key)
        if hit is None:
            row = found[key]
            hit = Hit("narrative" if row.flagged else "node", key, 0.0, _matched(terms, row.text))
        out.append(Hit(hit.kind, key, score, hit.matched))
    return out


def _served_hits(served: Served, corpus: str, terms: Sequence[str], limit: int
                 ) -> list[tuple[int, float, int]]:
    from ctxstore.search.tantivy_index import TantivyUnusable

    try:
        return served.hits(corpus, terms, limit)
    except TantivyUnusable as exc:
        raise _Stale from exc


def _tantivy_nodes(conn: sqlite3.Connection, served: Served, terms: Sequence[str], pool: int,
                   include_superseded: bool, flag: str) -> list[NodeText]:
    """``ranked_nodes`` served by Tantivy: its best nodes, the live ones kept (as many)."""
    from ctxstore.search.rows import superseded_count
    from ctxstore.search.tantivy_index import check_of

    extra = 0 if include_superseded else superseded_count(conn)
    found = _served_hits(served, "nodes", terms, pool + extra)
    rows = nodes_at(conn, [r for r, _, _ in found], flag=flag,
                    include_superseded=include_superseded)
    out = []
    for rowid, score, check in found:
        row = rows.get(rowid)
        if row is not None:
            if check != check_of(row.id):
                raise _Stale
            out.append(NodeText(row.id, row.text, row.flagged, score))
    return out[:pool]


def _scale(best: float, relative: bool) -> float:
    """What BM25 scores are divided by: the best one's when ``relative`` (and positive)."""
    return best if relative and best > 0 else 1.0


def _with_nodes(conn: sqlite3.Connection, hits: list[Hit]) -> list[Hit]:
    """``hits`` with the full node of each node hit loaded (one that vanished is dropped)."""
    from ctxstore.index.read import nodes_by_ids

    rows = {n.id: n for n in nodes_by_ids(conn, [h.key for h in hits if h.kind in _NODE_KINDS])}
    # A new Hit rather than dataclasses.replace: the hook path never imports dataclasses.
    return [Hit(h.kind, h.key, h.score, h.matched, rows[h.key], h.chunk, h.symbol)
            if h.kind in _NODE_KINDS else h
            for h in hits if h.kind not in _NODE_KINDS or h.key in rows]


def _chunk_hits(conn: sqlite3.Connection, served: Served | None, terms: Sequence[str], pool: int,
                relative: bool) -> list[Hit]:
    """Candidate chunks re-ranked by coverage; BM25 relative to the best with ``relative``."""
    ranked = _tantivy_chunks(conn, served, terms, pool) if served is not None else \
        ranked_chunks(conn, terms, limit=pool)
    scale = _scale(ranked[0][1] if ranked else 0.0, relative)
    hits = []
    for chunk, score in ranked:
        matched = _matched(terms, f"{chunk.path}\n{chunk.qualname or ''}\n{chunk.text}")
        key = f"{chunk.path}:{chunk.start_line}-{chunk.end_line}"
        hits.append(Hit("chunk", key, _boosted(score / scale, len(matched), len(terms)), matched,
                        chunk=chunk))
    return hits


def _tantivy_chunks(conn: sqlite3.Connection, served: Served, terms: Sequence[str], pool: int
                    ) -> list[tuple[ChunkRow, float]]:
    """``ranked_chunks`` served by Tantivy."""
    from ctxstore.search.tantivy_index import check_of

    found = _served_hits(served, "chunks", terms, pool)
    rows = chunks_at(conn, [r for r, _, _ in found])
    out = []
    for rowid, score, check in found:
        chunk = rows.get(rowid)
        if chunk is None or check != check_of(chunk.path):
            raise _Stale
        out.append((chunk, score))
    return out


def _symbol_hits(conn: sqlite3.Connection, names: Sequence[str], terms: Sequence[str],
                 score: float, pool: int) -> list[Hit]:
    """Symbols named by a word of the text, scored by the share of the text's words they hold.

    A name that is the whole query (``read_config``, ``HookState``) scores ``score`` (the best
    other hit's: typing a name finds it first); ``add`` in "add a new language extractor"
    holds one word of four and scores a quarter of it, below the chunks that hold them all.
    """
    words = [t for t in terms if " " not in t] or list(terms)
    wanted = set(words)
    spellings = list(dict.fromkeys([*names, *(n.lower() for n in names)]))
    hits = []
    for s in symbols_named(conn, spellings, limit=pool):
        held = len(wanted.intersection(terms_of(s.name))) or 1
        share = min(1.0, held / len(words)) if words else 1.0
        hits.append(Hit("symbol", s.qualname, score * share, (s.name.lower(),), symbol=s))
    return hits


def _run_hits(conn: sqlite3.Connection, text: str, pool: int, relative: bool,
              failing: bool = False) -> list[Hit]:
    """Each command's best stored run for ``text`` (the newest among equals), scored.

    Terms are the text's significant words stemmed as ``runs_fts`` holds them. BM25 is
    divided by the best run's with ``relative``, then weighed by coverage as other hits are,
    and halved for a run the query does not ask about (``RunHit.asked``). ``failing``: only
    runs that did not pass compete (a command's best failing run).
    """
    from ctxstore.index.runs import has_runs, runs_at, status_after
    from ctxstore.search.ranked import ranked_runs

    if not has_runs(conn):  # no run stored: the stemmer (8 ms to import) is not loaded
        return []
    from ctxstore.search.tokenize import PROSE_QUERY

    terms = list(dict.fromkeys(PROSE_QUERY.tokenize(text.replace("\0", " "))))[:MAX_TERMS]
    found = ranked_runs(conn, terms, limit=pool)
    if not found:
        return []
    rows = runs_at(conn, [r for r, _ in found])
    scale = _scale(found[0][1], relative)
    best: dict[str, tuple[float, int, RunRow, tuple[str, ...], bool]] = {}
    for rowid, score in found:
        row = rows.get(rowid)
        if row is None or (failing and row.status == "passed"):
            continue
        head = set(row.head_terms.split())
        held = head | set(row.body_terms.split())
        matched = tuple(t for t in terms if t in held)
        asked = any(t in head or t in _RUN_WORDS for t in matched)
        value = _boosted(score / scale, len(matched), len(terms)) * (1.0 if asked else _UNASKED_RUN)
        mine = best.get(row.name)
        if mine is None or (value, row.run_at) > (mine[0], mine[1]):
            best[row.name] = (value, row.run_at, row, matched, asked)
    return [Hit("run", row.snapshot.hex(), value, matched,
                run=RunHit(row, status_after(conn, row.name, row.run_at, row.status), asked))
            for value, _, row, matched, asked in best.values()]


def search(target: SearchSession | sqlite3.Connection, text: str, *, kinds: Iterable[str] = KINDS,
           limit: int = 20, include_superseded: bool = False,
           served: Served | None | Literal["choose"] = "choose",
           embedder: Embedder | None = None) -> list[Hit]:
    """Rank nodes, narrative, file chunks, symbols and command runs by relevance to any text.

    The one entry point of free-text search: ``ctx search``, the MCP ``search`` tool (through
    ``knowledge.scopes``), ``ctx pack``'s memory items, recall's free text and the prompt
    hook's relevant memory. Given a session, the full-text engine is chosen for its index
    (``search.tantivy_index.open_served``: Tantivy on a large index, else FTS5); given a
    bare index connection (the hooks, recall), FTS5 answers, and tantivy is never imported.

    Args:
        target: A session, or an index connection that is current.
        text: Any text: a question, code, punctuation, 10 KB of a log.
        kinds: Which of ``KINDS`` to search; ``node`` means every node, those made from
            narrative entries (kind ``narrative``) included.
        limit: At most this many hits.
        include_superseded: Also superseded nodes.
        served: The Tantivy index a caller opened already for this session
            (``tantivy_index.open_served``; None: FTS5), or ``"choose"`` to choose here.
        embedder: With ``[retrieval] vectors = "on"``, the engine that embeds the query in
            place of the configured one (``llm.hyde.HydeEmbedder``: the same model, the query's
            vector joined by a drafted answer's).

    Returns:
        Hits, best first (ties: node, narrative, chunk, symbol, run, then key; runs newest
        first); empty when the text holds no word.

    Raises:
        IndexCorrupt: (E007) if the index cannot answer.
    """
    wanted = frozenset(kinds)
    if "node" in wanted:  # a decision or a task is a node, whatever file it was written in
        wanted |= {"narrative"}
    conn = target if isinstance(target, sqlite3.Connection) else target.index()
    query = search_terms(text, conn)
    if not query:
        return []
    if isinstance(target, sqlite3.Connection) or not wanted & {"chunk", *_NODE_KINDS}:
        served = None
    elif served == "choose":
        from ctxstore.search.tantivy_index import open_served

        served = open_served(target.root, conn, target.config)
    near = _near_nodes(target, conn, text, wanted, max(limit * 4, 50), embedder)
    try:
        hits = _ranked(conn, served, text, query, wanted, limit, include_superseded, near)
    except _Stale:  # rowids the engine recorded name other rows now, or its files are
        # damaged: FTS5 answers, and the next write rebuilds it
        from ctxstore.search.tantivy_index import forget_tantivy

        assert not isinstance(target, sqlite3.Connection)
        forget_tantivy(target.root)
        hits = _ranked(conn, None, text, query, wanted, limit, include_superseded, near)
    return _with_nodes(conn, hits)


def _near_nodes(target: SearchSession | sqlite3.Connection, conn: sqlite3.Connection, text: str,
                wanted: frozenset[str], pool: int, embedder: Embedder | None = None
                ) -> list[tuple[int, float]]:
    """``(rowid, cosine)`` of the nodes nearest to ``text`` by vector, best first.

    Only for a session searching nodes with ``[retrieval] vectors = "on"``
    (``search.node_vectors``); else none, and nothing is imported.
    """
    if isinstance(target, sqlite3.Connection) or not wanted & _NODE_KINDS or \
            target.config.get("retrieval", "vectors") != "on":
        return []
    from ctxstore.search.node_vectors import nearest_nodes, node_engine

    engine = embedder or node_engine(target.config)
    return [] if engine is None else nearest_nodes(target.root, conn, engine, text, pool)


def _ranked(conn: sqlite3.Connection, served: Served | None, text: str, query: SearchTerms,
            wanted: frozenset[str], limit: int, include_superseded: bool,
            near: Sequence[tuple[int, float]] = ()) -> list[Hit]:
    """``search``'s hits, best first, the ``limit`` best (node hits without their nodes yet)."""
    terms = query.terms
    pool = max(limit * 4, 50)
    # BM25 of a two-line decision (nodes_fts) and of a 60-line chunk (chunks_fts) come from
    # two tables with their own lengths and document counts: merged as they were, 60 test
    # chunks buried the decision naming the word. When both are searched, each table's
    # BM25 is divided by its best candidate's, so the best of each is 1 and coverage, which
    # means the same in both, decides between them. A search of one table keeps raw BM25.
    relative = "chunk" in wanted and bool(wanted & _NODE_KINDS)
    hits = _node_hits(conn, served, terms, wanted, pool, include_superseded, relative)
    if near:
        hits = _fused_nodes(conn, hits, near, terms, wanted, include_superseded)
    if "chunk" in wanted:
        hits += _chunk_hits(conn, served, terms, pool, relative)
    if "symbol" in wanted:
        top = max((h.score for h in hits), default=1.0)
        hits += _symbol_hits(conn, query.names, terms, top, pool)
    if "run" in wanted:
        # Runs rank on their own table's BM25: relative to the best run whenever another
        # table is searched too, as chunks and nodes are to each other.
        mixed = bool(wanted - {"run"})
        runs = _run_hits(conn, text, max(pool, 200), relative or mixed)
        if mixed:
            runs = sorted(runs, key=_order)[:MIXED_RUNS]
        hits += runs
    hits.sort(key=_order)
    return hits[:limit]


def failing_runs(target: SearchSession | sqlite3.Connection, text: str, *, limit: int
                 ) -> list[Hit]:
    """The stored runs that did not pass, best first for ``text``: each command's best one.

    The run search of ``search`` (``runs_fts``, the same terms and scores) with passing runs
    left out, so a command that failed before it passed is found by its failure whatever
    its latest run did (a pack's past runs, ``packs.content``).

    Args:
        target: The session or an index connection.
        text: Any text.
        limit: At most this many runs (one per command).

    Returns:
        ``run`` hits, best first, each with what its command did next.

    Raises:
        IndexCorrupt: (E007) if the index cannot answer.
    """
    conn = target if isinstance(target, sqlite3.Connection) else target.index()
    hits = _run_hits(conn, text, max(limit, 200), True, failing=True)
    return sorted(hits, key=_order)[:limit]


def _order(hit: Hit) -> tuple[float, int, int, str]:
    """Best first; ties by kind (``KINDS``), runs newest first, then key."""
    return (-hit.score, KINDS.index(hit.kind), -hit.run.row.run_at if hit.run else 0, hit.key)
