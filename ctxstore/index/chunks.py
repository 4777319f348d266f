"""How a file is cut into retrieval chunks (the rows of ``chunks`` and ``chunks_fts``).

Chunks are at symbol granularity: one per top-level definition (a class over
``CLASS_SPLIT_TOKENS`` is split into a header chunk and one chunk per method), plus one
module-header chunk for the lines outside them; a file without symbols (no extractor, or
ingested without ``--extract-semantics``) gets windows of ``WINDOW_LINES`` lines. Pure: no
SQL; ``index.code`` stores what this returns.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ctxstore.index.inflate import inflate
from ctxstore.records import dataclass
from ctxstore.tokens import estimate_tokens

if TYPE_CHECKING:  # index.codedb reads chunks on every connection: no model import for that
    from ctxstore.model.code import CodeSymbol

__all__ = ["Chunk", "chunk_file", "chunk_text", "pack_text", "unpack_lines", "WINDOW_LINES",
           "CLASS_SPLIT_TOKENS"]

# zlib level of a file's text in ``file_text``: 6 compresses source code about 3.5 times; the
# levels above it gain under 2% for twice the time.
TEXT_LEVEL = 6

WINDOW_LINES = 60
CLASS_SPLIT_TOKENS = 1500
# Symbols split into their children when larger than CLASS_SPLIT_TOKENS: a class into its
# methods, a Markdown section into its subsections.
_CONTAINERS = frozenset({"class", "impl", "trait", "interface", "struct", "enum", "heading"})


@dataclass(frozen=True, slots=True)
class Chunk:
    """A piece of a file for full-text retrieval."""

    qualname: str | None
    kind: str
    start_line: int
    end_line: int
    text: str
    # The lines the text is made of when they are not all of start_line..end_line (a module
    # header around its definitions): "a-b,c-d", 1-based and inclusive; None when they are.
    spans: str | None = None


def chunk_file(text: str, symbols: Sequence[CodeSymbol]) -> list[Chunk]:
    """Cut a file into retrieval chunks (see the module docstring).

    Args:
        text: The file's text.
        symbols: Its symbols, in order of appearance (none: line windows).

    Returns:
        The chunks in file order, the module header first.
    """
    lines = text.splitlines(keepends=True)
    if not lines:
        return []
    if not symbols:
        return [Chunk(None, "window", i + 1, min(i + WINDOW_LINES, len(lines)),
                      "".join(lines[i:i + WINDOW_LINES])) for i in range(0, len(lines), WINDOW_LINES)]
    modules = {s.qualname for s in symbols if s.kind == "module"}
    top = [s for s in symbols if s.kind != "module" and (s.parent is None or s.parent in modules)]
    covered = [False] * len(lines)
    out: list[Chunk] = []
    children_of: dict[str, list[CodeSymbol]] = {}  # once: a scan per symbol was quadratic
    for s in symbols:
        if s.parent is not None:
            children_of.setdefault(s.parent, []).append(s)

    def take(sym: CodeSymbol, start: int, end: int, kind: str) -> None:
        end = min(end, len(lines))
        for i in range(start - 1, end):
            covered[i] = True
        out.append(Chunk(sym.qualname, kind, start, end, "".join(lines[start - 1:end])))

    def place(sym: CodeSymbol) -> None:
        """One chunk for ``sym``, or, for a large container, its header and its children."""
        if sym.start_line > len(lines) or any(covered[sym.start_line - 1:sym.end_line]):
            return
        body = "".join(lines[sym.start_line - 1:sym.end_line])
        children = children_of.get(sym.qualname, [])
        if sym.kind in _CONTAINERS and children and estimate_tokens(body) > CLASS_SPLIT_TOKENS:
            first = min(c.start_line for c in children)
            if first > sym.start_line:
                take(sym, sym.start_line, first - 1, "header")
            for child in children:
                place(child)  # a large section's subsections split in turn
            for i in range(sym.start_line - 1, min(sym.end_line, len(lines))):
                covered[i] = True  # what lies between methods belongs to the class
        elif sym.kind == "heading" and estimate_tokens(body) > CLASS_SPLIT_TOKENS:
            # A long section with no subsections (a table, a log): its lines in windows.
            end = min(sym.end_line, len(lines))
            for start in range(sym.start_line, end + 1, WINDOW_LINES):
                take(sym, start, min(start + WINDOW_LINES - 1, end), sym.kind)
        else:
            take(sym, sym.start_line, sym.end_line, sym.kind)

    for sym in top:
        place(sym)
    rest = [i for i, c in enumerate(covered) if not c]
    header = "".join(lines[i] for i in rest)
    if header.strip():
        module = next(iter(sorted(modules)), None)
        out.insert(0, Chunk(module, "module", rest[0] + 1, rest[-1] + 1, header, _spans(rest)))
    out.sort(key=lambda c: (c.kind != "module", c.start_line))
    return out


def _spans(rest: list[int]) -> str | None:
    """``Chunk.spans`` of the lines at the (sorted, 0-based) indexes ``rest``; None if contiguous."""
    if rest[-1] - rest[0] + 1 == len(rest):
        return None
    parts: list[str] = []
    start = prev = rest[0]
    for i in rest[1:]:
        if i != prev + 1:
            parts.append(f"{start + 1}-{prev + 1}")
            start = i
        prev = i
    parts.append(f"{start + 1}-{prev + 1}")
    return ",".join(parts)


def chunk_text(lines: Sequence[str], start_line: int, end_line: int, spans: str | None) -> str:
    """A chunk's text made again from its file's lines (``str.splitlines(keepends=True)``).

    Gives ``Chunk.text`` back from the chunk's ``start_line``, ``end_line`` and ``spans``.

    Raises:
        ValueError: if ``spans`` is not what ``chunk_file`` writes.
    """
    if spans is None:
        return "".join(lines[start_line - 1:end_line])
    out: list[str] = []
    for part in spans.split(","):
        first, _, last = part.partition("-")
        out.extend(lines[int(first) - 1:int(last)])
    return "".join(out)


def pack_text(text: str) -> bytes:
    """A file's text as ``file_text`` keeps it: UTF-8, zlib-compressed."""
    return zlib.compress(text.encode("utf-8", "surrogatepass"), TEXT_LEVEL)


def unpack_lines(data: bytes, size: int) -> list[str]:
    """The lines of a text ``pack_text`` made, as ``chunk_file`` cut them.

    Args:
        data: The compressed text.
        size: Its length in UTF-8 (``files.byte_count``): no more is ever decompressed.

    Raises:
        zlib.error, UnicodeDecodeError: if ``data`` is not such a text, or not of that size.
    """
    raw, whole = inflate(data, max(size, 0) + 1)
    if len(raw) != size or not whole:
        raise zlib.error(f"the text is not the {size} bytes indexed")
    return raw.decode("utf-8", "surrogatepass").splitlines(keepends=True)
