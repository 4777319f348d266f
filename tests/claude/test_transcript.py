"""Reading the last assistant turn of real-format Claude Code transcripts (claude-code.md §4)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

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
    data += (b'{"type":"assistant","uuid":"a2","message":{"id":"m2",'
             b'"content":[{"type":"text","text":"bad \xff byte"}]}}\r\n')
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
        assert time.monotonic() - start < 10  # a hang guard: a FIFO's open blocks for ever


def test_transcript_large_file_is_read_from_the_end(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "big.jsonl"
    filler = _line("user", [{"type": "tool_result", "tool_use_id": "t", "content": "x" * 5000}], uuid="f")
    with path.open("w") as fh:
        fh.write(_line("user", "ancient prompt", uuid="u0") + "\n")
        for _ in range(4000):  # ~20 MB
            fh.write(filler + "\n")
        fh.write(_line("user", "recent prompt", uuid="u1") + "\n")
        fh.write(_line("assistant", [{"type": "text", "text": "the answer"}], uuid="a1", msg_id="m") + "\n")
    read = []
    pread = os.pread

    def counting_pread(fd: int, n: int, offset: int) -> bytes:
        data = pread(fd, n, offset)
        read.append(len(data))
        return data

    monkeypatch.setattr(os, "pread", counting_pread)
    start = time.monotonic()
    turn = read_last_turn(path)
    assert [b.text for b in turn.blocks] == ["the answer"] and turn.prompt_uuid == "u1"
    # What was read, not how long it took: the end, not the 20 MB before it.
    assert 0 < sum(read) < 1 << 20, sum(read)
    assert time.monotonic() - start < 10  # and a hang guard


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
    # Kept whole: the tag parser masks code first, then the reminder (tags.py).
    from ctxstore.claude.tags import parse_commands

    blocks = read_last_turn(path).blocks
    assert [b.text for b in blocks] == ["a<system-reminder><ctx:status/></system-reminder>b"]
    assert parse_commands(blocks[0].text) == ([], [])


def test_transcript_final_message_is_added_only_when_the_transcript_lags() -> None:
    turn = Turn([TextBlock("a1:0", "before the tool"), TextBlock("a2:0", "final words")], "u1")
    assert [b.text for b in merge_final_message(turn, "final words")] == ["before the tool", "final words"]
    merged = merge_final_message(turn, "a newer final message")
    assert [b.key for b in merged][-1] == "last_assistant_message"
    assert merge_final_message(Turn([], None), None) == []
    assert [b.text for b in merge_final_message(Turn([], None), "only this")] == ["only this"]


# -- where the last turn starts (issue 11 item 5) --------------------------------------------
# Lines in the real format (claude-code.md §4.7): `type` before `message`, `uuid` after it.
def _real(kind: str, content, *, uuid: str, msg_id: str | None = None, **extra) -> str:
    message: dict = {"role": kind, "content": content}
    if msg_id:
        message["id"] = msg_id
    return json.dumps({"parentUuid": None, "isSidechain": False, "userType": "external",
                       "cwd": "/w", "sessionId": "s", "version": "2.1.240", "type": kind,
                       "message": message, "uuid": uuid, "timestamp": "2026-11-01T00:00:00Z",
                       **extra})


def _say(text: str, uuid: str) -> str:
    return _real("assistant", [{"type": "text", "text": text}], uuid=uuid, msg_id="m-" + uuid)


def _summary(uuid: str, subtype: str = "stop_hook_summary") -> str:
    return json.dumps({"parentUuid": None, "isSidechain": False, "type": "system",
                       "subtype": subtype, "hookCount": 1, "hookErrors": [],
                       "preventedContinuation": False, "level": "suggestion", "uuid": uuid})


CAVEAT = ("Caveat: The messages below were generated by the user while running local commands. "
          "DO NOT respond to these messages or otherwise consider them in your response unless "
          "the user explicitly asks you to.")
HUGE = 9 << 20  # over MAX_LINE_BYTES: the line cannot be parsed within the reader's limit


def test_transcript_a_prompt_over_the_line_limit_still_opens_a_turn(tmp_path: Path) -> None:
    path = _write(tmp_path / "t.jsonl", [
        _real("user", "first", uuid="p1"), _say("OLD <ctx:recall query='x'/>", "a1"),
        _real("user", "Please review this log:\n" + "log line\n" * (HUGE // 9), uuid="p2"),
        _say("answer two", "a2"),
    ])
    turn = read_last_turn(path)
    assert [b.text for b in turn.blocks] == ["answer two"] and turn.prompt_uuid == "p2"


def test_transcript_a_huge_image_prompt_opens_a_turn_and_huge_tool_output_does_not(tmp_path: Path) -> None:
    image = [{"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                          "data": "A" * HUGE}}, {"type": "text", "text": "what is this?"}]
    big_result = [{"tool_use_id": "t1", "type": "tool_result", "content": "x" * HUGE}]
    path = _write(tmp_path / "t.jsonl", [
        _real("user", "first", uuid="p1"), _say("OLD", "a1"),
        _real("user", image, uuid="p2"), _say("before the tool", "a2"),
        _real("user", big_result, uuid="r1", toolUseResult={"stdout": "x"}),
        _real("user", "M" * HUGE, uuid="meta1", isMeta=True),
        _say("after the tool", "a3"),
    ])
    turn = read_last_turn(path)
    assert [b.text for b in turn.blocks] == ["before the tool", "after the tool"]
    assert turn.prompt_uuid == "p2"


def test_transcript_a_cut_off_huge_last_line_is_not_a_prompt(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(_real("user", "first", uuid="p1") + "\n" + _say("the answer", "a1") + "\n"
                    + _real("user", "y" * HUGE, uuid="p2")[:-40])  # still being written
    turn = read_last_turn(path)
    assert [b.text for b in turn.blocks] == ["the answer"] and turn.prompt_uuid == "p1"


def test_transcript_a_turn_opened_only_by_meta_lines_ends_at_the_stop_hook_summary(tmp_path: Path) -> None:
    path = _write(tmp_path / "t.jsonl", [
        _real("user", "first", uuid="p1"), _say("OLD <ctx:status/>", "a1"),
        _summary("sum1"),
        _real("user", CAVEAT, uuid="c1", isMeta=True),
        _real("user", "<command-name>/skill</command-name>", uuid="m1", isMeta=True),
        _real("user", [{"type": "text", "text": "Expanded skill prompt"}], uuid="m2", isMeta=True),
        _say("NEW", "a2"),
    ])
    turn = read_last_turn(path)
    assert [b.text for b in turn.blocks] == ["NEW"] and turn.prompt_uuid == "sum1"


def test_transcript_a_turn_end_line_written_before_the_hook_runs_is_not_a_boundary(tmp_path: Path) -> None:
    for subtype in ("stop_hook_summary", "turn_duration"):
        path = _write(tmp_path / f"{subtype}.jsonl", [
            _real("user", "first", uuid="p1"), _say("the answer", "a1"), _summary("s1", subtype),
        ])
        turn = read_last_turn(path)
        assert [b.text for b in turn.blocks] == ["the answer"] and turn.prompt_uuid == "p1"


def test_transcript_a_task_notification_does_not_open_a_turn_but_the_turn_end_does(tmp_path: Path) -> None:
    note = "<task-notification><task-id>b1</task-id><status>completed</status></task-notification>"
    path = _write(tmp_path / "t.jsonl", [
        _real("user", "first", uuid="p1"), _say("OLD", "a1"), _summary("sum1"),
        _real("user", note, uuid="n1"), _say("NEW", "a2"),
    ])
    assert [b.text for b in read_last_turn(path).blocks] == ["NEW"]
    mid_turn = _write(tmp_path / "mid.jsonl", [
        _real("user", "first", uuid="p1"), _say("before", "a1"),
        _real("user", note, uuid="n1"), _say("after", "a2"),
    ])
    assert [b.text for b in read_last_turn(mid_turn).blocks] == ["before", "after"]


def test_transcript_typed_prompts_that_look_like_harness_text_open_a_turn(tmp_path: Path) -> None:
    for prompt in ("[Request interrupted] - sorry, do the other file first",
                   "[Request interrupted by user] was what I saw; why?",
                   "Caveat: the tests are flaky, so run them twice",
                   ("Caveat: The messages below were generated by the user while running local "
                    "commands.\nPlease explain what they mean."),
                   "<system-reminder>pasted</system-reminder> what does this reminder mean?"):
        path = _write(tmp_path / "t.jsonl", [
            _real("user", "first", uuid="p1"), _say("OLD", "a1"),
            _real("user", prompt, uuid="p2"), _say("NEW", "a2"),
        ])
        turn = read_last_turn(path)
        assert ([b.text for b in turn.blocks], turn.prompt_uuid) == (["NEW"], "p2"), prompt


def test_transcript_harness_lines_do_not_open_a_turn(tmp_path: Path) -> None:
    for line in (
        _real("user", [{"type": "text", "text": "[Request interrupted by user for tool use]"}], uuid="x"),
        _real("user", "[Request interrupted by user]", uuid="x"),
        _real("user", CAVEAT, uuid="x"),  # even without isMeta
        _real("user", CAVEAT, uuid="x", isMeta=True),
        _real("user", "<local-command-stdout>ok</local-command-stdout>", uuid="x"),
        _real("user", [{"type": "text", "text": "<system-reminder>r</system-reminder>"},
                       {"type": "text", "text": " "}], uuid="x"),
        _real("user", [{"tool_use_id": "t", "type": "tool_result", "content": "out"}], uuid="x"),
        _real("user", "summary", uuid="x", isCompactSummary=True, isVisibleInTranscriptOnly=True),
    ):
        path = _write(tmp_path / "t.jsonl", [
            _real("user", "first", uuid="p1"), _say("before", "a1"), line, _say("after", "a2"),
        ])
        turn = read_last_turn(path)
        assert ([b.text for b in turn.blocks], turn.prompt_uuid) == (["before", "after"], "p1"), line


def test_transcript_reverse_lines_can_report_overlong_lines_with_head_and_tail(tmp_path: Path) -> None:
    from ctxstore.claude.transcript import LongLine

    path = tmp_path / "lines"
    long = b"HEAD" + b"z" * 200_000 + b"TAIL"
    path.write_bytes(long + b"\none\n" + long + b"\nfour")
    fd = os.open(path, os.O_RDONLY)
    try:
        lines = list(iter_lines_reversed(fd, os.fstat(fd).st_size, max_line=100_000, long_lines=True))
    finally:
        os.close(fd)
    assert lines[0] == b"four" and lines[2] == b"one"
    for item in (lines[1], lines[3]):
        assert isinstance(item, LongLine) and item.size == len(long)
        assert item.head.startswith(b"HEAD") and item.tail.endswith(b"TAIL")
    assert len(lines) == 4
