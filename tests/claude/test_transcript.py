"""Reading the last assistant turn of real-format Claude Code transcripts (claude-code.md §4)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from ctxstore.claude.transcript import (
    TextBlock,
    Turn,
    iter_lines_reversed,
    merge_final_message,
    read_last_turn,
)

FIXTURES = Path(__file__).parent / "fixtures"


def _line(kind: str, content, *, uuid: str, msg_id: str | None = None, **extra) -> str:
    message: dict = {"role": kind, "content": content}
    if msg_id:
        message["id"] = msg_id
    return json.dumps({"type": kind, "uuid": uuid, "message": message, **extra})


def _write(path: Path, lines: list[str], *, newline: str = "\n") -> Path:
    path.write_text(newline.join(lines) + newline, encoding="utf-8")
    return path


def test_transcript_realistic_fixture_gives_only_the_last_turns_assistant_text() -> None:
    turn = read_last_turn(FIXTURES / "realistic.jsonl")
    joined = "\n".join(b.text for b in turn.blocks)
    # Text before the tool call and after it, once each (a repeated line is deduplicated).
    assert "BEFORE-TOOL" in joined and "AFTER-TOOL" in joined
    assert len(turn.blocks) == 2
    for absent in ("OLD-TURN", "THINKING", "TOOL-USE-INPUT", "TOOL-RESULT", "USER-TYPED",
                   "TASK-NOTIFICATION", "SIDECHAIN", "COMPACT-SUMMARY", "TRUNCATED", "<ctx:status/> from"):
        assert absent not in joined, absent
    # The turn starts at the typed prompt (a block list), not at the tool results or the
    # injected <task-notification> after it.
    assert turn.prompt_uuid == "00000000-0000-4000-8000-000000000009"
    # A lone surrogate from the file is replaced, so the text can be encoded.
    assert "\ufffd" in joined
    joined.encode("utf-8")


def test_transcript_turn_ends_at_compaction_summary_only_at_a_real_prompt(tmp_path: Path) -> None:
    path = _write(tmp_path / "t.jsonl", [
        _line("user", "do the thing", uuid="u1"),
        _line("assistant", [{"type": "text", "text": "early text"}], uuid="a1", msg_id="m1"),
        json.dumps({"type": "system", "subtype": "compact_boundary", "uuid": "b1"}),
        _line("user", "This session is being continued ...", uuid="s1", isCompactSummary=True,
              isVisibleInTranscriptOnly=True),
        _line("assistant", [{"type": "text", "text": "late text"}], uuid="a2", msg_id="m2"),
    ])
    turn = read_last_turn(path)
    assert [b.text for b in turn.blocks] == ["early text", "late text"]
    assert turn.prompt_uuid == "u1"


def test_transcript_content_shapes_string_null_and_dict_are_tolerated(tmp_path: Path) -> None:
    path = _write(tmp_path / "t.jsonl", [
        _line("user", "go", uuid="u1"),
        _line("assistant", "plain string content", uuid="a1", msg_id="m1"),
        _line("assistant", None, uuid="a2", msg_id="m2"),
        _line("assistant", {"type": "text", "text": "dict content is not a block list"}, uuid="a3"),
        json.dumps({"type": "assistant", "uuid": "a4", "message": "not an object"}),
        json.dumps([1, 2, 3]),
    ])
    assert [b.text for b in read_last_turn(path).blocks] == ["plain string content"]


def test_transcript_crlf_bom_invalid_utf8_and_garbage_lines(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    lines = [_line("user", "go", uuid="u1"),
             _line("assistant", [{"type": "text", "text": "first"}], uuid="a1", msg_id="m1")]
    data = b"\xef\xbb\xbf" + "\r\n".join(lines).encode() + b"\r\n"
    data += b'{"type":"assistant","uuid":"a2","message":{"id":"m2","content":[{"type":"text","text":"bad \xff byte"}]}}\r\n'
    data += b"\x00\x01garbage\xfe\r\n"
    path.write_bytes(data)
    texts = [b.text for b in read_last_turn(path).blocks]
    assert texts == ["first", "bad \ufffd byte"]


def test_transcript_missing_directory_fifo_and_device_give_an_empty_turn(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in (tmp_path / "missing.jsonl", tmp_path, fifo, Path("/dev/zero")):
        start = time.monotonic()
        assert read_last_turn(path).blocks == []
        assert time.monotonic() - start < 1.0


def test_transcript_large_file_is_read_from_the_end(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    filler = _line("user", [{"type": "tool_result", "tool_use_id": "t", "content": "x" * 5000}], uuid="f")
    with path.open("w") as fh:
        fh.write(_line("user", "ancient prompt", uuid="u0") + "\n")
        for _ in range(4000):  # ~20 MB
            fh.write(filler + "\n")
        fh.write(_line("user", "recent prompt", uuid="u1") + "\n")
        fh.write(_line("assistant", [{"type": "text", "text": "the answer"}], uuid="a1", msg_id="m") + "\n")
    start = time.monotonic()
    turn = read_last_turn(path)
    assert [b.text for b in turn.blocks] == ["the answer"] and turn.prompt_uuid == "u1"
    assert time.monotonic() - start < 0.2


def test_transcript_scan_is_bounded_when_no_prompt_is_found(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with path.open("w") as fh:
        fh.write(_line("assistant", [{"type": "text", "text": "too far back"}], uuid="a0") + "\n")
        fh.write("y" * 300_000 + "\n")
        fh.write(_line("assistant", [{"type": "text", "text": "near the end"}], uuid="a1") + "\n")
    turn = read_last_turn(path, max_scan=100_000)
    assert [b.text for b in turn.blocks] == ["near the end"] and turn.prompt_uuid is None


def test_transcript_reverse_lines_skip_overlong_lines_and_keep_order(tmp_path: Path) -> None:
    path = tmp_path / "lines"
    path.write_bytes(b"one\n" + b"z" * 200_000 + b"\nthree\nfour")
    fd = os.open(path, os.O_RDONLY)
    try:
        lines = list(iter_lines_reversed(fd, os.fstat(fd).st_size, max_line=100_000))
    finally:
        os.close(fd)
    assert lines == [b"four", b"three", b"", b"one"]


def test_transcript_system_reminders_are_stripped_from_assistant_text(tmp_path: Path) -> None:
    path = _write(tmp_path / "t.jsonl", [
        _line("user", "go", uuid="u1"),
        _line("assistant", [{"type": "text", "text": "a<system-reminder><ctx:status/></system-reminder>b"}],
              uuid="a1", msg_id="m1"),
    ])
    assert [b.text for b in read_last_turn(path).blocks] == ["ab"]


def test_transcript_final_message_is_added_only_when_the_transcript_lags() -> None:
    turn = Turn([TextBlock("a1:0", "before the tool"), TextBlock("a2:0", "final words")], "u1")
    assert [b.text for b in merge_final_message(turn, "final words")] == ["before the tool", "final words"]
    merged = merge_final_message(turn, "a newer final message")
    assert [b.key for b in merged][-1] == "last_assistant_message"
    assert merge_final_message(Turn([], None), None) == []
    assert [b.text for b in merge_final_message(Turn([], None), "only this")] == ["only this"]
