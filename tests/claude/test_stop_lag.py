"""A transcript that lags by a whole turn: the Stop runs the turn's tags from
``last_assistant_message`` while neither the prompt nor the reply is in the file yet.

A later Stop that reads the turn from the transcript (the same turn's Stop again, or the next
turn's, whose own lines lag) must not run those tags again; the same reply written in a later
turn still runs (docs/hooks.md "Exactly once").
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from ctxstore.repo import Store
from tests.claude.test_hooks import Transcript, context, hook, nodes, payload, stop

REPLY = 'Noted. <ctx:remember type="fact">whole-turn lag memory</ctx:remember> <ctx:status/>'
MEMORY = "whole-turn lag memory"


def _iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{int(seconds * 1000) % 1000:03d}Z"


class Timed(Transcript):
    """Real lines carry the time the message was created (claude-code.md §4.3)."""

    def at(self, seconds: float) -> Timed:
        self.stamp = seconds
        return self

    def _add(self, entry: dict) -> str:
        stamp = getattr(self, "stamp", None)
        return super()._add({**entry, "timestamp": _iso(stamp)} if stamp is not None else entry)


@pytest.fixture
def tr(tmp_path: Path) -> Timed:
    return Timed(tmp_path / "session.jsonl")


def _count(store: Store) -> int:
    return [n[1] for n in nodes(store)].count(MEMORY)


def _statuses(store: Store) -> int:
    return context(hook("prompt-submit", payload(store, prompt="what is next"))).count("ctx Status")


@pytest.mark.parametrize("earlier_turn", [False, True])
def test_stop_lagging_a_whole_turn_never_runs_a_tag_twice(store: Store, tr: Timed,
                                                          earlier_turn: bool) -> None:
    start = time.time() - 60
    if earlier_turn:  # the transcript's last turn is then the one before
        tr.at(start - 30).user("Hello there.")
        tr.at(start - 29).say("Hi. How can I help?")
        assert stop(store, tr, last_assistant_message="Hi. How can I help?") == {}
    # Stop of turn 1: neither its prompt nor its reply is written yet
    assert stop(store, tr, last_assistant_message=REPLY) == {}
    assert _count(store) == 1 and _statuses(store) == 1
    tr.at(start).user("Please remember the lag test.")  # the transcript catches up
    tr.at(start + 2).say(REPLY)
    # the same turn's Stop again, with no prompt_id: the turn is named by its prompt line now
    assert stop(store, tr, last_assistant_message=REPLY) == {}
    # the next turn's Stop, its own lines not written yet (prompt_id sent this time)
    assert stop(store, tr, prompt_id="p2", last_assistant_message="All done.") == {}
    assert _count(store) == 1 and _statuses(store) == 0


@pytest.mark.slow
def test_stop_the_same_reply_in_a_later_turn_runs_again(store: Store, tr: Timed) -> None:
    start = time.time() - 60
    assert stop(store, tr, last_assistant_message=REPLY) == {}  # turn 1, lagging
    tr.at(start).user("Please remember the lag test.")
    tr.at(start + 2).say(REPLY)
    assert stop(store, tr, last_assistant_message=REPLY) == {}
    assert _count(store) == 1 and _statuses(store) == 1
    now = time.time()  # turn 2 starts after turn 1's Stop: the same reply, written in time
    tr.at(now).user("And once more, please.")
    tr.at(now + 0.5).say(REPLY)
    assert stop(store, tr, last_assistant_message=REPLY) == {}
    assert stop(store, tr, last_assistant_message=REPLY) == {}  # its Stop again: once
    assert _count(store) == 2 and _statuses(store) == 1


def test_stop_lagging_lines_without_a_time_are_taken_for_the_run_reply(store: Store,
                                                                       tr: Timed) -> None:
    assert stop(store, tr, prompt_id="p1", last_assistant_message=REPLY) == {}
    tr.user("Please remember the lag test.")  # lines written with no timestamp
    tr.say(REPLY)
    assert stop(store, tr, prompt_id="p2", last_assistant_message="All done.") == {}
    assert _count(store) == 1
