"""Incremental indexing: cursors, idempotence, rewrites, budgets, damage (a kill part way:
tests/crash/test_memory_index_kill.py)."""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxstore.errors import MemoryDamaged, UnsafePath
from ctxstore.memory import index
from ctxstore.memory.db import memory_path, open_memory
from ctxstore.memory.index import index_transcript
from tests.memory.memtx import Transcript, conversation


def dump(ctx_dir: Path) -> dict[str, Any]:
    """Everything indexed, without row ids (which may differ between runs)."""
    conn = sqlite3.connect(memory_path(ctx_dir))
    try:
        q = conn.execute
        return {
            "turns": q("SELECT session, seq, kind, sidechain, ts_start, ts_end, user_text, "
                       "assistant_text, tool_text, uuids FROM turns ORDER BY session, seq").fetchall(),
            "spans": q("SELECT s.session, s.name, s.depth, s.start_seq, s.end_seq, p.name FROM spans s "
                       "LEFT JOIN spans p ON p.id = s.parent_id ORDER BY s.session, s.start_seq, "
                       "s.depth").fetchall(),
            "turn_spans": q("SELECT t.seq, s.start_seq, s.depth FROM turns t JOIN spans s ON "
                            "s.id = t.span_id ORDER BY t.session, t.seq").fetchall(),
            "ideas": q("SELECT t.seq, i.intent, i.content, i.confidence, i.answered FROM ideas i "
                       "JOIN turns t ON t.id = i.turn_id ORDER BY i.id").fetchall(),
            "relations": q("SELECT a.content, b.content, r.relation_type FROM relations r JOIN ideas a "
                           "ON a.id = r.from_id JOIN ideas b ON b.id = r.to_id ORDER BY 1, 2, 3"
                           ).fetchall(),
            "entities": q("SELECT i.content, e.name, e.type FROM idea_entities x JOIN ideas i ON "
                          "i.id = x.idea_id JOIN entities e ON e.id = x.entity_id ORDER BY 1, 2"
                          ).fetchall(),
            "fts": q("SELECT count(*) FROM turns_fts").fetchone(),
            "seen": q("SELECT count(*) FROM seen").fetchone(),
        }
    finally:
        conn.close()


def _ctx(tmp_path: Path, name: str = "a") -> Path:
    ctx = tmp_path / name / ".ctx"
    ctx.mkdir(parents=True)
    return ctx


def _long_session(turns: int = 30) -> Transcript:
    t = conversation()
    for i in range(turns):
        t.prompt(f"Question {i}: how does module_{i % 7} handle retries in src/mod{i % 5}.py?")
        t.say(f"We decided to use exponential backoff in module_{i % 7}; the problem was "
              f"timeouts number {i}.")
        t.tool("Read", {"file_path": f"src/mod{i % 5}.py"}, f"def retry_{i}(): pass")
        t.end_turn()
    return t


def test_index_full_then_again_reads_nothing_new(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    path = conversation().write(tmp_path / "s.jsonl")
    first = index_transcript(ctx, path)
    assert first.done and first.turns == 5 and first.ideas > 3 and first.bytes == path.stat().st_size
    before = dump(ctx)
    again = index_transcript(ctx, path)
    assert (again.bytes, again.turns, again.ideas) == (0, 0, 0)
    assert dump(ctx) == before
    assert [t[2] for t in before["turns"]] == ["turn", "turn", "turn", "summary", "turn"]
    assert ("decision", "decision") and any(r[2] == "supersedes" for r in before["relations"])


def test_index_structure_topics_turn_uuids_and_low_value(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    t = conversation()
    path = t.write(tmp_path / "s.jsonl")
    index_transcript(ctx, path)
    data = dump(ctx)
    turns = data["turns"]
    assert "Redis" in turns[0][7] and "src/cache.py" in turns[0][8]  # reply and tool text
    assert turns[1][7] == ""  # "Sure." is an acknowledgement: not indexed
    uuids = [line["uuid"] for line in t.lines if line.get("uuid")]
    assert all(u in uuids for turn in turns for u in __import__("json").loads(turn[9]))
    topics = [s for s in data["spans"] if s[2] == 0]
    assert len(topics) == 2 and "login page" in topics[1][1]  # "now let's move on to ..."
    assert {(r[2]) for r in data["relations"]} >= {"supersedes"}


@settings(max_examples=25)
@given(st.lists(st.integers(min_value=0, max_value=10**9), min_size=1, max_size=6))
@pytest.mark.slow
def test_index_incremental_equals_full_at_any_cut_points(tmp_path_factory: pytest.TempPathFactory,
                                                         cuts: list[int]) -> None:
    tmp = tmp_path_factory.mktemp("cuts")
    data = _long_session(6).data()
    full_ctx, inc_ctx = _ctx(tmp, "full"), _ctx(tmp, "inc")
    whole = tmp / "whole.jsonl"
    whole.write_bytes(data)
    index_transcript(full_ctx, whole)
    growing = tmp / "growing.jsonl"
    for cut in sorted({c % (len(data) + 1) for c in cuts}) + [len(data)]:
        with open(growing, "ab") as out:  # appended like Claude Code does, mid-line cuts included
            out.write(data[growing.stat().st_size if growing.exists() else 0:cut])
        index_transcript(inc_ctx, growing)
    assert dump(inc_ctx) == dump(full_ctx)


def test_index_byte_budget_stops_and_the_next_call_continues(tmp_path: Path) -> None:
    data = _long_session(30).data()
    path = tmp_path / "s.jsonl"
    path.write_bytes(data)
    full, part = _ctx(tmp_path, "full"), _ctx(tmp_path, "part")
    index_transcript(full, path)
    calls = 0
    while True:
        calls += 1
        report = index_transcript(part, path, max_bytes=3000)
        if report.done:
            break
    assert calls > 5
    assert dump(part) == dump(full)


@pytest.mark.slow
def test_index_backlog_takes_the_short_budget_and_loses_nothing(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(index, "BACKLOG_BYTES", 20_000)
    monkeypatch.setattr(index, "BUDGET_BATCH_BYTES", 4_000)
    data = _long_session(60).data()
    path = tmp_path / "s.jsonl"
    path.write_bytes(data)
    assert len(data) > 40_000
    full, part = _ctx(tmp_path, "full"), _ctx(tmp_path, "part")
    index_transcript(full, path)
    offsets = []
    while True:  # a hook over a backlog: one batch per call (its budget is spent at once)
        report = index_transcript(part, path, seconds=60.0, backlog_seconds=0.0)
        offsets.append((offsets[-1] if offsets else 0) + report.bytes)
        if report.done:
            break
        assert 0 < report.bytes < 8_000
    assert offsets == sorted(set(offsets))  # the cursor advanced every call
    assert len(data) - offsets[-2] <= 20_000 < len(data) - offsets[-3]  # the rest in one call
    assert dump(part) == dump(full)


def test_index_small_backlog_keeps_the_full_budget(tmp_path: Path) -> None:
    path = conversation().write(tmp_path / "s.jsonl")
    report = index_transcript(_ctx(tmp_path), path, seconds=60.0, backlog_seconds=0.0)
    assert report.done and report.turns == 5


def test_index_rewritten_or_shrunk_file_never_duplicates(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    t = conversation()
    path = t.write(tmp_path / "s.jsonl")
    index_transcript(ctx, path)
    before = dump(ctx)
    path.unlink()
    t.write(path)  # the same lines in a new file (a new inode)
    index_transcript(ctx, path)
    assert dump(ctx) == before
    path.write_bytes(t.data()[:500])  # shrank
    index_transcript(ctx, path)  # ends mid-line: that line waits, nothing is duplicated
    assert dump(ctx) == before
    t.prompt("A new question about the deploy script deploy.sh?")  # grows again, rewritten
    path.write_bytes(t.data())
    index_transcript(ctx, path)
    assert len(dump(ctx)["turns"]) == len(before["turns"]) + 1


def test_index_resumed_session_copies_are_not_duplicated(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    t = conversation()
    t.write(tmp_path / "one.jsonl")
    index_transcript(ctx, tmp_path / "one.jsonl")
    t.prompt("Back to the cache: what about eviction?")
    t.say("Eviction is LRU.")
    t.write(tmp_path / "two.jsonl")  # a resumed session: the history copied, then new lines
    index_transcript(ctx, tmp_path / "two.jsonl")
    data = dump(ctx)
    assert len(data["turns"]) == 6 and data["turns"][-1][6].startswith("Back to the cache")


def test_index_sidechain_file_turns_are_marked(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    t = Transcript(sidechain=True)
    t.prompt("Explore the storage layer")
    t.say("The storage layer uses SQLite with WAL.")
    index_transcript(ctx, t.write(tmp_path / "s" / "subagents" / "agent-a1.jsonl"))
    assert [row[3] for row in dump(ctx)["turns"]] == [1]


def test_index_hostile_transcripts_are_noted_not_read(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    link = tmp_path / "zero.jsonl"
    link.symlink_to("/dev/zero")
    started = time.monotonic()
    for path in (fifo, link, tmp_path / "missing.jsonl", tmp_path):
        report = index_transcript(ctx, path)
        assert report.note and report.bytes == 0
    assert time.monotonic() - started < 5


def test_index_damaged_memory_is_named_and_kept(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    path = conversation().write(tmp_path / "s.jsonl")
    db_file = memory_path(ctx)
    db_file.parent.mkdir()
    db_file.write_bytes(b"this is not a database" * 100)
    with pytest.raises(MemoryDamaged, match="memory.sqlite is damaged"):
        index_transcript(ctx, path)
    assert db_file.read_bytes().startswith(b"this is not a database")  # never wiped
    db_file.unlink()
    db_file.symlink_to(tmp_path / "elsewhere.sqlite")
    with pytest.raises(MemoryDamaged, match="symbolic link"):
        index_transcript(ctx, path)
    assert not (tmp_path / "elsewhere.sqlite").exists()


def test_index_local_folder_link_is_refused(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    (tmp_path / "out").mkdir()
    (ctx / "local").symlink_to(tmp_path / "out")
    with pytest.raises(UnsafePath):
        index_transcript(ctx, conversation().write(tmp_path / "s.jsonl"))
    assert list((tmp_path / "out").iterdir()) == []


def test_index_missing_table_is_damage(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    path = conversation().write(tmp_path / "s.jsonl")
    index_transcript(ctx, path)
    conn = sqlite3.connect(memory_path(ctx))
    conn.execute("DROP TABLE relations")
    conn.commit()
    conn.close()
    with pytest.raises(MemoryDamaged, match="relations is missing"):
        open_memory(ctx, create=False)
