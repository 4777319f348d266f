"""Searching transcript memory: BM25 over turns, smoothed, filtered by time, grown by the graph.

One query (spec 004 §5, without embeddings):

1. Time words in the text ("last week", "yesterday", "in March") name a range
   (``memory.timeexpr``): a turn inside it, or told within the range's length after its end
   (people tell of an event after it happened), scores twice; the others still count (a range
   read wrongly from the words never hides what was asked for). ``--since``/``--until``
   filter; a query of time words only lists the turns of the range. A question asking when
   ("When did ...", "How long ...") ranks the turns that tell a time ("last Friday") 30%
   higher: the answer is the time said, seldom a word of the question.
2. FTS5 BM25 over the turns' fields, the person's words and the replies weighted above tool text,
   any query term matching (OR), a pool of ``POOL`` turns.
3. Neighbour smoothing: a turn gains a share of the score of the turns just before and after it in
   its session (a question and its answer often sit in adjacent turns). (A session prior, turns of
   a session holding much of the pool's score gaining a little, was measured to lower recall.)
4. Intent words ("decisions about", "open questions", "problems with") boost turns holding ideas
   of that intent; ``--intent`` filters on it.
5. Files and symbols named in the query ("src/cache.py", ``MemoryDB.forget``) add the turns whose
   ideas name them, directly or through the code file or symbol they are linked to
   (``memory.codelink``), with a boost: a search for a path finds the turns that discussed it.
6. A person the question names ("What did Maria say about yoga?") ranks that speaker's own
   words first: in a chat between people each message opens with its speaker's name
   ("Maria: ..."), and a turn gains up to half its score by the share of the query's other
   terms said in the named speaker's messages.
7. Each hit names its topic (the parent span) and carries its evolution chain: the ideas its
   decisions superseded, oldest last, shown as history under their successor.

A query with no words left (only time words) lists the latest turns in the range.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from ctxstore.memory.db import MemoryDB, TurnRow
from ctxstore.search.fts5 import match_expression
from ctxstore.search.tokenize import PROSE, PROSE_QUERY  # their home: no query cleaner

if TYPE_CHECKING:
    from ctxstore.embed.engine import Embedder
    from ctxstore.llm.hyde import Drafter

__all__ = ["POOL", "WEIGHTS", "VECTOR_WEIGHT", "VECTOR_GATE", "INTENTS", "Hit",
           "SearchResult", "MemoryQuery", "MemoryAnswer",
           "search_transcripts", "search_memory", "iso", "hit_text",
           "INTENT_WORDS", "time_bound", "unique_session", "hit_json", "hit_provenance",
           "result_json"]

POOL = 300
"""Candidate turns taken from BM25 before re-ranking."""
WEIGHTS = (1.2, 1.0, 0.3)
"""BM25 weights of the user, assistant and tool text of a turn."""
_NEIGHBOUR = 0.5
_ANSWER = 1.0
_INTENT_BOOST = 0.25
_NAMED_BOOST = 0.5
# What a query naming a file or symbol holds; each alternative needs one of ``_CODE_MARKS``.
_CODE_HINT = r"[/`]|::|\(\)|\w\.\w"
_CODE_MARKS = ("/", "`", "::", "()", ".")
_SPEAKER_BOOST = 0.5
_SPEAKER_TURNS = 100
_TIME_BOOST = 1.0
# A question asking when ("When did Maria adopt the puppy?") prefers the turns that tell a time:
# the answer is a time said in the turn ("last Friday"), seldom a word of the question.
_DATED_BOOST = 0.3
_WHEN = re.compile(r"(?:when|how long|(?:what|which) (?:year|month|date|day|week|time))\b", re.I)
_NAME = re.compile(r"\b[A-Z][a-z]+\b")
_SPEAKER = re.compile(r"([A-Z][\w'.-]{0,40}): ")
_HISTORY_DEPTH = 5
_TEXT_CHARS = 600
VECTOR_WEIGHT = 0.3
"""The weight of a turn's scaled cosine beside its scaled BM25 score (``_fused``)."""
VECTOR_GATE = 10
"""How many of the nearest turns by vector ``Hit.near_rank`` names (prompt context admits them)."""
INTENTS = ("decision", "conclusion", "question", "problem", "solution", "todo", "context")
"""The intents an idea may have (``--intent``)."""
INTENT_WORDS: dict[str, str] = {
    "decision": r"\b(decisions?|decided?|decide|chose|choice|settled on)\b",
    "question": r"\b(open questions?|questions?|asked)\b",
    "problem": r"\b(problems?|issues?|bugs?|errors?)\b",
    "solution": r"\b(solutions?|fix(?:es|ed)?|solved|workarounds?|tried|try|attempt(?:s|ed)?)\b",
    "todo": r"\b(todos?|to-dos?|next steps?|follow[- ]ups?)\b",
    "conclusion": r"\b(conclusions?|concluded|learn(?:ed|t)|insights?)\b",
}
"""The words that name each intent in a query (patterns, matched ignoring case)."""
_OPEN = r"\b(open|unanswered|pending|outstanding|unresolved)\b"
"""Words that ask, of questions, for those not answered yet ("open questions")."""
# Words that, beside an intent's words, say nothing of a subject: "open questions", "the
# latest decisions", "what did we decide" list ideas of the intent instead of searching words.
_LISTING = frozenset("""open unanswered pending outstanding unresolved remaining recent latest
last all any list show past previous earlier made we us our about""".split())
# Every alternative of ``INTENT_WORDS`` holds one of these: an ASCII query holding none of
# them, lower-cased, names no intent, and the patterns are not compiled for it (~0.7 ms of
# the prompt hook). A query with other characters is matched as written (``re.I`` folds
# some of them, the Kelvin sign or a dotless i, onto ASCII letters).
_INTENT_STEMS = ("decision", "decide", "chose", "choice", "settled on", "question", "asked",
                 "problem", "issue", "bug", "error", "solution", "fix", "solved", "workaround",
                 "tried", "try", "attempt", "todo", "to-do", "next step", "follow", "conclusion",
                 "concluded", "learn", "insight")


class Hit(NamedTuple):
    """One turn found.

    Attributes:
        score: Higher is better.
        turn: The turn.
        topic: The name of its topic span, or None.
        intent: The intent of its strongest idea, or None.
        history: Earlier ideas its ideas superseded (``intent``, ``text``, ``timestamp``).
        entities: What its ideas name (``name``, ``type``; a file or symbol linked to the code
            index adds ``code``: ``path`` and, for a symbol, ``qualname``).
        ideas: Its ideas (``id``, ``intent``, ``text``, and where each was said: ``branch``,
            ``commit``; None where memory does not know).
        near_rank: Its place among the turns nearest to the query by vector (0 the nearest),
            when vectors are on and it is among the first ``VECTOR_GATE``; else None.
    """

    score: float
    turn: TurnRow
    topic: str | None
    intent: str | None
    history: list[dict[str, Any]]
    entities: list[dict[str, Any]]
    ideas: tuple[dict[str, Any], ...] = ()
    near_rank: int | None = None


class SearchResult(NamedTuple):
    """The hits, best first, and the query as understood."""

    query: str
    since: int | None
    until: int | None
    hits: list[Hit]


class MemoryQuery(NamedTuple):
    """A transcript-memory search as a person or an agent asks it (``search_transcripts``).

    Attributes:
        text: What to look for; may hold time words ("decisions about the cache last week").
        since: Only turns from this time on: time words, ``7d``, a date (None: no bound).
        until: Only turns before this time.
        session: Only this session: an id or a unique prefix.
        intent: Only turns holding an idea of this intent (``INTENTS``).
        limit: At most this many turns.
    """

    text: str
    since: str | None = None
    until: str | None = None
    session: str | None = None
    intent: str | None = None
    limit: int = 10


class MemoryAnswer(NamedTuple):
    """What ``search_transcripts`` found, or why it searched nothing.

    Attributes:
        result: The result (no hits when nothing was searched).
        off: Memory is off (``[memory] enabled = false``) and the asker is an agent.
        missing: There is no transcript memory yet (nothing was ever indexed).
        note: Vectors are on but cannot be loaded: searched by words, and why (E027's text).
    """

    result: SearchResult
    off: bool = False
    missing: bool = False
    note: str | None = None


def search_transcripts(ctx_dir: Path, query: MemoryQuery, *, now_ms: int, agent: bool,
                       names: tuple[str, str, str] = ("--since", "--until", "--session"),
                       read_only: bool = False, hyde: Drafter | None = None) -> MemoryAnswer:
    """Search transcript memory: the one use case behind ``ctx memory search`` and MCP's tool.

    The privacy switch (``[memory] enabled``, read afresh, failing closed) keeps an agent
    from past turns: memory off, it searches nothing. A person's own ``ctx memory search``
    still reads what memory already holds (docs/memory.md "Privacy").

    Args:
        ctx_dir: The store's ``.ctx`` directory.
        query: The search.
        now_ms: "Now" for time words, in milliseconds since the epoch.
        agent: Whether an agent asks (the MCP tool): then memory off means nothing is searched.
        names: How the asker names the since, until and session arguments, for its errors.
        read_only: Open memory read-only, migrating nothing (the memory browser, ``ctx ui``).
        hyde: With vectors on, the query's vector is joined by a drafted answer's
            (``llm.hyde``); its failures fall back to the plain query.

    Returns:
        The answer.

    Raises:
        InvalidInput: (E011) for a time that is no time, an unknown intent, or a session
            prefix that names no single session.
        MemoryDamaged: (E023) if the memory database is damaged.
        UnsupportedStoreVersion: (E014) a newer ctx wrote it; with ``read_only``, also an
            older one.
    """
    from ctxstore.errors import InvalidInput
    from ctxstore.memory.db import open_memory
    from ctxstore.memory.settings import engine_or_note, memory_settings

    if query.intent is not None and query.intent not in INTENTS:
        raise InvalidInput(f"intent must be one of {', '.join(INTENTS)}, got {query.intent!r}")
    low = time_bound(names[0], query.since, now_ms, end=False)
    high = time_bound(names[1], query.until, now_ms, end=True)
    nothing = SearchResult(query.text, None, None, [])
    settings = memory_settings(ctx_dir)
    if agent and not settings.enabled:  # not even opened
        return MemoryAnswer(nothing, off=True)
    engine, note = engine_or_note(settings)  # a missing extra: words only, and a note says so
    if engine is not None and hyde is not None:
        from ctxstore.llm.hyde import HydeEmbedder

        engine = HydeEmbedder(engine, hyde)
    db = open_memory(ctx_dir, create=False, read_only=read_only)
    if db is None:
        return MemoryAnswer(nothing, missing=True)
    with db:
        session = unique_session(db, query.session, names[2]) if query.session else None
        return MemoryAnswer(search_memory(db, query.text, now_ms=now_ms, since=low, until=high,
                                          session=session, intent=query.intent,
                                          limit=query.limit, engine=engine), note=note)


def iso(ms: int | None) -> str | None:
    """Milliseconds since the epoch as ISO-8601 UTC (``...Z``), or None.

    None too for a stored value no date has (out of range, not a number: a memory written by an
    older ctx may hold one), so reading memory never fails on what it holds.
    """
    if ms is None or isinstance(ms, bool) or not isinstance(ms, (int, float)):
        return None
    try:
        moment = datetime.fromtimestamp(ms / 1000, UTC)
    except (ValueError, OverflowError, OSError):
        return None
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def _narrow(low: int | None, high: int | None, since: int | None, until: int | None
            ) -> tuple[int | None, int | None]:
    if since is not None:
        low = since if low is None else max(low, since)
    if until is not None:
        high = until if high is None else min(high, until)
    return low, high


def search_memory(db: MemoryDB, query: str, *, now_ms: int, since: int | None = None,
                  until: int | None = None, session: str | None = None, intent: str | None = None,
                  limit: int = 10, engine: Embedder | None = None) -> SearchResult:
    """Search transcript memory.

    Args:
        db: The open memory.
        query: What to look for; may hold time words ("last week").
        now_ms: "Now" for the time words, in milliseconds since the epoch.
        since: Only turns at or after this time (ms).
        until: Only turns before this time (ms).
        session: Only this session.
        intent: Only turns holding an idea of this intent.
        limit: The most hits.
        engine: The embedding model when vectors are on: the turns nearest to the query join
            BM25's, their scores summed with a weight (``_fused``; turns without a stored
            vector are found by their words only).

    Returns:
        The result.
    """
    from ctxstore.memory.timeexpr import parse_time_filter

    text, said_low, said_high = parse_time_filter(query, now_ms)
    low, high = _narrow(said_low, said_high, since, until)
    words = list(dict.fromkeys(PROSE_QUERY.tokenize(text)))
    intents = _wanted_intents(text) if intent is None else set()
    asked = intents if intent is None else {intent}
    unanswered = "question" in asked and bool(re.search(_OPEN, text, re.I))
    if intents and not _subject(text):  # "open questions", "what did we decide": a listing
        words = []
    wanted = tuple(sorted(intents)) if intents and not words else intent
    if not words:
        ids = db.recent_turn_ids(limit, since=low, until=high, session=session, intent=wanted,
                                 unanswered=unanswered)
        turns = db.turns_by_id(ids)
        scored: list[tuple[float, TurnRow, int | None]] = [
            (1.0 / (rank + 1), turns[i], None) for rank, i in enumerate(ids) if i in turns]
    else:
        # the time the words name ranks, only the options filter: see ``_in_time``
        pool = db.fts(match_expression(words, "any"), WEIGHTS, POOL, since=since, until=until,
                      session=session, intent=intent)
        near: list[tuple[int, float]] = []
        if engine is not None:
            from ctxstore.memory.vectors import nearest_turns

            near = nearest_turns(db, engine, text, POOL, since=since, until=until,
                                 session=session, intent=intent, asked=asked)
        named = set(db.turns_naming(_code_names(text), since=since, until=until,
                                    session=session, intent=intent))
        ranks = {i: r for r, (i, _) in enumerate(near[:VECTOR_GATE])}
        scored = [(score, turn, ranks.get(turn.id)) for score, turn in
                  _rerank(db, _fused(pool, near), intents, named, unanswered,
                          speakers=_speaker_terms(text, words),
                          when=_in_time(said_low, said_high),
                          dated=_WHEN.match(query.lstrip()) is not None)]
    scored.sort(key=lambda pair: (-pair[0], -(pair[1].ts_start or 0), pair[1].id))
    hits = [_hit(db, score, turn, near_rank) for score, turn, near_rank in scored[:limit]]
    return SearchResult(text, low, high, hits)


def _says_time(turn: TurnRow) -> bool:
    """Whether a turn tells a time ("last Friday", "two weeks ago", "in May")."""
    from ctxstore.memory.timeexpr import says_time

    return says_time(f"{turn.user_text}\n{turn.assistant_text}")


def _wanted_intents(text: str) -> set[str]:
    if text.isascii():
        lowered = text.lower()
        if not any(stem in lowered for stem in _INTENT_STEMS):
            return set()
    return {name for name, pattern in INTENT_WORDS.items() if re.search(pattern, text, re.I)}


def _subject(text: str) -> list[str]:
    """The terms of a query once its intent words and listing words are set aside."""
    for pattern in (*INTENT_WORDS.values(), _OPEN):
        text = re.sub(pattern, " ", text, flags=re.I)
    return [w for w in PROSE_QUERY.tokenize(text) if w not in _LISTING_TERMS()]


@lru_cache(maxsize=1)
def _LISTING_TERMS() -> frozenset[str]:  # noqa: N802 - a constant, stemmed on first use
    return frozenset(PROSE.tokenize(" ".join(_LISTING))) | _LISTING


def _code_names(text: str) -> list[str]:
    """The files and symbols a query names (the extractor is loaded only when one may be there)."""
    if not any(mark in text for mark in _CODE_MARKS) or not re.search(_CODE_HINT, text):
        return []
    from ctxstore.memory.extract import extract_entities

    names = [e.name for e in extract_entities(text) if e.kind in ("file", "symbol")]
    return list(dict.fromkeys(n.removeprefix("./").removesuffix("()") for n in names))


def _ends_asking(turn: TurnRow) -> bool:
    """Whether a turn ends on a question: the next turn opens with its answer."""
    return (turn.assistant_text or turn.user_text).rstrip().endswith("?")


def _in_time(low: int | None, high: int | None) -> Callable[[int | None], bool] | None:
    """Whether a turn's time is in the range a query's words name, or just after it.

    People tell of an event after it happens ("last week I ..."), so the range is stretched by
    its own length past its end (a week named: the week after counts too).
    """
    if low is None and high is None:
        return None
    end = None if high is None else high + (high - low if low is not None else 0)

    def inside(ts: int | None) -> bool:
        return ts is not None and (low is None or ts >= low) and (end is None or ts < end)
    return inside


def _speaker_terms(text: str, words: list[str]) -> tuple[frozenset[str], frozenset[str]]:
    """The names a query may call a speaker by (capitalised words), and its other terms."""
    names = frozenset(m.lower() for m in _NAME.findall(text))
    if not names:
        return frozenset(), frozenset()
    return names, frozenset(w for w in words if w not in names)


def _spoken_by(turn: TurnRow, names: frozenset[str]) -> str:
    """The text of ``turn``'s messages that open with one of ``names`` and a colon."""
    out = []
    for part in (turn.user_text, turn.assistant_text):
        for message in part.split("\n\n"):
            head = _SPEAKER.match(message)
            if head and head.group(1).lower() in names:
                out.append(message[head.end():])
    return "\n".join(out)


def _fused(pool: list[tuple[int, float]], near: list[tuple[int, float]]) -> dict[int, float]:
    """Each candidate turn's base score, the best 1.

    BM25's scaled by its best; with the vector ranking, plus ``VECTOR_WEIGHT`` times the turn's
    cosine scaled between the last of the nearest turns (0) and the first (1). A weighted sum
    of scaled scores, not reciprocal rank fusion: on the LoCoMo development set equal-weight
    RRF (k=60) lowered recall@10 from 0.710 to 0.607 and a weight of 0.3 to 0.601 (ranks drop
    how far BM25's best turn leads, which the re-ranking below builds on), where this sum
    raised it to 0.723 (docs/memory.md).
    """
    top = max((-bm25 for _, bm25 in pool), default=1.0) or 1.0
    base = {i: max(-bm25, 0.0) / top for i, bm25 in pool}
    if not near:
        return base
    best, floor = near[0][1], near[-1][1]
    span = best - floor
    if span <= 0:
        return base
    for i, cosine in near:
        base[i] = base.get(i, 0.0) + VECTOR_WEIGHT * (cosine - floor) / span
    top = max(base.values()) or 1.0
    return {i: value / top for i, value in base.items()}


def _rerank(db: MemoryDB, pool: dict[int, float], intents: set[str], named: set[int],
            unanswered: bool = False,
            speakers: tuple[frozenset[str], frozenset[str]] = (frozenset(), frozenset()),
            when: Callable[[int | None], bool] | None = None,
            dated: bool = False) -> list[tuple[float, TurnRow]]:
    if not pool and not named:
        return []
    turns = db.turns_by_id(list(pool) + sorted(named - set(pool)))
    base = {i: value for i, value in pool.items() if i in turns}
    for i in named:
        if i in turns:
            base[i] = base.get(i, 0.0) + _NAMED_BOOST
    by_place = {(turns[i].session, turns[i].seq): i for i in base}
    boosted = set()
    if intents:
        for idea in db.ideas_of_turns(list(base)):
            if idea[2] in intents and not (unanswered and idea[2] == "question" and idea[7]):
                boosted.add(idea[1])
    out = []
    for i, value in base.items():
        turn = turns[i]
        score = value
        for d in (-1, 1):
            other = by_place.get((turn.session, turn.seq + d))
            if other is None:
                continue
            weight = _ANSWER if d == -1 and _ends_asking(turns[other]) else _NEIGHBOUR
            score += weight * base[other]
        if i in boosted:
            score *= 1.0 + _INTENT_BOOST
        if when is not None and when(turn.ts_start):
            score *= 1.0 + _TIME_BOOST
        if dated and _says_time(turn):
            score *= 1.0 + _DATED_BOOST
        out.append((score, turn))
    names, others = speakers
    if others:  # the best turns only: one lower down gains too little to reach the top
        out.sort(key=lambda pair: -pair[0])
        for k, (score, turn) in enumerate(out[:_SPEAKER_TURNS]):
            said = _spoken_by(turn, names)
            if said:
                held = others & set(PROSE.tokenize(said))
                out[k] = (score * (1.0 + _SPEAKER_BOOST * len(held) / len(others)), turn)
    return out


def _hit(db: MemoryDB, score: float, turn: TurnRow, near_rank: int | None = None) -> Hit:
    topic = None
    if turn.span_id is not None:
        span = db.span(turn.span_id)
        if span is not None and span[1] is not None:
            parent = db.span(span[1])
            topic = parent[2] if parent else span[2]
        elif span is not None:
            topic = span[2]
    ideas = db.ideas_of_turns([turn.id])
    intent = max(ideas, key=lambda row: (row[4], -row[0]))[2] if ideas else None
    entities = [_entity(*row) for row in db.turn_entities([turn.id]).get(turn.id, [])]
    return Hit(round(score, 6), turn, topic, intent, _history(db, [row[0] for row in ideas]),
               entities, tuple({"id": row[0], "intent": row[2], "text": row[3], "branch": row[8],
                                "commit": row[9]} for row in ideas), near_rank)


def _entity(name: str, kind: str, path: str | None, qualname: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "type": kind}
    if path is not None:
        out["code"] = {"path": path, **({"qualname": qualname} if qualname else {})}
    return out


def _history(db: MemoryDB, idea_ids: list[int]) -> list[dict[str, Any]]:
    """The ideas superseded by ``idea_ids``, then those they superseded, newest first."""
    out: list[dict[str, Any]] = []
    seen = set(idea_ids)
    frontier = idea_ids
    for _ in range(_HISTORY_DEPTH):
        older = [row for row in db.superseded_by(frontier) if row[1] not in seen]
        if not older:
            break
        for _newer, old_id, old_intent, content, ts in sorted(older, key=lambda r: -r[1]):
            if old_id in seen:
                continue
            seen.add(old_id)
            out.append({"idea": old_id, "intent": old_intent, "text": content,
                        "timestamp": iso(ts)})
        frontier = [row[1] for row in older]
    return out


def hit_text(turn: TurnRow, width: int = _TEXT_CHARS) -> str:
    """A turn as one short text: the prompt, then the start of the reply."""
    user = turn.user_text.strip()
    reply = turn.assistant_text.strip()
    text = f"{user}\n-> {reply}" if user and reply else user or reply or turn.tool_text.strip()
    return text if len(text) <= width else text[:width].rstrip() + " [...]"


def time_bound(option: str, text: str | None, now_ms: int, *, end: bool) -> int | None:
    """A ``since``/``until`` bound in milliseconds: natural words, ``7d``, or a date.

    Args:
        option: The option's name as the user wrote it (``--since``), for the error.
        text: The value, or None.
        now_ms: "Now" in milliseconds since the epoch.
        end: Take the end of a range ("last week" as an upper bound), else its start.

    Returns:
        The bound, or None when ``text`` is None.

    Raises:
        InvalidInput: (E011) for a value that is no time.
    """
    if text is None:
        return None
    from ctxstore.errors import InvalidInput
    from ctxstore.memory.timeexpr import parse_when
    from ctxstore.query.parser import parse_time

    found = parse_when(text, now_ms)
    if found is not None:
        low, high = found
        value: int | None = high if end and high is not None else low
        if value is not None:
            return value
    try:
        return int(float(parse_time(text.strip(), now=now_ms / 1000)) * 1000)
    except InvalidInput:
        raise InvalidInput(f"{option}: cannot read {text!r} as a time",
                           hint='e.g. "last week", "yesterday", 7d, 2026-03-01') from None


def unique_session(db: MemoryDB, prefix: str, option: str = "--session") -> str:
    """The one session whose id is ``prefix`` or starts with it.

    Raises:
        InvalidInput: (E011) when none or several do.
    """
    from ctxstore.errors import InvalidInput

    matches = db.sessions_like(prefix)
    if len(matches) != 1:
        raise InvalidInput(f"{option}: {'no' if not matches else 'more than one'} "
                           f"session starts with {prefix!r}")
    return matches[0]


def hit_json(hit: Hit) -> dict[str, Any]:
    """One hit as the JSON of ``ctx memory search --format json``."""
    turn = hit.turn
    return {"score": hit.score, "session": turn.session, "topic": hit.topic,
            "timestamp": iso(turn.ts_start), "uuids": turn.uuids, "text": hit_text(turn),
            "intent": hit.intent, "history": hit.history, "entities": hit.entities,
            "turn": turn.id, "seq": turn.seq,
            "sidechain": turn.sidechain, "kind": turn.kind, "ideas": list(hit.ideas),
            "provenance": hit_provenance(hit)}


def hit_provenance(hit: Hit) -> dict[str, Any]:
    """Where a hit came from (spec 003 Phase 4): ``session``, ``branch``, ``commit``, ``files``.

    The branch and commit are those of its latest idea that records them (None when none does:
    ideas of an older memory, a turn without ideas); the files, those its ideas are linked to
    (named and found in the code index, or read and edited by the turn's tool calls), at most five.
    """
    branch = commit = None
    for idea in reversed(hit.ideas):
        if idea["branch"] is not None or idea["commit"] is not None:
            branch, commit = idea["branch"], idea["commit"]
            break
    files = list(dict.fromkeys(e["code"]["path"] for e in hit.entities if e.get("code")))[:5]
    return {"session": hit.turn.session, "branch": branch, "commit": commit, "files": files}


def result_json(result: SearchResult, note: str | None = None) -> dict[str, Any]:
    """A search as ``ctx memory search`` JSON: ``query``, ``since``, ``until``, ``results``, ``note``."""
    return {"query": result.query, "since": iso(result.since), "until": iso(result.until),
            "results": [hit_json(h) for h in result.hits], **({"note": note} if note else {})}
