"""The SELECTs of ranked free-text search (``search.search``): any-term BM25 candidates.

Each function takes terms that are already plain words or phrases (``search.search``
tokenises the user's text) and returns candidates best first by BM25, for the caller to
re-rank. The code tables (``chunks``, ``chunks_fts``, ``symbols``; docs/code.md) are read
only when the index has them: an index built before code ingestion answers with nodes
alone. A SQLite error becomes ``IndexCorrupt`` (E007), or ``InvalidInput`` (E011) when
SQLite says a statement is over one of its limits.

FTS5 scores every row a query matches, and has no top-k pruning: a question whose words
include a common one ("response", "header") scored 15,000 of 200,000 chunks to keep 80.
``_top_rows`` finds the same rows, in the same order and with the same scores, while
scoring fewer of them (MaxScore pruning). A term adds less than ``idf * (k1 + 1)`` to the
score of any row, so once the rows holding the rarer terms are scored, rows that hold
only common terms whose bounds add up to less than the last kept score cannot be among
the best: they are never scored. The bounds come from the count of each term's matches
(the count bm25() uses); every score is still FTS5's ``bm25()`` over the whole query, so
the result does not depend on the pruning. Only chunks are pruned, and only when the
counts say it pays (``_prune_plan``): nodes are few and short, and scoring them all is
cheaper than a pruned scan's fixed cost.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from ctxstore.errors import IndexCorrupt, InvalidInput
from ctxstore.records import dataclass
from ctxstore.search.fts5 import fts_literal, match_expression

__all__ = ["NodeText", "ChunkRow", "SymbolRow", "run_select", "has_table", "document_frequencies",
           "ranked_nodes", "ranked_chunks", "symbols_named", "ranked_runs"]

_LIMIT_WORDS = ("too many", "too big", "too long", "too complex", "too deep", "overflow")
# FTS5's bm25() (fts5_aux.c): a phrase found f times in a row of D tokens adds
# idf * f * (k1 + 1) / (f + k1 * (1 - b + b * D / avgdl)) with k1 = 1.2, b = 0.75, and
# idf = log((N - n + 0.5) / (n + 0.5)) for n of the N rows holding it (1e-6 when not
# positive). That is less than idf * (k1 + 1) for any f and D.
_TERM_BOUND = 1.2 + 1.0
_MIN_IDF = 1e-6
# Bounds are summed in Python and scores in C: this margin covers the rounding of both.
_BOUND_SLACK = 1e-9
# The first rows scored are those of the rarest terms, up to this share of the rows the
# query matches: the best rows mostly hold rare terms, so their scores usually bound
# the rest in one round.
_FIRST_SHARE = 0.3
# Pruning only above this many matches (counted per term): a pruned round has a fixed
# cost of 2-4 ms (FTS5 reads the positions of every matching row, and bm25() counts each
# term's rows), paid back only when scoring every row (~1.3 us each) takes longer.
_PRUNE_MIN_ROWS = 8_000
# The terms whose rows may be left out: at most two, their bounds at most half the others'.
# On the 190 commit messages of the evaluation set and 13 questions over a 200,000-chunk
# index, this pruned 75 of the 203 searches: 58 took less than 90% of the time, 8 or 9
# (between runs) more than 110%, the worst 1.7x; the 203 together 79-80%.
_MAX_SKIPPED = 2
_SKIPPED_SHARE = 0.5


@dataclass(frozen=True, slots=True)
class NodeText:
    """A candidate node: its id, its searchable text, whether it is flagged, its BM25 score."""

    id: str
    text: str
    flagged: bool
    score: float


@dataclass(frozen=True, slots=True)
class ChunkRow:
    """A chunk of an indexed file (a row of ``chunks``: a symbol's source, or a piece of a file)."""

    rowid: int
    path: str
    qualname: str | None
    kind: str
    start_line: int
    end_line: int
    tokens: int
    text: str


@dataclass(frozen=True, slots=True)
class SymbolRow:
    """A symbol of an indexed file."""

    path: str
    qualname: str
    name: str
    kind: str
    start_line: int | None
    signature: str | None


def run_select(conn: sqlite3.Connection, sql: str, args: Sequence[Any]) -> list[Any]:
    """Run one SELECT; SQLite errors become typed errors (as ``query.executor._fetch``).

    Args:
        conn: An index connection.
        sql: The statement.
        args: Its parameters.

    Returns:
        Every row.

    Raises:
        IndexCorrupt, InvalidInput: if SQLite refuses the statement.
    """
    try:
        return conn.execute(sql, args).fetchall()
    except sqlite3.OperationalError as exc:
        if any(word in str(exc).lower() for word in _LIMIT_WORDS):
            raise InvalidInput(f"the search is too large for SQLite ({exc})") from exc
        raise IndexCorrupt(f"a search failed in SQLite ({exc})") from exc
    except sqlite3.DatabaseError as exc:
        raise IndexCorrupt(f"a search failed in SQLite ({exc})") from exc


def has_table(conn: sqlite3.Connection, name: str) -> bool:
    """Whether the index has a table (a virtual table, or a view: ``code_edges``) ``name``.

    Args:
        conn: An index connection.
        name: The table's name.

    Returns:
        True when it exists.
    """
    # Every attached database: the code tables live in this clone's code.sqlite (index.codedb).
    return bool(run_select(conn, "SELECT 1 FROM pragma_table_list WHERE name = ?"
                                 " AND type IN ('table', 'virtual', 'view')", (name,)))


def document_frequencies(conn: sqlite3.Connection, words: Sequence[str]) -> dict[str, int]:
    """How many nodes hold each word, from FTS5's vocabulary (``fts5vocab``, a temp table).

    Args:
        conn: An index connection.
        words: Folded single words (lower case, no diacritics), as FTS5 stores them.

    Returns:
        Word -> number of documents; a word no node holds is absent.
    """
    if not words:
        return {}
    try:
        conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.ctx_nodes_vocab "
                     "USING fts5vocab(main, 'nodes_fts', 'row')")
    except sqlite3.Error as exc:
        raise IndexCorrupt(f"the full-text vocabulary cannot be read ({exc})") from exc
    found: dict[str, int] = {}
    unique = list(dict.fromkeys(words))
    for start in range(0, len(unique), 500):
        chunk = unique[start:start + 500]
        rows = run_select(conn, "SELECT term, doc FROM temp.ctx_nodes_vocab WHERE term IN "
                             f"({','.join('?' * len(chunk))})", chunk)
        found.update((term, doc) for term, doc in rows)
    return found


def _match_counts(conn: sqlite3.Connection, table: str, words: Sequence[str]) -> list[int]:
    """How many rows of the FTS5 table ``table`` each word matches, as bm25() counts them.

    One ``count(*)`` per word, in one statement: FTS5 counts a term's rows without reading
    their positions, and a fresh connection needs no ``fts5vocab`` table for it.
    """
    counts = ", ".join(f"(SELECT count(*) FROM {table} WHERE {table} MATCH ?)" for _ in words)
    rows = run_select(conn, f"SELECT {counts}", [fts_literal(w) for w in words])
    return list(rows[0])


# One ranking statement: given SQL to add to the WHERE clause of its scan of the full-text
# table (and its arguments), the rows it keeps, best first. A row's last two columns are
# its bm25() score and its rowid, the order it is sorted in.
_Ranking = Callable[[str, Sequence[Any]], list[Any]]


def _top_rows(conn: sqlite3.Connection, table: str, terms: Sequence[str], limit: int,
              ranking: _Ranking) -> list[Any]:
    """What ``ranking("", ())`` returns, with fewer rows scored when bounds allow.

    ``ranking`` must keep the ``limit`` best rows (by score, then rowid) of those it is
    allowed to scan, whatever else it filters on: the rows kept from two disjoint scans
    are then merged into the rows kept from their union.
    """
    plan = _prune_plan(conn, table, terms, limit)
    if plan is None:
        return ranking("", ())
    first_terms, bounded = plan
    inside = f" AND +rowid IN (SELECT rowid FROM {table} WHERE {table} MATCH ?)"
    outside = f" AND +rowid NOT IN (SELECT rowid FROM {table} WHERE {table} MATCH ?)"
    # ``+rowid``: a rowid that FTS5 took as a constraint would restart its scan, and its
    # bm25() statistics, for every row.
    first_match = match_expression(first_terms, "any")
    first = ranking(inside, (first_match,))
    if len(first) < limit:
        return ranking("", ())  # too few rows for a bound: score them all
    kept = -first[-1][-2]  # the lowest score kept (bm25() is negated: higher is better)
    total, skipped = 0.0, 0
    for bound in (b for _, b in bounded):
        if (total + bound) * (1 + _BOUND_SLACK) >= kept:
            break
        total, skipped = total + bound, skipped + 1
    # Rows holding only the ``skipped`` terms score below ``kept``: none of them is kept.
    second_terms = [term for term, _ in bounded[skipped:]]
    if not second_terms:
        return first
    second = ranking(inside + outside, (match_expression(second_terms, "any"), first_match))
    return sorted([*first, *second], key=lambda row: (row[-2], row[-1]))[:limit]


def _prune_plan(conn: sqlite3.Connection, table: str, terms: Sequence[str], limit: int
                ) -> tuple[list[str], list[tuple[str, float]]] | None:
    """The terms whose rows are scored first, and the others with their bounds (lowest first).

    The rarest terms are scored first, up to ``_FIRST_SHARE`` of the matches. None when
    pruning is not expected to pay: fewer than ``_PRUNE_MIN_ROWS`` matches, or more terms
    left out, or larger bounds, than ``_MAX_SKIPPED`` and ``_SKIPPED_SHARE`` allow.
    """
    words = list(dict.fromkeys(terms))  # each is one phrase of the query: bm25() scores each
    if len(words) < 2:
        return None
    counts = dict(zip(words, _match_counts(conn, table, words), strict=True))
    held = [w for w in words if counts[w]]  # a term no row matches adds to no score
    matched = sum(counts[w] for w in held)  # at least the rows the query matches
    if len(held) < 2 or matched < max(_PRUNE_MIN_ROWS, 4 * limit):
        return None
    first: list[str] = []
    scanned = 0
    for word in sorted(held, key=lambda w: (counts[w], w)):  # the rarest first
        if scanned and scanned + counts[word] > _FIRST_SHARE * matched:
            break
        first.append(word)
        scanned += counts[word]
    rest = [w for w in held if w not in first]
    if not rest or len(rest) > _MAX_SKIPPED:
        return None
    rowids = run_select(conn, f"SELECT (SELECT rowid FROM {table} ORDER BY rowid DESC LIMIT 1) - "
                           f"(SELECT rowid FROM {table} ORDER BY rowid LIMIT 1) + 1", ())
    rows = rowids[0][0] if rowids and rowids[0][0] else 0  # at least the table's row count
    bounds = {w: terms.count(w) * _TERM_BOUND  # a term given twice is scored twice
              * max(_MIN_IDF, math.log((rows - counts[w] + 0.5) / (counts[w] + 0.5)))
              for w in held}
    # Pruning pays when one round suffices: when the rows left out hold only one or two
    # common terms whose bounds are small beside the rarer terms'. Otherwise a second
    # round often follows, and two rounds cost more than scoring every row once.
    if sum(bounds[w] for w in rest) > _SKIPPED_SHARE * sum(bounds[w] for w in first):
        return None
    return first, sorted(((w, bounds[w]) for w in rest), key=lambda pair: (pair[1], pair[0]))


def ranked_nodes(conn: sqlite3.Connection, terms: Sequence[str], *, limit: int,
                 include_superseded: bool = False, flag: str = "$") -> list[NodeText]:
    """Nodes holding at least one term, best BM25 first, as light rows (no full node).

    Args:
        conn: An index connection that is current.
        terms: Words or phrases (each quoted for FTS5 here).
        limit: At most this many candidates.
        include_superseded: Also superseded nodes.
        flag: A JSON path into node metadata; ``NodeText.flagged`` says whether it is set.

    Returns:
        The candidates; the score is BM25 negated (higher is better).

    Raises:
        IndexCorrupt, InvalidInput: if SQLite refuses the search.
    """
    if not terms:
        return []
    # BM25 over the full-text table alone, best first, then the node rows of those only:
    # a join before the ORDER BY would read every matching node's row (6,000 of 10,000 for a
    # prompt of ten common words) to sort by a score that needs none of it. Without the
    # superseded, the inner query takes as many more rows as there are superseded nodes, so
    # leaving them out cannot shorten the result.
    extra, where = ("", "") if include_superseded else (
        " + (SELECT count(*) FROM nodes WHERE superseded_by IS NOT NULL)",
        "WHERE n.superseded_by IS NULL")
    # Every matching node is scored (no ``_top_rows``): node rows are short and the table
    # small, so a pruned scan's fixed cost (FTS5 reads every matching row's positions for
    # bm25() to be available) is ~40% of scoring them all, and the hook's ten-word
    # question needed two rounds, 30% slower than one full scan.
    rows = run_select(conn,
                   "SELECT n.id, n.content, coalesce(n.summary, ''), "
                   "json_extract(n.metadata, ?) IS NOT NULL, s.score "
                   "FROM (SELECT rowid AS r, bm25(nodes_fts) AS score FROM nodes_fts "
                   f"WHERE nodes_fts MATCH ? ORDER BY score, rowid LIMIT ?{extra}) s "
                   f"JOIN nodes n ON n.rowid = s.r {where} ORDER BY s.score, n.rowid LIMIT ?",
                   (flag, match_expression(terms, "any"), limit, limit))
    return [NodeText(i, f"{content}\n{summary}", bool(flagged), -score)
            for i, content, summary, flagged, score in rows]


def ranked_chunks(conn: sqlite3.Connection, terms: Sequence[str], *, limit: int
                  ) -> list[tuple[ChunkRow, float]]:
    """Chunks of indexed files holding at least one term (in path, name or text), best first.

    Args:
        conn: An index connection that is current.
        terms: Words or phrases.
        limit: At most this many.

    Returns:
        ``(chunk, score)`` pairs (BM25 negated); empty when the index has no code tables.

    Raises:
        IndexCorrupt, InvalidInput: if SQLite refuses the search.
    """
    if not terms or not (has_table(conn, "chunks_fts") and has_table(conn, "chunks")):
        return []
    match = match_expression(terms, "any")

    def ranking(scan: str, scan_args: Sequence[Any]) -> list[Any]:
        return run_select(conn,
                       "SELECT c.rowid, c.path, c.qualname, c.kind, c.start_line, c.end_line, "
                       "c.tokens, c.text, s.score, c.rowid "
                       "FROM (SELECT rowid AS r, bm25(chunks_fts) AS score FROM chunks_fts "
                       f"WHERE chunks_fts MATCH ?{scan} ORDER BY score, rowid LIMIT ?) s "
                       "JOIN chunks c ON c.rowid = s.r ORDER BY s.score, c.rowid",
                       (match, *scan_args, limit))

    rows = _top_rows(conn, "chunks_fts", terms, limit, ranking)
    return [(ChunkRow(*r[:8]), -r[8]) for r in rows]


def symbols_named(conn: sqlite3.Connection, names: Sequence[str], *, limit: int) -> list[SymbolRow]:
    """Symbols whose bare name is one of ``names``, exactly (the caller adds other spellings).

    Args:
        conn: An index connection that is current.
        names: Names as written.
        limit: At most this many.

    Returns:
        The symbols, by path and line; empty when the index has no ``symbols`` table.

    Raises:
        IndexCorrupt, InvalidInput: if SQLite refuses the search.
    """
    if not names or not has_table(conn, "symbols"):
        return []
    wanted = list(dict.fromkeys(names))[:500]
    rows = run_select(conn, "SELECT path, qualname, name, kind, start_line, signature FROM symbols "
                         f"WHERE name IN ({','.join('?' * len(wanted))}) "
                         "ORDER BY path, start_line LIMIT ?", (*wanted, limit))
    return [SymbolRow(*r) for r in rows]


def ranked_runs(conn: sqlite3.Connection, terms: Sequence[str], *, limit: int
                ) -> list[tuple[int, float]]:
    """Stored runs of commands holding any of ``terms`` (``runs_fts``), best first by BM25.

    Args:
        conn: An index connection.
        terms: Terms stemmed as ``runs_fts`` holds them (``tokenize.PROSE``).
        limit: At most this many.

    Returns:
        ``(runs rowid, score)`` pairs, the score BM25 negated (higher is better); among equal
        scores the later row first (the caller orders ties by the runs' times).

    Raises:
        IndexCorrupt, InvalidInput: if SQLite refuses the search.
    """
    if not terms:
        return []
    rows = run_select(conn, "SELECT rowid, bm25(runs_fts) AS score FROM runs_fts"
                            " WHERE runs_fts MATCH ? ORDER BY score, rowid DESC LIMIT ?",
                      (match_expression(terms, "any"), limit))
    return [(int(r[0]), -float(r[1])) for r in rows]
