"""The transcript-memory page: sessions, their topics, and search.

What ``ctx memory topics`` and ``ctx memory search`` show.

Transcript memory (``.ctx/local/memory.sqlite``, docs/memory.md) is opened read-only: a file
written by another ctx version is named in a note, never migrated, and nothing is written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ctxstore.errors import CtxError, InvalidInput, MemoryDamaged, UnsupportedStoreVersion
from ctxstore.memory.db import open_memory
from ctxstore.memory.search import INTENTS, MemoryQuery, hit_json, search_transcripts, unique_session
from ctxstore.records import dataclass

if TYPE_CHECKING:
    from ctxstore.memory.db import MemoryDB
    from ctxstore.session import Session

__all__ = ["Topic", "TranscriptSession", "Transcripts", "TranscriptSearch", "read_transcripts",
           "search_transcripts_read_only", "INTENTS", "MAX_QUERY_CHARS"]

MAX_QUERY_CHARS = 10_000
_NO_MEMORY = ("there is no transcript memory yet: `ctx memory backfill --all` indexes past "
              "sessions, and the Stop hook indexes new ones")


@dataclass(frozen=True, slots=True)
class Topic:
    """A topic span (depth 0) or one of its sub-spans.

    Attributes:
        id: The span's id.
        session: Its session.
        parent: The topic it is a sub-span of.
        name: Its name (the first line of the prompt that opened it).
        depth: 0 for a topic, 1 for a sub-span.
        first_turn: The first turn's number in the session.
        last_turn: The last turn's.
        start_ms: When it started.
        end_ms: When it ended.
        ideas: How many ideas it holds.
    """

    id: int
    session: str
    parent: int | None
    name: str
    depth: int
    first_turn: int
    last_turn: int
    start_ms: int | None
    end_ms: int | None
    ideas: int


@dataclass(frozen=True, slots=True)
class TranscriptSession:
    """A session transcript memory holds.

    Attributes:
        id: The session id (a subagent thread: ``<session>:agent-<id>``).
        first_ms: Its first turn's time.
        last_ms: Its last turn's time.
        turns: Its number of turns.
        topic: Its first topic's name.
    """

    id: str
    first_ms: int | None
    last_ms: int | None
    turns: int
    topic: str | None


@dataclass(frozen=True, slots=True)
class Transcripts:
    """The transcript-memory page: sessions and topics.

    Attributes:
        sessions: The sessions, latest first.
        topics: Topics, newest first, each followed by its sub-spans (of ``session`` when given).
        session: The session the topics are of, or None for all.
        note: Why there is nothing to show (no memory yet, another schema), else None.
    """

    sessions: tuple[TranscriptSession, ...]
    topics: tuple[Topic, ...]
    session: str | None
    note: str | None


@dataclass(frozen=True, slots=True)
class TranscriptSearch:
    """A search of transcript memory.

    Attributes:
        query: The text searched, time words taken out.
        since_ms: The lower time bound, if any.
        until_ms: The upper time bound, if any.
        results: The hits, best first, as ``ctx memory search --format json`` gives them.
        note: Why nothing was searched (no memory yet, another schema), else None.
    """

    query: str
    since_ms: int | None
    until_ms: int | None
    results: tuple[dict[str, Any], ...]
    note: str | None


def _open(db: Session) -> tuple[MemoryDB | None, str | None]:
    try:
        memory = open_memory(db.root, create=False, read_only=True)
    except CtxError as exc:
        return None, str(exc)
    return memory, None if memory is not None else _NO_MEMORY


def read_transcripts(db: Session, *, session: str | None = None, limit: int = 200) -> Transcripts:
    """Transcript memory's sessions and topics, as ``ctx memory topics`` lists them.

    Args:
        db: The open session.
        session: Only the topics of this session (an id or a unique prefix).
        limit: The most sessions, and the most topic rows.

    Returns:
        The page.

    Raises:
        InvalidInput: (E011) for a session prefix that names no single session.
    """
    memory, note = _open(db)
    if memory is None:
        return Transcripts((), (), None, note)
    with memory:
        if session:
            session = unique_session(memory, session, "session")
        sessions = tuple(TranscriptSession(*row) for row in memory.sessions(limit))
        topics = tuple(Topic(int(r[0]), str(r[1]), r[2], str(r[3]), int(r[4]), int(r[5]),
                             int(r[6]), r[7], r[8], int(r[9])) for r in memory.topics(session, limit))
    return Transcripts(sessions, topics, session, None)


def search_transcripts_read_only(db: Session, text: str, *, now_ms: int, since: str | None = None,
                                 until: str | None = None, intent: str | None = None,
                                 session: str | None = None, limit: int = 20) -> TranscriptSearch:
    """Search transcript memory as ``ctx memory search`` does (``search_transcripts``), read-only.

    Args:
        db: The open session.
        text: What to look for; time words in it rank that time first ("last week").
        now_ms: "Now" for the time words (milliseconds since the epoch).
        since: Only turns from this time on ("last week", 7d, a date).
        until: Only turns before this time.
        intent: Only turns holding an idea of this intent (``INTENTS``).
        session: Only this session (an id or a unique prefix).
        limit: The most hits (1 to 200).

    Returns:
        The search and its hits; a note instead when there is no memory, or it is at another
        schema or damaged.

    Raises:
        InvalidInput: (E011) for a time that is no time, an unknown intent, a session prefix
            that names no single session, a text over ``MAX_QUERY_CHARS`` or a bad limit.
    """
    if len(text) > MAX_QUERY_CHARS:
        raise InvalidInput(f"the search is over {MAX_QUERY_CHARS} characters")
    if not 1 <= limit <= 200:
        raise InvalidInput(f"limit must be between 1 and 200, not {limit}")
    query = MemoryQuery(text, since=since or None, until=until or None, session=session or None,
                        intent=intent or None, limit=limit)
    try:
        answer = search_transcripts(db.root, query, now_ms=now_ms, agent=False,
                                    names=("since", "until", "session"), read_only=True)
    except (UnsupportedStoreVersion, MemoryDamaged) as exc:
        return TranscriptSearch(text, None, None, (), str(exc))
    found = answer.result
    return TranscriptSearch(found.query, found.since, found.until,
                            tuple(hit_json(h) for h in found.hits),
                            _NO_MEMORY if answer.missing else answer.note)
