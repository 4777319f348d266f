"""Markdown extraction: ATX headings as symbols; the second real ``Extractor``.

Each ``#`` to ``######`` heading outside a fenced code block is a ``heading`` symbol
whose span runs to the next heading of the same or a higher level (its section). Its
qualified name is the document (the path) and the titles of its enclosing headings,
joined with ``/`` (``docs/x.md#Install/Linux``); a repeated title under one parent gets
``#2``, ``#3``... A ``Defines`` relation (high confidence) joins each section to the
enclosing one. Pure, and it never raises.
"""

from __future__ import annotations

import re

from ctxstore.code.languages import (
    MAX_SOURCE_BYTES,
    Evidence,
    Extraction,
    Relation,
    Span,
    Symbol,
    line_starts,
)

__all__ = ["MarkdownExtractor"]

_BLANKS = b" \t"


def _heading(line: bytes) -> tuple[int, bytes] | None:
    """The level and raw title of an ATX heading line, or None.

    Up to three spaces, one to six ``#``, then the end or a blank and the title; a closing
    run of ``#`` after a blank and the blanks around the title are not part of it. Written
    out, not as the regex it replaces (``.*?`` before optional blanks: quadratic in a line of
    blanks), and it answers as that regex did.
    """
    body = line[:-2] if line.endswith(b"\r\n") else line[:-1] if line[-1:] in (b"\n", b"\r") else line
    text = body.lstrip(b" ")
    if len(body) - len(text) > 3:
        return None
    level = len(text) - len(text.lstrip(b"#"))
    rest = text[level:]
    if not 1 <= level <= 6 or (rest and rest[:1] not in (b" ", b"\t")):
        return None
    title = rest.strip(_BLANKS)
    bare = title.rstrip(b"#")
    if bare != title and bare[-1:] in (b" ", b"\t"):  # a closing run after a blank
        title = bare.rstrip(_BLANKS)
    return level, title

_FENCE = re.compile(rb" {0,3}(`{3,}|~{3,})")


class MarkdownExtractor:
    """Markdown files (implements ``Extractor``)."""

    name: str = "markdown"
    suffixes: tuple[str, ...] = (".md", ".markdown")

    def extract(self, path: str, text: str) -> Extraction:
        """Extract the heading outline; never raises.

        Args:
            path: The repository-relative path (the root of every qualified name).
            text: The document.

        Returns:
            The extraction (incomplete only when over ``MAX_SOURCE_BYTES``).
        """
        data = text.encode("utf-8", "surrogatepass")
        if len(data) > MAX_SOURCE_BYTES:
            return Extraction(self.name, complete=False)
        starts = line_starts(data)
        lines = data.splitlines(keepends=True)
        root = path or "<document>"
        headings: list[tuple[int, int, str]] = []  # (line index, level, title)
        fence: bytes | None = None
        for i, line in enumerate(lines):
            opener = _FENCE.match(line)
            if fence is not None:
                if opener and opener.group(1)[:1] == fence[:1] and len(opener.group(1)) >= len(fence):
                    fence = None
                continue
            if opener:
                fence = opener.group(1)
                continue
            found = _heading(line)
            if found is not None:
                level, raw = found
                title = raw.decode("utf-8", "replace").strip() or "(untitled)"
                headings.append((i, level, title))
        # A section ends at the next heading of its level or a higher one: one pass with a
        # stack of the open sections (a scan ahead from each was quadratic: 100,000
        # headings took minutes).
        ends = [len(lines)] * len(headings)
        open_: list[int] = []
        for n, (_i, level, _title) in enumerate(headings):
            while open_ and headings[open_[-1]][1] >= level:
                ends[open_.pop()] = headings[n][0]
            open_.append(n)
        symbols: list[Symbol] = []
        relations: list[Relation] = []
        taken: set[str] = set()
        next_k: dict[str, int] = {}  # the next "#k" to try per repeated name
        stack: list[tuple[int, str]] = []  # (level, qualname) of the enclosing sections
        for n, (i, level, title) in enumerate(headings):
            end_i = ends[n]
            span = Span(starts[i], starts[end_i], i + 1, max(end_i, i + 1))
            while stack and stack[-1][0] >= level:
                stack.pop()
            parent = stack[-1][1] if stack else None
            base = f"{parent}/{title}" if parent else f"{root}#{title}"
            qualname, k = base, next_k.get(base, 2)
            while qualname in taken:
                qualname, k = f"{base}#{k}", k + 1
            next_k[base] = k
            taken.add(qualname)
            symbols.append(Symbol(qualname, title, "heading", span, parent))
            if parent is not None:
                relations.append(Relation("Defines", parent, qualname,
                                          Evidence("parser", span, "high")))
            stack.append((level, qualname))
        return Extraction(self.name, tuple(symbols), tuple(relations))
