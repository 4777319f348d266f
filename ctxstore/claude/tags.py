"""``<ctx:*>`` command tags: finding them in assistant text, and escaping them in output.

The grammar is exact ASCII: ``<ctx:NAME attr="v" attr='v'/>`` or
``<ctx:NAME attr="v">content</ctx:NAME>``, NAME a key of ``ATTRIBUTES``, attributes
``[a-z_]+`` each given at most once. Tags are looked for only in prose: text inside fenced
code (``` or ~~~, closed or not), inline code spans, indented code blocks, blockquotes
and HTML comments is data, never a command (RELIABILITY.md PI-01..PI-04, PI-11). The
parser never raises; what it cannot accept comes back as a ``TagProblem``.

Rules where a choice had to be made (documented in docs/hooks.md):
- each text block is parsed on its own, so a tag split across two blocks is not a tag;
- a tag whose content holds another ``<ctx:`` is unclosed (rejected); parsing resumes
  at the inner tag;
- content-less commands (recall, status, link, ...) may omit the ``/`` of ``/>``.

This module must stay pure (no store, no I/O): hooks call it on every Stop.
"""

from __future__ import annotations

import bisect
import re
from typing import NamedTuple

from ctxstore.claude.inject import escape_tags

__all__ = ["ATTRIBUTES", "Command", "TagProblem", "parse_commands", "mask_code"]

# name -> the attributes it accepts (anything else is rejected: PI-13).
ATTRIBUTES: dict[str, frozenset[str]] = {
    "remember": frozenset({"type", "tags"}),
    "recall": frozenset({"query", "limit"}),
    "summarize": frozenset({"nodes", "archive", "tags"}),
    "link": frozenset({"from", "to", "type"}),
    "status": frozenset(),
    "task": frozenset({"name", "action", "summarize"}),
    "expand": frozenset({"node"}),
    "supersede": frozenset({"old", "new"}),
    "forget": frozenset({"id", "node"}),
}
_NEEDS_CONTENT = frozenset({"remember", "summarize"})

_OPEN = re.compile(r"<ctx:([a-z]+)((?:[ \t\r\n]+[a-z_]+=(?:\"[^\"]*\"|'[^']*'))*)[ \t\r\n]*(/?)>")
_ATTR = re.compile(r"([a-z_]+)=(?:\"([^\"]*)\"|'([^']*)')")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_QUOTE = re.compile(r"^ {0,3}>")
_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.S)
_TICKS = re.compile(r"`+")
_NOT_NEWLINE = re.compile(r"[^\n]")
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")


class Command(NamedTuple):
    """One accepted tag: its name, attributes, trimmed content and raw text."""

    name: str
    attrs: dict[str, str]
    content: str
    raw: str


class TagProblem(NamedTuple):
    """A tag that was seen but not accepted, and why (reported via ``systemMessage``)."""

    snippet: str
    reason: str


def _blank(text: str, ranges: list[tuple[int, int]]) -> str:
    """``text`` with each range's characters, except line breaks, replaced by spaces."""
    out: list[str] = []
    pos = 0
    for start, end in ranges:
        if end <= pos:
            continue
        start = max(start, pos)
        out.append(text[pos:start])
        out.append(_NOT_NEWLINE.sub(" ", text[start:end]))
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _block_ranges(text: str) -> list[tuple[int, int]]:
    """Fenced code, blockquote lines and indented code blocks, line by line."""
    ranges: list[tuple[int, int]] = []
    fence: tuple[str, int] | None = None
    prev_blank = True
    prev_code = False
    pos = 0
    for line in text.splitlines(keepends=True):
        end = pos + len(line)
        body = line.rstrip("\r\n")
        blank = not body.strip()
        code = False
        if fence is not None:
            ranges.append((pos, end))
            m = _FENCE.match(body)
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= fence[1] and not m.group(2).strip():
                fence = None
        elif (m := _FENCE.match(body)) and not (m.group(1)[0] == "`" and "`" in m.group(2)):
            fence = (m.group(1)[0], len(m.group(1)))
            ranges.append((pos, end))
        elif _QUOTE.match(body):
            ranges.append((pos, end))
        elif not blank and (body.startswith("    ") or body[:1] == "\t") and (prev_blank or prev_code):
            code = True
            ranges.append((pos, end))
        prev_blank, prev_code = blank, code or (prev_code and blank)
        pos = end
    return ranges


def _inline_ranges(text: str) -> list[tuple[int, int]]:
    """Inline code spans: a run of N backticks up to the next run of exactly N, within one
    paragraph; an unmatched run is literal (CommonMark)."""
    breaks = [m.start() for m in _PARAGRAPH_BREAK.finditer(text)] + [len(text)]
    ranges: list[tuple[int, int]] = []
    closers: dict[int, re.Pattern[str]] = {}
    pos = 0
    while (m := _TICKS.search(text, pos)) is not None:
        limit = breaks[bisect.bisect_left(breaks, m.end())]
        n = len(m.group())
        if n not in closers:
            closers[n] = re.compile(r"(?<!`)`{%d}(?!`)" % n)
        closing = closers[n].search(text, m.end(), limit)
        if closing is None:
            pos = m.end()
            continue
        ranges.append((m.start(), closing.end()))
        pos = closing.end()
    return ranges


def mask_code(text: str) -> str:
    """``text`` with code, quotes and HTML comments replaced by spaces (same length and
    line breaks), so tag positions in the result are positions in ``text``."""
    masked = _blank(text, _block_ranges(text))
    masked = _blank(masked, [m.span() for m in _COMMENT.finditer(masked)])
    return _blank(masked, _inline_ranges(masked))


def _snippet(text: str) -> str:
    one = " ".join(text.split())
    return escape_tags(one if len(one) <= 60 else one[:57] + "...")


def _attrs(raw_attrs: str, name: str) -> tuple[dict[str, str], str | None]:
    attrs: dict[str, str] = {}
    for m in _ATTR.finditer(raw_attrs):
        key = m.group(1)
        if key in attrs:
            return {}, f"duplicate attribute {key!r}"
        if key not in ATTRIBUTES[name]:
            return {}, f"unknown attribute {key!r} for <ctx:{name}>"
        attrs[key] = m.group(2) if m.group(2) is not None else m.group(3)
    return attrs, None


def parse_commands(text: str) -> tuple[list[Command], list[TagProblem]]:
    """Find the command tags in one assistant text block.

    Returns:
        The accepted commands in order, and the problems (unknown, malformed, unclosed or
        empty tags) to report.
    """
    if "<ctx:" not in text:
        return [], []
    masked = mask_code(text)
    commands: list[Command] = []
    problems: list[TagProblem] = []
    pos = 0
    while (start := masked.find("<ctx:", pos)) != -1:
        m = _OPEN.match(masked, start)
        if m is None:
            end = masked.find(">", start)
            problems.append(TagProblem(_snippet(text[start:end + 1 if end != -1 else start + 40]),
                                       "malformed tag"))
            pos = start + 5
            continue
        name = m.group(1)
        if name not in ATTRIBUTES:
            problems.append(TagProblem(_snippet(text[start:m.end()]), f"unknown command {name!r}"))
            pos = m.end()
            continue
        # Attribute values come from the original text at the same span (masking keeps length).
        attrs, why = _attrs(text[m.start(2):m.end(2)], name)
        content, end = "", m.end()
        if not m.group(3):
            close = masked.find(f"</ctx:{name}>", m.end())
            inner = masked.find("<ctx:", m.end())
            if close == -1 or (inner != -1 and inner < close):
                if name in _NEEDS_CONTENT:
                    problems.append(TagProblem(_snippet(text[start:m.end()]), f"unclosed <ctx:{name}>"))
                    pos = m.end()
                    continue
            else:
                content = text[m.end():close].strip()
                end = close + len(f"</ctx:{name}>")
        raw = text[start:end]
        pos = end
        if why is not None:
            problems.append(TagProblem(_snippet(raw), why))
        elif name in _NEEDS_CONTENT and not content:
            problems.append(TagProblem(_snippet(raw), f"empty <ctx:{name}> ignored"))
        else:
            commands.append(Command(name, attrs, content, raw))
    return commands, problems
