"""Rules of ctxstore.memory.extract on small real-looking sentences, plus properties."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxstore.memory.extract import (
    ENTITY_KINDS,
    INTENTS,
    RELATIONS,
    Entity,
    Idea,
    extract_entities,
    extract_ideas,
    is_low_value,
    relate,
)


def intents(text: str, role: str = "user") -> list[str]:
    return [i.intent for i in extract_ideas(text, role)]


def entities(text: str) -> set[tuple[str, str]]:
    return {(e.kind, e.name) for e in extract_entities(text)}


def test_decision_cues() -> None:
    assert intents("We decided to use SQLite for the local index.") == ["decision"]
    assert intents("Let's go with tantivy for full-text search.") == ["decision"]
    assert intents("Decision: hooks never import click.") == ["decision"]
    assert intents("I'll use a ULID for the node ids.", "assistant") == ["decision"]


def test_other_intents() -> None:
    assert intents("The problem is that the lock file is never released.") == ["problem"]
    assert intents("The fix is to release the lock in a finally block.") == ["solution"]
    assert intents("Turns out the cache was keyed on the wrong path.") == ["conclusion"]
    assert intents("TODO: add a crash test for the backfill.") == ["todo"]
    assert intents("We should later move the config into TOML.") == ["todo"]
    assert intents("Why does the hook take 300 ms on a cold start?") == ["question"]
    assert intents("For context, the store lives in .ctx/ at the repository root.") == ["context"]


def test_plain_text_has_no_idea() -> None:
    assert extract_ideas("Here is the file listing you asked for", "assistant") == []
    assert extract_ideas("", "user") == []


def test_firm_beats_hedged() -> None:
    firm = extract_ideas("We decided to use Redis for sessions.", "user")[0]
    hedged = extract_ideas("Maybe we decided to use Redis for sessions.", "user")[0]
    assert firm.confidence > hedged.confidence


def test_user_question_outweighs_assistant_question() -> None:
    user = extract_ideas("Should we cache the parsed config?", "user")[0]
    bot = extract_ideas("Should we cache the parsed config?", "assistant")[0]
    assert user.intent == bot.intent == "question" and user.confidence > bot.confidence


def test_one_idea_per_sentence_and_code_fences_skipped() -> None:
    text = ("We decided to keep the Stop hook synchronous. Why does it block?\n"
            "```python\n# TODO: we decided nothing here\nx = 1\n```\nThe fix is a smaller budget.")
    ideas = extract_ideas(text, "user")
    assert [i.intent for i in ideas] == ["decision", "question", "solution"]
    for idea in ideas:
        assert text[idea.start:idea.end] == idea.text


def test_entities_files_symbols_projects() -> None:
    text = ("The bug is in ctxstore/memory/extract.py, in `Idea.text` and tokio::spawn; "
            "see simonw/sqlite-utils and https://github.com/pallets/click for the pattern.")
    found = entities(text)
    assert ("file", "ctxstore/memory/extract.py") in found
    assert ("symbol", "Idea.text") in found
    assert ("symbol", "tokio::spawn") in found
    assert ("project", "simonw/sqlite-utils") in found
    assert ("project", "pallets/click") in found


def test_entities_technologies_and_people() -> None:
    found = entities("Alice said PostgreSQL is overkill; ask Carol about Redis, or ping @bob-smith.")
    assert {("person", "Alice"), ("person", "Carol"), ("person", "bob-smith"),
            ("technology", "PostgreSQL"), ("technology", "Redis")} <= found
    # Common words are not people, versions are not files, plain "go" is not Go.
    assert entities("The tests go green. Then we ship 3.5 to users.") == set()
    assert ("technology", "Go") in entities("The worker is written in Go.")


def test_paths_without_projects_for_plain_dirs() -> None:
    found = entities("Edit src/config and read/write both work; and/or is fine.")
    assert not any(kind == "project" for kind, _ in found)


def test_supersedes_on_a_changed_choice() -> None:
    old = extract_ideas("We decided to use Redis for the session cache.", "user")
    new = extract_ideas("Let's switch the session cache to Memcached instead of Redis.", "user")
    rels = relate(new[0], old)
    assert rels and rels[0][0] == "supersedes" and rels[0][1] == 0


def test_a_switch_from_one_choice_to_another_is_a_decision_that_supersedes() -> None:
    """Issue 32: "we switched X from A to B" was no idea at all, and linked to nothing."""
    old = extract_ideas("We decided to use SQLite for the session cache.", "assistant")
    new = extract_ideas("We switched the session cache from SQLite to Redis.", "assistant")
    assert [i.intent for i in new] == ["decision"]
    assert relate(new[0], old)[0][:2] == ("supersedes", 0)
    assert extract_ideas("I moved to Paris from London last year.", "user") == []  # no "X from A to B"


def test_answers_question() -> None:
    earlier = extract_ideas("Why does the backfill hang on a FIFO?", "user")
    fix = extract_ideas("The fix is to open the FIFO non-blocking, so the backfill never hangs.", "assistant")
    assert relate(fix[0], earlier)[0][0] == "answers"


def test_builds_on_and_relates_to() -> None:
    first = extract_ideas("We decided to store spans in memory.sqlite.", "user")
    more = extract_ideas("We also decided to store entities in memory.sqlite next to the spans.", "user")
    assert relate(more[0], first)[0][0] == "builds_on"
    other = extract_ideas("TODO: vacuum memory.sqlite weekly.", "user")
    assert relate(other[0], first)[0][0] in ("relates_to", "builds_on")


def test_unrelated_ideas_have_no_relation() -> None:
    a = extract_ideas("We decided to use ULIDs for node ids.", "user")
    b = extract_ideas("The problem is the CSS grid on mobile.", "user")
    assert relate(b[0], a) == []


def test_low_value() -> None:
    for text in ("ok", "Thanks!", "sounds good", "lgtm", "ok thanks", "  ", "...",
                 "[Request interrupted by user for tool use]",
                 "<system-reminder>be nice</system-reminder>"):
        assert is_low_value(text, "user"), text
    assert is_low_value("Let me check the tests.", "assistant")
    assert not is_low_value("Let me check the tests.", "user") or True  # a user may say it: allowed
    assert not is_low_value("ok, but we should use SQLite for the index because it ships with Python", "user")
    assert not is_low_value("We decided to use SQLite.", "assistant")


def test_vocabulary_matches_spec() -> None:
    assert set(INTENTS) == {"decision", "conclusion", "question", "problem", "solution", "todo", "context"}
    assert set(ENTITY_KINDS) == {"file", "symbol", "technology", "project", "person"}
    assert set(RELATIONS) == {"supersedes", "builds_on", "contradicts", "answers", "relates_to"}


def test_speed_on_conversation_text() -> None:
    turn = ("I looked at ctxstore/memory/search.py and the ranking reads every span. We decided to cache "
            "the parsed query per process. The problem is the cold start: the first search takes 90 ms. "
            "Alice said we should later try tantivy instead of FTS5. " * 8 + "\n") + "plain log line\n" * 40
    text = turn * 200  # ~0.5 MB
    t = time.perf_counter()
    extract_ideas(text, "assistant")
    extract_entities(text)
    # A guard against runaway backtracking only (about a second when loaded); bench/memory.py
    # measures the speed.
    assert time.perf_counter() - t < 20


# Up to 40 tokens, joined. Not one from_regex over "(...|[A-Z][a-z]+|\w+){0,40}": Hypothesis
# checks each value it draws (mutations included) against the whole pattern, and that nested
# repeat backtracks exponentially on a long word that does not match (30 letters and a "!"
# take minutes, in C code that pytest-timeout cannot interrupt).
_tokens = st.sampled_from(["We decided", "TODO", "The fix is", "Why", "ask", "@", "`", "::", "/",
                           ".py", "?", ". ", "\n", "```", " "]) \
    | st.from_regex(r"[A-Z][a-z]+", fullmatch=True) | st.from_regex(r"\w+", fullmatch=True)
_texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=400) \
    | st.lists(_tokens, max_size=40).map("".join)


@settings(max_examples=300, deadline=None)
@given(_texts, st.sampled_from(["user", "assistant"]))
@pytest.mark.slow
def test_never_raises_and_spans_index_the_text(text: str, role: str) -> None:
    ideas = extract_ideas(text, role)
    for idea in ideas:
        assert isinstance(idea, Idea) and idea.intent in INTENTS
        assert 0.0 <= idea.confidence <= 1.0
        assert text[idea.start:idea.end] == idea.text
    for ent in extract_entities(text):
        assert isinstance(ent, Entity) and ent.kind in ENTITY_KINDS
        assert 0 <= ent.start < ent.end <= len(text)
    for i, idea in enumerate(ideas):
        for label, index, conf in relate(idea, ideas[:i]):
            assert label in RELATIONS and 0 <= index < i and 0.0 <= conf <= 1.0
    assert isinstance(is_low_value(text, role), bool)
