"""Searching transcript memory: ranking, time words, filters, evolution chains, context."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxstore.memory.context import memory_context, recall_section
from ctxstore.memory.db import MemoryDB, open_memory
from ctxstore.memory.index import index_transcript
from ctxstore.memory.search import search_memory
from tests.memory.memtx import Transcript, conversation

NOW = datetime(2026, 3, 20, 12, 0, tzinfo=UTC)


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


@pytest.fixture
def memory(tmp_path: Path) -> MemoryDB:
    """Two sessions: the cache/login one 5 weeks ago, a deploy one 3 days ago."""
    ctx = tmp_path / ".ctx"
    ctx.mkdir()
    index_transcript(ctx, conversation(start=NOW - timedelta(days=35)).write(tmp_path / "a.jsonl"))
    t = Transcript("9f000000-0000-4000-8000-00000000beef", NOW - timedelta(days=3))
    t.prompt("The deploy script fails on the staging server with a permission error.")
    t.say("The problem is that deploy.sh runs as the www user; the fix is to use sudo -u deploy.")
    t.end_turn()
    t.prompt("What about the cache warmup after deploy?")
    t.say("We decided to warm the SQLite session cache from a cron job after each deploy.")
    index_transcript(ctx, t.write(tmp_path / "b.jsonl"))
    db = open_memory(ctx, create=False)
    assert db is not None
    yield db
    db.close()


def test_search_finds_the_turn_with_its_uuids_topic_and_history(memory: MemoryDB) -> None:
    result = search_memory(memory, "session cache sqlite instead of redis", now_ms=_ms(NOW))
    best = result.hits[0]
    assert "SQLite" in best.turn.assistant_text and best.turn.uuids
    assert best.topic and "session cache" in best.topic
    assert best.intent == "decision"
    assert any("Redis" in old["text"] for old in best.history)  # the superseded decision


def test_search_time_words_rank_and_options_filter(memory: MemoryDB) -> None:
    recent = search_memory(memory, "session cache in the last 7 days", now_ms=_ms(NOW))
    assert recent.since is not None and recent.hits
    # the turns of the time named come first; the others still follow (a soft hint: a range
    # read wrongly from the words never hides what was asked for)
    sessions = [h.turn.session[:8] for h in recent.hits]
    assert sessions[0] == "9f000000" and "4d5611e5" in sessions
    assert sessions == sorted(sessions, key=lambda s: s != "9f000000")
    listed = search_memory(memory, "in the last 7 days", now_ms=_ms(NOW))  # time words only
    assert listed.hits and all(h.turn.session.startswith("9f000000") for h in listed.hits)
    older = search_memory(memory, "session cache", now_ms=_ms(NOW), until=_ms(NOW - timedelta(days=10)))
    assert older.hits and all(h.turn.session.startswith("4d5611e5") for h in older.hits)


def test_search_filters_session_and_intent(memory: MemoryDB) -> None:
    hits = search_memory(memory, "deploy", now_ms=_ms(NOW), intent="problem").hits
    assert hits and all("problem" in h.turn.assistant_text.lower() for h in hits)
    one = search_memory(memory, "cache", now_ms=_ms(NOW),
                        session="4d5611e5-241a-462a-8d15-5122611a9569").hits
    assert one and {h.turn.session for h in one} == {"4d5611e5-241a-462a-8d15-5122611a9569"}


def test_search_odd_queries_never_fail(memory: MemoryDB) -> None:
    for query in ("", '"', "AND OR NOT", "NEAR(a b)", "*", "col:umn", "\x00", "ünïcödé 🙂",
                  "x" * 10_000):
        search_memory(memory, query, now_ms=_ms(NOW))


def test_search_context_for_a_prompt_skips_the_current_conversation(memory: MemoryDB,
                                                                     tmp_path: Path) -> None:
    ctx = tmp_path / ".ctx"
    items = memory_context(ctx, "how do we deploy to the staging server", 3, now_ms=_ms(NOW))
    assert items and "deploy" in items[0].text and items[0].score > 1.0
    assert memory_context(ctx, "deploy staging server", 3,
                          now_ms=_ms(NOW - timedelta(days=3, minutes=-5))) == []
    assert "From past sessions" in recall_section(ctx, "deploy staging permission",
                                                  now_ms=_ms(NOW))
    assert memory_context(tmp_path / "none" / ".ctx", "deploy", 3) == []


_QUERY_TEXT = st.lists(st.sampled_from([
    *"abdeiklnorstuxy -/.`():", "Decided", "QUESTION", "bug", "to-do", "next step", "follow-up",
    "learnt", "\u212a", "\u0131", "\u017f", "\u00e9", "src/a.py", "a::b", "f()", "x.y"]),
    max_size=20).map("".join)


@given(_QUERY_TEXT)
def test_search_query_intents_and_code_names_as_the_patterns_find_them(text: str) -> None:
    """The quick checks that skip the patterns never change what they find."""
    import re

    from ctxstore.memory import search as memory_search

    assert memory_search._wanted_intents(text) == {
        name for name, pattern in memory_search.INTENT_WORDS.items()
        if re.search(pattern, text, re.I)}
    if re.search(memory_search._CODE_HINT, text) is None:
        assert memory_search._code_names(text) == []
    else:
        assert any(mark in text for mark in memory_search._CODE_MARKS)


def _identifiers(tmp_path: Path) -> Path:
    ctx = tmp_path / ".ctx"
    ctx.mkdir()
    t = Transcript("9f000000-0000-4000-8000-00000000cafe", NOW - timedelta(days=1))
    t.prompt("Why is the viewer slow?")
    t.say("Because getPagerFile re-reads the whole cache on every call.")
    t.end_turn()
    t.prompt("And the login page?")
    t.say("The login page is fine.")
    index_transcript(ctx, t.write(tmp_path / "c.jsonl"))
    return ctx


def test_search_finds_an_identifier_by_its_parts(tmp_path: Path) -> None:
    """The terms of ``search.tokenize``: ``getPagerFile`` holds ``pager`` and ``file``."""
    db = open_memory(_identifiers(tmp_path), create=False)
    assert db is not None
    with db:
        for query in ("pager file", "getPagerFile", "get_pager_file"):
            hits = search_memory(db, query, now_ms=_ms(NOW)).hits
            assert hits and "getPagerFile" in hits[0].turn.assistant_text, query


def test_search_schema_2_memory_gets_the_tokenisers_terms(tmp_path: Path) -> None:
    """A memory written before the one tokeniser (FTS5's own words) is rebuilt on open."""
    import sqlite3

    from ctxstore.memory.db import SCHEMA_VERSION, memory_path

    ctx = _identifiers(tmp_path)
    conn = sqlite3.connect(memory_path(ctx))
    conn.executescript(
        "DROP TABLE turns_fts; CREATE VIRTUAL TABLE turns_fts USING fts5(user_text, "
        "assistant_text, tool_text, tokenize = 'unicode61 remove_diacritics 2');"
        "INSERT INTO turns_fts(rowid, user_text, assistant_text, tool_text) "
        "SELECT id, user_text, assistant_text, tool_text FROM turns;"
        "UPDATE meta SET value = '2' WHERE key = 'schema_version';"
        "ALTER TABLE ideas DROP COLUMN branch; ALTER TABLE ideas DROP COLUMN git_commit;"
        "DROP TABLE turn_vectors;"  # schema 6's
        "DROP TABLE idea_vectors; DROP TABLE span_vectors;"  # schema 7's
        "DELETE FROM schema_version WHERE version > 2;")
    # as schema 2 stored it, no part of the identifier is a word of its own
    assert conn.execute("SELECT count(*) FROM turns_fts WHERE turns_fts MATCH 'file'").fetchone() \
        == (0,)
    conn.close()
    db = open_memory(ctx, create=False)
    assert db is not None
    with db:
        version = db.conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        assert version == (str(SCHEMA_VERSION),) and db.stats()["turns"] == 2
        hits = search_memory(db, "pager file", now_ms=_ms(NOW)).hits
        assert "getPagerFile" in hits[0].turn.assistant_text
        assert {h.turn.id for h in hits} == {hits[0].turn.id}  # the login turn holds neither


def test_search_transcripts_is_the_one_use_case_of_both_front_ends(memory: MemoryDB,
                                                                    tmp_path: Path) -> None:
    """A person searches what memory holds; an agent not while the switch is off."""
    from ctxstore.errors import InvalidInput
    from ctxstore.memory.search import MemoryQuery, search_transcripts

    ctx = tmp_path / ".ctx"
    (ctx / "config.toml").write_text("[memory]\nenabled = false\n")
    query = MemoryQuery("session cache sqlite", since="last year", limit=3)
    person = search_transcripts(ctx, query, now_ms=_ms(NOW), agent=False)
    assert person.result.hits and not person.off and not person.missing
    agent = search_transcripts(ctx, query, now_ms=_ms(NOW), agent=True)
    assert agent.off and agent.result.hits == []
    (ctx / "config.toml").write_text("[memory]\nenabled = true\n")
    assert search_transcripts(ctx, query, now_ms=_ms(NOW), agent=True).result == person.result
    assert search_transcripts(tmp_path / "none", query, now_ms=_ms(NOW), agent=False).missing
    with pytest.raises(InvalidInput, match="since"):
        search_transcripts(ctx, query._replace(since="blorp"), now_ms=_ms(NOW), agent=False,
                           names=("since", "until", "session"))
    with pytest.raises(InvalidInput, match="intent must be one of"):
        search_transcripts(ctx, query._replace(intent="gossip"), now_ms=_ms(NOW), agent=False)
