"""The query language of spec 000: a tokenizer and a recursive-descent parser (pure).

One parser serves ``ctx query``, ``ctx compose --query``, views and recall. Grammar
(precedence NOT > AND > OR; adjacent terms mean AND)::

    query  := or
    or     := and ("OR" and)*
    and    := unary (["AND"] unary)*
    unary  := "NOT" unary | "(" or ")" | term
    term   := field ":" value | word | "phrase" | 'phrase'

Fields: ``type tag has from to id`` (a value), ``created updated`` (``>``/``<``/``>=``/
``<=``/``=`` then a duration ``24h``/``7d``/``1w``/``30m``/``10s`` meaning "now minus", a
date ``YYYY-MM-DD`` or ``YYYY-MM-DDTHH:MM:SSZ``), ``tokens`` (an operator then an integer).
A word with any other ``prefix:`` is a full-text word. Errors are one line and name the
column.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Union

from ctxstore.errors import InvalidInput

__all__ = ["QuerySyntaxError", "Field", "Compare", "Text", "And", "Or", "Not", "QueryNode",
           "parse_query", "format_query", "iter_terms", "text_terms", "MAX_QUERY_LENGTH"]

MAX_QUERY_LENGTH = 10_000
MAX_DEPTH = 100
VALUE_FIELDS = ("type", "tag", "has", "from", "to", "id")
COMPARE_FIELDS = ("created", "updated", "tokens")
HAS_VALUES = ("summary", "edges")
_OPS = (">=", "<=", ">", "<", "=")
_DURATION = re.compile(r"(\d+)([smhdw])")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_KEYWORDS = ("AND", "OR", "NOT")


class QuerySyntaxError(InvalidInput):
    """E011: a query that does not parse; ``position`` is the 0-based column."""

    def __init__(self, query: str, position: int, detail: str) -> None:
        near = query[max(0, position - 10):position + 10].replace("\n", " ")
        super().__init__(f"query syntax error at column {position + 1}: {detail} (near {near!r})",
                         hint="see docs/query.md")
        self.query = query
        self.position = position
        self.detail = detail


@dataclass(frozen=True, slots=True)
class Field:
    """``type:``, ``tag:``, ``has:``, ``from:``, ``to:`` or ``id:`` with its value."""

    name: str
    op: str | None
    value: str


@dataclass(frozen=True, slots=True)
class Compare:
    """``created``/``updated`` (value: Unix seconds) or ``tokens`` (value: an integer)."""

    field: str
    op: str
    value: int | float


@dataclass(frozen=True, slots=True)
class Text:
    """A full-text word or phrase."""

    text: str
    phrase: bool


@dataclass(frozen=True, slots=True)
class And:
    items: tuple[QueryNode, ...]


@dataclass(frozen=True, slots=True)
class Or:
    items: tuple[QueryNode, ...]


@dataclass(frozen=True, slots=True)
class Not:
    item: QueryNode


QueryNode = Union[Field, Compare, Text, And, Or, Not]


@dataclass(frozen=True, slots=True)
class _Tok:
    kind: str  # "word", "phrase", "(", ")", "AND", "OR", "NOT", "end"
    text: str
    pos: int


def _tokenize(query: str) -> list[_Tok]:
    toks: list[_Tok] = []
    i, n = 0, len(query)
    while i < n:
        ch = query[i]
        if ch.isspace():
            i += 1
        elif ch in "()":
            toks.append(_Tok(ch, ch, i))
            i += 1
        elif ch in "\"'":
            end = query.find(ch, i + 1)
            if end < 0:
                raise QuerySyntaxError(query, i, "unterminated quote")
            toks.append(_Tok("phrase", query[i + 1:end], i))
            i = end + 1
        else:
            start = i
            while i < n and not query[i].isspace() and query[i] not in "()":
                if query[i] in "\"'" and i > start and query[start:i].endswith(":"):
                    # field:"quoted value" — the quote belongs to the value
                    end = query.find(query[i], i + 1)
                    if end < 0:
                        raise QuerySyntaxError(query, i, "unterminated quote")
                    i = end + 1
                    continue
                i += 1
            word = query[start:i]
            kind = word if word in _KEYWORDS else "word"
            toks.append(_Tok(kind, word, start))
    toks.append(_Tok("end", "", n))
    return toks


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _time_value(query: str, pos: int, text: str, now: float) -> float:
    m = _DURATION.fullmatch(text)
    if m:
        return float(int(now) - int(m.group(1)) * _UNIT[m.group(2)])
    for fmt in ("%Y-%m-%dT%H:%M:%SZ", "%Y-%m-%d"):
        try:
            return float(dt.datetime.strptime(text, fmt).replace(tzinfo=dt.timezone.utc).timestamp())
        except ValueError:
            continue
    raise QuerySyntaxError(query, pos, f"invalid time {text!r} (want e.g. 24h, 7d, 2024-01-01)")


class _Parser:
    def __init__(self, query: str, now: float) -> None:
        self.query = query
        self.now = now
        self.toks = _tokenize(query)
        self.i = 0
        self.depth = 0

    def peek(self) -> _Tok:
        return self.toks[self.i]

    def take(self) -> _Tok:
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def error(self, tok: _Tok, detail: str) -> QuerySyntaxError:
        return QuerySyntaxError(self.query, tok.pos, detail)

    def parse(self) -> QueryNode:
        if self.peek().kind == "end":
            raise self.error(self.peek(), "empty query")
        node = self.parse_or()
        tok = self.peek()
        if tok.kind == ")":
            raise self.error(tok, "unbalanced ')'")
        if tok.kind != "end":
            raise self.error(tok, f"unexpected {tok.text!r}")
        return node

    def parse_or(self) -> QueryNode:
        items = [self.parse_and()]
        while self.peek().kind == "OR":
            op = self.take()
            if self.peek().kind in ("end", ")", "OR", "AND"):
                raise self.error(op, "OR needs a term on its right")
            items.append(self.parse_and())
        return items[0] if len(items) == 1 else Or(tuple(items))

    def parse_and(self) -> QueryNode:
        items = [self.parse_unary()]
        while True:
            tok = self.peek()
            if tok.kind == "AND":
                self.take()
                if self.peek().kind in ("end", ")", "OR", "AND"):
                    raise self.error(tok, "AND needs a term on its right")
                items.append(self.parse_unary())
            elif tok.kind in ("word", "phrase", "(", "NOT"):
                items.append(self.parse_unary())  # adjacent terms: implicit AND
            else:
                break
        return items[0] if len(items) == 1 else And(tuple(items))

    def parse_unary(self) -> QueryNode:
        tok = self.take()
        if tok.kind == "NOT":
            if self.peek().kind in ("end", ")", "OR", "AND"):
                raise self.error(tok, "NOT needs a term on its right")
            return Not(self.nested(self.parse_unary))
        if tok.kind == "(":
            if self.peek().kind == ")":
                raise self.error(self.peek(), "empty parentheses")
            node = self.nested(self.parse_or)
            close = self.take()
            if close.kind != ")":
                raise self.error(close if close.kind != "end" else tok, "expected ')'")
            return node
        if tok.kind == "phrase":
            if not tok.text.strip():
                raise self.error(tok, "empty phrase")
            return Text(tok.text, True)
        if tok.kind == "word":
            return self.term(tok)
        if tok.kind in ("AND", "OR"):
            raise self.error(tok, f"{tok.kind} needs a term on its left")
        if tok.kind == ")":
            raise self.error(tok, "unbalanced ')'")
        raise self.error(tok, "unexpected end of query")

    def nested(self, fn):  # type: ignore[no-untyped-def]
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.error(self.peek(), f"nested more than {MAX_DEPTH} levels")
        try:
            return fn()
        finally:
            self.depth -= 1

    def term(self, tok: _Tok) -> QueryNode:
        name, sep, raw = tok.text.partition(":")
        field = name.lower()
        if not sep or field not in VALUE_FIELDS + COMPARE_FIELDS:
            return Text(tok.text, False)
        vpos = tok.pos + len(name) + 1
        value = _unquote(raw)
        if not value:
            raise QuerySyntaxError(self.query, vpos, f"{field}: needs a value")
        if field in VALUE_FIELDS:
            if field == "has" and value not in HAS_VALUES:
                raise QuerySyntaxError(self.query, vpos,
                                       f"has: takes {' or '.join(HAS_VALUES)}, not {value!r}")
            return Field(field, None, value)
        op = next((o for o in _OPS if value.startswith(o)), None)
        if op is None:
            raise QuerySyntaxError(self.query, vpos, f"{field}: needs an operator (> < >= <= =)")
        rest = value[len(op):]
        if not rest:
            raise QuerySyntaxError(self.query, vpos + len(op), f"{field}:{op} needs a value")
        if field == "tokens":
            if not rest.isdigit():
                raise QuerySyntaxError(self.query, vpos + len(op), f"tokens: needs an integer, not {rest!r}")
            return Compare(field, op, int(rest))
        return Compare(field, op, _time_value(self.query, vpos + len(op), rest, self.now))


def parse_query(text: str, *, now: float) -> QueryNode:
    """Parse a query; times relative to ``now`` (Unix seconds) become absolute.

    Raises:
        QuerySyntaxError: (E011) naming the column of the problem.
    """
    if len(text) > MAX_QUERY_LENGTH:
        raise QuerySyntaxError(text[:40], 0, f"query longer than {MAX_QUERY_LENGTH} characters")
    if not text.strip():
        raise QuerySyntaxError(text, 0, "empty query")
    return _Parser(text, now).parse()


def _quote(text: str) -> str:
    return '"' + text + '"' if '"' not in text else "'" + text + "'"


def _fmt_time(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def format_query(node: QueryNode) -> str:
    """Render an AST as canonical query text (``parse_query`` of it gives the same AST)."""
    if isinstance(node, Or):
        return " OR ".join(_wrap(i, (Or,)) for i in node.items)
    if isinstance(node, And):
        return " AND ".join(_wrap(i, (Or, And)) for i in node.items)
    if isinstance(node, Not):
        return "NOT " + _wrap(node.item, (Or, And))
    if isinstance(node, Text):
        plain = not node.phrase and node.text and not any(c.isspace() or c in "()\"'" for c in node.text) \
            and node.text not in _KEYWORDS and not _looks_like_field(node.text)
        return node.text if plain else _quote(node.text)
    if isinstance(node, Compare):
        value = str(node.value) if node.field == "tokens" else _fmt_time(node.value)
        return f"{node.field}:{node.op}{value}"
    needs_quote = any(c.isspace() or c in "()\"'" for c in node.value)
    return f"{node.name}:{_quote(node.value) if needs_quote else node.value}"


def _looks_like_field(text: str) -> bool:
    name, sep, _ = text.partition(":")
    return bool(sep) and name.lower() in VALUE_FIELDS + COMPARE_FIELDS


def _wrap(node: QueryNode, kinds: tuple[type, ...]) -> str:
    text = format_query(node)
    return f"({text})" if isinstance(node, kinds) else text


def iter_terms(node: QueryNode) -> Iterator[QueryNode]:
    """Every leaf (Field, Compare, Text) of the query, left to right."""
    if isinstance(node, (And, Or)):
        for item in node.items:
            yield from iter_terms(item)
    elif isinstance(node, Not):
        yield from iter_terms(node.item)
    else:
        yield node


def text_terms(node: QueryNode) -> list[str]:
    """The full-text words and phrases of a query."""
    return [t.text for t in iter_terms(node) if isinstance(t, Text)]
