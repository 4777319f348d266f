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

A new language plugs in here: implement ``Extractor`` (and optionally
``module_name``) and ``register`` it; ``docs/code.md`` "Languages" walks through it.
The built-in extractors (``python``, ``markdown``, ``rust``, ``javascript``,
``typescript``, ``go``) are imported when a file of their suffix is first looked up (all of
them by ``registered`` or ``register``), and the tree-sitter ones import their grammar on
first use, so importing this module stays cheap.
"""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Literal, Protocol, runtime_checkable

from ctxstore.records import dataclass

__all__ = [
    "MAX_SOURCE_BYTES",
    "SymbolKind",
    "Visibility",
    "Detail",
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
    "module_name",
    "span_of_lines",
    "path_suffix",
    "line_starts",
    "source_bytes",
    "one_line",
]

# Files over this many UTF-8 bytes are not parsed (an incomplete, empty extraction):
# a hook must never spend seconds on one generated file.
MAX_SOURCE_BYTES = 4 << 20

# spec 002 §7.2.3 ItemKind in snake_case, plus what Python, JS/TS, Go and Markdown need.
SymbolKind = Literal["module", "class", "function", "method", "heading", "struct", "enum", "trait",
                     "impl", "const", "static", "type_alias", "macro", "interface", "variable",
                     "field"]
# ``public|crate|super|private`` for Rust (§7.2.3 Visibility); ``public|private`` elsewhere.
Visibility = Literal["public", "crate", "super", "private"]
# Extra facts as ``(key, value)`` pairs in a fixed order, hashable (a tuple, not a dict).
Detail = tuple[tuple[str, str], ...]
Confidence = Literal["high", "medium", "low"]
CONFIDENCE_RANK: dict[str, int] = {"low": 0, "medium": 1, "high": 2}


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
        visibility: Who may use it (``Visibility``), None when the language has no rule.
        signature: Its declaration on one line (``def f(x: int) -> str``), None for
            modules and headings.
        detail: Extra facts as ``(key, value)`` pairs: a Rust impl's ``self_type`` and
            ``trait``, a ``mod x;`` declaration's ``declaration``.
    """

    qualname: str
    name: str
    kind: SymbolKind
    span: Span
    parent: str | None
    visibility: Visibility | None = None
    signature: str | None = None
    detail: Detail = ()


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
        source: Qualified name of a symbol of this file (the module's own for
            file-level imports).
        target: The best fully qualified language name the extractor can resolve: for
            ``Imports`` the imported module or item with relative imports made absolute
            (``pkg.sub.mod.Name``, ``ignore::walk::Walk``); for ``Calls`` and
            ``References`` a symbol of this file or an imported name expanded through the
            file's imports (confidence ``medium``), else the name as written (``low``).
        evidence: Tool, span and confidence.
        detail: Extra facts as ``(key, value)`` pairs: an import's ``import_kind`` (Rust
            ``single|glob|self|super|crate``; JS ``require|reexport``) and local ``alias``.
    """

    label: str
    source: str
    target: str
    evidence: Evidence
    detail: Detail = ()


@dataclass(frozen=True, slots=True)
class Extraction:
    """What an extractor found in one file.

    Attributes:
        language: The extractor's name.
        symbols: In order of appearance.
        relations: In order of appearance.
        complete: False when the file could not be read fully (syntax error, too
            large, not text): what is here is right, but something may be missing.
        dropped: Relations below the ``min_confidence`` the caller asked for, counted
            but not built (an extractor with ``filters_confidence``).
        note: Why it is incomplete, when the reason is not the usual one (a syntax error):
            the file's work budget ran out, for instance. None otherwise.
    """

    language: str
    symbols: tuple[Symbol, ...] = ()
    relations: tuple[Relation, ...] = ()
    complete: bool = True
    dropped: int = 0
    note: str | None = None


@runtime_checkable
class Extractor(Protocol):
    """Extracts symbols and relations from the files of one language.

    An extractor may also define ``module_name(path) -> str | None`` (the language's
    module name of a file; optional, so not a protocol member: ``module_name`` below
    calls it when present). One whose class sets ``filters_confidence = True`` takes a
    keyword ``min_confidence`` in ``extract``: relations below it are only counted
    (``Extraction.dropped``), which spares building what the ingest would drop.
    """

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


def module_name(path: str | PurePosixPath) -> str | None:
    """Return the language's qualified module name of a repository-relative path.

    An extractor may define ``module_name(path) -> str | None`` (optional, so not part
    of the ``Extractor`` protocol): ``src/werkzeug/http.py`` is ``werkzeug.http``,
    ``crates/ignore/src/walk.rs`` is ``ignore::walk``. The ingest maps modules to files
    with it and resolves ``Imports`` targets by their longest module prefix.

    Args:
        path: The file's repository-relative POSIX path.

    Returns:
        The module name, or None when no extractor claims the file or it names none.
    """
    extractor = extractor_for(path)
    namer = getattr(extractor, "module_name", None)
    if namer is None:
        return None
    name = namer(str(path))
    return name if isinstance(name, str) and name else None


def source_bytes(text: str) -> bytes | None:
    """Return a file's UTF-8 bytes (lone surrogates kept), or None when too large to parse.

    Args:
        text: The decoded file.

    Returns:
        The bytes every span indexes, None over ``MAX_SOURCE_BYTES``.
    """
    if len(text) > MAX_SOURCE_BYTES:
        return None
    data = text.encode("utf-8", "surrogatepass")
    return data if len(data) <= MAX_SOURCE_BYTES else None


def one_line(text: str, limit: int = 240) -> str:
    """Collapse a declaration to one line of at most ``limit`` characters (signatures).

    Args:
        text: The declaration as written, possibly over several lines.
        limit: The longest result; longer ones end with ``...``.

    Returns:
        Its words joined by single spaces.
    """
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit - 3] + "..."


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
# The built-in extractors by suffix: ``extractor_for`` imports only the one a file needs (a
# one-file re-index of Python code never imports the tree-sitter languages). A test checks
# this table against the extractors' own ``suffixes``.
_BUILTIN_BY_SUFFIX: dict[str, tuple[str, str]] = {
    **dict.fromkeys((".py", ".pyi"), ("ctxstore.code.python", "PythonExtractor")),
    **dict.fromkeys((".md", ".markdown"), ("ctxstore.code.markdown", "MarkdownExtractor")),
    ".rs": ("ctxstore.code.rust", "RustExtractor"),
    **dict.fromkeys((".js", ".mjs", ".cjs", ".jsx"),
                    ("ctxstore.code.javascript", "JavaScriptExtractor")),
    **dict.fromkeys((".ts", ".mts", ".cts", ".tsx"),
                    ("ctxstore.code.javascript", "TypeScriptExtractor")),
    ".go": ("ctxstore.code.go", "GoExtractor"),
}


def _builtin(module: str, cls: str) -> Extractor:
    import importlib

    return getattr(importlib.import_module(module), cls)()  # type: ignore[no-any-return]


def _load_builtin_for(suffix: str) -> None:
    """Register the built-in extractor of ``suffix`` unless its name or a suffix is taken."""
    spec = _BUILTIN_BY_SUFFIX.get(suffix)
    if spec is None or _loaded:
        return
    extractor = _builtin(*spec)
    if extractor.name not in _BY_NAME and not any(s in _BY_SUFFIX for s in extractor.suffixes):
        _BY_NAME[extractor.name] = extractor
        for each in extractor.suffixes:
            _BY_SUFFIX[each] = extractor


def _load_builtins() -> None:
    global _loaded
    if _loaded:
        return
    for spec in dict.fromkeys(_BUILTIN_BY_SUFFIX.values()):
        extractor = _builtin(*spec)
        if extractor.name not in _BY_NAME:
            _BY_NAME[extractor.name] = extractor
            for suffix in extractor.suffixes:
                _BY_SUFFIX.setdefault(suffix, extractor)
    _loaded = True


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


def path_suffix(path: str) -> str:
    """``PurePosixPath(path).suffix`` without building a path object (called per file per run).

    Args:
        path: A POSIX path.

    Returns:
        The last component's suffix (``.py``), or "" (none, a dot file, a trailing dot).
    """
    name = path.rstrip("/").rpartition("/")[2]
    dot = name.rfind(".")
    return name[dot:] if 0 < dot < len(name) - 1 else ""


def extractor_for(path: str | PurePosixPath) -> Extractor | None:
    """Return the extractor for a file, by its suffix (case-insensitive), or None.

    Args:
        path: The file's path.

    Returns:
        The registered extractor, or None when no language claims the suffix.
    """
    suffix = path_suffix(str(path)).lower()
    found = _BY_SUFFIX.get(suffix)
    if found is None and not _loaded:
        _load_builtin_for(suffix)
        found = _BY_SUFFIX.get(suffix)
    return found


def registered() -> tuple[Extractor, ...]:
    """Return every registered extractor, sorted by name.

    Returns:
        The extractors.
    """
    _load_builtins()
    return tuple(_BY_NAME[name] for name in sorted(_BY_NAME))
