"""``format_query``: a query's syntax tree written back as canonical query text.

For every tree it accepts, ``parse_query(format_query(ast), now=t) == ast`` for any ``t``.
"""

from __future__ import annotations

import datetime as dt

from ctxstore.query.syntax import (
    _EPOCH,
    _MAX_TIME,
    _MAX_TOKENS_DIGITS,
    _MIN_TIME,
    _QUOTES,
    COMPARE_FIELDS,
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
    Text,
    iter_terms,
)

__all__ = ["format_query"]

def _is_bare_word(text: str) -> bool:
    """Whether ``text`` written as is reads back as ``Text(text, phrase=False)``."""
    if not text or text[0] in _QUOTES or text in KEYWORDS:
        return False
    if any(c.isspace() or c in "()" for c in text):
        return False
    name, colon, _ = text.partition(":")
    return not (colon and name in FIELDS)


def _quoted(text: str, what: str) -> str:
    for quote in _QUOTES:
        if quote not in text:
            return quote + text + quote
    raise ValueError(f"{what} holds both kinds of quote and cannot be written as query text")


def _format_time(value: int | float) -> str:
    # Range first: float() of a huge int overflows, and NaN fails every comparison.
    if isinstance(value, bool) or not _MIN_TIME <= value <= _MAX_TIME \
            or not float(value).is_integer():
        raise ValueError(f"time {value!r} is not whole seconds within years 1..9999")
    when = _EPOCH + dt.timedelta(seconds=int(value))
    # Not strftime: glibc's %Y drops the zero padding of years before 1000.
    return (f"{when.year:04d}-{when.month:02d}-{when.day:02d}"
            f"T{when.hour:02d}:{when.minute:02d}:{when.second:02d}Z")


def _format(node: QueryNode, depth: int) -> str:
    # ``depth`` counts enclosing NOTs and parentheses the way the parser does.
    if depth > MAX_QUERY_DEPTH:
        raise ValueError(f"query nests deeper than {MAX_QUERY_DEPTH} levels")
    if isinstance(node, (And, Or)):
        if len(node.items) < 2:
            raise ValueError(f"{type(node).__name__} needs two or more items")
        # AND binds tighter than OR, so only same-or-looser children need parentheses.
        wrap: tuple[type, ...] = (And, Or) if isinstance(node, And) else (Or,)
        joiner = " AND " if isinstance(node, And) else " OR "
        return joiner.join(_wrapped(item, wrap, depth) for item in node.items)
    if isinstance(node, Not):
        return "NOT " + _wrapped(node.item, (And, Or), depth + 1)
    if isinstance(node, Text):
        if node.phrase:
            if not node.text.strip():
                raise ValueError("an empty phrase cannot be written as query text")
            return _quoted(node.text, f"phrase {node.text!r}")
        if not _is_bare_word(node.text):
            raise ValueError(f"Text({node.text!r}, phrase=False) does not read back as a word "
                             "(use phrase=True)")
        return node.text
    if isinstance(node, Compare):
        if node.field not in COMPARE_FIELDS or node.op not in COMPARE_OPS:
            raise ValueError(f"no comparison {node.field}:{node.op}")
        if node.field == "tokens":
            if isinstance(node.value, bool) or not isinstance(node.value, int) \
                    or not 0 <= node.value < 10 ** _MAX_TOKENS_DIGITS:
                raise ValueError(f"tokens value {node.value!r} is not a whole number in range")
            return f"tokens:{node.op}{node.value}"
        return f"{node.field}:{node.op}{_format_time(node.value)}"
    if isinstance(node, Field):
        if node.name not in VALUE_FIELDS or node.op is not None:
            raise ValueError(f"no field {node.name}:{node.op or ''}")
        value = node.value
        if not value.strip() or (node.name == "has" and value not in HAS_VALUES):
            raise ValueError(f"{node.name}:{value!r} is not a valid value")
        if value[0] in _QUOTES or any(c.isspace() or c in "()" for c in value):
            value = _quoted(value, f"{node.name}: value {value!r}")
        return f"{node.name}:{value}"
    raise TypeError(f"not a query node: {node!r}")


def _wrapped(node: QueryNode, kinds: tuple[type, ...], depth: int) -> str:
    if isinstance(node, kinds):
        return "(" + _format(node, depth + 1) + ")"
    return _format(node, depth)


def format_query(node: QueryNode) -> str:
    """Render an AST as canonical query text.

    Operators are upper case and explicit, parentheses appear only where precedence
    needs them, and times are written as ``YYYY-MM-DDTHH:MM:SSZ``. For every AST this
    accepts, ``parse_query(format_query(ast), now=t) == ast`` for any ``t``.

    Args:
        node: The AST, e.g. from ``parse_query``.

    Returns:
        The query text.

    Raises:
        ValueError: the AST cannot be written so that it reads back the same (an
            ``And``/``Or`` with fewer than two items, a ``Text`` word that would read as
            a keyword, field or phrase, a value with both kinds of quote, a time outside
            years 1..9999 or not in whole seconds, a NUL character, nesting, length,
            number of terms or length of a term over the limits).
        TypeError: ``node`` is not a query node.
    """
    text = _format(node, 0)
    leaves = list(iter_terms(node))
    if len(leaves) > MAX_QUERY_TERMS:
        raise ValueError(f"query has more than {MAX_QUERY_TERMS} terms")
    for leaf in leaves:
        value = leaf.text if isinstance(leaf, Text) else leaf.value if isinstance(leaf, Field) else ""
        if len(value) > MAX_TERM_LENGTH:
            raise ValueError(f"a term is longer than {MAX_TERM_LENGTH:,} characters")
    if "\0" in text:
        raise ValueError("a query cannot hold a NUL character")
    if len(text) > MAX_QUERY_LENGTH:
        raise ValueError(f"formatted query is longer than {MAX_QUERY_LENGTH:,} characters")
    return text
