"""The full-text engine protocol: what the index and the query executor need of one.

An engine indexes documents (an integer key, the ``nodes`` rowid, and named text fields),
deletes them, and searches them. Every engine indexes the terms of ``search.tokenize`` (one
tokeniser for every engine and every query): a document's fields are given as text and the
engine indexes ``tokenize.index_text`` of each. A search takes *phrases*, each a string of
terms (``tokenize.phrase`` of the words a person typed, or one term alone), and the phrases
combine with ``mode="all"`` (every phrase) or ``mode="any"`` (at least one). A phrase
matches where its terms occur in order, adjacent. Scores are BM25.

The executor composes full-text matches into one SQL statement over ``nodes``, so an
engine also renders a search as a SQL sub-query (``sql_rowids``, ``sql_scores``): FTS5
answers from its own virtual table; an engine outside SQLite (Tantivy) runs the search
and hands the rowids over as a JSON parameter. Either way the executor never writes
engine-specific SQL.

Implementations: ``fts5.Fts5Engine`` (the default, ``fts5.default_engine``: the ``nodes_fts`` table of
``ctxstore.index.schema``) and ``tantivy.TantivyEngine`` (imported lazily, not on the hot
path). ``tests/contracts/test_fulltext.py`` runs one suite against each. This module
must not import ``query`` or anything above ``index``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

if TYPE_CHECKING:
    from pathlib import Path

    from ctxstore.config import Config

__all__ = ["MatchMode", "SqlFragment", "FullTextEngine", "NODE_FIELDS", "SearchSession"]

MatchMode = Literal["any", "all"]
# A SQL text with its positional parameters.
SqlFragment = tuple[str, list[object]]
# The fields every engine indexes for a node, in this order.
NODE_FIELDS = ("content", "summary")


@runtime_checkable
class FullTextEngine(Protocol):
    """A full-text index over documents keyed by integer, searched with ranked BM25."""

    name: str

    def index_document(self, rowid: int, fields: Mapping[str, str]) -> None:
        """Add a document (the caller deletes an older version of it first).

        Args:
            rowid: The document's key (``nodes.rowid``).
            fields: Text per field name (any text: the engine indexes its terms); names
                outside the engine's fields are refused.

        Raises:
            ValueError: for an unknown field name.
        """
        ...

    def delete_document(self, rowid: int) -> None:
        """Remove a document; removing one that is not there does nothing.

        Args:
            rowid: The document's key.
        """
        ...

    def clear(self) -> None:
        """Remove every document."""
        ...

    def search(self, terms: Sequence[str], *, mode: MatchMode = "all",
               limit: int | None = None) -> list[tuple[int, float]]:
        """Search the documents.

        Args:
            terms: Phrases of terms (``tokenize.phrase`` of a word or of a quoted
                phrase, or single terms). A phrase with no terms in it matches no
                document (so it empties an ``all`` search and adds nothing to an ``any``
                one); no terms match nothing.
            mode: ``"all"``: every term must occur; ``"any"``: at least one.
            limit: At most this many results.

        Returns:
            ``(rowid, score)`` pairs, best first (higher score is better; ties by rowid).
        """
        ...

    def sql_rowids(self, terms: Sequence[str], mode: MatchMode = "all") -> SqlFragment:
        """Render the search as a SELECT of one column, the matching rowids.

        Args:
            terms: As ``search``.
            mode: As ``search``.

        Returns:
            The SELECT and its parameters, for ``n.rowid IN (<select>)``.
        """
        ...

    def sql_scores(self, terms: Sequence[str], mode: MatchMode = "all") -> SqlFragment:
        """Render the search as a SELECT of ``r`` (rowid) and ``score`` (lower ranks first).

        Args:
            terms: As ``search``.
            mode: As ``search``.

        Returns:
            The SELECT and its parameters, to join on ``r``.
        """
        ...


class SearchSession(Protocol):
    """What ``search`` needs of a session (``ctxstore.session.Session`` is one)."""

    @property
    def root(self) -> Path:
        """The store's ``.ctx`` directory."""
        ...

    @property
    def config(self) -> Config:
        """The store's configuration."""
        ...

    def index(self) -> sqlite3.Connection:
        """The store's index connection, current."""
        ...
