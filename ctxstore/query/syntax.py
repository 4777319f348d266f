"""The query language's syntax tree, its fields and limits, and walks over the tree.

The AST records (``Field``, ``Compare``, ``Text``, ``And``, ``Or``, ``Not``) that
``parser.parse_query`` builds, ``format.format_query`` writes back and the executor turns into
SQL; ``QuerySyntaxError`` (E011); the limits that make every query that parses also run.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import TypeAlias

from ctxstore.errors import InvalidInput
from ctxstore.records import dataclass

__all__ = ["QuerySyntaxError", "Field", "Compare", "Text", "And", "Or", "Not", "QueryTerm",
           "QueryNode", "iter_terms", "text_terms", "MAX_QUERY_LENGTH", "MAX_QUERY_DEPTH",
           "MAX_QUERY_TERMS", "MAX_TERM_LENGTH"]


# Limits, so that every query that parses also runs: SQLite refuses an expression more than
# 1,000 levels deep (a chain of N terms is N deep) and its parser has a small fixed stack
# (the executor moves deep sub-queries into common table expressions for that).
MAX_QUERY_LENGTH = 10_000
MAX_QUERY_DEPTH = 100  # levels of "(" and NOT, counted together
MAX_QUERY_TERMS = 500  # words, phrases and field terms
MAX_TERM_LENGTH = 1_000  # characters of one word, phrase or field value

VALUE_FIELDS = ("type", "tag", "has", "from", "to", "id")
TIME_FIELDS = ("created", "updated")
COMPARE_FIELDS = (*TIME_FIELDS, "tokens")
FIELDS = (*VALUE_FIELDS, *COMPARE_FIELDS)
HAS_VALUES = ("summary", "edges")
COMPARE_OPS = (">=", "<=", ">", "<", "=")  # two-character operators first: ">=" is not ">" "="
KEYWORDS = ("AND", "OR", "NOT")

_QUOTES = "\"'"
_NEAR_CHARS = 20
_MAX_TOKENS_DIGITS = 18  # keeps ``tokens:`` below 2**63, so SQLite can bind it
# ASCII digits only: str.isdigit() and \d accept digits int() or the format cannot round-trip.
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_ONE_SECOND = dt.timedelta(seconds=1)
# Times must be writable as YYYY-MM-DDTHH:MM:SSZ, so they are kept within years 1..9999.
_MIN_TIME = (dt.datetime(1, 1, 1, tzinfo=dt.UTC) - _EPOCH) // _ONE_SECOND
_MAX_TIME = (dt.datetime(9999, 12, 31, 23, 59, 59, tzinfo=dt.UTC) - _EPOCH) // _ONE_SECOND


class QuerySyntaxError(InvalidInput):
    """E011: a query that does not parse.

    The message is one line: ``query syntax error at column N: <detail> (near '<text>')``
    where ``N`` is 1-based and the excerpt starts at the problem.

    Attributes:
        query: The full query text.
        position: 0-based character offset of the problem (``len(query)`` for "at the end").
        detail: What is wrong, without the position.
    """

    def __init__(self, query: str, position: int, detail: str) -> None:
        excerpt = query[position:position + _NEAR_CHARS].rstrip()
        if not excerpt:
            where = "at the end of the query"
        else:
            if position + _NEAR_CHARS < len(query):
                excerpt += "..."
            # repr() escapes newlines and other control characters: the message stays one line.
            where = f"near {excerpt!r}"
        super().__init__(f"query syntax error at column {position + 1}: {detail} ({where})",
                         hint="see docs/query.md")
        self.query = query
        self.position = position
        self.detail = detail


@dataclass(frozen=True, slots=True)
class Field:
    """A ``type:``, ``tag:``, ``has:``, ``from:``, ``to:`` or ``id:`` term.

    Attributes:
        name: The field name, one of ``type tag has from to id``.
        op: Always ``None`` for these fields (kept for a uniform term shape).
        value: The value as written, quotes removed (``tag:project:x`` → ``project:x``).
    """

    name: str
    op: str | None
    value: str


@dataclass(frozen=True, slots=True)
class Compare:
    """A ``created:``, ``updated:`` or ``tokens:`` comparison.

    Attributes:
        field: ``created``, ``updated`` or ``tokens``.
        op: One of ``>``, ``<``, ``>=``, ``<=``, ``=``.
        value: For times, absolute Unix seconds (whole seconds, UTC); for ``tokens``,
            the integer.
    """

    field: str
    op: str
    value: int | float


@dataclass(frozen=True, slots=True)
class Text:
    """A full-text term.

    Attributes:
        text: The word, or the phrase without its quotes.
        phrase: True when written in quotes.
    """

    text: str
    phrase: bool


@dataclass(frozen=True, slots=True)
class And:
    """All of ``items`` (two or more) match."""

    items: tuple[QueryNode, ...]


@dataclass(frozen=True, slots=True)
class Or:
    """Any of ``items`` (two or more) matches."""

    items: tuple[QueryNode, ...]


@dataclass(frozen=True, slots=True)
class Not:
    """``item`` does not match."""

    item: QueryNode


QueryTerm: TypeAlias = Field | Compare | Text
QueryNode: TypeAlias = Field | Compare | Text | And | Or | Not


def iter_terms(node: QueryNode) -> Iterator[QueryTerm]:
    """Yield every leaf of a query, left to right, including those under ``NOT``.

    Args:
        node: The AST.

    Returns:
        An iterator over the ``Field``, ``Compare`` and ``Text`` leaves.
    """
    stack: list[QueryNode] = [node]  # explicit stack: hand-built ASTs may be deep
    while stack:
        cur = stack.pop()
        if isinstance(cur, (And, Or)):
            stack.extend(reversed(cur.items))
        elif isinstance(cur, Not):
            stack.append(cur.item)
        else:
            yield cur


def text_terms(node: QueryNode) -> list[str]:
    """List the full-text words and phrases of a query, left to right.

    Terms under ``NOT`` are included; callers that rank by relevance should skip them.

    Args:
        node: The AST.

    Returns:
        The text of every ``Text`` leaf (phrases without their quotes).
    """
    return [term.text for term in iter_terms(node) if isinstance(term, Text)]
