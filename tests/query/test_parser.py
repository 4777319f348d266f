"""The query parser: the spec's examples, precedence, errors with positions."""

from __future__ import annotations

import pytest

from ctxstore.query.parser import (
    And,
    Compare,
    Field,
    Not,
    Or,
    QuerySyntaxError,
    Text,
    format_query,
    parse_query,
    text_terms,
)

NOW = 1_700_000_000.0
P = lambda q: parse_query(q, now=NOW)  # noqa: E731


def test_parser_spec_examples() -> None:
    assert P("type:fact AND tag:project:viberent") == \
        And((Field("type", None, "fact"), Field("tag", None, "project:viberent")))
    assert P("(type:decision OR type:pattern) AND created:>7d") == And((
        Or((Field("type", None, "decision"), Field("type", None, "pattern"))),
        Compare("created", ">", NOW - 7 * 86400)))
    assert P("tag:tier:working AND NOT has:summary") == \
        And((Field("tag", None, "tier:working"), Not(Field("has", None, "summary"))))
    assert P("type:observation AND tokens:<500") == \
        And((Field("type", None, "observation"), Compare("tokens", "<", 500)))


def test_parser_precedence_and_implicit_and() -> None:
    a, b, c = Text("a", False), Text("b", False), Text("c", False)
    assert P("a OR b AND c") == Or((a, And((b, c))))
    assert P("NOT a AND b") == And((Not(a), b))
    assert P("a b") == And((a, b))
    assert P("(a OR b) c") == And((Or((a, b)), c))
    assert P("NOT NOT a") == Not(Not(a))


def test_parser_text_terms() -> None:
    q = P('retry AND type:decision "exponential backoff" \'jitter x\' http://x foo:bar and')
    assert text_terms(q) == ["retry", "exponential backoff", "jitter x", "http://x", "foo:bar", "and"]
    assert P('"a b"') == Text("a b", True)


def test_parser_time_values() -> None:
    assert P("created:>24h") == Compare("created", ">", NOW - 86400)
    assert P("updated:<=30m") == Compare("updated", "<=", NOW - 1800)
    assert P("created:>2024-01-01") == Compare("created", ">", 1704067200.0)
    assert P("created:=2024-01-01T12:00:00Z") == Compare("created", "=", 1704110400.0)
    assert P("tokens:>=10") == Compare("tokens", ">=", 10)


@pytest.mark.parametrize("query,column,detail", [
    ("", 1, "empty query"),
    ("   ", 1, "empty query"),
    ("type:fact AND", 11, "AND needs a term"),
    ("OR x", 1, "OR needs a term on its left"),
    ("NOT", 1, "NOT needs a term"),
    ("(type:fact", 1, "expected ')'"),
    ("type:fact)", 10, "unbalanced ')'"),
    ("()", 2, "empty parentheses"),
    ("type:", 6, "type: needs a value"),
    ("has:wings", 5, "has: takes summary or edges"),
    ("created:24h", 9, "needs an operator"),
    ("created:>yesterday", 10, "invalid time"),
    ("tokens:<many", 9, "needs an integer"),
    ('say "hello', 5, "unterminated quote"),
    ("a OR OR b", 3, "OR needs a term on its right"),
])
def test_parser_errors_name_the_column(query: str, column: int, detail: str) -> None:
    with pytest.raises(QuerySyntaxError) as err:
        P(query)
    assert err.value.code == "E011"
    assert f"at column {column}: " in str(err.value), str(err.value)
    assert detail in str(err.value)
    assert "\n" not in str(err.value)


def test_parser_limits() -> None:
    with pytest.raises(QuerySyntaxError, match="longer than"):
        P("a " * 6000)
    with pytest.raises(QuerySyntaxError, match="nested more than"):
        P("(" * 150 + "a" + ")" * 150)
    assert P("(" * 50 + "a" + ")" * 50) == Text("a", False)


def test_format_query_roundtrips_examples() -> None:
    for q in ("type:fact AND tag:project:viberent", "(type:decision OR type:pattern) AND created:>7d",
              "tag:tier:working AND NOT has:summary", 'retry "two words" OR NOT (a AND b)',
              "'say \"hi\"'", "tag:x OR type:y AND tokens:<5"):
        ast = P(q)
        assert P(format_query(ast)) == ast
