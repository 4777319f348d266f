"""``<ctx:*>`` command tags: finding them in assistant text, and escaping them in output.

The grammar is exact ASCII: ``<ctx:NAME attr="v" attr='v'/>`` or
``<ctx:NAME attr="v">content</ctx:NAME>``, NAME a key of ``ATTRIBUTES``, attributes
``[a-z_]+`` each given at most once. The parser never raises; what it cannot accept comes
back as a ``TagProblem``.

Where a tag counts (RELIABILITY.md PI-01..PI-04, PI-11; docs/hooks.md "Command tags"): a
tag is a command only where CommonMark shows its text as plain text of a paragraph or
heading (list items and table rows included). The text is parsed once, as it is, with
markdown-it (CommonMark); masks come from its token stream: the source lines of fenced
and indented code, HTML blocks and blockquotes (lazy continuation lines included, as
CommonMark counts them), and the source positions of inline code spans, inline HTML and
comments, images and link destinations. Everything else outside a paragraph or heading
(list markers, link reference definitions, ...) is masked too. Only on those masks are
``<system-reminder>`` sections looked for (both ends outside code, quotes and comments),
so a reminder mentioned in prose cannot un-fence a block, and an unclosed one hides
nothing. markdown-it is imported only for a text that holds ``<ctx:``.

Rules where a choice had to be made (documented in docs/hooks.md):
- each text block is parsed on its own, so a tag split across two blocks is not a tag;
- a tag whose content holds another ``<ctx:`` is unclosed (rejected); parsing resumes
  at the inner tag;
- content-less commands (recall, status, link, ...) may omit the ``/`` of ``/>``.

This module must stay pure (no store, no I/O): hooks call it on every Stop.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from ctxstore.claude.inject import escape_tags

__all__ = ["ATTRIBUTES", "Command", "TagProblem", "parse_commands", "mask_code"]

# name -> the attributes it accepts (anything else is rejected: PI-13).
ATTRIBUTES: dict[str, frozenset[str]] = {
    "remember": frozenset({"type", "tags", "scope"}),
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
# A name starts after a non-name character: from inside a run of letters the search would scan
# the rest of the run again at every position.
_ATTR = re.compile(r"(?<![a-z_])([a-z_]+)=(?:\"([^\"]*)\"|'([^']*)')")
_REMINDER_OPEN = "<system-reminder>"
_REMINDER_CLOSE = "</system-reminder>"
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_NOT_NEWLINE = re.compile(r"[^\r\n]")
# Position classes of the mask: prose, raw HTML (not a comment), anything else.
_TEXT, _HTML, _DATA = 0, 1, 2

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


_PARSER: Any = None


def _parser() -> Any:
    """The CommonMark parser, built once, whose inline rules record where they matched.

    The core ``inline`` rule is off: ``_classes`` parses each paragraph's inline content
    itself, with an ``env`` of its own, so the positions it records belong to that text.
    """
    global _PARSER
    if _PARSER is None:
        # ~20 ms to import (-X importtime; `import click` is ~11 ms) and ~4 ms to build:
        # paid only by a Stop whose text holds "<ctx:".
        from markdown_it import MarkdownIt

        md = MarkdownIt("commonmark")
        md.disable("inline")
        for name in ("backticks", "html_inline", "image", "link"):
            md.inline.ruler.at(name, _recording(name, md.inline.ruler.__rules__[
                md.inline.ruler.__find__(name)].fn))
        _PARSER = md
    return _PARSER


def _recording(name: str, rule: Any) -> Any:
    """``rule`` that, on a real (non-silent) match, notes the source range that is not prose.

    A code span, inline HTML, a whole image (its alt text is an attribute), or a link's
    ``](destination "title")`` (its label stays prose).
    """
    def run(state: Any, silent: bool) -> bool:
        start = state.pos
        ok: bool = rule(state, silent)
        if ok and not silent:
            if name == "link":
                label_end = state.md.helpers.parseLinkLabel(state, start, True)
                start = label_end if label_end >= 0 else start
            kind = _HTML if name == "html_inline" and not state.src.startswith("<!--", start) \
                else _DATA
            state.env["ctx_spans"].append((state.src, kind, start, state.pos))
        return ok
    return run


def _lines(text: str) -> list[tuple[int, int]]:
    """(start, end) of each line of ``text``, its line break not included.

    Line breaks as CommonMark counts them: CRLF, CR or LF.
    """
    out, pos = [], 0
    for m in _LINE_BREAK.finditer(text):
        out.append((pos, m.start()))
        pos = m.end()
    out.append((pos, len(text)))
    return out


def _line_offset(line: str, content: str, atx: bool) -> tuple[int, int] | None:
    """Where ``content`` (one line of a paragraph's or heading's inline text) sits in the source ``line``.

    Returns (source column of content column ``skip``, ``skip``), or None.

    markdown-it takes the line from after its container markers and indentation (a
    partly used tab becomes spaces), strips the paragraph's ends, and an ATX heading's
    ``#`` runs.
    """
    for piece, skip in ((content, 0), (content.lstrip(" \t"), len(content) - len(content.lstrip(" \t")))):
        if not piece:
            return None
        if atx:
            col = line.find("#")
            while 0 <= col < len(line) and line[col] == "#":
                col += 1
            while col < len(line) and line[col] in " \t":
                col += 1
            if col >= 0 and line.startswith(piece, col):
                return col, skip
            continue
        for body in (line, line.rstrip()):
            if body.endswith(piece):
                return len(body) - len(piece), skip
    return None


def _map_inline(text: str, lines: list[tuple[int, int]], first: int, last: int, content: str,
                atx: bool) -> list[tuple[int, int, int]]:
    """(content start, content end, source start) of each line of an inline token.

    The token spans source lines ``first``..``last - 1``; the lines come in order. Only a
    whitespace-only source line (which the paragraph's strip removed) may be passed over; at the
    first line that cannot be placed the mapping stops, so the rest stays masked (never guessed).
    """
    segments: list[tuple[int, int, int]] = []
    no, pos = first, 0
    for piece in content.split("\n"):
        found = None
        while no < last and found is None:
            start, end = lines[no]
            line = text[start:end].replace("\x00", "\ufffd")
            found = _line_offset(line, piece, atx)
            if found is None and line.strip():
                return segments
            no += 1
        if found is None:
            return segments
        col, skip = found
        segments.append((pos + skip, pos + len(piece), start + col))
        pos += len(piece) + 1
    return segments


def _paint(classes: bytearray, segments: list[tuple[int, int, int]], lo: int, hi: int,
           kind: int) -> None:
    """Set the class of content range [lo, hi) of an inline token, through its segments."""
    for c_start, c_end, s_start in segments:
        a, b = max(lo, c_start), min(hi, c_end)
        if a < b:
            classes[s_start + a - c_start:s_start + b - c_start] = bytes([kind]) * (b - a)


def _classes(text: str) -> bytearray:
    """The class (``_TEXT``, ``_HTML``, ``_DATA``) of every character of ``text``."""
    md = _parser()
    lines = _lines(text)
    env: dict[str, Any] = {}
    tokens = md.parse(text, env)
    classes = bytearray([_DATA]) * len(text)

    def whole_lines(first: int, last: int, kind: int) -> None:
        if first < len(lines):
            a, b = lines[first][0], lines[min(last, len(lines)) - 1][1]
            classes[a:b] = bytes([kind]) * (b - a)

    quotes: list[tuple[int, int]] = []
    previous = None
    for tok in tokens:
        if tok.type == "inline" and tok.map and previous is not None:
            if "ctx:" not in tok.content and "system-reminder" not in tok.content:
                previous = tok
                continue  # cannot hold a tag or a reminder end: left masked, not parsed
            atx = previous.type == "heading_open" and previous.markup.startswith("#")
            segments = _map_inline(text, lines, tok.map[0], tok.map[1], tok.content, atx)
            _paint(classes, segments, 0, len(tok.content), _TEXT)
            spans: list[tuple[str, int, int, int]] = []
            md.inline.parse(tok.content, md, {"references": env.get("references", {}),
                                              "ctx_spans": spans}, [])
            for src, kind, lo, hi in spans:
                if src is tok.content:  # not an image's alt text, parsed on its own
                    _paint(classes, segments, lo, hi, kind)
        elif tok.type in ("fence", "code_block") and tok.map:
            whole_lines(tok.map[0], tok.map[1], _DATA)
        elif tok.type == "html_block" and tok.map:
            comment = tok.content.lstrip(" \t").startswith("<!--")
            whole_lines(tok.map[0], tok.map[1], _DATA if comment else _HTML)
        elif tok.type == "blockquote_open" and tok.map:
            quotes.append((tok.map[0], tok.map[1]))
        previous = tok
    for first, last in quotes:  # last: a quote masks whatever it holds
        whole_lines(first, last, _DATA)
    _mask_reminders(text, classes)
    return classes


def _mask_reminders(text: str, classes: bytearray) -> None:
    """Mask each ``<system-reminder>`` section whose two ends are prose or raw HTML.

    A section runs from ``<system-reminder>`` to ``</system-reminder>``; an end in code, a quote or
    a comment does not count. An end without its pair is text like any other: it hides nothing.
    """
    pos = 0
    while (start := text.find(_REMINDER_OPEN, pos)) != -1:
        pos = start + len(_REMINDER_OPEN)
        if classes[start] == _DATA:
            continue
        close = text.find(_REMINDER_CLOSE, pos)
        while close != -1 and classes[close] == _DATA:
            close = text.find(_REMINDER_CLOSE, close + 1)
        if close == -1:
            return  # no usable closing tag after this one, nor after any later opening
        end = close + len(_REMINDER_CLOSE)
        classes[start:end] = bytes([_DATA]) * (end - start)
        pos = end


def mask_code(text: str) -> str:
    """``text`` with everything that is not prose replaced by spaces.

    Same length, line breaks kept, so tag positions in the result are positions in ``text``. Masked
    are code, quotes, HTML, comments and ``<system-reminder>`` sections, by CommonMark's rules.
    Paragraphs that hold no ``ctx:`` (so no tag) are masked whole, without parsing their inlines.
    """
    classes = _classes(text)
    out: list[str] = []
    pos = 0
    for m in re.finditer(rb"[^\x00]+", bytes(classes)):
        out.append(text[pos:m.start()])
        out.append(_NOT_NEWLINE.sub(" ", text[m.start():m.end()]))
        pos = m.end()
    out.append(text[pos:])
    return "".join(out)


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
    ahead: dict[str, int] = {}  # the next occurrence of a string found so far (-1: none left)

    def next_at(what: str, at: int) -> int:
        """``masked.find(what, at)``, each string's scan resumed, never restarted (linear)."""
        found = ahead.get(what)
        if found is None or (found != -1 and found < at):
            found = ahead[what] = masked.find(what, at)
        return found

    while (start := masked.find("<ctx:", pos)) != -1:
        m = _OPEN.match(masked, start)
        if m is None:
            end = next_at(">", start)
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
            close = next_at(f"</ctx:{name}>", m.end())
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
