"""The SELECTs of ranked free-text search (``knowledge.search``): any-term BM25 candidates.

Each function takes terms that are already plain words or phrases (``knowledge.search``
tokenises the user's text) and returns candidates best first by BM25, for the caller to
re-rank. The code tables (``chunks``, ``chunks_fts``, ``symbols``; docs/code.md) are read
only when the index has them: an index built before code ingestion answers with nodes
alone. A SQLite error becomes ``IndexCorrupt`` (E007), or ``InvalidInput`` (E011) when
SQLite says a statement is over one of its limits.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from ctxstore.errors import IndexCorrupt, InvalidInput
from ctxstore.index.fulltext.fts5 import match_expression
from ctxstore.records import dataclass

__all__ = ["NodeText", "ChunkRow", "SymbolRow", "has_table", "document_frequencies", "ranked_nodes",
           "ranked_chunks", "symbols_named"]

_LIMIT_WORDS = ("too many", "too big", "too long", "too complex", "too deep", "overflow")


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


def _select(conn: sqlite3.Connection, sql: str, args: Sequence[Any]) -> list[Any]:
    """Run one SELECT; SQLite errors become typed errors (as ``query.executor._fetch``)."""
    try:
        return conn.execute(sql, args).fetchall()
    except sqlite3.OperationalError as exc:
        if any(word in str(exc).lower() for word in _LIMIT_WORDS):
            raise InvalidInput(f"the search is too large for SQLite ({exc})") from exc
        raise IndexCorrupt(f"a search failed in SQLite ({exc})") from exc
    except sqlite3.DatabaseError as exc:
        raise IndexCorrupt(f"a search failed in SQLite ({exc})") from exc


def has_table(conn: sqlite3.Connection, name: str) -> bool:
    """Whether the index has a table (or virtual table) ``name``.

    Args:
        conn: An index connection.
        name: The table's name.

    Returns:
        True when it exists.
    """
    return bool(_select(conn, "SELECT 1 FROM sqlite_master WHERE name = ? AND type = 'table'",
                        (name,)))


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
        rows = _select(conn, "SELECT term, doc FROM temp.ctx_nodes_vocab WHERE term IN "
                             f"({','.join('?' * len(chunk))})", chunk)
        found.update((term, doc) for term, doc in rows)
    return found


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
    rows = _select(conn,
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
    rows = _select(conn,
                   "SELECT c.rowid, c.path, c.qualname, c.kind, c.start_line, c.end_line, c.tokens, c.text, "
                   "s.score FROM (SELECT rowid AS r, bm25(chunks_fts) AS score FROM chunks_fts "
                   "WHERE chunks_fts MATCH ? ORDER BY score LIMIT ?) s "
                   "JOIN chunks c ON c.rowid = s.r ORDER BY s.score, c.rowid",
                   (match_expression(terms, "any"), limit))
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
    rows = _select(conn, "SELECT path, qualname, name, kind, start_line, signature FROM symbols "
                         f"WHERE name IN ({','.join('?' * len(wanted))}) "
                         "ORDER BY path, start_line LIMIT ?", (*wanted, limit))
    return [SymbolRow(*r) for r in rows]
