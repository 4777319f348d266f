"""Tree-sitter plumbing shared by the Rust, JavaScript/TypeScript and Go extractors.

The grammars come from the ``tree-sitter-<lang>`` wheels, which ship compiled
parsers: nothing is downloaded. ``tree_sitter`` and the grammar modules are imported
inside the functions that use them (a layering rule), so importing this module costs
nothing; parsers and queries are built once per language and cached.

``Builder`` collects one file's symbols and relations: unique qualified names, spans
from nodes, evidence, and the innermost enclosing definition of a byte (how a call
found by a query gets its caller). Nothing here recurses: ``walk`` keeps its own
stack and a depth bound, so deeply nested input cannot exhaust Python's stack.

Every file has a work budget (``WORK_SECONDS`` from the start of its extraction): the parse
is given a progress callback that cancels it, and ``walk`` stops yielding. A query never
starts a match deeper than ``MAX_DEPTH`` (where ``walk`` does not look either) and runs only
over the parts of the tree without a syntax error (``_sound_parts``); its own progress
callback is not used, as it crashed the interpreter (tree-sitter 0.25 and 0.26 bindings). A
file whose budget ran out is extracted as far as it went and marked incomplete with
``OVER_BUDGET`` as its note. The calls query over a 100,000-call chain, or over a few hundred
KB of unclosed brackets, took minutes before.
"""

from __future__ import annotations

import bisect
import importlib
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from ctxstore.code.languages import (
    CONFIDENCE_RANK,
    Confidence,
    Detail,
    Evidence,
    Extraction,
    Relation,
    Span,
    Symbol,
    SymbolKind,
    Visibility,
    source_bytes,
)

if TYPE_CHECKING:
    from tree_sitter import Node, Parser, Query, Tree

__all__ = ["GRAMMARS", "extract_with", "parse", "query_captures", "span", "text", "walk", "Builder",
           "TreeSitterExtractor", "MAX_DEPTH", "WORK_SECONDS", "OVER_BUDGET"]

TOOL = "parser"
# Deeper than this, ``walk`` does not descend and no query match starts: no real source
# nests so deep.
MAX_DEPTH = 512
WORK_SECONDS = 5.0
"""Seconds one file's extraction (parse, queries, walks) may take. 1.7 MB of real Rust (the
ripgrep sources joined) takes about 1 s, 370 KB of minified JavaScript 0.5 s."""
OVER_BUDGET = (f"extraction incomplete: stopped after its work budget ({WORK_SECONDS:g} s a file; "
               "deeply nested or unclosed code)")
_CHUNK = 64 << 10  # bytes handed to the parser at a time


class _Budget:
    """The work budget of the extraction in progress: its deadline, and whether it ran out."""

    __slots__ = ("deadline", "spent")

    def __init__(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds
        self.spent = False

    def over(self) -> bool:
        """Whether the deadline has passed (and remember it)."""
        if not self.spent and time.monotonic() > self.deadline:
            self.spent = True
        return self.spent


_BUDGET: ContextVar[_Budget | None] = ContextVar("ctx_extraction_budget", default=None)

# Language name -> (grammar module, function returning its language pointer).
GRAMMARS: dict[str, tuple[str, str]] = {
    "rust": ("tree_sitter_rust", "language"),
    "javascript": ("tree_sitter_javascript", "language"),
    "typescript": ("tree_sitter_typescript", "language_typescript"),
    "tsx": ("tree_sitter_typescript", "language_tsx"),
    "go": ("tree_sitter_go", "language"),
}

_PARSERS: dict[str, Parser] = {}
_QUERIES: dict[tuple[str, str], Query] = {}


def _language(name: str) -> Any:

    from tree_sitter import Language

    module, function = GRAMMARS[name]
    return Language(getattr(importlib.import_module(module), function)())


def extract_with(language: str, grammar: str, text: str,
                 walk: Callable[[Node, bytes, Builder], str],
                 min_confidence: Confidence = "low") -> Extraction:
    """The common frame of the tree-sitter extractors: parse, walk, add structure, finish.

    Args:
        language: The extractor's name (``Extraction.language``).
        grammar: The ``GRAMMARS`` key to parse with.
        text: The source.
        walk: Records the file's symbols and relations into the builder from the root node
            and the bytes; returns the module's qualified name (``Builder.add_structure``).
        min_confidence: Relations below it are counted, not built (``Extraction.dropped``).

    Returns:
        The extraction, incomplete when the file has syntax errors or is too large.
    """
    data = source_bytes(text)
    if data is None:
        return Extraction(language, complete=False)
    budget = _Budget(WORK_SECONDS)
    token = _BUDGET.set(budget)
    try:
        tree = parse(grammar, data)
        if tree is None:  # the parse was cancelled: nothing to walk
            return Extraction(language, complete=False, note=OVER_BUDGET)
        builder = Builder(language, data, CONFIDENCE_RANK.get(min_confidence, 0))
        builder.add_structure(walk(tree.root_node, data, builder))
        if budget.spent:
            return builder.finish(False, OVER_BUDGET)
        return builder.finish(not tree.root_node.has_error)
    finally:
        _BUDGET.reset(token)


def parse(language: str, data: bytes) -> Tree | None:
    """Parse ``data`` with the cached parser of ``language`` (a ``GRAMMARS`` key).

    Within the work budget of the extraction in progress, if any: past it the parse is
    cancelled.

    Args:
        language: The grammar's name.
        data: The source bytes.

    Returns:
        The syntax tree (tree-sitter recovers from errors: check ``root_node.has_error``), or
        None when the budget ran out first.
    """
    parser = _PARSERS.get(language)
    if parser is None:
        from tree_sitter import Parser

        parser = _PARSERS[language] = Parser(_language(language))
    budget = _BUDGET.get()
    if budget is None:
        return parser.parse(data)

    def read(offset: int, _point: object) -> bytes:
        return data[offset:offset + _CHUNK]

    def cancel(_offset: int, _has_error: bool) -> bool:  # every few hundred parser steps
        return budget.over()

    try:
        tree = parser.parse(read, progress_callback=cancel)
    except ValueError:  # "Parsing failed": how the bindings say the callback cancelled it
        tree = None
    if tree is None:
        parser.reset()  # else the next parse would resume this one
    return tree


def query_captures(language: str, source: str, node: Node) -> dict[str, list[Node]]:
    """Run a (cached) tree-sitter query under ``node``; the matching runs in C.

    Args:
        language: The grammar's name.
        source: The query in tree-sitter's S-expression syntax.
        node: Where to search.

    Returns:
        Capture name -> captured nodes in document order.
    """
    query = _QUERIES.get((language, source))
    if query is None:
        from tree_sitter import Query

        query = _QUERIES[(language, source)] = Query(_language(language), source)
    from tree_sitter import QueryCursor

    cursor = QueryCursor(query)
    cursor.set_max_start_depth(MAX_DEPTH)  # a 100,000-call chain nests that deep
    if not node.has_error:
        found: dict[str, list[Node]] = cursor.captures(node)
    else:
        found = {}
        for part in _sound_parts(node):
            for name, nodes in cursor.captures(part).items():
                found.setdefault(name, []).extend(nodes)
    for nodes in found.values():
        nodes.sort(key=lambda n: n.start_byte)
    return found


def _sound_parts(node: Node) -> Iterator[Node]:
    """The largest subtrees under ``node`` without a syntax error, in document order.

    A query over an error region costs time quadratic in its size (200,000 unclosed ``{``
    took minutes; no progress callback of the bindings can stop it safely), and what it would
    find there is a guess anyway: queries run over these parts only, and the file is already
    incomplete for its syntax error. Bounded by ``MAX_DEPTH`` and the file's budget.
    """
    for part, _depth in walk(node, lambda n: n.has_error):
        if not part.has_error and part.named_child_count:
            yield part


def span(node: Node) -> Span:
    """Return the span of a node (byte offsets; 1-based line of its first and last byte).

    Args:
        node: A syntax node.

    Returns:
        The span.
    """
    start_line = node.start_point[0] + 1
    end_row, end_col = node.end_point
    # A node ending at a line start has its last byte on the line before.
    end_line = end_row if end_col == 0 and node.end_byte > node.start_byte else end_row + 1
    return Span(node.start_byte, node.end_byte, start_line, max(end_line, start_line))


def text(node: Node | None, data: bytes) -> str:
    """Return the source text of a node ("" for None); invalid UTF-8 is replaced.

    Args:
        node: A syntax node, or None.
        data: The bytes the tree was parsed from.

    Returns:
        Its text.
    """
    if node is None:
        return ""
    return data[node.start_byte:node.end_byte].decode("utf-8", "replace")


def walk(node: Node, descend: Callable[[Node], bool],
         max_depth: int = MAX_DEPTH) -> Iterator[tuple[Node, int]]:
    """Yield ``node`` and its named descendants pre-order, with their depth, iteratively.

    Args:
        node: Where to start (depth 0).
        descend: Whether to visit a node's children.
        max_depth: Children deeper than this are not visited.

    Yields:
        ``(node, depth)`` pairs in document order.
    """
    budget = _BUDGET.get()
    stack: list[tuple[Node, int]] = [(node, 0)]
    count = 0
    while stack:
        current, depth = stack.pop()
        yield current, depth
        count += 1
        if budget is not None and not count & 1023 and budget.over():
            return  # the file's budget ran out: what was seen so far is kept
        if depth < max_depth and descend(current):
            stack.extend((child, depth + 1) for child in reversed(current.named_children))


class Builder:
    """One file's symbols and relations, in order of appearance.

    Args:
        language: The extractor's name (``Extraction.language``).
        data: The file's bytes.
        min_rank: Relations of a lower ``CONFIDENCE_RANK`` are counted, not kept.
    """

    def __init__(self, language: str, data: bytes, min_rank: int = 0) -> None:
        self.language = language
        self.data = data
        self.min_rank = min_rank
        self.dropped = 0
        self.symbols: list[Symbol] = []
        self.relations: list[Relation] = []
        self._taken: set[str] = set()
        self._next: dict[str, int] = {}  # the next "#n" to try per wanted name
        self._scopes: list[tuple[int, int, str]] = []  # (start, end, qualname)
        self._parents: list[int] | None = None  # enclosing scope's index, once sorted
        self._starts: list[int] = []  # the sorted scopes' start bytes

    def unique(self, qualname: str) -> str:
        """Return ``qualname``, or ``qualname#2``, ``#3``... if already taken in this file.

        The next number to try is kept per name, so 50,000 definitions of one name cost 50,000
        steps, not a scan from ``#2`` for each.
        """
        candidate, n = qualname, self._next.get(qualname, 2)
        while candidate in self._taken:
            candidate, n = f"{qualname}#{n}", n + 1
        self._next[qualname] = n
        self._taken.add(candidate)
        return candidate

    def symbol(self, qualname: str, name: str, kind: SymbolKind, where: Span, parent: str | None,
               *, visibility: Visibility | None = None, signature: str | None = None,
               detail: Detail = (), scope: bool = False) -> str:
        """Add a symbol under a unique qualified name; return that name.

        Args:
            qualname: The wanted qualified name.
            name: The bare name.
            kind: Its kind.
            where: Its span.
            parent: The enclosing symbol's qualified name.
            visibility: Its visibility.
            signature: Its one-line declaration.
            detail: Extra ``(key, value)`` facts.
            scope: Whether calls inside its span belong to it (functions, methods).

        Returns:
            The qualified name given.
        """
        qualname = self.unique(qualname)
        self.symbols.append(Symbol(qualname, name, kind, where, parent, visibility, signature,
                                   detail))
        if scope:
            self._scopes.append((where.start_byte, where.end_byte, qualname))
            self._parents = None
        return qualname

    def relate(self, label: str, source: str, target: str, node: Node | Span,
               confidence: Confidence, detail: Detail = ()) -> None:
        """Add a relation whose evidence is the parser and ``node``'s span."""
        if self.min_rank and CONFIDENCE_RANK[confidence] < self.min_rank:
            self.dropped += 1
            return
        where = node if type(node) is Span else span(node)  # type: ignore[arg-type]
        self.relations.append(Relation(label, source, target, Evidence(TOOL, where, confidence),
                                       detail))

    def scope_at(self, offset: int, default: str) -> str:
        """Return the innermost scope symbol (``scope=True``) containing ``offset``.

        Args:
            offset: A byte offset.
            default: What to return outside every scope (the module).

        Returns:
            A qualified name.
        """
        if not self._scopes:
            return default
        if self._parents is None:  # scopes nest (a tree), so an enclosing one is an ancestor
            self._scopes.sort(key=lambda s: (s[0], -s[1]))
            self._starts = [start for start, _end, _name in self._scopes]
            self._parents = []
            open_: list[int] = []
            for index, (start, _end, _name) in enumerate(self._scopes):
                while open_ and self._scopes[open_[-1]][1] <= start:
                    open_.pop()
                self._parents.append(open_[-1] if open_ else -1)
                open_.append(index)
        i = bisect.bisect_right(self._starts, offset) - 1
        while i >= 0:
            start, end, qualname = self._scopes[i]
            if start <= offset < end:
                return qualname
            i = self._parents[i]
        return default

    def add_structure(self, module: str) -> None:
        """Add ``Contains`` (parent to child) and ``Defines`` (module to every other symbol).

        Args:
            module: The file's module symbol.
        """
        for sym in list(self.symbols):
            if sym.parent is not None:
                self.relate("Contains", sym.parent, sym.qualname, sym.span, "high")
            if sym.qualname != module:
                self.relate("Defines", module, sym.qualname, sym.span, "high")

    def finish(self, complete: bool, note: str | None = None) -> Extraction:
        """Return the extraction (``note``: why it is incomplete, if not a syntax error)."""
        return Extraction(self.language, tuple(self.symbols), tuple(self.relations), complete,
                          self.dropped, note)


class TreeSitterExtractor:
    """The frame of a tree-sitter language's ``Extractor``: a subclass names its grammar and walks.

    ``extract`` parses the file with ``grammar(path)`` and hands the tree to ``walk``
    (``extract_with``); a subclass sets ``name`` and ``suffixes`` and defines ``walk`` (and
    ``grammar`` when one language has several).
    """

    name: str = ""
    filters_confidence: bool = True
    suffixes: tuple[str, ...] = ()

    def grammar(self, path: str) -> str:
        """Return the ``GRAMMARS`` key a file is parsed with: by default the extractor's name."""
        return self.name

    def walk(self, path: str, grammar: str, root: Node, data: bytes, builder: Builder) -> str:
        """Record one file's symbols and relations into ``builder``; return its module's name."""
        raise NotImplementedError

    def extract(self, path: str, text: str, *, min_confidence: Confidence = "low"
                ) -> Extraction:
        """Extract one file's symbols and relations (``Extractor.extract``); never raises.

        Args:
            path: The file's repository-relative path, which names its module.
            text: The source.
            min_confidence: The lowest confidence a relation is built at; those below it
                are only counted (``Extraction.dropped``).

        Returns:
            The extraction; incomplete when the file has syntax errors, is too large, or
            outran its work budget (``WORK_SECONDS``).
        """
        grammar = self.grammar(path)

        def walk(root: Node, data: bytes, builder: Builder) -> str:
            return self.walk(path, grammar, root, data, builder)

        return extract_with(self.name, grammar, text, walk, min_confidence)
