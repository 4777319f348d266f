"""Languages: the ``Extractor`` protocol, the records it returns, and the registry.

An extractor turns one file's text into an ``Extraction``: symbols (qualified name,
kind, span) and relations between them (a spec 002 §9.2 label, with evidence as §3.5
and §9.1 ask: the tool, the span, a confidence). It is pure: no I/O, no index, no
store; the code-intelligence ingest (later) stores what it returns. Every extractor
honours one contract, checked for each registered one by
``tests/contracts/test_extractors.py``: deterministic output, spans inside the file,
qualified names unique per file, and no exception on any input (garbage, binary,
huge): a file it cannot read fully gives an empty or partial extraction with
``complete=False``.

A new language plugs in here: implement ``Extractor`` and ``register`` it. The
built-in extractors (``python``, ``markdown``) are imported on the first registry
lookup, so importing this module stays cheap.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Literal, Protocol, runtime_checkable

__all__ = [
    "MAX_SOURCE_BYTES",
    "SymbolKind",
    "Confidence",
    "Span",
    "Symbol",
    "Evidence",
    "Relation",
    "Extraction",
    "Extractor",
    "register",
    "extractor_for",
    "registered",
    "span_of_lines",
    "line_starts",
]

# Files over this many UTF-8 bytes are not parsed (an incomplete, empty extraction):
# a hook must never spend seconds on one generated file.
MAX_SOURCE_BYTES = 4 << 20

SymbolKind = Literal["module", "class", "function", "method", "heading"]
Confidence = Literal["high", "medium", "low"]


@dataclass(frozen=True, slots=True)
class Span:
    """A region of a file: UTF-8 byte offsets (end exclusive) and 1-based lines.

    Attributes:
        start_byte: Offset of the first byte.
        end_byte: Offset just past the last byte.
        start_line: Line of ``start_byte`` (1-based).
        end_line: Line of the last byte (1-based).
    """

    start_byte: int
    end_byte: int
    start_line: int
    end_line: int


@dataclass(frozen=True, slots=True)
class Symbol:
    """A named definition in a file.

    Attributes:
        qualname: The name, qualified within the file's language (unique per file).
        name: The bare name as written.
        kind: What it is.
        span: Where it is, its body included.
        parent: The qualified name of the enclosing symbol, None for the outermost.
    """

    qualname: str
    name: str
    kind: SymbolKind
    span: Span
    parent: str | None


@dataclass(frozen=True, slots=True)
class Evidence:
    """Why a relation is believed (spec 002 §3.5, §9.1 ``Evidence``).

    Attributes:
        tool: What produced it (``"parser"`` for a syntax tree).
        span: The text that supports it.
        confidence: ``high`` (syntax says so), ``medium`` (resolved by name within the
            file), ``low`` (a name as written, not resolved).
    """

    tool: str
    span: Span
    confidence: Confidence


@dataclass(frozen=True, slots=True)
class Relation:
    """A labelled relation from a symbol of this file to a name.

    Attributes:
        label: A spec 002 §9.2 label (``ctxstore.model.vocab.CODE_EDGE_LABELS``).
        source: Qualified name of a symbol of this file.
        target: A qualified name of this file, or a name as the file writes it.
        evidence: Tool, span and confidence.
    """

    label: str
    source: str
    target: str
    evidence: Evidence


@dataclass(frozen=True, slots=True)
class Extraction:
    """What an extractor found in one file.

    Attributes:
        language: The extractor's name.
        symbols: In order of appearance.
        relations: In order of appearance.
        complete: False when the file could not be read fully (syntax error, too
            large, not text): what is here is right, but something may be missing.
    """

    language: str
    symbols: tuple[Symbol, ...] = ()
    relations: tuple[Relation, ...] = ()
    complete: bool = True


@runtime_checkable
class Extractor(Protocol):
    """Extracts symbols and relations from the files of one language."""

    name: str
    suffixes: tuple[str, ...]

    def extract(self, path: str, text: str) -> Extraction:
        """Extract one file; never raises.

        Args:
            path: The file's repository-relative POSIX path (names the module).
            text: Its content, decoded.

        Returns:
            The extraction; ``complete=False`` when it is empty or partial.
        """
        ...


def line_starts(data: bytes) -> list[int]:
    """Return the byte offset of each line's start (``\\n``, ``\\r\\n`` or ``\\r`` end lines).

    Args:
        data: The file's UTF-8 bytes.

    Returns:
        Offsets, the first being 0.
    """
    starts = [0]
    pos = 0
    for line in data.splitlines(keepends=True):
        pos += len(line)
        starts.append(pos)
    return starts


def span_of_lines(starts: list[int], size: int, start_line: int, start_col: int,
                  end_line: int, end_col: int) -> Span:
    """Build a span from 1-based lines and byte columns, clamped inside the file.

    Args:
        starts: ``line_starts`` of the file.
        size: The file's length in bytes.
        start_line: First line (1-based).
        start_col: Byte column on it.
        end_line: Last line (1-based).
        end_col: Byte column just past the end on it.

    Returns:
        The span.
    """
    def offset(line: int, col: int) -> int:
        base = starts[min(max(line, 1), len(starts)) - 1]
        return min(max(base + col, 0), size)

    start = offset(start_line, start_col)
    end = max(offset(end_line, end_col), start)
    return Span(start, end, max(start_line, 1), max(end_line, start_line, 1))


_BY_NAME: dict[str, Extractor] = {}
_BY_SUFFIX: dict[str, Extractor] = {}
_loaded = False


def _load_builtins() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    from ctxstore.code.markdown import MarkdownExtractor
    from ctxstore.code.python import PythonExtractor

    for extractor in (PythonExtractor(), MarkdownExtractor()):
        if extractor.name not in _BY_NAME:
            register(extractor)


def register(extractor: Extractor, *, replace: bool = False) -> None:
    """Make ``extractor`` the one for its language name and file suffixes.

    Args:
        extractor: The extractor.
        replace: Take over a name or suffix already registered (otherwise refused).

    Raises:
        ValueError: if its name or a suffix is taken and ``replace`` is False, or a
            suffix does not start with a dot.
    """
    _load_builtins()
    for suffix in extractor.suffixes:
        if not suffix.startswith(".") or suffix != suffix.lower():
            raise ValueError(f"suffix {suffix!r} must be a lower-case '.ext'")
    if not replace:
        if extractor.name in _BY_NAME and _BY_NAME[extractor.name] is not extractor:
            raise ValueError(f"an extractor named {extractor.name!r} is registered")
        taken = [s for s in extractor.suffixes if s in _BY_SUFFIX
                 and _BY_SUFFIX[s] is not extractor]
        if taken:
            raise ValueError(f"suffixes {taken} already have an extractor")
    old = _BY_NAME.get(extractor.name)
    if old is not None:
        for suffix in old.suffixes:
            if _BY_SUFFIX.get(suffix) is old:
                del _BY_SUFFIX[suffix]
    _BY_NAME[extractor.name] = extractor
    for suffix in extractor.suffixes:
        _BY_SUFFIX[suffix] = extractor


def extractor_for(path: str | PurePosixPath) -> Extractor | None:
    """Return the extractor for a file, by its suffix (case-insensitive), or None.

    Args:
        path: The file's path.

    Returns:
        The registered extractor, or None when no language claims the suffix.
    """
    _load_builtins()
    return _BY_SUFFIX.get(PurePosixPath(path).suffix.lower())


def registered() -> tuple[Extractor, ...]:
    """Return every registered extractor, sorted by name.

    Returns:
        The extractors.
    """
    _load_builtins()
    return tuple(_BY_NAME[name] for name in sorted(_BY_NAME))
