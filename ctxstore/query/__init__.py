"""The query language: ``parser`` (pure, text → AST) and ``executor`` (AST → SQL over the index)."""

from ctxstore.query.parser import QuerySyntaxError, format_query, parse_query

__all__ = ["QuerySyntaxError", "parse_query", "format_query"]
