"""The restricted time grammar of ctxstore.memory.timeexpr (UTC)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxstore.memory.timeexpr import parse_time_filter, parse_when, resolve_relative, says_time

# Wednesday 18 March 2026, 15:00 UTC.
NOW = int(datetime(2026, 3, 18, 15, 0, tzinfo=UTC).timestamp() * 1000)


def ms(*args: int) -> int:
    return int(datetime(*args, tzinfo=UTC).timestamp() * 1000)  # type: ignore[misc]


@pytest.mark.parametrize(("query", "rest", "since", "until"), [
    ("what did we decide last week about the cache?", "what did we decide about the cache?",
     ms(2026, 3, 9), ms(2026, 3, 16)),
    ("yesterday's flaky test", None, ms(2026, 3, 17), ms(2026, 3, 18)),
    ("the bug from 3 days ago", "the bug", ms(2026, 3, 15), ms(2026, 3, 16)),
    ("hook latency in March", "hook latency", ms(2026, 3, 1), ms(2026, 4, 1)),
    ("what changed since Monday", "what changed", ms(2026, 3, 16), None),
    ("notes on 2026-03-04", "notes", ms(2026, 3, 4), ms(2026, 3, 5)),
    ("this morning's plan", None, ms(2026, 3, 18), ms(2026, 3, 18, 12)),
    ("the error earlier today", "the error", ms(2026, 3, 18), NOW + 1),
    ("decisions last month", "decisions", ms(2026, 2, 1), ms(2026, 3, 1)),
    ("deploy on Friday", "deploy", ms(2026, 3, 13), ms(2026, 3, 14)),
    ("what we did in December", "what we did", ms(2025, 12, 1), ms(2026, 1, 1)),
    ("a couple of days ago", "", ms(2026, 3, 16), ms(2026, 3, 17)),
    ("before last Friday", "", None, ms(2026, 3, 13)),
    ("last weekend", "", ms(2026, 3, 14), ms(2026, 3, 16)),
    ("March 4 release", "release", ms(2026, 3, 4), ms(2026, 3, 5)),
])
def test_time_words(query: str, rest: str | None, since: int | None, until: int | None) -> None:
    text, lo, hi = parse_time_filter(query, NOW)
    assert (lo, hi) == (since, until)
    if rest is not None:
        assert text == rest


@pytest.mark.parametrize("query", [
    "we march on", "you may see it", "May I ask about the cache", "the week planner component",
    "monthly report exporter", "since the refactor", "last call wins", "nothing temporal here",
])
def test_not_time_words(query: str) -> None:
    assert parse_time_filter(query, NOW) == (query, None, None)


def test_two_expressions_intersect() -> None:
    _, lo, hi = parse_time_filter("since Monday yesterday", NOW)
    assert (lo, hi) == (ms(2026, 3, 17), ms(2026, 3, 18))


@pytest.mark.parametrize(("value", "expected"), [
    ("2d", (ms(2026, 3, 16, 15), NOW)),
    ("1w", (ms(2026, 3, 11, 15), NOW)),
    ("3 days ago", (ms(2026, 3, 15, 15), NOW)),
    ("2026-03-04", (ms(2026, 3, 4), ms(2026, 3, 5))),
    ("2026-03-04T10:30Z", (ms(2026, 3, 4, 10, 30), ms(2026, 3, 4, 10, 30))),
    ("2026-03-04T10:30:00+01:00", (ms(2026, 3, 4, 9, 30), ms(2026, 3, 4, 9, 30))),
    ("yesterday", (ms(2026, 3, 17), ms(2026, 3, 18))),
    ("last week", (ms(2026, 3, 9), ms(2026, 3, 16))),
    ("now", (NOW, NOW)),
])
def test_parse_when(value: str, expected: tuple[int, int]) -> None:
    assert parse_when(value, NOW) == expected


@pytest.mark.parametrize("value", ["", "garbage", "last week about cache", "2026-13-45", "99999999d", "we"])
def test_parse_when_rejects(value: str) -> None:
    assert parse_when(value, NOW) is None


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80) | st.from_regex(
    r"((since|before|on|in|last|this|a|two|\d{1,5}|days?|weeks?|months?|ago|yesterday|today|"
    r"Monday|March|May|\d{4}-\d{2}(-\d{2})?|the|cache) ?){0,8}", fullmatch=True),
    st.integers(min_value=0, max_value=4_000_000_000_000))
def test_never_raises(query: str, now: int) -> None:
    text, lo, hi = parse_time_filter(query, now)
    assert isinstance(text, str)
    assert lo is None or hi is None or lo <= hi
    result = parse_when(query, now)
    assert result is None or len(result) == 2


_VOCAB = ["last", "past", "previous", "this", "earlier", "the", "day", "before", "yesterday",
          "today", "tonight", "morning", "night", "week", "weekend", "month", "year", "ago", "a",
          "couple", "of", "few", "3", "12", "2026-03", "2026-03-04", "in", "since", "until",
          "monday", "Friday", "march", "Sept.", "dec", "may", "1st", "decide", "lock", "index",
          "_", "-", ",", "?", "days", "hours", "Weeks", "mins"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_VOCAB), max_size=8),
       st.lists(st.sampled_from([" ", "  ", "_", "-", "/", ""]), min_size=8, max_size=8))
def test_the_quick_check_never_hides_a_time_expression(words: list[str], seps: list[str]) -> None:
    """A text the quick check passes by (no trigger word) holds nothing the grammar reads."""
    import re

    from ctxstore.memory import timeexpr

    text = "".join(w + s for w, s in zip(words, seps, strict=False))
    if re.search(timeexpr._TIME_PATTERN, text, re.IGNORECASE):
        assert timeexpr._may_hold_time(text), text
    if not timeexpr._may_hold_time(text):
        assert parse_time_filter(text, NOW) == (text, None, None)


@pytest.mark.parametrize(("said", "resolved"), [
    ("I moved last Tuesday!", "I moved last Tuesday [2026-03-17]!"),
    ("yesterday and the day before yesterday",
     "yesterday [2026-03-17] and the day before yesterday [2026-03-16]"),
    ("Last week we shipped it", "Last week [2026-03-09 to 2026-03-15] we shipped it"),
    ("last month I started", "last month [2026-02] I started"),
    ("we met two years ago", "we met two years ago [2024]"),
    ("3 days ago, and last weekend", "3 days ago [2026-03-15], and last weekend [2026-03-14 to 2026-03-15]"),
    # left as said: a bare weekday or "this weekend" may be ahead, a date names itself, hours
    # are below a date
    ("see you on Friday", "see you on Friday"),
    ("this weekend we will see", "this weekend we will see"),
    ("on 2026-03-04 and in March 2025", "on 2026-03-04 and in March 2025"),
    ("two hours ago", "two hours ago"),
    ("no time here", "no time here"),
])
def test_resolve_relative_dates_against_the_time_they_were_said(said: str, resolved: str) -> None:
    assert resolve_relative(said, NOW) == resolved


@given(st.text(max_size=200), st.integers(min_value=-(2 ** 62), max_value=2 ** 62))
@settings(max_examples=200)
def test_resolve_relative_never_raises_and_only_adds(text: str, at: int) -> None:
    out = resolve_relative(text, at)
    assert isinstance(out, str) and len(out) >= len(text)


def test_says_time_finds_a_time_in_any_form_and_not_the_verb_may() -> None:
    for told in ("I went there last Friday.", "We moved in May.", "two weeks ago it broke",
                 "Yesterday was long", "on 3 August, 2023 we met", "it was 2023-05-01"):
        assert says_time(told), told
    for untold in ("I may go there.", "The pottery class is fun.", "", "I ask why."):
        assert not says_time(untold), untold
