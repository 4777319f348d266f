"""The FTS5 full-text engine: the ``nodes_fts`` virtual table in the index database.

It owns every piece of FTS5 syntax the library writes: quoting a phrase as an FTS5
string, joining phrases with AND/OR, ``MATCH`` and ``bm25()``, and the tokenizer clause of
every table that holds ``search.tokenize`` terms (``TOKENIZE``: FTS5's ``ascii`` tokenizer
with ``_`` a token character, which keeps each term as the tokeniser wrote it). The table
itself is declared in ``ctxstore.index.schema`` (its shape is part of
``INDEX_SCHEMA_VERSION``); this module never creates or alters it, and it runs inside the
caller's transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence

from ctxstore.search.engine import NODE_FIELDS, FullTextEngine, MatchMode, SqlFragment
from ctxstore.search.tokenize import index_text

__all__ = ["TOKENIZE", "Fts5Engine", "default_engine", "fts_literal", "match_expression"]

TOKENIZE = "tokenize = \"ascii tokenchars '_'\""
"""The tokenizer clause of an FTS5 table of ``search.tokenize`` terms (``index.schema``)."""

_STATEMENTS: dict[tuple[str, tuple[str, ...]], tuple[str, str]] = {}  # table -> (insert, delete)

def fts_literal(text: str) -> str:
    """Quote ``text`` as one FTS5 string (a phrase of its tokens).

    Args:
        text: Any text; double quotes are doubled, nothing else is special inside.

    Returns:
        The FTS5 string literal.
    """
    return '"' + text.replace('"', '""') + '"'


def match_expression(terms: Sequence[str], mode: MatchMode = "all") -> str:
    """Return the FTS5 MATCH expression for phrases ``terms`` combined by ``mode``.

    Args:
        terms: Phrases (at least one).
        mode: ``"all"`` joins them with AND, ``"any"`` with OR.

    Returns:
        The expression, e.g. ``"a b" AND "c"``.
    """
    return (" AND " if mode == "all" else " OR ").join(fts_literal(t) for t in terms)


class Fts5Engine:
    """Full-text search through FTS5 (implements ``FullTextEngine``).

    Scores are SQLite's ``bm25()``, where lower (more negative) is better; ``search``
    negates them so that higher is better, as the protocol says.
    """

    name = "fts5"

    def __init__(self, conn: sqlite3.Connection, table: str = "nodes_fts",
                 fields: tuple[str, ...] = NODE_FIELDS) -> None:
        """Wrap the FTS5 table ``table`` of an open index connection.

        Args:
            conn: The index connection (the caller owns its transaction).
            table: The FTS5 table (``TOKENIZE``d), with the columns ``fields``.
            fields: Its columns, in order.
        """
        self.conn = conn
        self.table = table
        self.fields = fields
        self._field_set = frozenset(fields)
        # Built once per table: index apply makes an engine per record it applies.
        if (stmts := _STATEMENTS.get((table, fields))) is None:
            stmts = _STATEMENTS[(table, fields)] = (
                f"INSERT INTO {table}(rowid, {', '.join(fields)}) "
                f"VALUES (?, {', '.join('?' * len(fields))})",
                f"DELETE FROM {table} WHERE rowid = ?")
        self._insert, self._delete = stmts

    def index_document(self, rowid: int, fields: Mapping[str, str]) -> None:
        """Add a document: each field's terms (``tokenize.index_text``); absent fields empty.

        Args:
            rowid: The document's key (``nodes.rowid``).
            fields: Text per field name.

        Raises:
            ValueError: for a field name the table does not have.
        """
        if not self._field_set.issuperset(fields):
            unknown = set(fields) - self._field_set
            raise ValueError(f"unknown full-text fields {sorted(unknown)}")
        self.conn.execute(self._insert,
                          (rowid, *(index_text(fields.get(f, "")) for f in self.fields)))

    def delete_document(self, rowid: int) -> None:
        """Remove a document (nothing happens if it is not there).

        Args:
            rowid: The document's key.
        """
        self.conn.execute(self._delete, (rowid,))

    def clear(self) -> None:
        """Remove every document."""
        self.conn.execute(f"DELETE FROM {self.table}")

    def search(self, terms: Sequence[str], *, mode: MatchMode = "all",
               limit: int | None = None) -> list[tuple[int, float]]:
        """Search the table; see ``FullTextEngine.search``.

        Args:
            terms: Phrases.
            mode: ``"all"`` or ``"any"``.
            limit: At most this many results.

        Returns:
            ``(rowid, score)`` pairs, best first; the score is BM25 negated.
        """
        if not terms:
            return []
        sql, args = self.sql_scores(terms, mode)
        sql = f"SELECT r, score FROM ({sql}) ORDER BY score, r"
        if limit is not None:
            sql += " LIMIT ?"
            args.append(limit)
        return [(r, -score) for r, score in self.conn.execute(sql, args)]

    def sql_rowids(self, terms: Sequence[str], mode: MatchMode = "all") -> SqlFragment:
        """Render the search as ``SELECT rowid ... MATCH ?``; see the protocol.

        Args:
            terms: Phrases.
            mode: ``"all"`` or ``"any"``.

        Returns:
            The SELECT and its one parameter (none for no terms).
        """
        return self._select("rowid", terms, mode)

    def sql_scores(self, terms: Sequence[str], mode: MatchMode = "all") -> SqlFragment:
        """Render the search as ``SELECT rowid AS r, bm25(...) AS score``; see the protocol.

        Args:
            terms: Phrases.
            mode: ``"all"`` or ``"any"``.

        Returns:
            The SELECT and its one parameter (none for no terms).
        """
        return self._select(f"rowid AS r, bm25({self.table}) AS score", terms, mode)

    def _select(self, columns: str, terms: Sequence[str], mode: MatchMode) -> SqlFragment:
        # No terms select nothing (FTS5 refuses an empty MATCH; bm25() is never called).
        if not terms:
            return f"SELECT {columns} FROM {self.table} WHERE 0", []
        return (f"SELECT {columns} FROM {self.table} WHERE {self.table} MATCH ?",
                [match_expression(terms, mode)])


def default_engine(conn: sqlite3.Connection) -> FullTextEngine:
    """Return the engine the index uses: FTS5 over ``nodes_fts`` in ``conn``.

    Args:
        conn: An open index connection.

    Returns:
        The engine.
    """
    return Fts5Engine(conn)
