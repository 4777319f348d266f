"""Reading the last assistant turn of a Claude Code transcript (JSONL), from the end.

The real format (claude-code.md §4): one content block per line, several lines per
``message.id``, tool results as ``user`` lines, ``thinking`` / ``tool_use`` blocks,
compaction boundaries, summaries, meta lines, attachments and many other line types.
A turn is every assistant ``text`` block written since the last *real* user prompt
(tool results, meta lines, compaction summaries and system-injected prompts such as
``<task-notification>`` do not open a turn).

The file is read backwards in blocks with ``pread``, so a 200 MB transcript costs what
its last turn costs. Bounded everywhere: only regular files are opened (a FIFO or a
device never blocks or streams forever), at most ``MAX_SCAN_BYTES`` are read, and a
line longer than ``MAX_LINE_BYTES`` is skipped unparsed. A line that does not parse
(cut off, binary, invalid JSON) is skipped. Never raises for a bad transcript.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from ctxstore.claude.inject import sanitize_text

__all__ = ["MAX_SCAN_BYTES", "MAX_LINE_BYTES", "TextBlock", "Turn", "read_last_turn",
           "iter_lines_reversed", "merge_final_message"]

MAX_SCAN_BYTES = 64 << 20
MAX_LINE_BYTES = 8 << 20
_BLOCK = 64 << 10
# Text that the harness, not the human, puts in a user line (PI-15, claude-code.md §4.8).
_INJECTED_PREFIXES = ("<task-notification>", "<system-reminder>", "<local-command-stdout>",
                      "<local-command-stderr>", "<local-command-caveat>", "[Request interrupted",
                      "Caveat: The messages below were generated")
_SYSTEM_REMINDER_OPEN = "<system-reminder>"
_SYSTEM_REMINDER_CLOSE = "</system-reminder>"


# NamedTuples, not dataclasses: the dataclasses module alone costs a Stop ~1 ms.
class TextBlock(NamedTuple):
    """One assistant text block; ``key`` identifies the line it came from."""

    key: str
    text: str


class Turn(NamedTuple):
    """The last assistant turn: its text blocks in order, and the prompt that opened it."""

    blocks: list[TextBlock]
    prompt_uuid: str | None


def iter_lines_reversed(fd: int, size: int, *, max_scan: int = MAX_SCAN_BYTES,
                        max_line: int = MAX_LINE_BYTES) -> Iterator[bytes]:
    """Yield the lines of an open file from last to first (without newlines).

    Reads at most ``max_scan`` bytes from the end; lines longer than ``max_line`` are
    dropped (an empty line is yielded in their place, so callers may count them).
    """
    pos = size
    scanned = 0
    parts: list[bytes] = []  # pieces of the line being assembled, in reverse order
    part_len = 0
    skipping = False
    while pos > 0 and scanned < max_scan:
        step = min(_BLOCK, pos)
        pos -= step
        chunk = os.pread(fd, step, pos)
        scanned += len(chunk)
        if len(chunk) < step:  # the file shrank under us: stop, what we have is unsure
            return
        pieces = chunk.split(b"\n")
        # pieces[-1] continues the line after this chunk; pieces[0] continues before it.
        for piece in reversed(pieces[1:]):
            if skipping:
                skipping = False
                yield b""
            else:
                parts.append(piece)
                yield b"".join(reversed(parts))
            parts, part_len = [], 0
        if not skipping:
            parts.append(pieces[0])
            part_len += len(pieces[0])
            if part_len > max_line:
                parts, part_len, skipping = [], 0, True
    if pos == 0 and not skipping and parts:
        yield b"".join(reversed(parts))


def _parse(line: bytes) -> dict[str, Any] | None:
    line = line.strip()
    if line.startswith(b"\xef\xbb\xbf"):
        line = line[3:]
    if not line.startswith(b"{"):
        return None
    try:
        value = json.loads(line)
    except UnicodeDecodeError:
        try:
            value = json.loads(line.decode("utf-8", "replace"))
        except (ValueError, RecursionError):
            return None
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _content(entry: dict[str, Any]) -> Any:
    message = entry.get("message")
    return message.get("content") if isinstance(message, dict) else None


def _is_real_prompt(entry: dict[str, Any]) -> bool:
    if entry.get("isMeta") or entry.get("isCompactSummary") or entry.get("isVisibleInTranscriptOnly"):
        return False
    content = _content(entry)
    if isinstance(content, str):
        texts = [content]
    elif isinstance(content, list):
        if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
            return False
        texts = _text_blocks(content)
        if not texts:  # e.g. only an image: still the human speaking
            return bool(content)
    else:
        return False
    return any(t.strip() and not t.lstrip().startswith(_INJECTED_PREFIXES) for t in texts)


def _strip_reminders(text: str) -> str:
    while (start := text.find(_SYSTEM_REMINDER_OPEN)) != -1:
        end = text.find(_SYSTEM_REMINDER_CLOSE, start)
        if end == -1:
            return text[:start]
        text = text[:start] + text[end + len(_SYSTEM_REMINDER_CLOSE):]
    return text


def _assistant_texts(entry: dict[str, Any]) -> list[str]:
    content = _content(entry)
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return _text_blocks(content)


def _text_blocks(content: list[Any]) -> list[str]:
    """The texts of a message's ``{"type": "text", "text": ...}`` blocks, in order."""
    return [b["text"] for b in content
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)]


def _open_regular(path: Path) -> int | None:
    """Open ``path`` for reading only if it is a regular file (never block on a FIFO)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (OSError, ValueError):
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped between stat and open
            os.close(fd)
            return None
    except OSError:
        os.close(fd)
        return None
    return fd


def read_last_turn(path: Path, *, max_scan: int = MAX_SCAN_BYTES) -> Turn:
    """The assistant text blocks since the last real user prompt, oldest first.

    Sidechain (subagent) lines, thinking and tool_use blocks and tool results are ignored;
    ``<system-reminder>`` text is stripped. Duplicate lines (same ``uuid``, or same
    ``message.id`` and text) count once. A missing or unreadable transcript is an empty turn.
    """
    fd = _open_regular(path)
    if fd is None:
        return Turn([], None)
    prompt_uuid = None
    seen_uuids: set[str] = set()
    seen_texts: set[tuple[str, str]] = set()
    found: list[TextBlock] = []
    try:
        size = os.fstat(fd).st_size
        for line in iter_lines_reversed(fd, size, max_scan=max_scan):
            entry = _parse(line) if line else None
            if entry is None or entry.get("isSidechain") is True:
                continue
            kind = entry.get("type")
            uuid = entry.get("uuid")
            if not isinstance(uuid, str):  # stable across reads, unlike a line number
                import hashlib

                uuid = "sha1-" + hashlib.sha1(line).hexdigest()[:16]
            if kind == "user" and _is_real_prompt(entry):
                prompt_uuid = uuid
                break
            if kind != "assistant" or uuid in seen_uuids:
                continue
            seen_uuids.add(uuid)
            message = entry.get("message")
            msg_id = message.get("id") if isinstance(message, dict) else None
            texts = _assistant_texts(entry)
            for index in range(len(texts) - 1, -1, -1):
                text = sanitize_text(_strip_reminders(texts[index]))
                marker = (str(msg_id), text)
                if not text.strip() or (msg_id and marker in seen_texts):
                    continue
                seen_texts.add(marker)
                found.append(TextBlock(f"{uuid}:{index}", text))
    except OSError:
        pass
    finally:
        os.close(fd)
    found.reverse()
    return Turn(found, prompt_uuid)


def merge_final_message(turn: Turn, final: str | None) -> list[TextBlock]:
    """The turn's blocks plus Stop's ``last_assistant_message`` when the transcript lags
    and does not hold it yet (claude-code.md §1.1: the transcript is written
    asynchronously; ``last_assistant_message`` holds only the final message)."""
    blocks = list(turn.blocks)
    if not final or not final.strip():
        return blocks
    final = sanitize_text(_strip_reminders(final))
    want = final.strip()
    joined = "\n".join(b.text.strip() for b in blocks)
    if want and want not in joined:
        blocks.append(TextBlock("last_assistant_message", final))
    return blocks
