"""The query language of spec 000: a hand-written tokenizer and recursive-descent parser.

This module owns the text → AST step (``parse_query``). Its inverse (``format_query``)
is ``query.format`` and the syntax tree ``query.syntax``, both re-exported here. It is pure:
no I/O, no clock (the caller passes ``now``), no index. One parser serves ``ctx query``,
``ctx compose --query``, views and recall; the executor turns the AST into SQL. Grammar
(precedence NOT > AND > OR; terms side by side mean AND)::

    query  := or
    or     := and ("OR" and)*
    and    := unary (["AND"] unary)*
    unary  := "NOT" unary | "(" or ")" | term
    term   := field ":" value | field ":" quoted | word | quoted
    quoted := '"' chars '"' | "'" chars "'"

Known fields (lower case): ``type tag has from to id`` take a value; ``created``
and ``updated`` take an operator and a time; ``tokens`` an operator and an integer.
A word with any other ``prefix:`` is a full-text word. A word ends at white space,
``(`` or ``)``; quotes inside a word are ordinary characters. Errors are
``QuerySyntaxError`` (E011): one line that names the column and quotes the text there.
A query is bounded (``MAX_QUERY_LENGTH``, ``MAX_QUERY_DEPTH``, ``MAX_QUERY_TERMS``,
``MAX_TERM_LENGTH``) and holds no NUL character, so whatever parses can also run.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Callable

from ctxstore.errors import InvalidInput
from ctxstore.query.format import format_query
from ctxstore.query.syntax import (
    _EPOCH,
    _MAX_TIME,
    _MAX_TOKENS_DIGITS,
    _MIN_TIME,
    _ONE_SECOND,
    _QUOTES,
    COMPARE_OPS,
    FIELDS,
    HAS_VALUES,
    KEYWORDS,
    MAX_QUERY_DEPTH,
    MAX_QUERY_LENGTH,
    MAX_QUERY_TERMS,
    MAX_TERM_LENGTH,
    VALUE_FIELDS,
    And,
    Compare,
    Field,
    Not,
    Or,
    QueryNode,
    QuerySyntaxError,
    QueryTerm,
    Text,
    iter_terms,
    text_terms,
)
from ctxstore.records import dataclass

__all__ = [
    "QuerySyntaxError",
    "Field",
    "Compare",
    "Text",
    "And",
    "Or",
    "Not",
    "QueryTerm",
    "QueryNode",
    "parse_query",
    "parse_time",
    "suggest_field",
    "misspelt_fields",
    "format_query",
    "iter_terms",
    "text_terms",
    "MAX_QUERY_LENGTH",
    "MAX_QUERY_DEPTH",
    "MAX_QUERY_TERMS",
    "MAX_TERM_LENGTH",
]

# The time values of ``created:`` and ``updated:`` (``parse_time``).
_MAX_DURATION_DIGITS = 15
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_INTEGER = re.compile(r"[0-9]+")
_DURATION = re.compile(r"([0-9]+)([smhdw])")
_DATETIME = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})(?:T([0-9]{2}):([0-9]{2}):([0-9]{2})Z)?")


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "(", ")", "AND", "OR", "NOT", "word", "phrase", "field", "end", "error"
    pos: int
    text: str  # the word, phrase or field value; the detail of an "error" token
    name: str = ""  # field tokens: the field name
    vpos: int = 0  # field tokens: offset of the value's first character


_TERM_STARTS = frozenset({"word", "phrase", "field", "(", "NOT"})


def _tokenize(query: str) -> list[_Token]:
    """Split ``query`` into tokens, ending with "end" or with an "error" token.

    A lexical error becomes a token rather than an exception so that the parser
    reports problems left to right: ``) "abc`` complains about the ``)`` first.
    """
    tokens: list[_Token] = []
    i, n = 0, len(query)
    while i < n:
        ch = query[i]
        if ch.isspace():
            i += 1
        elif ch in "()":
            tokens.append(_Token(ch, i, ch))
            i += 1
        elif ch in _QUOTES:
            end = query.find(ch, i + 1)
            if end < 0:
                tokens.append(_Token("error", i, f"unterminated quote ({ch})"))
                return tokens
            tokens.append(_Token("phrase", i, query[i + 1:end]))
            i = end + 1
        else:
            start = i
            while i < n and not query[i].isspace() and query[i] not in "()":
                i += 1
            word = query[start:i]
            name, colon, rest = word.partition(":")
            if word in KEYWORDS:
                tokens.append(_Token(word, start, word))
            elif not colon or name not in FIELDS:
                tokens.append(_Token("word", start, word))
            elif rest and rest[0] in _QUOTES:
                # field:"quoted value" may hold spaces and parentheses: rescan from the quote.
                quote_at = start + len(name) + 1
                end = query.find(rest[0], quote_at + 1)
                if end < 0:
                    tokens.append(_Token("error", quote_at, f"unterminated quote ({rest[0]})"))
                    return tokens
                tokens.append(_Token("field", start, query[quote_at + 1:end], name, quote_at + 1))
                i = end + 1
            else:
                tokens.append(_Token("field", start, rest, name, start + len(name) + 1))
    tokens.append(_Token("end", n, ""))
    return tokens


class _Parser:
    """Recursive descent over the token list; one instance per query."""

    def __init__(self, query: str, now: float) -> None:
        self.query = query
        self.now = now
        self.tokens = _tokenize(query)
        self.i = 0
        self.depth = 0
        self.terms = 0

    def fail(self, pos: int, detail: str) -> QuerySyntaxError:
        return QuerySyntaxError(self.query, pos, detail)

    def peek(self) -> _Token:
        tok = self.tokens[self.i]
        if tok.kind == "error":
            raise self.fail(tok.pos, tok.text)
        return tok

    def take(self) -> _Token:
        tok = self.peek()
        self.i += 1
        return tok

    def count_term(self, tok: _Token, text: str, text_pos: int) -> None:
        """Count a leaf against ``MAX_QUERY_TERMS`` and bound its length."""
        self.terms += 1
        if self.terms > MAX_QUERY_TERMS:
            raise self.fail(tok.pos, f"more than {MAX_QUERY_TERMS} terms")
        if len(text) > MAX_TERM_LENGTH:
            raise self.fail(text_pos, f"term is longer than {MAX_TERM_LENGTH:,} characters")

    def need_right(self, op: _Token) -> None:
        if self.peek().kind not in _TERM_STARTS:
            raise self.fail(op.pos, f"{op.kind} needs a term on its right")

    def nested(self, opener: _Token, parse: Callable[[], QueryNode]) -> QueryNode:
        # Bounded so that deep input is a syntax error, never a RecursionError.
        if self.depth >= MAX_QUERY_DEPTH:
            raise self.fail(opener.pos, f"nested more than {MAX_QUERY_DEPTH} levels")
        self.depth += 1
        try:
            return parse()
        finally:
            self.depth -= 1

    def parse(self) -> QueryNode:
        node = self.parse_or()
        tok = self.peek()
        if tok.kind == ")":
            raise self.fail(tok.pos, "unbalanced ')'")
        if tok.kind != "end":  # pragma: no cover - parse_or consumes every other token
            raise self.fail(tok.pos, f"unexpected {tok.text!r}")
        return node

    def parse_or(self) -> QueryNode:
        items = [self.parse_and()]
        while self.peek().kind == "OR":
            op = self.take()
            self.need_right(op)
            items.append(self.parse_and())
        return items[0] if len(items) == 1 else Or(tuple(items))

    def parse_and(self) -> QueryNode:
        items = [self.parse_unary()]
        while True:
            tok = self.peek()
            if tok.kind == "AND":
                self.take()
                self.need_right(tok)
            elif tok.kind not in _TERM_STARTS:
                break
            # else: adjacent terms, an implicit AND
            items.append(self.parse_unary())
        return items[0] if len(items) == 1 else And(tuple(items))

    def parse_unary(self) -> QueryNode:
        tok = self.take()
        if tok.kind == "NOT":
            self.need_right(tok)
            return Not(self.nested(tok, self.parse_unary))
        if tok.kind == "(":
            nxt = self.peek()
            if nxt.kind == ")":
                raise self.fail(nxt.pos, "empty parentheses")
            if nxt.kind == "end":
                raise self.fail(tok.pos, "'(' is never closed: expected ')'")
            node = self.nested(tok, self.parse_or)
            if self.peek().kind != ")":
                raise self.fail(tok.pos, "'(' is never closed: expected ')'")
            self.take()
            return node
        if tok.kind == "phrase":
            if not tok.text.strip():
                raise self.fail(tok.pos, "empty phrase")
            self.count_term(tok, tok.text, tok.pos + 1)
            return Text(tok.text, True)
        if tok.kind == "word":
            self.count_term(tok, tok.text, tok.pos)
            return Text(tok.text, False)
        if tok.kind == "field":
            self.count_term(tok, tok.text, tok.vpos)
            return self.field(tok)
        if tok.kind in ("AND", "OR"):
            raise self.fail(tok.pos, f"{tok.kind} needs a term on its left")
        if tok.kind == ")":
            raise self.fail(tok.pos, "unbalanced ')'")
        raise self.fail(tok.pos, "unexpected end of query")

    def field(self, tok: _Token) -> QueryTerm:
        name, value, vpos = tok.name, tok.text, tok.vpos
        if not value.strip():
            raise self.fail(vpos, f"{name}: needs a value")
        if name in VALUE_FIELDS:
            if name == "has" and value not in HAS_VALUES:
                raise self.fail(vpos, f"has: takes summary or edges, not {value!r}")
            return Field(name, None, value)
        op = next((o for o in COMPARE_OPS if value.startswith(o)), None)
        if op is None:
            raise self.fail(vpos, f"{name}: needs an operator (>, <, >=, <= or =) before the value")
        rest, rpos = value[len(op):], vpos + len(op)
        if not rest:
            raise self.fail(rpos, f"{name}:{op} needs a value")
        if name == "tokens":
            if not _INTEGER.fullmatch(rest):
                raise self.fail(rpos, f"tokens: needs an integer, not {rest!r}")
            if len(rest) > _MAX_TOKENS_DIGITS:
                raise self.fail(rpos, f"tokens: number {rest} is too large")
            return Compare(name, op, int(rest))
        return Compare(name, op, self.time(name, rest, rpos))

    def time(self, name: str, text: str, pos: int) -> int:
        try:
            return parse_time(text, now=self.now)
        except InvalidInput as exc:
            raise self.fail(pos, f"{name}: {exc.message}") from None


def parse_time(text: str, *, now: float) -> int:
    """A time as the query language writes it: a duration ago or an absolute UTC date.

    The one parser of times: ``created:>7d`` in a query and ``--since 7d`` on the command line
    both come here.

    Args:
        text: ``24h``, ``7d``, ``2w`` (``s m h d w``: that long before ``now``), ``YYYY-MM-DD``
            (midnight UTC) or ``YYYY-MM-DDTHH:MM:SSZ``.
        now: The current time in Unix seconds.

    Returns:
        Whole Unix seconds (a duration counts back from ``floor(now)``).

    Raises:
        InvalidInput: (E011) naming what is wrong, for any other text, a date that does not
            exist or a time outside years 1..9999.
    """
    m = _DURATION.fullmatch(text)
    if m:
        if len(m.group(1)) > _MAX_DURATION_DIGITS:
            raise InvalidInput(f"duration {text!r} is out of range")
        # Whole seconds, so that format_query's YYYY-MM-DDTHH:MM:SSZ round-trips exactly.
        value = math.floor(now) - int(m.group(1)) * _UNIT_SECONDS[m.group(2)]
    else:
        m = _DATETIME.fullmatch(text)
        if not m:
            raise InvalidInput(f"invalid time {text!r} (want a duration like 24h, 7d, "
                               "1w, a date YYYY-MM-DD or YYYY-MM-DDTHH:MM:SSZ)")
        try:
            # The time part is optional as a whole: absent, it is midnight.
            year, month, day, hour, minute, second = (int(g or 0) for g in m.groups())
            when = dt.datetime(year, month, day, hour, minute, second, tzinfo=dt.UTC)
        except ValueError:
            raise InvalidInput(f"no such date or time {text!r}") from None
        value = (when - _EPOCH) // _ONE_SECOND
    if not _MIN_TIME <= value <= _MAX_TIME:
        raise InvalidInput(f"time {text!r} is out of range")
    return value


def suggest_field(word: str) -> str | None:
    """The field a full-text word with a ``prefix:`` was probably meant to name.

    ``tpye:fact`` is a full-text word (any unknown prefix is), which matches nothing; the
    front ends say so with this suggestion.

    Args:
        word: A full-text word as written.

    Returns:
        The nearest known field name (``type``), or None when the word has no ``prefix:``, the
        prefix is a field already, or no field is close.
    """
    import difflib

    prefix, sep, _ = word.partition(":")
    if not sep or not prefix or prefix.lower() in FIELDS:
        return None
    close = difflib.get_close_matches(prefix.lower(), FIELDS, n=1, cutoff=0.6)
    return close[0] if close else None


def misspelt_fields(node: QueryNode) -> list[tuple[str, str]]:
    """``(word, field)`` for each unquoted full-text word whose prefix looks like a misspelt field.

    Args:
        node: A parsed query.

    Returns:
        The words with their suggested field, in query order, each word once.
    """
    found: list[tuple[str, str]] = []
    for term in iter_terms(node):
        if isinstance(term, Text) and not term.phrase:
            field = suggest_field(term.text)
            if field is not None and (term.text, field) not in found:
                found.append((term.text, field))
    return found


def parse_query(text: str, *, now: float) -> QueryNode:
    """Parse query text into an AST.

    Args:
        text: The query, at most ``MAX_QUERY_LENGTH`` characters.
        now: The current time in Unix seconds; durations (``created:>24h``) resolve to
            ``floor(now)`` minus the duration, so the AST holds only absolute times.

    Returns:
        The AST: a ``Field``, ``Compare`` or ``Text`` leaf, or ``And``/``Or``/``Not``.
        ``And`` and ``Or`` always hold two or more items; parentheses are not kept.

    Raises:
        QuerySyntaxError: (E011) the query is empty, malformed, holds a NUL character, or
            is over a limit (length, nesting, number of terms, length of a term);
            ``position`` says where.
    """
    # The length first: a 1 MiB query is refused before anything scans it.
    if len(text) > MAX_QUERY_LENGTH:
        raise QuerySyntaxError(text, MAX_QUERY_LENGTH,
                               f"query is longer than {MAX_QUERY_LENGTH:,} characters")
    if not text.strip():
        raise QuerySyntaxError(text, 0, "empty query")
    nul = text.find("\0")
    if nul >= 0:  # SQLite's full-text parser ends a string at NUL
        raise QuerySyntaxError(text, nul, "a NUL character is not allowed")
    return _Parser(text, now).parse()
