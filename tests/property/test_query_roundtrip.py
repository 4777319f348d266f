"""Property tests: format/parse round trip, and nothing but QuerySyntaxError on garbage."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ctxstore.query.parser import And, Compare, Field, Not, Or, QuerySyntaxError, Text, format_query, parse_query

NOW = 1_700_000_000.0
words = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_.:/", min_size=1, max_size=8)
leaves = st.one_of(
    st.builds(Field, st.sampled_from(["type", "tag", "from", "to", "id"]), st.none(), words),
    st.builds(Field, st.just("has"), st.none(), st.sampled_from(["summary", "edges"])),
    st.builds(Compare, st.just("tokens"), st.sampled_from([">", "<", ">=", "<=", "="]),
              st.integers(0, 10**6)),
    st.builds(Compare, st.sampled_from(["created", "updated"]), st.sampled_from([">", "<", "="]),
              st.integers(0, 4_000_000_000).map(float)),
    st.builds(Text, st.text(alphabet="abc xyz", min_size=1, max_size=6).filter(lambda s: s.strip() == s and s),
              st.booleans()),
)


def _flat(cls, items):
    # the parser flattens a AND (b AND c) only when grouped; keep generated trees canonical
    out = []
    for i in items:
        out.extend(i.items if isinstance(i, cls) else [i])
    return cls(tuple(out))


asts = st.recursive(leaves, lambda inner: st.one_of(
    st.lists(inner, min_size=2, max_size=3).map(lambda xs: _flat(And, xs)),
    st.lists(inner, min_size=2, max_size=3).map(lambda xs: _flat(Or, xs)),
    inner.map(Not)), max_leaves=8)


def _normalize(node):
    """A Text without spaces that is not a phrase renders bare; with spaces it must be a phrase."""
    if isinstance(node, Text):
        phrase = node.phrase or " " in node.text
        return Text(node.text, phrase)
    if isinstance(node, (And, Or)):
        return type(node)(tuple(_normalize(i) for i in node.items))
    if isinstance(node, Not):
        return Not(_normalize(node.item))
    return node


@given(asts)
def test_query_format_parse_roundtrip(ast) -> None:
    ast = _normalize(ast)
    text = format_query(ast)
    assert parse_query(text, now=NOW) == ast


@given(st.text(max_size=200))
def test_query_parser_only_raises_syntax_errors(text) -> None:
    try:
        parse_query(text, now=NOW)
    except QuerySyntaxError:
        pass
