"""The query language: ``parser`` (pure, text → AST) and ``executor`` (AST → SQL over the index).

This package re-exports the parser's API only; import ``ctxstore.query.executor``
explicitly, since it pulls in the index layer.
"""

from ctxstore.query.parser import (
    MAX_QUERY_DEPTH,
    MAX_QUERY_LENGTH,
    And,
    Compare,
    Field,
    Not,
    Or,
    QueryNode,
    QuerySyntaxError,
    QueryTerm,
    Text,
    format_query,
    iter_terms,
    parse_query,
    text_terms,
)

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
    "format_query",
    "iter_terms",
    "text_terms",
    "MAX_QUERY_LENGTH",
    "MAX_QUERY_DEPTH",
]
