"""Reading the last assistant turn of a Claude Code transcript (JSONL), from the end.

The real format (claude-code.md §4): one content block per line, several lines per
``message.id``, tool results as ``user`` lines, ``thinking`` / ``tool_use`` blocks,
compaction boundaries, summaries, meta lines, attachments and many other line types.
A turn is every assistant ``text`` block written since the last *real* user prompt
(tool results, meta lines, compaction summaries and system-injected prompts such as
``<task-notification>`` do not open a turn), or since the end of the previous turn
(a ``system`` line ``stop_hook_summary`` or ``turn_duration`` that the conversation
went on after: a turn opened only by meta lines or a task notification starts there).
What the harness writes is recognised by its flags (``isMeta``, ``isCompactSummary``)
and by whole harness elements and sentences, never by a prefix a person could type
(``[Request interrupted] do X instead`` and ``Caveat: ...`` typed by the user are
prompts). A prompt longer than ``MAX_LINE_BYTES`` still opens a turn: its first and
last bytes are enough to tell a typed prompt from a tool result or a meta line.

The file is read backwards in blocks with ``pread``, so a 200 MB transcript costs what
its last turn costs. Bounded everywhere: only regular files are opened (a FIFO or a
device never blocks or streams forever), at most ``MAX_SCAN_BYTES`` are read, and a
line longer than ``MAX_LINE_BYTES`` is skipped unparsed. A line that does not parse
(cut off, binary, invalid JSON) is skipped. Never raises for a bad transcript.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from ctxstore.claude.inject import sanitize_text
from ctxstore.memory.transcript import (
    FLAGS,
    MAX_TURN_FILES,
    TURN_END,
    is_real_prompt,
    message_content,
    open_regular,
    parse_line,
    strip_reminders,
    text_blocks,
    tool_file,
)

__all__ = ["MAX_SCAN_BYTES", "MAX_LINE_BYTES", "LONG_LINE_PEEK", "TextBlock", "Turn", "LongLine",
           "read_last_turn", "iter_lines_reversed", "merge_final_message", "epoch_ms"]

MAX_SCAN_BYTES = 64 << 20
MAX_LINE_BYTES = 8 << 20
LONG_LINE_PEEK = 64 << 10
_BLOCK = 64 << 10


# NamedTuples, not dataclasses: the dataclasses module alone costs a Stop ~1 ms.
class TextBlock(NamedTuple):
    """One assistant text block.

    ``key`` identifies the line it came from; ``at_ms`` is the line's ``timestamp`` (when
    Claude Code created the message, milliseconds since the epoch), None when it has none.
    """

    key: str
    text: str
    at_ms: int | None = None


class Turn(NamedTuple):
    """The last assistant turn.

    Its text blocks in order, the id of the line that opened it (the prompt, or the end of the
    previous turn), and whether the reading stopped at its time limit before it found that line
    (then ``blocks`` are only the turn's latest ones).
    """

    blocks: list[TextBlock]
    prompt_uuid: str | None
    timed_out: bool = False
    files: tuple[str, ...] = ()  # files the turn's tool calls read or wrote, latest first


def _tool_files(entry: dict[str, Any], into: list[str]) -> None:
    """Add the files the entry's tool calls name (``tool_file``), at most ``MAX_TURN_FILES`` in all."""
    content = message_content(entry)
    if not isinstance(content, list):
        return
    for block in reversed(content):  # the turn is read backwards: latest first
        if len(into) >= MAX_TURN_FILES:
            return
        if not isinstance(block, dict) or block.get("type") != "tool_use":
            continue
        path = tool_file(str(block.get("name")), block.get("input"))
        if path is not None and path not in into:
            into.append(path)


class LongLine(NamedTuple):
    """A line longer than the reader's limit: its first and last bytes, and its length."""

    head: bytes
    tail: bytes
    size: int


def _long_line(fd: int, start: int, end: int) -> LongLine:
    peek = min(LONG_LINE_PEEK, end - start)
    return LongLine(os.pread(fd, peek, start), os.pread(fd, peek, end - peek), end - start)


class _Deadline(Exception):
    """The time allowed for reading the transcript is over."""


def iter_lines_reversed(fd: int, size: int, *, max_scan: int = MAX_SCAN_BYTES,
                        max_line: int = MAX_LINE_BYTES, long_lines: bool = False,
                        deadline: float | None = None) -> Iterator[bytes | LongLine]:
    """Yield the lines of an open file from last to first (without newlines).

    Reads at most ``max_scan`` bytes from the end. A line longer than ``max_line`` is
    not assembled: in its place comes an empty line, or with ``long_lines`` a
    ``LongLine`` holding its first and last ``LONG_LINE_PEEK`` bytes (read with two
    more ``pread`` calls), so a caller may still tell what kind of line it was.

    Args:
        fd: The open file.
        size: Its size (where reading starts).
        max_scan: The most bytes read.
        max_line: The longest line assembled.
        long_lines: Yield a ``LongLine`` for a line over ``max_line``.
        deadline: A ``time.monotonic()`` value after which no further block is read.

    Yields:
        Each line, last first.

    Raises:
        _Deadline: when ``deadline`` passed before the next block (internal to this module).
    """
    pos = size
    line_end = size  # where the line being assembled ends
    scanned = 0
    parts: list[bytes] = []  # pieces of the line being assembled, in reverse order
    part_len = 0
    skipping = False
    while pos > 0 and scanned < max_scan:
        if deadline is not None and scanned and time.monotonic() > deadline:
            raise _Deadline
        step = min(_BLOCK, pos)
        pos -= step
        chunk = os.pread(fd, step, pos)
        scanned += len(chunk)
        if len(chunk) < step:  # the file shrank under us: stop, what we have is unsure
            return
        pieces = chunk.split(b"\n")
        newline = pos + len(chunk)
        # pieces[-1] continues the line after this chunk; pieces[0] continues before it.
        for piece in reversed(pieces[1:]):
            newline -= len(piece) + 1  # the offset of the newline before this piece
            if skipping:
                skipping = False
                yield _long_line(fd, newline + 1, line_end) if long_lines else b""
            else:
                parts.append(piece)
                yield b"".join(reversed(parts))
            parts, part_len, line_end = [], 0, newline
        if not skipping:
            parts.append(pieces[0])
            part_len += len(pieces[0])
            if part_len > max_line:
                parts, part_len, skipping = [], 0, True
    if pos == 0 and skipping and long_lines:
        yield _long_line(fd, 0, line_end)
    elif pos == 0 and not skipping and parts:
        yield b"".join(reversed(parts))



# -- lines too long to read whole -------------------------------------------------------------
class _Cut(Exception):
    """The text ended inside a value; ``value`` is what was read of it."""

    def __init__(self, value: Any) -> None:
        super().__init__()
        self.value = value


_SCALAR = json.JSONDecoder()
# The C string scanner of the json module (public, but missing from the type stubs).
_scanstring: Callable[[str, int], tuple[str, int]] = getattr(json.decoder, "scanstring")  # noqa: B009


def _skip(text: str, pos: int, chars: str = " \t\r\n") -> int:
    while pos < len(text) and text[pos] in chars:
        pos += 1
    return pos


def _json_prefix(text: str, pos: int, depth: int = 0) -> tuple[Any, int]:
    """Parse the JSON value at ``pos`` of a text that may end part-way through it.

    Best effort: what is not JSON ends the reading as a cut would.

    Raises:
        _Cut: with the part read (a string's start, an object's first keys) if the
            text ends inside the value.
    """
    pos = _skip(text, pos)
    if pos >= len(text) or depth > 16:
        raise _Cut(None)
    first = text[pos]
    if first == '"':
        try:
            return _scanstring(text, pos + 1)
        except ValueError:  # unterminated: the line goes on past the head
            raise _Cut(_string_prefix(text[pos + 1:])) from None
    if first == "{":
        return _object_prefix(text, pos + 1, depth)
    if first == "[":
        return _array_prefix(text, pos + 1, depth)
    try:
        return _SCALAR.raw_decode(text, pos)
    except ValueError:
        raise _Cut(None) from None


def _object_prefix(text: str, pos: int, depth: int) -> tuple[dict[str, Any], int]:
    box: dict[str, Any] = {}
    while True:
        pos = _skip(text, pos, " \t\r\n,")
        if pos >= len(text) or text[pos] != '"':
            if pos < len(text) and text[pos] == "}":
                return box, pos + 1
            raise _Cut(box)
        try:
            key, pos = _scanstring(text, pos + 1)
        except ValueError:
            raise _Cut(box) from None
        pos = _skip(text, pos)
        if pos >= len(text) or text[pos] != ":":
            raise _Cut(box)
        try:
            box[key], pos = _json_prefix(text, pos + 1, depth + 1)
        except _Cut as cut:
            if cut.value is not None:
                box[key] = cut.value
            raise _Cut(box) from None


def _array_prefix(text: str, pos: int, depth: int) -> tuple[list[Any], int]:
    box: list[Any] = []
    while True:
        pos = _skip(text, pos, " \t\r\n,")
        if pos < len(text) and text[pos] == "]":
            return box, pos + 1
        try:
            value, pos = _json_prefix(text, pos, depth + 1)
        except _Cut as cut:
            if cut.value is not None:
                box.append(cut.value)
            raise _Cut(box) from None
        box.append(value)


def _string_prefix(raw: str) -> str:
    """The decoded start of a JSON string cut off part-way."""
    for trim in range(7):  # drop a cut-off escape such as "\u00"
        try:
            return str(json.loads('"' + raw[:len(raw) - trim] + '"'))
        except ValueError:
            continue
    return raw


def _long_entry(line: LongLine) -> dict[str, Any] | None:
    """What can be read of a line too long to parse.

    Its first keys and values from the head, its flags and ``uuid`` from the tail. None unless it is
    a complete object.
    """
    if not line.tail.rstrip().endswith(b"}"):  # cut off: still being written
        return None
    head = line.head.decode("utf-8", "replace").lstrip("\ufeff \t")
    if not head.startswith("{"):
        return None
    try:
        entry, _ = _json_prefix(head, 0)
    except _Cut as cut:
        entry = cut.value
    if not isinstance(entry, dict):
        return None
    tail = line.tail.decode("utf-8", "replace")
    # In the tail a key can only be structure: inside a JSON string its quotes are escaped.
    for flag in FLAGS:
        if re.search(rf'"{flag}"\s*:\s*true', tail):
            entry[flag] = True
    if re.search(r'"(toolUseResult|sourceToolAssistantUUID)"\s*:', tail):
        entry["toolUseResult"] = True  # a tool result whose block type is out of sight
    if not isinstance(entry.get("uuid"), str):
        found = re.findall(r'"uuid"\s*:\s*"([0-9A-Za-z-]{1,64})"', tail)
        if found:
            entry["uuid"] = found[-1]
    return entry



def _assistant_texts(entry: dict[str, Any]) -> list[str]:
    content = message_content(entry)
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return text_blocks(content)



# Compiled on first use (``re`` keeps it): only a Stop with tags reads a line's time.
_STAMP = r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?(?:Z|\+00:?00)"


def epoch_ms(stamp: object) -> int | None:
    """Milliseconds since the epoch of a line's UTC ``timestamp`` (``2026-02-12T16:02:27.718Z``).

    None for anything else (no ``datetime`` import on the Stop path).
    """
    found = re.fullmatch(_STAMP, stamp) if isinstance(stamp, str) else None
    if found is None:
        return None
    year, month, day, hour, minute, second = (int(g) for g in found.groups()[:6])
    if not (1 <= month <= 12 and 1 <= day <= 31 and hour < 24 and minute < 60 and second < 61):
        return None
    # days from 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil)
    year -= month <= 2
    era = year // 400
    yoe = year - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    days = era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468
    millis = int((found.group(7) or "0")[:3].ljust(3, "0"))
    return ((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + millis


def _line_id(entry: dict[str, Any], line: bytes) -> str:
    """The line's ``uuid``, or a digest of its bytes (stable across reads, unlike a line number)."""
    uuid = entry.get("uuid")
    if isinstance(uuid, str):
        return uuid
    import hashlib

    return "sha1-" + hashlib.sha1(line, usedforsecurity=False).hexdigest()[:16]


def read_last_turn(path: Path, *, max_scan: int = MAX_SCAN_BYTES,
                   max_line: int = MAX_LINE_BYTES, timeout: float | None = None) -> Turn:
    """The assistant text blocks since the last real user prompt, oldest first.

    Or since the end of the previous turn, see the module docstring.

    Sidechain (subagent) lines, thinking and tool_use blocks and tool results are ignored;
    ``<system-reminder>`` text is kept (the tag parser masks it after code). Duplicate lines
    (same ``uuid``, or same ``message.id`` and text) count once. A missing or unreadable
    transcript is an empty turn.

    Args:
        path: The transcript file.
        max_scan: The most bytes read from its end.
        max_line: The longest line parsed whole.
        timeout: Seconds the reading may take (``CTX_TRANSCRIPT_TIMEOUT``); past them it
            stops after the current block and the turn is marked ``timed_out``. None: no limit.

    Returns:
        The turn.
    """
    deadline = time.monotonic() + timeout if timeout is not None else None
    fd = open_regular(path)
    if fd is None:
        return Turn([], None)
    timed_out = False
    prompt_uuid = None
    seen_uuids: set[str] = set()
    seen_texts: set[tuple[str, str]] = set()
    found: list[TextBlock] = []
    files: list[str] = []
    talked = False  # a user or assistant line was met (so a turn end met now is not ours)
    try:
        size = os.fstat(fd).st_size
        for line in iter_lines_reversed(fd, size, max_scan=max_scan, max_line=max_line,
                                        long_lines=True, deadline=deadline):
            if isinstance(line, LongLine):
                # Only its kind can be known: a typed prompt still opens the turn.
                entry = _long_entry(line)
                if entry is None or entry.get("isSidechain") is True:
                    continue
                talked = True
                if entry.get("type") == "user" and is_real_prompt(entry, cut=True):
                    prompt_uuid = _line_id(entry, line.head + line.tail + str(line.size).encode())
                    break
                continue
            entry = parse_line(line) if line else None
            if entry is None or entry.get("isSidechain") is True:
                continue
            kind = entry.get("type")
            uuid = _line_id(entry, line)
            if kind == "system" and entry.get("subtype") in TURN_END:
                # The previous turn ended here. The end line of this very turn (written
                # before this hook ran, with nothing after it) does not count.
                if talked:
                    prompt_uuid = uuid
                    break
                continue
            if kind in ("user", "assistant"):
                talked = True
            if kind == "user" and is_real_prompt(entry):
                prompt_uuid = uuid
                break
            if kind != "assistant" or uuid in seen_uuids:
                continue
            seen_uuids.add(uuid)
            _tool_files(entry, files)
            message = entry.get("message")
            msg_id = message.get("id") if isinstance(message, dict) else None
            texts = _assistant_texts(entry)
            at_ms = epoch_ms(entry.get("timestamp")) if any("<ctx:" in t for t in texts) else None
            for index in range(len(texts) - 1, -1, -1):
                # Kept whole: the tag parser masks code first, then reminders (tags.py).
                text = sanitize_text(texts[index])
                marker = (str(msg_id), text)
                if not text.strip() or (msg_id and marker in seen_texts):
                    continue
                seen_texts.add(marker)
                found.append(TextBlock(f"{uuid}:{index}", text, at_ms))
    except OSError:
        pass
    except _Deadline:
        timed_out = True
    finally:
        os.close(fd)
    found.reverse()
    return Turn(found, prompt_uuid, timed_out, tuple(files))


def merge_final_message(turn: Turn, final: str | None) -> list[TextBlock]:
    """The turn's blocks plus Stop's ``last_assistant_message`` when the transcript lags.

    It lags when it does not hold that message yet (claude-code.md §1.1: the transcript is written
    asynchronously; ``last_assistant_message`` holds only the final message).
    """
    blocks = list(turn.blocks)
    if not final or not final.strip():
        return blocks
    final = sanitize_text(final)
    want = strip_reminders(final).strip()  # compared without reminders, kept whole
    joined = "\n".join(strip_reminders(b.text).strip() for b in blocks)
    if want and want not in joined:
        blocks.append(TextBlock("last_assistant_message", final))
    return blocks
