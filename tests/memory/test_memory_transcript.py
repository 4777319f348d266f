"""The forward transcript reader of transcript memory, on real line shapes (claude-code.md §4)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ctxstore.memory.transcript import MAX_ENTRY_BYTES, TOOL_TEXT_BUDGET, open_regular, read_entries
from tests.memory.memtx import Transcript, conversation

REALISTIC = Path(__file__).parent.parent / "claude" / "fixtures" / "realistic.jsonl"


def _read(path: Path, start: int = 0, limit: int = 1 << 30):
    fd = open_regular(path)
    assert fd is not None
    try:
        return read_entries(fd, start, limit=limit)
    finally:
        os.close(fd)


def test_transcript_every_line_type_becomes_the_right_entry(tmp_path: Path) -> None:
    path = conversation().write(tmp_path / "s.jsonl")
    kinds = [(e.kind, e.text[:30]) for e in _read(path).entries]
    assert kinds[0] == ("prompt", "How should we store the sessio")  # meta/other lines skipped
    assert [k for k, _ in kinds] == [
        "prompt", "assistant", "tool_use", "tool_result", "assistant", "turn_end",
        "prompt", "assistant", "turn_end", "prompt", "assistant", "turn_end",
        "boundary", "summary", "prompt", "assistant", "tool_use", "tool_result", "assistant",
        "turn_end"]
    entries = _read(path).entries
    assert all(e.session == "4d5611e5-241a-462a-8d15-5122611a9569" for e in entries)
    assert all(e.timestamp and e.timestamp > 1_700_000_000_000 for e in entries)
    assert entries[2].text.startswith('Bash {"command": "grep -rn cache src/"}')


def test_transcript_reads_the_real_fixture_without_meta_lines() -> None:
    entries = _read(REALISTIC).entries
    prompts = [e.text for e in entries if e.kind == "prompt"]
    assert prompts and not any(p.startswith("Caveat:") for p in prompts)
    assert any(e.kind == "assistant" for e in entries)


def test_transcript_strips_reminders_and_harness_elements(tmp_path: Path) -> None:
    t = Transcript()
    t.prompt("<system-reminder>hidden</system-reminder>Fix the parser please")
    t.meta("<local-command-stdout>out</local-command-stdout>")
    t.say("Done <system-reminder>x</system-reminder>with it")
    entries = _read(t.write(tmp_path / "s.jsonl")).entries
    assert [(e.kind, e.text) for e in entries] == [("prompt", "Fix the parser please"),
                                                  ("assistant", "Done with it")]


def test_transcript_cuts_tool_output_to_its_budget(tmp_path: Path) -> None:
    t = Transcript()
    t.prompt("run it")
    t.tool("Bash", {"command": "seq"}, "x" * 50_000)
    result = [e for e in _read(t.write(tmp_path / "s.jsonl")).entries if e.kind == "tool_result"]
    assert len(result[0].text) <= TOOL_TEXT_BUDGET + 10 and result[0].text.startswith("xxx")


def test_transcript_leaves_a_line_still_being_written(tmp_path: Path) -> None:
    data = conversation().data()
    path = tmp_path / "s.jsonl"
    cut = data.rfind(b"\n", 0, len(data) - 1) + 20  # inside the last line
    path.write_bytes(data[:cut])
    first = _read(path)
    assert first.end == data.rfind(b"\n", 0, len(data) - 1) + 1
    path.write_bytes(data)
    rest = _read(path, first.end)
    assert rest.end == len(data) and [e.kind for e in rest.entries] == ["turn_end"]


def test_transcript_takes_a_whole_last_line_without_newline(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(conversation().data().rstrip(b"\n"))
    assert _read(path).end == path.stat().st_size


def test_transcript_survives_garbage_binary_and_huge_lines(tmp_path: Path) -> None:
    t = Transcript()
    t.prompt("first")
    good = t.data()
    huge = json.dumps({"type": "user", "message": {"content": "y" * (MAX_ENTRY_BYTES + 10)}})
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"not json\n\x00\xff\xfe binary\n[1,2]\n{\"type\": \"user\"\n" + huge.encode()
                     + b"\n" + good + "\ud83d lone".encode("utf-8", "surrogatepass") + b"\n")
    read = _read(path)
    assert [e.text for e in read.entries] == ["first"]
    assert read.skipped == 6 and read.end == path.stat().st_size


def test_transcript_lone_surrogates_are_replaced(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    line = {"type": "user", "uuid": "u1", "message": {"content": "emoji \\ud83d cut"}}
    path.write_text(json.dumps(line).replace("\\\\ud83d", "\\ud83d") + "\n")
    [entry] = _read(path).entries
    assert entry.text == "emoji \ufffd cut"
    entry.text.encode("utf-8")


def test_transcript_refuses_fifo_and_device_links(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    link = tmp_path / "zero.jsonl"
    link.symlink_to("/dev/zero")
    assert open_regular(fifo) is None and open_regular(link) is None


def test_transcript_sidechain_lines_are_marked(tmp_path: Path) -> None:
    t = Transcript(sidechain=True)
    t.prompt("Explore the codebase")
    t.say("I found three modules.")
    assert all(e.sidechain for e in _read(t.write(tmp_path / "agent-a1.jsonl")).entries)
