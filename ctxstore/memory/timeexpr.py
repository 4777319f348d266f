"""Time expressions in queries and ``--since``/``--until`` values, by a restricted grammar.

No ``dateparser``: on chat questions it reads "we" as a Wednesday and months as points
(RETRIEVAL.md §0). Only these forms are recognised (case-insensitive), each giving a
half-open range ``[since, until)`` in milliseconds:

- ``today``, ``earlier today``, ``this morning/afternoon/evening``, ``tonight``,
  ``yesterday``, ``last night``, ``the day before yesterday``;
- ``N minutes/hours/days/weeks/months/years ago`` (``a``, ``an``, ``a couple of``, ``a few``
  and the words one..twelve count as numbers): the unit-long window around that moment,
  whole days for days;
- ``last/past N days/weeks/...`` and ``in the last ...``: from then until now;
- ``this/last/previous week``, ``weekend``, ``month``, ``year``; ``earlier this week/month``;
- weekday names (``on Monday``, ``last Friday``): the most recent such day before today;
- month names (``in March``, ``March 2026``): the whole month, the most recent one not in
  the future unless a year is given; ``March 4`` / ``4 March`` (``, 2026``) one day;
- ISO dates ``2026-03-04`` (one day) and months ``2026-03``;
- a leading ``since`` / ``after`` keeps only the start, ``before`` / ``until`` only the end.

**Time zone: UTC.** Transcript timestamps are UTC (ISO ``Z``) and a query carries no zone,
so "yesterday" is the previous UTC calendar day. Near midnight a user far from UTC may see
a day's shift; the range is a soft hint to ranking, so this costs little.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

__all__ = ["parse_time_filter", "parse_when", "resolve_relative"]

_DAY = 86_400_000
_UNITS_MS = {"minute": 60_000, "hour": 3_600_000, "day": _DAY, "week": 7 * _DAY}
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
            "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
            "a couple of": 2, "a couple": 2, "couple of": 2, "a few": 3, "few": 3, "several": 3}
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august",
           "september", "october", "november", "december")
_MONTH_RE = "|".join([*_MONTHS, *(m[:3] for m in _MONTHS if m != "may"), "sept"])
_NUM = r"(?P<n>\d{1,4}|a couple of|a couple|couple of|a few|few|several|an|a|one|two|three|four|" \
       r"five|six|seven|eight|nine|ten|eleven|twelve)"
_UNIT = r"(?P<unit>minute|min|hour|hr|day|week|wk|month|year|yr)s?"

_FORMS = [
    ("iso", r"(?P<y>\d{4})-(?P<mo>\d{2})(?:-(?P<d>\d{2}))?(?![\d:T-])"),
    ("ago", rf"{_NUM}\s+{_UNIT}\s+ago"),
    ("past", r"(?:in\s+|over\s+|during\s+|within\s+)?(?:the\s+)?(?:last|past|previous)\s+"
             + _NUM.replace("<n>", "<pn>") + r"\s+" + _UNIT.replace("<unit>", "<punit>")),
    ("dbefore", r"(?:the\s+)?day\s+before\s+yesterday"),
    ("named", r"(?P<which>earlier\s+today|today|this\s+morning|this\s+afternoon|this\s+evening|"
              r"tonight|yesterday|last\s+night)"),
    ("period", r"(?P<rel>earlier\s+this|this|last|previous|past)\s+(?P<unitp>week(?:end)?|month|year)"),
    ("weekday", rf"(?P<last>last\s+)?(?P<wd>{'|'.join(_WEEKDAYS)})"),
    ("monthday", rf"(?P<mname>{_MONTH_RE})\.?\s+(?P<md>\d{{1,2}})(?:st|nd|rd|th)?(?:,?\s+(?P<my>\d{{4}}))?"
                 rf"|(?P<md2>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<mname2>{_MONTH_RE})(?:,?\s+(?P<my2>\d{{4}}))?"),
    ("month", rf"(?P<mname3>{_MONTH_RE})(?:\s+(?P<my3>\d{{4}}))?"),
]
# Every form above holds one of these words whole (or, ``iso``, digits and a dash): a text
# with none of them is passed by without the big pattern, whose compilation (~2.5 ms)
# would otherwise be paid by every prompt the hook searches memory for.
_TRIGGERS = frozenset({"ago", "last", "past", "previous", "yesterday", "today", "tonight", "morning",
                       "afternoon", "evening", "night", "week", "weekend", "month", "year",
                       *_WEEKDAYS, *_MONTHS, *(m[:3] for m in _MONTHS), "sept"})
_PREP = r"(?P<prep>since|after|before|until|till|from|on|in|during|at|by)\s+"
_TIME_PATTERN = (rf"(?<![\w-])(?:{_PREP})?(?:"
                 + "|".join(f"(?P<{name}>{pattern})" for name, pattern in _FORMS) + r")(?![\w-])")
# Patterns, not compiled objects: ``re`` compiles each on first use (and caches it), so the
# prompt hook, which imports this module for every memory search, compiles none of them.
_SPACES = r"\s{2,}"
_DURATION = r"(?i)(?P<n>\d+)\s*(?P<unit>m|min|h|hr|d|w|wk|mo|y|yr)"
_DATETIME = r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"


def parse_time_filter(query: str, now_ms: int) -> tuple[str, int | None, int | None]:
    """The time words of a query, removed, and the range they name.

    Args:
        query: A search query in natural language.
        now_ms: The present, in ms since the epoch (UTC).

    Returns:
        ``(query without the time words, since, until)``, a half-open range in ms where
        either end may be None (open). With several expressions the ranges are intersected
        (the first is kept when they do not overlap). No time words: ``(query, None, None)``.
        Never raises.
    """
    try:
        return _parse(query, now_ms)
    except (ValueError, OverflowError):
        return query, None, None


def resolve_relative(text: str, at_ms: int) -> str:
    """``text`` with each relative time it says followed by the date it meant, in brackets.

    A past turn's "last Tuesday" or "two weeks ago" means nothing once the day has passed; read
    against the time the turn was said (``at_ms``) it becomes "last Tuesday [2023-05-02]",
    "last month [2023-04]", "last week [2023-05-01 to 2023-05-07]". Only relative forms are
    resolved (``ago``, ``yesterday``, ``today``, ``last``/``this`` week, weekend, month or
    year, ``last`` + a weekday, "the day before yesterday"); a bare weekday ("on Friday") or
    "this weekend" may be ahead as well as behind and is left as said, as are dates that name
    themselves. Never
    raises: a text it cannot read is returned as it was.
    """
    if not _may_hold_time(text):
        return text
    try:
        now = datetime.fromtimestamp(at_ms / 1000, UTC)
        out: list[str] = []
        pos = 0
        for m in re.compile(_TIME_PATTERN, re.IGNORECASE).finditer(text):
            kind = next((name for name, _ in _FORMS if m.group(name) is not None), None)
            if kind not in _RELATIVE or (kind == "weekday" and not m.group("last")):
                continue
            if kind == "period" and m.group("unitp").lower() == "weekend" and \
                    not m.group("rel").lower().startswith(("last", "previous", "past")):
                continue  # "this weekend" said on a Monday: the one gone or the one coming
            if kind == "ago" and _unit(m.group("unit")) in ("minute", "hour"):
                continue
            span = _range(m, now)
            if span is None:
                continue
            out += [text[pos:m.end()], f" [{_render(*span)}]"]
            pos = m.end()
        return "".join(out) + text[pos:] if out else text
    except (ValueError, OverflowError, KeyError, StopIteration):
        return text


_RELATIVE = frozenset({"ago", "dbefore", "named", "period", "weekday"})


def says_time(text: str) -> bool:
    """Whether ``text`` tells a time in any form ("last Friday", "two weeks ago", "in May").

    The verb "may" written in lower case is no month. Never raises.
    """
    if not _may_hold_time(text):
        return False
    for m in re.compile(_TIME_PATTERN, re.IGNORECASE).finditer(text):
        if m.group(0).split()[-1] != "may":
            return True
    return False


def _render(lo: int, hi: int) -> str:
    """A range ``[lo, hi)`` in ms as the shortest dates that name it."""
    start = datetime.fromtimestamp(lo / 1000, UTC)
    last = datetime.fromtimestamp((hi - 1) / 1000, UTC)
    if start.date() == last.date():
        return start.date().isoformat()
    first_day = start == _day(start)
    if first_day and start.day == 1 and _ms(_month_start(start.year, start.month + 1)) == hi:
        return f"{start.year:04d}-{start.month:02d}"
    if first_day and (start.month, start.day) == (1, 1) and \
            _ms(datetime(start.year + 1, 1, 1, tzinfo=UTC)) == hi:
        return f"{start.year:04d}"
    return f"{start.date().isoformat()} to {last.date().isoformat()}"


def _may_hold_time(query: str) -> bool:
    """False only when no form can match: an ASCII text without a trigger word or ``N-N``.

    Not ASCII: True (case-insensitive matching folds some other letters to ASCII ones).
    """
    if not query.isascii():
        return True
    low = query.lower()
    if "-" in low and any(c.isdigit() for c in low):
        return True
    words = "".join(c if c.isalpha() else " " for c in low).split()
    return not _TRIGGERS.isdisjoint(words)


def _parse(query: str, now_ms: int) -> tuple[str, int | None, int | None]:
    if not _may_hold_time(query):
        return query, None, None
    now = datetime.fromtimestamp(now_ms / 1000, UTC)
    since: int | None = None
    until: int | None = None
    found = False
    kept: list[str] = []
    pos = 0
    for m in re.compile(_TIME_PATTERN, re.IGNORECASE).finditer(query):  # re caches it
        span = _range(m, now)
        if span is None:
            continue
        lo, hi = _apply_prep(m.group("prep"), span)
        if not found:
            since, until, found = lo, hi, True
        else:
            new_lo = max(x for x in (since, lo) if x is not None) if since or lo else None
            new_hi = min(x for x in (until, hi) if x is not None) if until or hi else None
            if new_lo is None or new_hi is None or new_lo < new_hi:
                since, until = new_lo, new_hi
        kept.append(query[pos:m.start()])
        pos = m.end()
    if not found:
        return query, None, None
    kept.append(query[pos:])
    text = re.sub(_SPACES, " ", "".join(kept)).strip()
    text = re.sub(r"\s+([?.!,])", r"\1", text)
    return text, since, until


def _apply_prep(prep: str | None, span: tuple[int, int]) -> tuple[int | None, int | None]:
    word = (prep or "").lower()
    if word == "since":  # "from" reads as "of" ("the bug from 3 days ago"): the range itself
        return span[0], None
    if word == "after":
        return span[1], None
    if word == "before":
        return None, span[0]
    if word in ("until", "till", "by"):
        return None, span[1]
    return span


def _ms(dt: datetime) -> int:
    return int(dt.timestamp() * 1000)


def _day(dt: datetime) -> datetime:
    return dt.replace(hour=0, minute=0, second=0, microsecond=0)


def _month_start(year: int, month: int) -> datetime:
    year += (month - 1) // 12
    month = (month - 1) % 12 + 1
    return datetime(year, month, 1, tzinfo=UTC)


def _number(text: str) -> int:
    text = " ".join(text.lower().split())
    return int(text) if text.isdigit() else _NUMBERS[text]


def _unit(text: str) -> str:
    text = text.lower()
    return {"min": "minute", "hr": "hour", "wk": "week", "yr": "year"}.get(text, text)


def _range(m: re.Match[str], now: datetime) -> tuple[int, int] | None:
    """The [since, until) of one matched expression, or None when it is not a time."""
    kind = next((name for name, _ in _FORMS if m.group(name) is not None), None)
    today = _day(now)
    if kind == "iso":
        year, month = int(m.group("y")), int(m.group("mo"))
        if m.group("d"):
            start = datetime(year, month, int(m.group("d")), tzinfo=UTC)
            return _ms(start), _ms(start + timedelta(days=1))
        return _ms(_month_start(year, month)), _ms(_month_start(year, month + 1))
    if kind == "ago":
        return _ago(_number(m.group("n")), _unit(m.group("unit")), now)
    if kind == "past":
        n, unit = _number(m.group("pn")), _unit(m.group("punit"))
        start = _shift(now, unit, -n)
        return _ms(_day(start) if unit != "minute" and unit != "hour" else start), _ms(now) + 1
    if kind == "dbefore":
        return _ms(today - timedelta(days=2)), _ms(today - timedelta(days=1))
    if kind == "named":
        return _named(" ".join(m.group("which").lower().split()), now, today)
    if kind == "period":
        return _period(" ".join(m.group("rel").lower().split()), m.group("unitp").lower(), now, today)
    if kind == "weekday":
        target = _WEEKDAYS.index(m.group("wd").lower())
        back = (today.weekday() - target) % 7 or 7
        start = today - timedelta(days=back)
        return _ms(start), _ms(start + timedelta(days=1))
    if kind == "monthday":
        return _month_day(m, now)
    if kind == "month":
        word = m.group("mname3")
        if not m.group("my3") and not m.group("prep") and (not word[0].isupper() or word == "May"):
            return None  # a bare "march", "sept" or "May" is more often a word than a month
        month = _month_number(word)
        year = int(m.group("my3")) if m.group("my3") else now.year - (month > now.month)
        return _ms(_month_start(year, month)), _ms(_month_start(year, month + 1))
    return None


def _month_number(word: str) -> int:
    word = word.lower()
    return next(i + 1 for i, name in enumerate(_MONTHS) if name.startswith(word[:3]))


def _month_day(m: re.Match[str], now: datetime) -> tuple[int, int]:
    name = m.group("mname") or m.group("mname2")
    day = int(m.group("md") or m.group("md2"))
    year_text = m.group("my") or m.group("my2")
    month = _month_number(name)
    year = int(year_text) if year_text else now.year
    start = datetime(year, month, day, tzinfo=UTC)
    if not year_text and start > now:
        start = start.replace(year=year - 1)
    return _ms(start), _ms(start + timedelta(days=1))


def _shift(now: datetime, unit: str, n: int) -> datetime:
    if unit == "month":
        start = _month_start(now.year, now.month + n)
        return start.replace(day=min(now.day, 28), hour=now.hour, minute=now.minute)
    if unit == "year":
        return now.replace(year=now.year + n, day=min(now.day, 28))
    return now + timedelta(milliseconds=n * _UNITS_MS[unit])


def _ago(n: int, unit: str, now: datetime) -> tuple[int, int]:
    at = _shift(now, unit, -n)
    if unit in ("minute", "hour"):
        half = _UNITS_MS[unit] // 2
        return _ms(at) - half, _ms(at) + half
    if unit == "day":
        return _ms(_day(at)), _ms(_day(at) + timedelta(days=1))
    if unit == "week":
        return _ms(_day(at) - timedelta(days=3)), _ms(_day(at) + timedelta(days=4))
    if unit == "month":
        return _ms(_month_start(at.year, at.month)), _ms(_month_start(at.year, at.month + 1))
    return _ms(datetime(at.year, 1, 1, tzinfo=UTC)), _ms(datetime(at.year + 1, 1, 1, tzinfo=UTC))


def _named(which: str, now: datetime, today: datetime) -> tuple[int, int]:
    hours = {"this morning": (0, 12), "this afternoon": (12, 18), "this evening": (18, 24),
             "tonight": (18, 24)}
    if which in hours:
        lo, hi = hours[which]
        return _ms(today + timedelta(hours=lo)), _ms(today + timedelta(hours=hi))
    if which == "yesterday":
        return _ms(today - timedelta(days=1)), _ms(today)
    if which == "last night":
        return _ms(today - timedelta(hours=6)), _ms(today + timedelta(hours=6))
    return _ms(today), _ms(now) + 1  # today, earlier today


def _period(rel: str, period: str, now: datetime, today: datetime) -> tuple[int, int]:
    if period in ("week", "weekend"):
        monday = today - timedelta(days=today.weekday())
        if rel in ("last", "previous", "past"):
            monday -= timedelta(days=7)
        if period == "weekend":
            saturday = monday + timedelta(days=5)
            return _ms(saturday), _ms(saturday + timedelta(days=2))
        end = monday + timedelta(days=7) if rel in ("last", "previous", "past") else now
        return _ms(monday), _ms(end) + (rel not in ("last", "previous", "past"))
    if period == "month":
        back = 1 if rel in ("last", "previous", "past") else 0
        start = _month_start(now.year, now.month - back)
        end = _month_start(now.year, now.month) if back else now
        return _ms(start), _ms(end) + (not back)
    year = now.year - (rel in ("last", "previous", "past"))
    end_year = datetime(year + 1, 1, 1, tzinfo=UTC) if year != now.year else now
    return _ms(datetime(year, 1, 1, tzinfo=UTC)), _ms(end_year) + (year == now.year)


def parse_when(text: str, now_ms: int) -> tuple[int | None, int | None] | None:
    """A ``--since``/``--until`` value as a range ``[since, until)`` in ms (UTC).

    Accepts ISO datetimes (``2026-03-04T10:00Z``, a point: since == until), ISO dates and
    months, durations back from now (``2d``, ``1w``, ``3h``, ``2mo``, ``2 days``,
    ``2 days ago``: from then until now), ``now``, and every expression
    ``parse_time_filter`` knows when it is the whole value (``yesterday``, ``last week``).

    Args:
        text: The option's value.
        now_ms: The present, in ms since the epoch.

    Returns:
        The range, or None when the value is not understood. Never raises.
    """
    if not isinstance(text, str):
        return None
    value = text.strip()
    try:
        if value.lower() == "now":
            return now_ms, now_ms
        if re.fullmatch(_DATETIME, value):
            dt = datetime.fromisoformat(value.replace("Z", "+00:00").replace(" ", "T"))
            point = _ms(dt if dt.tzinfo else dt.replace(tzinfo=UTC))
            return point, point
        duration = re.fullmatch(_DURATION, value)
        spelled = re.fullmatch(rf"{_NUM}\s+{_UNIT}(?:\s+ago)?", value, re.IGNORECASE)
        if duration or spelled:
            found = duration or spelled
            assert found is not None
            unit = {"m": "minute", "h": "hour", "d": "day", "w": "week", "mo": "month",
                    "y": "year"}.get(found.group("unit").lower(), _unit(found.group("unit")))
            start = _shift(datetime.fromtimestamp(now_ms / 1000, UTC), unit, -_number(found.group("n")))
            return _ms(start), now_ms
        rest, since, until = parse_time_filter(value, now_ms)
    except (ValueError, OverflowError, KeyError, StopIteration):
        return None
    if rest or (since is None and until is None):
        return None
    return since, until
