"""The query parser: spec examples, precedence, terms, times, errors at exact positions, format."""

from __future__ import annotations

import pytest

import ctxstore.query
from ctxstore.errors import InvalidInput
from ctxstore.query.parser import (
    MAX_QUERY_DEPTH,
    MAX_QUERY_LENGTH,
    MAX_QUERY_TERMS,
    MAX_TERM_LENGTH,
    And,
    Compare,
    Field,
    Not,
    Or,
    QuerySyntaxError,
    Text,
    format_query,
    iter_terms,
    parse_query,
    text_terms,
)

NOW = 1_700_000_000.0  # 2023-11-14T22:13:20Z
DAY = 86400


def P(text: str):  # noqa: N802 - reads like the grammar
    return parse_query(text, now=NOW)


def W(text: str) -> Text:  # noqa: N802
    return Text(text, False)


# --- the spec's examples -------------------------------------------------------------------

def test_query_parser_spec_example_type_and_tag() -> None:
    assert P("type:fact AND tag:project:viberent") == \
        And((Field("type", None, "fact"), Field("tag", None, "project:viberent")))


def test_query_parser_spec_example_grouped_or_and_duration() -> None:
    assert P("(type:decision OR type:pattern) AND created:>7d") == And((
        Or((Field("type", None, "decision"), Field("type", None, "pattern"))),
        Compare("created", ">", int(NOW) - 7 * DAY)))


def test_query_parser_spec_example_not_has() -> None:
    assert P("tag:tier:working AND NOT has:summary") == \
        And((Field("tag", None, "tier:working"), Not(Field("has", None, "summary"))))


def test_query_parser_spec_example_tokens() -> None:
    assert P("type:observation AND tokens:<500") == \
        And((Field("type", None, "observation"), Compare("tokens", "<", 500)))


# --- precedence and implicit AND ---------------------------------------------------------

@pytest.mark.parametrize("query,expected", [
    ("a OR b AND c", Or((W("a"), And((W("b"), W("c")))))),
    ("a AND b OR c", Or((And((W("a"), W("b"))), W("c")))),
    ("NOT a AND b", And((Not(W("a")), W("b")))),
    ("NOT a OR b", Or((Not(W("a")), W("b")))),
    ("NOT (a OR b)", Not(Or((W("a"), W("b"))))),
    ("NOT NOT a", Not(Not(W("a")))),
    ("a OR b OR c", Or((W("a"), W("b"), W("c")))),
    ("a AND b AND c", And((W("a"), W("b"), W("c")))),
    ("a AND (b AND c)", And((W("a"), And((W("b"), W("c")))))),
    ("(a)", W("a")),
    ("((a OR b))", Or((W("a"), W("b")))),
])
def test_query_parser_precedence(query: str, expected: object) -> None:
    assert P(query) == expected


@pytest.mark.parametrize("query,expected", [
    ("retry timeout", And((W("retry"), W("timeout")))),
    ("retry timeout jitter", And((W("retry"), W("timeout"), W("jitter")))),
    ("a b OR c", Or((And((W("a"), W("b"))), W("c")))),
    ("a NOT b", And((W("a"), Not(W("b"))))),
    ("(a OR b) c", And((Or((W("a"), W("b"))), W("c")))),
    ("a (b)", And((W("a"), W("b")))),
    ("a AND b c", And((W("a"), W("b"), W("c")))),
    ("type:fact sqlite", And((Field("type", None, "fact"), W("sqlite")))),
])
def test_query_parser_adjacent_terms_mean_and(query: str, expected: object) -> None:
    assert P(query) == expected


def test_query_parser_keywords_are_upper_case_only() -> None:
    assert P("a and b or not c") == And((W("a"), W("and"), W("b"), W("or"), W("not"), W("c")))
    assert P("And Or Not") == And((W("And"), W("Or"), W("Not")))
    assert P('"AND"') == Text("AND", True)


def test_query_parser_keywords_need_no_spaces_around_parentheses() -> None:
    assert P("NOT(a)AND(b)") == And((Not(W("a")), W("b")))


# --- full-text terms ---------------------------------------------------------------------

def test_query_parser_text_with_fields() -> None:
    assert P("retry AND type:decision") == And((W("retry"), Field("type", None, "decision")))


def test_query_parser_phrases() -> None:
    assert P('"exponential backoff" OR jitter') == \
        Or((Text("exponential backoff", True), W("jitter")))
    assert P("'single quoted' x") == And((Text("single quoted", True), W("x")))
    assert P('"retry"') == Text("retry", True)
    assert P('" padded "') == Text(" padded ", True)
    assert P('"it\'s (here)"') == Text("it's (here)", True)
    assert P("'say \"hi\"'") == Text('say "hi"', True)
    # a phrase ends at its closing quote, even without a space after it
    assert P('"a b"c') == And((Text("a b", True), W("c")))


def test_query_parser_quotes_inside_a_word_are_ordinary() -> None:
    assert P("don't") == W("don't")
    assert P('a"b') == W('a"b')


def test_query_parser_unknown_prefix_is_text() -> None:
    assert P("http://x") == W("http://x")
    assert P("foo:bar") == W("foo:bar")
    assert P("foo:") == W("foo:")
    assert P(":x") == W(":x")
    assert P('foo:"bar') == W('foo:"bar')  # quoted values belong to known fields only
    # field names are lower case: pasted "From: bob" is text, not an empty from:
    assert P("From: bob") == And((W("From:"), W("bob")))
    assert P("Type:fact") == W("Type:fact")


def test_query_parser_text_terms_and_iter_terms() -> None:
    q = P('retry AND type:decision "exponential backoff" \'jitter x\' http://x foo:bar and '
          "NOT skipped tokens:<5")
    assert text_terms(q) == ["retry", "exponential backoff", "jitter x", "http://x", "foo:bar",
                             "and", "skipped"]
    assert list(iter_terms(q)) == [
        W("retry"), Field("type", None, "decision"), Text("exponential backoff", True),
        Text("jitter x", True), W("http://x"), W("foo:bar"), W("and"), W("skipped"),
        Compare("tokens", "<", 5)]
    assert list(iter_terms(W("x"))) == [W("x")]
    assert text_terms(Field("tag", None, "x")) == []


def test_query_parser_iter_terms_on_a_deep_tree() -> None:
    node: object = W("x")
    for _ in range(5000):
        node = Not(node)  # type: ignore[arg-type]
    assert list(iter_terms(node)) == [W("x")]  # type: ignore[arg-type]


# --- field terms -------------------------------------------------------------------------

def test_query_parser_value_fields() -> None:
    assert P("tag:project:viberent") == Field("tag", None, "project:viberent")
    assert P("tag:task:") == Field("tag", None, "task:")
    assert P("has:summary") == Field("has", None, "summary")
    assert P("has:edges") == Field("has", None, "edges")
    assert P("from:01HQABC") == Field("from", None, "01HQABC")
    assert P("to:01HQABC") == Field("to", None, "01HQABC")
    assert P("id:01hq") == Field("id", None, "01hq")
    assert P("type:open-question") == Field("type", None, "open-question")


def test_query_parser_tag_ends_at_space_or_parenthesis() -> None:
    assert P("(tag:tier:working)") == Field("tag", None, "tier:working")
    assert P("tag:a:b c") == And((Field("tag", None, "a:b"), W("c")))


def test_query_parser_quoted_field_values() -> None:
    assert P('tag:"a b"') == Field("tag", None, "a b")
    assert P("tag:'x (y)'") == Field("tag", None, "x (y)")
    assert P("tag:\"it's\"") == Field("tag", None, "it's")
    assert P('tag:"a b"c') == And((Field("tag", None, "a b"), W("c")))
    assert P('tokens:"<5"') == Compare("tokens", "<", 5)
    assert P("tag:a\"b") == Field("tag", None, 'a"b')  # a quote not right after ':' is literal


@pytest.mark.parametrize("query,expected", [
    ("created:>24h", Compare("created", ">", int(NOW) - DAY)),
    ("created:<1w", Compare("created", "<", int(NOW) - 7 * DAY)),
    ("updated:<=30m", Compare("updated", "<=", int(NOW) - 1800)),
    ("updated:>=10s", Compare("updated", ">=", int(NOW) - 10)),
    ("created:=0d", Compare("created", "=", int(NOW))),
    ("created:>2024-01-01", Compare("created", ">", 1704067200)),
    ("created:=2024-01-01T12:00:00Z", Compare("created", "=", 1704110400)),
    ("updated:<1969-12-31", Compare("updated", "<", -DAY)),
    ("created:>0001-01-01", Compare("created", ">", -62135596800)),
    ("created:<9999-12-31T23:59:59Z", Compare("created", "<", 253402300799)),
    ("tokens:>=10", Compare("tokens", ">=", 10)),
    ("tokens:=0", Compare("tokens", "=", 0)),
    ("tokens:<007", Compare("tokens", "<", 7)),
    ("tokens:<999999999999999999", Compare("tokens", "<", 999_999_999_999_999_999)),
])
def test_query_parser_compare_values(query: str, expected: Compare) -> None:
    got = P(query)
    assert got == expected
    assert isinstance(got, Compare) and type(got.value) is int


def test_query_parser_durations_use_whole_seconds_of_now() -> None:
    assert parse_query("created:>1h", now=NOW + 0.999) == Compare("created", ">", int(NOW) - 3600)


# --- errors, each at an exact position ----------------------------------------------------

@pytest.mark.parametrize("query,position,detail", [
    # empty
    ("", 0, "empty query"),
    ("   \t\n", 0, "empty query"),
    # unbalanced parentheses
    ("(type:fact", 0, "'(' is never closed: expected ')'"),
    ("a (b OR (c)", 2, "'(' is never closed: expected ')'"),
    ("a (", 2, "'(' is never closed: expected ')'"),
    ("type:fact)", 9, "unbalanced ')'"),
    (")", 0, "unbalanced ')'"),
    ("(a)) b", 3, "unbalanced ')'"),
    ("()", 1, "empty parentheses"),
    ("a ( ) b", 4, "empty parentheses"),
    # operators without operands
    ("type:fact AND", 10, "AND needs a term on its right"),
    ("(type:fact AND )", 11, "AND needs a term on its right"),
    ("a AND OR b", 2, "AND needs a term on its right"),
    ("a AND AND b", 2, "AND needs a term on its right"),
    ("OR x", 0, "OR needs a term on its left"),
    ("AND x", 0, "AND needs a term on its left"),
    ("(OR x)", 1, "OR needs a term on its left"),
    ("a OR", 2, "OR needs a term on its right"),
    ("a OR OR b", 2, "OR needs a term on its right"),
    ("(a OR) b", 3, "OR needs a term on its right"),
    ("NOT", 0, "NOT needs a term on its right"),
    ("a NOT", 2, "NOT needs a term on its right"),
    ("NOT AND a", 0, "NOT needs a term on its right"),
    ("(NOT)", 1, "NOT needs a term on its right"),
    # empty values of known fields
    ("type:", 5, "type: needs a value"),
    ("x tag: y", 6, "tag: needs a value"),
    ("from:", 5, "from: needs a value"),
    ('tag:""', 5, "tag: needs a value"),
    ("tag:' '", 5, "tag: needs a value"),
    ("id:)", 3, "id: needs a value"),
    # has:
    ("has:wings", 4, "has: takes summary or edges, not 'wings'"),
    ("has:Summary", 4, "has: takes summary or edges, not 'Summary'"),
    # operators and times
    ("created:24h", 8, "created: needs an operator (>, <, >=, <= or =) before the value"),
    ("updated:", 8, "updated: needs a value"),
    ("created:>", 9, "created:> needs a value"),
    ("created:>=", 10, "created:>= needs a value"),
    ("created:>yesterday", 9, "created: invalid time 'yesterday'"),
    ("created:>1y", 9, "created: invalid time '1y'"),
    ("created:>24H", 9, "created: invalid time '24H'"),
    ("created:>-5d", 9, "created: invalid time '-5d'"),
    ("created:>2024-1-1", 9, "created: invalid time '2024-1-1'"),
    ("created:>2024-01-01T12:00:00", 9, "created: invalid time '2024-01-01T12:00:00'"),
    ("created:>2024-02-30", 9, "created: no such date or time '2024-02-30'"),
    ("updated:<2024-01-01T24:00:00Z", 9, "updated: no such date or time"),
    ("created:>0000-01-01", 9, "created: no such date or time '0000-01-01'"),
    ("created:>9999999999999999w", 9, "created: duration '9999999999999999w' is out of range"),
    ("created:>999999999999w", 9, "created: time '999999999999w' is out of range"),
    # tokens
    ("tokens:500", 7, "tokens: needs an operator"),
    ("tokens:<many", 8, "tokens: needs an integer, not 'many'"),
    ("tokens:<-1", 8, "tokens: needs an integer, not '-1'"),
    ("tokens:<1.5", 8, "tokens: needs an integer, not '1.5'"),
    ("tokens:<\u00b2", 8, "tokens: needs an integer, not '\u00b2'"),
    ("tokens:<\u0663", 8, "tokens: needs an integer"),
    ("tokens:<1234567890123456789", 8, "tokens: number 1234567890123456789 is too large"),
    # quotes
    ('say "hello', 4, 'unterminated quote (")'),
    ("it 'is", 3, "unterminated quote (')"),
    ('tag:"a b', 4, 'unterminated quote (")'),
    ('""', 0, "empty phrase"),
    ("a '  '", 2, "empty phrase"),
])
def test_query_parser_error_position(query: str, position: int, detail: str) -> None:
    with pytest.raises(QuerySyntaxError) as info:
        P(query)
    err = info.value
    assert (err.position, err.query) == (position, query)
    assert err.detail.startswith(detail), err.detail
    assert str(err).startswith(f"E011: query syntax error at column {position + 1}: {detail}")
    assert "\n" not in str(err)


def test_query_parser_errors_report_the_leftmost_problem() -> None:
    with pytest.raises(QuerySyntaxError) as info:
        P(') "abc')
    assert (info.value.position, info.value.detail) == (0, "unbalanced ')'")
    with pytest.raises(QuerySyntaxError) as info:
        P('has:x "abc')
    assert info.value.position == 4


def test_query_syntax_error_message_quotes_the_text_at_the_position() -> None:
    with pytest.raises(QuerySyntaxError) as info:
        P("(type:fact AND )")
    err = info.value
    assert isinstance(err, InvalidInput) and err.code == "E011" and err.exit_code == 1
    assert err.message == "query syntax error at column 12: AND needs a term on its right " \
                          "(near 'AND )')"
    assert err.hint == "see docs/query.md"
    assert str(err) == "E011: query syntax error at column 12: AND needs a term on its right " \
                       "(near 'AND )') (hint: see docs/query.md)"


def test_query_syntax_error_message_at_end_and_truncated() -> None:
    with pytest.raises(QuerySyntaxError) as info:
        P("type:")
    assert info.value.message == "query syntax error at column 6: type: needs a value " \
                                 "(at the end of the query)"
    with pytest.raises(QuerySyntaxError) as info:
        P("has:abcdefghijklmnopqrstuvwxyz")
    assert info.value.message.endswith("(near 'abcdefghijklmnopqrst...')")


def test_query_syntax_error_message_stays_one_line() -> None:
    with pytest.raises(QuerySyntaxError) as info:
        P("a\nAND\n\r\u2028")
    assert info.value.position == 2
    assert "\n" not in str(info.value) and "\r" not in str(info.value)
    assert "\u2028" not in str(info.value)


# --- limits ------------------------------------------------------------------------------

def test_query_parser_length_limit() -> None:
    ok = ("w" * 19 + " ") * (MAX_QUERY_LENGTH // 20)  # 500 terms: at both limits
    assert len(ok) == MAX_QUERY_LENGTH and isinstance(P(ok), And)
    with pytest.raises(QuerySyntaxError) as info:
        P(ok + "b")
    assert info.value.position == MAX_QUERY_LENGTH
    assert info.value.detail == "query is longer than 10,000 characters"


def test_query_parser_depth_limit() -> None:
    deepest = "(" * MAX_QUERY_DEPTH + "a" + ")" * MAX_QUERY_DEPTH
    assert P(deepest) == W("a")
    with pytest.raises(QuerySyntaxError) as info:
        P("(" + deepest + ")")
    assert (info.value.position, info.value.detail) == (100, "nested more than 100 levels")
    assert P("NOT " * MAX_QUERY_DEPTH + "a") is not None
    with pytest.raises(QuerySyntaxError) as info:
        P("NOT " * (MAX_QUERY_DEPTH + 1) + "a")
    assert info.value.position == 400
    with pytest.raises(QuerySyntaxError, match="nested more than"):
        P("NOT (" * 60 + "a" + ")" * 60)  # NOT and '(' count together
    with pytest.raises(QuerySyntaxError, match="nested more than"):
        P("(" * 5000)  # never a RecursionError


def test_query_parser_term_count_limit() -> None:
    most = " OR ".join(f"w{i}" for i in range(MAX_QUERY_TERMS))
    assert len(P(most).items) == MAX_QUERY_TERMS  # type: ignore[union-attr]
    with pytest.raises(QuerySyntaxError) as info:
        P(most + " OR extra")
    assert info.value.detail == f"more than {MAX_QUERY_TERMS} terms"
    assert info.value.position == len(most) + 4  # at the first term over the limit
    with pytest.raises(QuerySyntaxError, match="more than 500 terms"):
        P(" ".join(f"tag:t{i}" for i in range(MAX_QUERY_TERMS + 1)))
    with pytest.raises(QuerySyntaxError, match="more than 500 terms"):
        P("x " * 995)  # 995 words: SQLite's expression depth would overflow


@pytest.mark.parametrize("make", [
    lambda n: "w" * n,
    lambda n: '"' + "p" * n + '"',
    lambda n: "tag:" + "t" * n,
    lambda n: "type:'" + "t" * n + "'",
])
def test_query_parser_term_length_limit(make) -> None:
    assert P(make(MAX_TERM_LENGTH)) is not None
    with pytest.raises(QuerySyntaxError) as info:
        P("a AND " + make(MAX_TERM_LENGTH + 1))
    assert info.value.detail == "term is longer than 1,000 characters"
    assert 6 <= info.value.position <= 12


@pytest.mark.parametrize("query,position", [
    ("\0", 0), ("a\0b", 1), ("type:fact AND \0", 14), ('"a \0 b"', 3), ("tag:\0", 4),
])
def test_query_parser_refuses_nul(query: str, position: int) -> None:
    with pytest.raises(QuerySyntaxError) as info:
        P(query)
    assert (info.value.position, info.value.detail) == (position, "a NUL character is not allowed")
    assert "\0" not in str(info.value) and "\n" not in str(info.value)


def test_query_parser_oversized_queries_fail_fast() -> None:
    """QL-01: a parse error (never a RecursionError) well within 2 s."""
    import time

    for query in ("(" * 100_000 + "x" + ")" * 100_000, "x" * (1 << 20), "a " * (1 << 19),
                  "NOT " * 2_000 + "a", "(" * 5_000):
        start = time.perf_counter()
        with pytest.raises(QuerySyntaxError):
            P(query)
        assert time.perf_counter() - start < 2.0  # microseconds: the length is checked first


def test_format_query_refuses_what_is_over_the_term_limits() -> None:
    with pytest.raises(ValueError):
        format_query(Or(tuple(W(f"w{i}") for i in range(MAX_QUERY_TERMS + 1))))
    with pytest.raises(ValueError):
        format_query(W("w" * (MAX_TERM_LENGTH + 1)))
    with pytest.raises(ValueError):
        format_query(Text("a\0b", True))


# --- format_query ------------------------------------------------------------------------

@pytest.mark.parametrize("query,canonical", [
    ("type:fact AND tag:project:viberent", "type:fact AND tag:project:viberent"),
    ("(type:decision OR type:pattern) AND created:>7d",
     "(type:decision OR type:pattern) AND created:>2023-11-07T22:13:20Z"),
    ("tag:tier:working AND NOT has:summary", "tag:tier:working AND NOT has:summary"),
    ("type:observation AND tokens:<500", "type:observation AND tokens:<500"),
    ("retry timeout", "retry AND timeout"),
    ("a OR b AND c", "a OR b AND c"),
    ("(a OR b) AND c", "(a OR b) AND c"),
    ("a AND (b AND c)", "a AND (b AND c)"),
    ("a OR (b OR c)", "a OR (b OR c)"),
    ("NOT (a AND b)", "NOT (a AND b)"),
    ("NOT a AND b", "NOT a AND b"),
    ("(((a)))", "a"),
    ("'x' \"y\"", '"x" AND "y"'),
    ("'say \"hi\"'", "'say \"hi\"'"),
    ("tag:'a b'", 'tag:"a b"'),
    ("tag:\"it's\"", "tag:it's"),
    ("tag:'\"x'", "tag:'\"x'"),
    ("created:>2024-01-01", "created:>2024-01-01T00:00:00Z"),
    ("created:>0001-01-01", "created:>0001-01-01T00:00:00Z"),
    ("tokens:<007", "tokens:<7"),
    ("don't http://x", "don't AND http://x"),
])
def test_format_query_canonical_text(query: str, canonical: str) -> None:
    ast = P(query)
    assert format_query(ast) == canonical
    assert parse_query(format_query(ast), now=NOW + 12345) == ast  # times are absolute


@pytest.mark.parametrize("node", [
    Text("a b", False),
    Text("AND", False),
    Text("type:fact", False),
    Text('"x', False),
    Text("", False),
    Text("", True),
    Text("  ", True),
    Text("a\"b'c", True),
    Field("tag", None, "a \"b' c"),
    Field("tag", None, ""),
    Field("has", None, "wings"),
    Field("tag", "=", "x"),
    Field("nope", None, "x"),
    Compare("tokens", "<", 1.5),
    Compare("tokens", "<", -1),
    Compare("tokens", "<", True),
    Compare("created", ">", 1.5),
    Compare("created", ">", float("nan")),
    Compare("created", ">", 10 ** 400),
    Compare("created", "!=", 0),
    Compare("size", "<", 0),
    And(()),
    Or((W("a"),)),
    Not(And((W("a"),))),
])
def test_format_query_refuses_what_cannot_read_back(node: object) -> None:
    with pytest.raises(ValueError):
        format_query(node)  # type: ignore[arg-type]


def test_format_query_refuses_too_deep_or_too_long() -> None:
    node: object = W("a")
    for _ in range(MAX_QUERY_DEPTH + 1):
        node = Not(node)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        format_query(node)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        format_query(Or(tuple(W("w") for _ in range(MAX_QUERY_LENGTH // 4))))
    with pytest.raises(TypeError):
        format_query("a")  # type: ignore[arg-type]


def test_query_package_reexports_the_parser_api() -> None:
    assert set(ctxstore.query.__all__) == {
        "QuerySyntaxError", "Field", "Compare", "Text", "And", "Or", "Not", "QueryTerm",
        "QueryNode", "parse_query", "format_query", "iter_terms", "text_terms",
        "MAX_QUERY_LENGTH", "MAX_QUERY_DEPTH"}
    assert ctxstore.query.parse_query is parse_query
