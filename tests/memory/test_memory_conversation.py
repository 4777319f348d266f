"""Conversational recall: speakers, the time a question names, dates in what the hook injects.

Small hand-written conversations in the shape a chat between two people takes in a transcript
(each message opens with its speaker's name), searched through the installed CLI and the
prompt-submit hook.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from conftest import run_ctx

from ctxstore.repo import Store
from tests.memory.memtx import Transcript

NOW = "2026-02-13T12:00:00Z"


def search(store: Store, *args: str) -> list[dict]:
    res = run_ctx(["--ctx-dir", str(store.root), "--format", "json", "memory", "search", *args,
                   "--now", NOW])
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)["results"]


def backfill(store: Store, *transcripts: Path) -> None:
    res = run_ctx(["--ctx-dir", str(store.root), "memory", "backfill",
                   *(str(p) for p in transcripts)])
    assert res.returncode == 0, res.stderr


def prompt_context(store: Store, prompt: str) -> str:
    payload = {"session_id": "fresh-session", "transcript_path": "",
               "cwd": str(store.root.parent), "hook_event_name": "UserPromptSubmit",
               "prompt": prompt}
    res = run_ctx(["hook", "prompt-submit"], stdin=json.dumps(payload))
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    return str(out.get("hookSpecificOutput", {}).get("additionalContext", ""))


def test_a_month_named_in_a_question_ranks_and_finds_what_was_told_after_it(
        store: Store, tmp_path: Path) -> None:
    """People tell of an event after it happened: "in May" must not hide June's "last month"."""
    june = Transcript("aaaaaaaa-0000-4000-8000-000000000001", datetime(2023, 6, 2, 10, tzinfo=UTC))
    june.prompt("Ann: Hi Bob! Big news: last month I moved to Denver, into a flat near the park.")
    june.say("Bob: Congrats Ann! How do you like the new flat?")
    june.end_turn()
    january = Transcript("bbbbbbbb-0000-4000-8000-000000000002",
                         datetime(2023, 1, 10, 10, tzinfo=UTC))
    january.prompt("Ann: I moved my desk to the window, the light is better there.")
    january.say("Bob: Nice, moved desks make a difference.")
    january.end_turn()
    backfill(store, june.write(tmp_path / "june.jsonl"), january.write(tmp_path / "jan.jsonl"))

    hits = search(store, "Where did Ann move in May 2023?")
    assert hits and "moved to Denver" in hits[0]["text"], [h["text"] for h in hits]
    # the time named ranks, it does not hide: January's turn about moving is still found
    assert any("moved my desk" in h["text"] for h in hits[1:])
    # an explicit bound still filters
    assert not search(store, "Ann moved", "--since", "2023-05-01")[1:]


def test_the_speaker_a_question_names_ranks_their_own_words_first(store: Store,
                                                                   tmp_path: Path) -> None:
    t = Transcript("cccccccc-0000-4000-8000-000000000003", datetime(2023, 3, 1, 9, tzinfo=UTC))
    t.prompt("John: Yoga, yoga, yoga: the yoga studio is my second home now.")
    t.say("Maria: Cool, John!")
    t.end_turn()
    t.prompt("John: How was your week, Maria?")
    t.say("Maria: Busy with the shelter, and I started aerial yoga on Tuesdays - "
          "upside down on a silk hammock, which is harder than it looks.")
    t.end_turn()
    backfill(store, t.write(tmp_path / "s.jsonl"))

    hits = search(store, "What yoga does Maria practise?")
    assert "aerial yoga" in hits[0]["text"], [h["text"] for h in hits]
    hits = search(store, "What yoga does John practise?")
    assert "studio is my second home" in hits[0]["text"], [h["text"] for h in hits]


def test_the_hook_finds_when_something_happened_and_resolves_the_relative_date(
        store: Store, tmp_path: Path) -> None:
    """ "When did Ann move?": the turn "I moved last Tuesday", with the date it meant."""
    t = Transcript("dddddddd-0000-4000-8000-000000000004", datetime(2023, 5, 8, 13, 56, tzinfo=UTC))
    t.prompt("Bob: How was your week, Ann? Anything new with the flat hunt?")
    t.say("Ann: Great news, I moved last Tuesday! The new flat is close to the river.")
    t.end_turn()
    t.prompt("Bob: What about the garden?")
    t.say("Ann: It needs work; I will plant tomatoes this weekend.")
    t.end_turn()
    backfill(store, t.write(tmp_path / "s.jsonl"))

    context = prompt_context(store, "When did Ann move into the new flat?")
    assert "I moved last Tuesday [2023-05-02]" in context, context
    assert "[2023-05-08 session dddddddd]" in context  # the day it was said, never the topic
    # the search shows the turn as said
    hits = search(store, "When did Ann move into the new flat?")
    assert "I moved last Tuesday!" in hits[0]["text"]


def test_a_question_turn_comes_with_the_turn_that_answers_it(store: Store,
                                                             tmp_path: Path) -> None:
    t = Transcript("eeeeeeee-0000-4000-8000-000000000005", datetime(2023, 7, 1, 18, tzinfo=UTC))
    t.prompt("Ann: The tournament went well, I made it to the final round!")
    t.say("Bob: Nice! You play so many video games. Which video game is your favourite one?")
    t.end_turn()
    t.prompt("Ann: Xenoblade Chronicles, hands down. I have sunk 200 hours into it.")
    t.say("Bob: Wow, that is dedication.")
    t.end_turn()
    t.prompt("Ann: Also I adopted a third turtle this week.")
    t.say("Bob: The tank is getting full then!")
    t.end_turn()
    backfill(store, t.write(tmp_path / "s.jsonl"))

    question = "What is Ann's favourite video game?"
    hits = search(store, question)
    top = " ".join(h["text"] for h in hits[:2])  # the question and its answer, together
    assert "Which video game is your favourite" in top and "Xenoblade Chronicles" in top, top
    # the answer holds none of the question's words but its speaker's name: the hook brings it
    # as the context of the question it answers
    context = prompt_context(store, question)
    assert "Which video game is your favourite" in context and "Xenoblade" in context, context
    assert "third turtle" not in context


def test_a_question_asking_when_prefers_the_turn_that_tells_a_time(store: Store,
                                                                  tmp_path: Path) -> None:
    """ "When did Ann ...?" is answered by a time said in a turn, seldom by the question's words:
    of two turns holding the same words, the one telling a time comes first."""
    chat = Transcript("ffffffff-0000-4000-8000-000000000006", datetime(2023, 9, 4, 18, tzinfo=UTC))
    chat.prompt("Ann: Pottery class is fun, the teacher is kind.")
    chat.say("Bob: Sounds relaxing.")
    chat.end_turn()
    told = Transcript("99999999-0000-4000-8000-000000000007", datetime(2023, 9, 11, 18, tzinfo=UTC))
    told.prompt("Ann: I joined a pottery class last Saturday and made my first bowl.")
    told.say("Bob: Congrats!")
    told.end_turn()
    backfill(store, chat.write(tmp_path / "chat.jsonl"), told.write(tmp_path / "told.jsonl"))

    hits = search(store, "When did Ann join the pottery class?")
    assert "last Saturday" in hits[0]["text"], [h["text"] for h in hits]
    hits = search(store, "When did Ann take the pottery class?")  # "join" not asked
    assert "last Saturday" in hits[0]["text"], [h["text"] for h in hits]
    # a question that does not ask when ranks by its words alone
    hits = search(store, "What does Ann think of the pottery class teacher?")
    assert "teacher is kind" in hits[0]["text"], [h["text"] for h in hits]


def test_the_hook_shows_the_sentences_of_a_long_turn_that_hold_the_prompts_words(
        store: Store, tmp_path: Path) -> None:
    """A long message no longer hides the rest of its turn: the hook keeps each message's first
    sentence and the sentences holding the prompt's words, within the item's size."""
    chatter = " ".join(f"The {w} was nice this week." for w in (
        "weather", "garden", "office", "commute", "gym", "market", "library", "bakery", "river",
        "bridge", "harbour", "museum", "station", "stadium", "cinema"))
    t = Transcript("12121212-0000-4000-8000-000000000008", datetime(2023, 10, 2, 18, tzinfo=UTC))
    t.prompt(f"Bob: Hi Ann! {chatter} Anyway, what did you cook for the party?")
    t.say("Ann: Oh, lots of things happened. I cooked a huge pot of chili with cornbread for "
          "the party, everyone loved it.")
    t.end_turn()
    backfill(store, t.write(tmp_path / "s.jsonl"))

    context = prompt_context(store, "What did Ann cook for the party?")
    assert "Bob: Hi Ann!" in context, context  # who speaks
    assert "what did you cook for the party?" in context, context
    assert "I cooked a huge pot of chili with cornbread" in context, context
    assert "..." in context and "stadium" not in context, context  # the chatter left out
    item = next(line for line in context.splitlines() if line.startswith("- ["))
    assert len(item) < 520, item
