"""In-process tests of ``ctxstore.memory.manage``: the use cases behind ``ctx memory
backfill|stats|topics|forget``, on a real store and real transcripts."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import session_of

from ctxstore.errors import InvalidInput, NothingToDo
from ctxstore.memory.manage import (
    backfill_memory,
    forget_memory,
    memory_session,
    memory_stats,
    memory_topics,
)
from ctxstore.repo import Store
from tests.memory.memtx import SESSION, conversation


def test_without_a_memory_stats_are_zero_and_the_rest_is_nothing_to_do(store: Store) -> None:
    stats = memory_stats(store.root)
    assert (stats.counts["sessions"], stats.size, stats.first) == (0, 0, None)
    for call in (lambda: memory_topics(store.root, None, 10),
                 lambda: memory_session(store.root, "4d56"),
                 lambda: forget_memory(store.root, None)):
        with pytest.raises(NothingToDo, match="no transcript memory yet"):
            call()
    assert not (store.root / "local" / "memory.sqlite").exists()  # reads made nothing


def test_backfill_topics_and_forget_one_session(store: Store, tmp_path: Path) -> None:
    conversation().write(tmp_path / "s.jsonl")
    report, _linked, _embedded = backfill_memory(session_of(store), [tmp_path / "s.jsonl"], tool_budget=2000)
    assert report.turns > 0 and memory_stats(store.root).counts["sessions"] == 1
    session, rows = memory_topics(store.root, SESSION[:8], 50)
    assert session == SESSION and rows
    assert memory_session(store.root, SESSION[:8], option="--session") == SESSION
    with pytest.raises(InvalidInput, match="E011: --session: no session starts with 'zzz'"):
        memory_session(store.root, "zzz", option="--session")
    assert forget_memory(store.root, SESSION) == report.turns
    assert memory_stats(store.root).counts["turns"] == 0
