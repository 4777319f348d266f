"""Property tests for the query parser.

- format_query then parse_query gives back any generated AST;
- any text that parses reads back the same after format_query;
- arbitrary text raises nothing but QuerySyntaxError, with a sane position and one line.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ctxstore.query.parser import (
    MAX_QUERY_DEPTH,
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
)

NOW = 1_700_000_000.25
FIELDS = {"type", "tag", "has", "from", "to", "id", "created", "updated", "tokens"}
MIN_TIME, MAX_TIME = -62135596800, 253402300799  # 0001-01-01T00:00:00Z .. 9999-12-31T23:59:59Z

# Characters with a meaning in the language, mixed with ordinary and odd ones.
chars = st.one_of(st.sampled_from(" \t\n()\"':<>=-_./"), st.characters().filter(lambda c: c != "\0"),
                  st.sampled_from("abcAZ09"))  # NUL is refused (see test_query_parser.py)
any_text = st.text(chars, min_size=1, max_size=12)


def reads_as_word(text: str) -> bool:
    """The documented rule for a bare full-text word (written independently of the parser)."""
    if not text or text[0] in "\"'" or text in ("AND", "OR", "NOT"):
        return False
    if any(c.isspace() or c in "()" for c in text):
        return False
    name, colon, _ = text.partition(":")
    return not (colon and name in FIELDS)


def writable_value(text: str) -> bool:
    """A field value or phrase can be written unless it is blank or needs both quotes."""
    return bool(text.strip()) and not ('"' in text and "'" in text)


words = any_text.filter(reads_as_word)
phrases = any_text.filter(writable_value)


def bare_value(text: str) -> bool:
    """A field value written without quotes: no blanks or parentheses, no leading quote."""
    return bool(text) and text[0] not in "\"'" and not any(c.isspace() or c in "()" for c in text)


values = any_text.filter(lambda v: writable_value(v) or bare_value(v))

leaves = st.one_of(
    st.builds(Text, words, st.just(False)),
    st.builds(Text, phrases, st.just(True)),
    st.builds(Field, st.sampled_from(["type", "tag", "from", "to", "id"]), st.none(), values),
    st.builds(Field, st.just("has"), st.none(), st.sampled_from(["summary", "edges"])),
    st.builds(Compare, st.just("tokens"), st.sampled_from([">", "<", ">=", "<=", "="]),
              st.integers(0, 10**18 - 1)),
    st.builds(Compare, st.sampled_from(["created", "updated"]),
              st.sampled_from([">", "<", ">=", "<=", "="]),
              st.one_of(st.integers(MIN_TIME, MAX_TIME),
                        st.integers(MIN_TIME, MAX_TIME).map(float))),
)
asts = st.recursive(leaves, lambda inner: st.one_of(
    st.lists(inner, min_size=2, max_size=4).map(lambda xs: And(tuple(xs))),
    st.lists(inner, min_size=2, max_size=4).map(lambda xs: Or(tuple(xs))),
    inner.map(Not)), max_leaves=12)


@given(asts)
def test_query_format_then_parse_gives_the_ast(ast) -> None:
    text = format_query(ast)
    assert parse_query(text, now=NOW) == ast
    assert format_query(parse_query(text, now=NOW)) == text  # the canonical text is stable


# Fragments that build plausible (and plausibly broken) queries.
fragments = st.sampled_from([
    " ", "(", ")", "AND", "OR", "NOT", " AND ", " OR ", " NOT ", '"', "'", "a", "b c", "x:y",
    "type:", "type:fact", "tag:", "tag:tier:working", 'tag:"a b"', "has:", "has:summary",
    "has:edges", "has:x", "from:01H", "to:01H", "id:01", "created:", "created:>", "created:>24h",
    "created:<1w", "updated:>=2024-01-01", "updated:=2024-01-01T12:00:00Z", "created:>2024-13-01",
    "tokens:", "tokens:<500", "tokens:>x", "tokens:=", "9", "d", "w", "-", ":", "\n", "don't",
])
queries = st.one_of(st.lists(fragments, max_size=25).map("".join), st.text(max_size=200),
                    st.lists(st.one_of(fragments, any_text), max_size=15).map(" ".join))


@given(queries)
def test_query_parser_raises_only_syntax_errors(text: str) -> None:
    try:
        ast = parse_query(text, now=NOW)
    except QuerySyntaxError as err:
        assert 0 <= err.position <= len(text)
        assert err.query == text
        assert err.code == "E011"
        assert "\n" not in str(err) and "\r" not in str(err)
        assert str(err).startswith(f"E011: query syntax error at column {err.position + 1}: ")
        return
    # Whatever parses can be written back and reads the same.
    assert parse_query(format_query(ast), now=NOW + 99) == ast
    assert all(isinstance(t, (Field, Compare, Text)) for t in iter_terms(ast))


@given(st.integers(0, 3 * MAX_QUERY_DEPTH), st.sampled_from(["(", "NOT ", "NOT ("]))
def test_query_parser_deep_nesting_is_a_syntax_error_or_parses(depth: int, opener: str) -> None:
    closer = ")" * opener.count("(")
    text = opener * depth + "a" + closer * depth
    levels = depth * len(opener.split())  # "NOT (" is two levels
    try:
        parse_query(text, now=NOW)
    except QuerySyntaxError as err:
        assert levels > MAX_QUERY_DEPTH and "nested more than" in err.detail
    else:
        assert levels <= MAX_QUERY_DEPTH
