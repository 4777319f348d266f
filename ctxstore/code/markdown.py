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

_HEADING = re.compile(rb" {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*\r?\n?\Z")
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
            m = _HEADING.match(line)
            if m:
                title = (m.group(2) or b"").decode("utf-8", "replace").strip() or "(untitled)"
                headings.append((i, len(m.group(1)), title))
        symbols: list[Symbol] = []
        relations: list[Relation] = []
        taken: set[str] = set()
        stack: list[tuple[int, str]] = []  # (level, qualname) of the enclosing sections
        for n, (i, level, title) in enumerate(headings):
            end_i = next((j for j, lv, _ in headings[n + 1:] if lv <= level), len(lines))
            span = Span(starts[i], starts[end_i], i + 1, max(end_i, i + 1))
            while stack and stack[-1][0] >= level:
                stack.pop()
            parent = stack[-1][1] if stack else None
            base = f"{parent}/{title}" if parent else f"{root}#{title}"
            qualname, k = base, 2
            while qualname in taken:
                qualname, k = f"{base}#{k}", k + 1
            taken.add(qualname)
            symbols.append(Symbol(qualname, title, "heading", span, parent))
            if parent is not None:
                relations.append(Relation("Defines", parent, qualname,
                                          Evidence("parser", span, "high")))
            stack.append((level, qualname))
        return Extraction(self.name, tuple(symbols), tuple(relations))
