"""Transcript memory does bounded work on every transcript (issue 34 items 3, 5 and 7).

Through the hook entry point (``ctx hook stop`` with a real-format transcript) and the
installed ``ctx memory`` commands. The assertion is the child's bound: a process timeout (and
for the sparse file an address-space limit), never a timed unit test. Each input made the
code before this fix take far longer than its bound here:

- a prompt of unclosed ``<system-reminder>`` openers: the lazy ``.*?`` harness regex was
  quadratic (340 KB: 31 s; this 1 MB: minutes), and the cursor only moved after the line, so
  every later Stop of the session spent its whole timeout on it again;
- a reply of closed reminders: ``strip_reminders`` rebuilt the string once per element;
- blank lines: the reader read 1 MiB per line (128 KB of them per batch: 9 s a Stop, and a
  backfill of 2 MB 85 s);
- a 20 GB sparse one-line file: read whole inside the hook (61 s), and again at every Stop.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from pathlib import Path

from _bounded import run_bounded
from hypothesis import given
from hypothesis import strategies as st

from ctxstore.memory.db import memory_path
from ctxstore.memory.transcript import (
    MAX_ENTRY_BYTES,
    MAX_TEXT_CHARS,
    open_regular,
    read_entries,
    strip_harness,
    strip_reminders,
)
from ctxstore.repo import Store
from tests.memory.memtx import SESSION, Transcript

MB = 1 << 20


def _stop(store: Store, path: Path, seconds: float, **limits: int) -> dict:
    payload = {"session_id": SESSION, "transcript_path": str(path),
               "cwd": str(store.root.parent), "hook_event_name": "Stop"}
    res = run_bounded(["hook", "stop"], stdin=json.dumps(payload), seconds=seconds, **limits)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert isinstance(out, dict) and "systemMessage" not in out, out
    return out


def _memory(store: Store, sql: str) -> list[tuple]:
    if not memory_path(store.root).exists():
        return []
    conn = sqlite3.connect(f"file:{memory_path(store.root)}?mode=ro", uri=True)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def _offset(store: Store, path: Path) -> int:
    rows = _memory(store, f"SELECT offset FROM index_state WHERE file_path = '{path}'")
    return int(rows[0][0]) if rows else 0


def _backfill(store: Store, *paths: Path, seconds: float, env: dict[str, str] | None = None,
              args: tuple[str, ...] = ()) -> dict:
    res = run_bounded(["--ctx-dir", str(store.root), "--format", "json", "memory", "backfill",
                       *map(str, paths), *args], seconds=seconds, env=env)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def _reminders_transcript(path: Path) -> Path:
    t = Transcript()
    t.prompt("How should we store the session cache?")
    t.say("We decided to use SQLite for the session cache.")
    t.end_turn()
    t.prompt("<system-reminder>" * 60_000 + " and what about the login page?")  # 1 MB, unclosed
    t.say("<system-reminder>x</system-reminder>" * 25_000 + "The login page is fixed.")
    t.end_turn()
    return t.write(path)


def test_stop_on_a_prompt_of_unclosed_reminders_finishes_and_moves_on(store: Store,
                                                                      tmp_path: Path) -> None:
    path = _reminders_transcript(tmp_path / "s.jsonl")
    _stop(store, path, seconds=20)
    for _ in range(3):  # the backlog is read a budget at a time; each Stop moves on
        if _offset(store, path) == path.stat().st_size:
            break
        _stop(store, path, seconds=20)
    assert _offset(store, path) == path.stat().st_size
    turns = _memory(store, "SELECT user_text, assistant_text FROM turns ORDER BY seq")
    assert len(turns) == 2
    user, reply = turns[1]
    assert user.startswith("<system-reminder>") and len(user) <= MAX_TEXT_CHARS + 10
    assert reply == "The login page is fixed."  # the closed reminders are gone
    _stop(store, path, seconds=20)  # nothing left: the line is never read again
    assert len(_memory(store, "SELECT id FROM turns")) == 2


def test_backfill_of_a_prompt_of_unclosed_reminders_finishes(store: Store, tmp_path: Path) -> None:
    path = _reminders_transcript(tmp_path / "s.jsonl")
    doc = _backfill(store, path, seconds=20)
    assert doc["turns"] == 2 and doc["skipped_lines"] == 0


def _blank_lines_transcript(path: Path, blank: int) -> Path:
    t = Transcript()
    t.prompt("How should we store the session cache?")
    t.say("We decided to use SQLite for the session cache.")
    t.end_turn()
    head = t.data()
    t.lines.clear()
    t.prompt("And the login page?")
    t.say("The login page is fixed.")
    path.write_bytes(head + b"\n" * blank + t.data())
    return path


def test_stop_over_blank_lines_keeps_its_budget(store: Store, tmp_path: Path) -> None:
    path = _blank_lines_transcript(tmp_path / "s.jsonl", 2 * MB)
    for _ in range(2):
        _stop(store, path, seconds=5)
    assert _offset(store, path) > 0


def test_backfill_over_blank_lines_is_linear(store: Store, tmp_path: Path) -> None:
    path = _blank_lines_transcript(tmp_path / "s.jsonl", 2 * MB)
    doc = _backfill(store, path, seconds=15)
    assert doc["turns"] == 2 and doc["bytes"] == path.stat().st_size


def test_stop_on_a_20_gb_sparse_one_line_file_reads_a_budget_at_a_time(store: Store,
                                                                       tmp_path: Path) -> None:
    path = tmp_path / "sparse.jsonl"
    with path.open("wb") as handle:
        handle.truncate(20 << 30)  # no newline anywhere: one line of 20 GB of NUL bytes
    if os.stat(path).st_blocks * 512 > MB:
        import pytest

        pytest.skip("this filesystem does not keep sparse files")
    offsets = []
    for _ in range(2):
        _stop(store, path, seconds=10, memory=2 << 30)
        offsets.append(_offset(store, path))
    # each Stop reads about its budget's worth and moves the cursor on, inside the line
    assert 0 < offsets[0] < offsets[1] < path.stat().st_size


def test_a_line_over_the_limit_is_skipped_with_a_note_and_never_read_again(store: Store,
                                                                           tmp_path: Path) -> None:
    t = Transcript()
    t.prompt("How should we store the session cache?")
    t.say("We decided to use SQLite for the session cache.")
    t.end_turn()
    t.prompt("y" * (MAX_ENTRY_BYTES + MB))
    t.say("That prompt was long.")
    t.end_turn()
    t.prompt("And the login page?")
    t.say("The login page is fixed.")
    path = t.write(tmp_path / "s.jsonl")
    for _ in range(10):
        if _offset(store, path) == path.stat().st_size:
            break
        _stop(store, path, seconds=10)
    assert _offset(store, path) == path.stat().st_size
    log = (store.root / "local" / "hooks.log").read_text()
    assert "1 line(s) of" in log and "skipped" in log, log
    # the long prompt is gone; the reply to it is kept, in a turn of its own
    assert _memory(store, "SELECT user_text, assistant_text FROM turns ORDER BY seq") == [
        ("How should we store the session cache?", "We decided to use SQLite for the session cache."),
        ("", "That prompt was long."), ("And the login page?", "The login page is fixed.")]
    doc = _backfill(store, path, seconds=20)
    assert doc["bytes"] == 0  # already read: the long line is not read again
    fresh = _fresh_store(tmp_path / "fresh")
    doc = _backfill(fresh, path, seconds=20)
    assert doc["skipped_lines"] == 1 and doc["turns"] == 3
    assert any("1 line(s) skipped" in note for note in doc["notes"]), doc["notes"]


def _fresh_store(work: Path) -> Store:
    from ctxstore.init import init_store
    from ctxstore.repo import open_store

    work.mkdir()
    init_store(work / ".ctx", git=False)
    return open_store(work / ".ctx")


# -- malformed lines (item 5) ---------------------------------------------------------------
def _malformed(tmp_path: Path, name: str, change: dict, line: int = 0) -> Path:
    """A good two-turn session whose ``line``-th line gets ``change`` (JSON values, raw)."""
    t = Transcript(session=name[:8].ljust(8, "0") + SESSION[8:])  # its own uuids too
    t.prompt("How should we store the session cache?")
    t.say("We decided to use SQLite for the session cache.")
    t.end_turn()
    t.prompt("And the login page?")
    t.say("The login page is fixed.")
    t.end_turn()
    t.lines[line].update(change)
    data = b"".join(json.dumps(entry).encode() + b"\n" for entry in t.lines)
    # json.dumps writes "\ud800" escaped as "\\ud800": make it the lone surrogate JSON allows
    path = tmp_path / f"{name}.jsonl"
    path.write_bytes(data.replace(b"\\\\ud800", b"\\ud800"))
    return path


MALFORMED = {
    "uuid": ({"uuid": "\\ud800"}, 0),
    "session": ({"sessionId": "\\ud800"}, 0),
    "sublist": ({"subtype": ["turn_duration"]}, 2),
    "subdict": ({"subtype": {"turn_duration": 1}}, 2),
    "ts-low": ({"timestamp": "0001-01-01T00:00:00+23:59"}, 0),
    "ts-high": ({"timestamp": "9999-12-31T23:59:59-23:59"}, 1),
    "summary": ({"isCompactSummary": True, "message": {"role": "user", "content": 5}}, 3),
}


def test_stop_takes_malformed_lines_and_goes_on(store: Store, tmp_path: Path) -> None:
    for name, (change, line) in MALFORMED.items():
        path = _malformed(tmp_path, name, change, line)
        _stop(store, path, seconds=20)
        assert _offset(store, path) == path.stat().st_size, name  # the cursor moved past
    texts = [r[0] for r in _memory(store, "SELECT user_text FROM turns")]
    assert texts.count("How should we store the session cache?") == len(MALFORMED)
    for command in (["memory", "stats"], ["memory", "topics"], ["memory", "search", "cache"]):
        for fmt in ("text", "json"):
            res = run_bounded(["--ctx-dir", str(store.root), "--format", fmt, *command], seconds=20)
            assert res.returncode == 0, (command, res.stderr)


def test_backfill_all_goes_on_past_malformed_files(store: Store, tmp_path: Path) -> None:
    projects = tmp_path / "claude" / "projects" / "-home-user-demo"
    projects.mkdir(parents=True)
    for name, (change, line) in MALFORMED.items():
        _malformed(projects, name, change, line)
    (projects / "bad\udcff.jsonl").write_bytes(_malformed(tmp_path, "good", {}).read_bytes())
    doc = _backfill(store, seconds=30, args=("--all-projects",),
                    env={"CLAUDE_CONFIG_DIR": str(tmp_path / "claude")})
    assert doc["files"] == len(MALFORMED) + 1
    sessions = _memory(store, "SELECT DISTINCT session FROM turns")
    assert len(sessions) >= len(MALFORMED)
    assert all(isinstance(s[0], str) for s in sessions)


def test_stats_and_topics_read_any_stored_time(store: Store, tmp_path: Path) -> None:
    path = _malformed(tmp_path, "good", {})
    _backfill(store, path, seconds=20)
    year_zero = -62_135_596_800_000 - 86_340_000  # what an older ctx stored for +23:59 at year 1
    conn = sqlite3.connect(memory_path(store.root))
    with conn:
        conn.execute("UPDATE turns SET ts_start = ?, ts_end = ?", (year_zero, 2 ** 62))
        conn.execute("UPDATE spans SET ts_start = ?, ts_end = ?", (year_zero, -(10 ** 18)))
        conn.execute("UPDATE ideas SET ts = ?", (year_zero,))
    conn.close()
    for command in (["memory", "stats"], ["memory", "topics"], ["memory", "search", "cache"]):
        for fmt in ("text", "json"):
            res = run_bounded(["--ctx-dir", str(store.root), "--format", fmt, *command], seconds=20)
            assert res.returncode == 0, (command, res.stderr)


# -- the library pieces, against the behaviour they replace ----------------------------------
_OLD_HARNESS = re.compile(r"<(system-reminder|task-notification|local-command-stdout|"
                          r"local-command-stderr|local-command-caveat)>.*?</\1>", re.DOTALL)
_PIECES = ["<system-reminder>", "</system-reminder>", "<task-notification>", "</task-notification>",
           "<local-command-stdout>", "</local-command-stdout>", "<local-command-caveat>",
           "</local-command-caveat>", "x", " y\n", "<", ">", "</", "<system-reminder"]


@given(st.lists(st.sampled_from(_PIECES), max_size=16))
def test_strip_harness_equals_the_regex_it_replaces(pieces: list[str]) -> None:
    text = "".join(pieces)
    assert strip_harness(text) == _OLD_HARNESS.sub(" ", text)


@given(st.lists(st.sampled_from(_PIECES[:2] + ["a", "b\n"]), max_size=16))
def test_strip_reminders_cuts_whole_elements(pieces: list[str]) -> None:
    text = "".join(pieces)
    expected = text
    while (start := expected.find("<system-reminder>")) != -1:
        end = expected.find("</system-reminder>", start)
        if end == -1:
            break
        expected = expected[:start] + expected[end + len("</system-reminder>"):]
    assert strip_reminders(text) == expected


def _read_all(path: Path, *, deadline: float | None, limit: int = 1 << 30
              ) -> tuple[list, int, int, int]:
    """Read ``path`` in as many calls as ``read_entries`` needs, up to a line being written."""
    fd = open_regular(path)
    assert fd is not None
    entries, skipped, pos, calls = [], 0, 0, 0
    try:
        while pos < path.stat().st_size:
            read = read_entries(fd, pos, limit=limit, deadline=deadline)
            if read.end == pos:  # only a last line still being written is left
                break
            entries += read.entries
            skipped += read.skipped
            pos, calls = read.end, calls + 1
    finally:
        os.close(fd)
    return [(e.uuid, e.kind, e.text) for e in entries], skipped, pos, calls


def test_reading_stopped_anywhere_reads_the_same(tmp_path: Path) -> None:
    """A deadline passed at every step (one line a call, or one block of a long line) changes
    nothing: the offsets returned inside an over-long line resume its skipping."""
    t = Transcript()
    t.prompt("first")
    t.say("one")
    head = t.data()
    t.lines.clear()
    t.prompt("second")
    t.say("two")
    data = (head + b"\n\n \r\n" + b'{"type": "user", "x": "' + b"z" * (MAX_ENTRY_BYTES + 3 * MB)
            + b'"}\n' + b"not json\n" + t.data() + b'{"type": "user", "x": "' + b"q" * (2 * MB))
    path = tmp_path / "s.jsonl"
    path.write_bytes(data)
    whole = _read_all(path, deadline=None)
    assert [e[2] for e in whole[0]] == ["first", "one", "second", "two"]
    assert whole[1:] == (2, data.rfind(b"\n") + 1, 1)  # the long line and "not json" skipped
    stepwise = _read_all(path, deadline=0.0)  # always past: one line, or one block, a call
    assert stepwise[:3] == whole[:3] and stepwise[3] > 10
    small = _read_all(path, deadline=None, limit=10)
    assert small[:3] == whole[:3]


def test_stop_on_a_reply_of_many_unclosed_tags_is_linear(store: Store, tmp_path: Path) -> None:
    """20,000 ``<ctx:remember>`` without a closer, then 4 MB of text: each tag looked for its
    closer to the end of the reply (44 s for the parsing alone; 1.6 s now)."""
    t = Transcript()
    t.prompt("remember things")
    t.say("<ctx:remember>" * 20_000 + "x" * 4_000_000)
    path = t.write(tmp_path / "s.jsonl")
    payload = {"session_id": SESSION, "transcript_path": str(path),
               "cwd": str(store.root.parent), "hook_event_name": "Stop"}
    res = run_bounded(["hook", "stop"], stdin=json.dumps(payload), seconds=25)
    assert res.returncode == 0 and "unclosed" in json.loads(res.stdout)["systemMessage"]
