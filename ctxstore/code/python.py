"""Python extraction with the standard library's ``ast``: one ``Extractor``.

Symbols: the module (named from its path by ``module_name``: ``src/`` layouts and
``__init__.py`` packages handled), classes, functions and methods, qualified as
Python's ``__qualname__`` does (``mod.C.m``, ``mod.f.<locals>.g``), each with a
visibility by the underscore convention (``_x`` private; dunders and the rest public)
and its header on one line as signature. A name defined twice in one scope (a
property setter, a definition under ``if``/``else``) gets ``#2``, ``#3``... in order of
appearance, so qualified names stay unique per file.

Relations (spec 002 §9.2): ``Contains`` from each symbol's parent to it and
``Defines`` from the module to every symbol (high); ``Imports`` from the importing
scope to each imported module or name, relative imports made absolute against the
module's package (high); ``Implements`` from a class to each base class; ``Calls`` from
the calling scope to the callee; ``References`` (once per scope and target) for other
uses of a name bound by an import or a top-level definition; ``UsesType`` (once per
function and type) for such names in a function's annotations. Names resolve through the
file's imports (to the absolute dotted name), its top-level definitions, and
``self.m``/``cls.m`` inside a method to the class's own method (medium); anything else
is the name as written (low; plain unresolved names are not References). No types, no
inference.

Pure: no I/O. It never raises: a file that does not parse, holds NUL bytes, nests
too deep or is over ``MAX_SOURCE_BYTES`` gives an empty, incomplete extraction.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from pathlib import PurePosixPath

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
    line_starts,
    one_line,
    path_suffix,
    source_bytes,
)

__all__ = ["PythonExtractor", "module_name"]

_TOOL = "parser"
_COMMENT = re.compile(r"#[^\n]*")


def _visibility(name: str) -> Visibility:
    """``_name`` is private by convention; ``__dunder__`` and everything else public."""
    dunder = name.startswith("__") and name.endswith("__")
    return "private" if name.startswith("_") and not dunder else "public"


def module_name(path: str) -> str:
    """Return the dotted module name of a repository-relative path.

    Args:
        path: e.g. ``src/pkg/mod.py``.

    Returns:
        e.g. ``pkg.mod``: the path below the nearest ``src`` directory (a ``src/``
        layout), without its suffix; ``pkg/__init__.py`` gives ``pkg``; never empty.
    """
    # String operations, not PurePosixPath: the ingest names every file of the tree each run.
    parts = [p for p in path.split("/") if p not in ("", ".", "..")]
    suffix = path_suffix(path)
    if "src" in parts[:-1]:
        parts = parts[len(parts) - 1 - parts[-2::-1].index("src"):]
    if parts and suffix:
        parts[-1] = parts[-1][:-len(suffix)]
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts) or "__main__"


def _dotted(node: ast.expr) -> str | None:
    """``a.b.c`` for a chain of names and attributes, else None."""
    names: list[str] = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    names.append(node.id)
    return ".".join(reversed(names))


class _Walker:
    """One file's walk: collects symbols and relations in order of appearance."""

    def __init__(self, path: str, data: bytes, min_rank: int = 0) -> None:
        self.min_rank = min_rank
        self.dropped = 0  # relations below ``min_rank``, counted, not built
        self.module = module_name(path)
        self.is_package = PurePosixPath(path).stem == "__init__"
        self.data = data
        self.size = len(data)
        self.starts = line_starts(data)
        self.symbols: list[Symbol] = []
        self.relations: list[Relation] = []
        self.taken: dict[str, int] = {}  # qualname given -> the last #N given for it
        self.aliases: dict[str, str] = {}  # local name -> imported dotted name
        self.top: dict[str, str] = {}  # module-level def name -> qualname
        self.referenced: set[tuple[str, str]] = set()  # (owner, target) References made

    def span(self, node: ast.AST) -> Span:
        # The hot path. ast positions are UTF-8 byte columns on 1-based lines, counted with
        # the same line ends as ``line_starts``; clamped anyway, never trusted.
        start_line: int = node.lineno  # type: ignore[attr-defined]
        end_line: int = node.end_lineno or start_line  # type: ignore[attr-defined]
        starts, size, last = self.starts, self.size, len(self.starts)
        start = starts[start_line - 1 if 0 < start_line <= last else 0] \
            + node.col_offset  # type: ignore[attr-defined]
        end = starts[end_line - 1 if 0 < end_line <= last else 0] \
            + (node.end_col_offset or 0)  # type: ignore[attr-defined]
        start = start if start < size else size
        end = end if end < size else size
        return Span(start, end if end > start else start, start_line,
                    end_line if end_line > start_line else start_line)

    def unique(self, qualname: str) -> str:
        """``qualname``, or ``qualname#N`` for its N-th definition in this file (linear)."""
        taken = self.taken
        if qualname not in taken:
            taken[qualname] = 1
            return qualname
        n = taken[qualname]
        while True:  # ``n`` resumes where the last duplicate stopped: each name is tried once
            n += 1
            name = f"{qualname}#{n}"
            if name not in taken:
                taken[qualname] = n
                taken[name] = 1
                return name

    def relate(self, label: str, source: str, target: str, node: ast.AST,
               confidence: Confidence, detail: Detail = ()) -> None:
        if self.min_rank and CONFIDENCE_RANK[confidence] < self.min_rank:
            self.dropped += 1
            return
        self.relations.append(Relation(label, source, target,
                                       Evidence(_TOOL, self.span(node), confidence), detail))

    def run(self, tree: ast.Module) -> None:
        last = self.module.rsplit(".", 1)[-1]
        self.symbols.append(Symbol(self.unique(self.module), last, "module",
                                   Span(0, self.size, 1, max(len(self.starts) - 1, 1)), None,
                                   _visibility(last)))
        for stmt in tree.body:  # top-level names first, so calls can resolve forward
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.top.setdefault(stmt.name, f"{self.module}.{stmt.name}")
        self.scope(tree.body, self.module, prefix=self.module, cls=None)
        for sym in self.symbols[1:]:
            if sym.parent is not None:
                self.relations.append(Relation("Contains", sym.parent, sym.qualname,
                                               Evidence(_TOOL, sym.span, "high")))
            self.relations.append(Relation("Defines", self.module, sym.qualname,
                                           Evidence(_TOOL, sym.span, "high")))

    def scope(self, body: Sequence[ast.AST], owner: str, *, prefix: str,
              cls: tuple[str, dict[str, str]] | None, in_class: bool = False) -> None:
        """Walk statements whose definitions belong to ``owner`` (named ``prefix.*``).

        ``cls`` is the class (qualname, method name -> qualname) whose method this is:
        ``self.m()`` and ``cls.m()`` resolve through it.
        """
        pending: list[ast.AST] = list(reversed(body))
        aliases, top = self.aliases, self.top
        # Locals, not module attributes: this loop runs once per node of the file.
        name_t, load_t, call_t, attr_t = ast.Name, ast.Load, ast.Call, ast.Attribute
        import_t, import_from_t = ast.Import, ast.ImportFrom
        leaves, definitions, child_fields = _LEAVES, _DEFINITIONS, _CHILD_FIELDS
        while pending:
            node = pending.pop()
            kind = type(node)
            if kind is name_t:  # the commonest node: a fast path
                name = node.id  # type: ignore[attr-defined]
                if (name in aliases or name in top) and type(node.ctx) is load_t:  # type: ignore[attr-defined]
                    self.reference(node, owner)  # type: ignore[arg-type]
                continue
            if kind in leaves:
                continue
            if kind in definitions:
                definition: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef = node  # type: ignore[assignment]
                self.scope([*definition.decorator_list, *_header_exprs(definition)], owner,
                           prefix=prefix, cls=cls)
                self.define(definition, owner, prefix, in_class, cls)
                continue
            if kind is import_t or kind is import_from_t:
                self.imports(node, owner)  # type: ignore[arg-type]
                continue
            if kind is call_t:
                call: ast.Call = node  # type: ignore[assignment]
                if self.call(call, owner, cls):
                    pending.extend(reversed(call.keywords))
                    pending.extend(reversed(call.args))
                    continue
            elif kind is attr_t and type(node.ctx) is load_t:  # type: ignore[attr-defined]
                if self.reference(node, owner):  # type: ignore[arg-type]
                    continue
            # Statements nested in if/for/try/with stay in this scope; expressions too.
            fields = child_fields.get(kind)
            if fields is None:
                fields = child_fields[kind] = _child_fields(kind)
            for field in fields:  # last field first: the stack pops them in source order
                value = getattr(node, field, None)
                if type(value) is list:  # of nodes (a dict's ``**`` key or a default: None)
                    pending.extend(reversed(value))
                elif value is not None:
                    pending.append(value)

    def define(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef, owner: str,
               prefix: str, in_class: bool, cls: tuple[str, dict[str, str]] | None) -> None:
        kind: SymbolKind = "class" if isinstance(node, ast.ClassDef) else \
            "method" if in_class else "function"
        qualname = self.unique(f"{prefix}.{node.name}")
        self.symbols.append(Symbol(qualname, node.name, kind, self.span(node), owner,
                                   _visibility(node.name), self.signature(node)))
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                target, confidence = self.resolve(base, None)
                if target:
                    self.relate("Implements", qualname, target, base, confidence)
            methods = {stmt.name: f"{qualname}.{stmt.name}" for stmt in node.body
                       if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef))}
            self.scope(node.body, qualname, prefix=qualname, cls=(qualname, methods),
                       in_class=True)
        else:
            self.uses_types(node, qualname)
            self.scope(node.body, qualname, prefix=f"{qualname}.<locals>",
                       cls=cls if in_class else None)

    def uses_types(self, node: ast.FunctionDef | ast.AsyncFunctionDef, qualname: str) -> None:
        """Add ``UsesType`` (once per type) for names in annotations that resolve."""
        args = node.args
        pending: list[ast.AST] = [a.annotation for a in (*args.posonlyargs, *args.args,
                                                         *args.kwonlyargs, args.vararg,
                                                         args.kwarg)
                                  if a is not None and a.annotation is not None]
        if node.returns is not None:
            pending.append(node.returns)
        seen: set[str] = set()
        while pending:
            expr = pending.pop()
            if isinstance(expr, (ast.Name, ast.Attribute)):
                target, confidence = self.resolve(expr, None)
                if target is not None:
                    if confidence != "low" and target not in seen:
                        seen.add(target)
                        self.relate("UsesType", qualname, target, expr, confidence)
                    continue
            pending.extend(ast.iter_child_nodes(expr))

    def signature(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> str:
        """The header as written, from ``def``/``class`` to the colon, on one line."""
        start = self.span(node).start_byte
        first = node.body[0] if node.body else node
        end = self.span(first).start_byte if first is not node else self.span(node).end_byte
        header = self.data[start:end].decode("utf-8", "replace")
        header = _COMMENT.sub("", header)
        return one_line(header).rstrip(" :")

    def imports(self, node: ast.Import | ast.ImportFrom, owner: str) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                detail: Detail = (("alias", alias.asname),) if alias.asname else ()
                self.relate("Imports", owner, alias.name, node, "high", detail)
                local = alias.asname or alias.name.split(".", 1)[0]
                self.aliases[local] = alias.name if alias.asname else local
            return
        base = node.module or ""
        if node.level:
            package = self.module.split(".")
            # A module's own name is not its package; a package's __init__ is.
            keep = len(package) - node.level + (1 if self.is_package else 0)
            base = ".".join([*package[:max(keep, 0)], *([base] if base else [])])
        for alias in node.names:
            target = f"{base}.{alias.name}" if base and alias.name != "*" else base or alias.name
            detail = (("alias", alias.asname),) if alias.asname else ()
            self.relate("Imports", owner, target, node, "high", detail)
            if alias.name != "*":
                self.aliases[alias.asname or alias.name] = target

    def resolve(self, expr: ast.expr, cls: tuple[str, dict[str, str]] | None
                ) -> tuple[str | None, Confidence]:
        """The qualified name a dotted expression stands for, medium; else as written, low."""
        name = _dotted(expr)
        if name is None:
            return None, "low"
        head, _, rest = name.partition(".")
        tail = f".{rest}" if rest else ""
        if head in self.aliases:
            return self.aliases[head] + tail, "medium"
        if head in self.top:
            return self.top[head] + tail, "medium"
        if cls is not None and head in ("self", "cls") and rest in cls[1]:
            return cls[1][rest], "medium"
        return name, "low"

    def call(self, node: ast.Call, owner: str, cls: tuple[str, dict[str, str]] | None) -> bool:
        target, confidence = self.resolve(node.func, cls)
        if target is None:
            return False
        self.relate("Calls", owner, target, node, confidence)
        return True

    def reference(self, node: ast.Name | ast.Attribute, owner: str) -> bool:
        """Add a ``References`` for a name bound by an import or a top-level definition."""
        target, confidence = self.resolve(node, None)
        if target is None:
            return False
        if confidence != "low" and (owner, target) not in self.referenced:
            self.referenced.add((owner, target))
            self.relate("References", owner, target, node, confidence)
        return True


# Nodes with nothing to extract below them; definitions; fields that never hold nodes.
_LEAVES = frozenset({ast.Constant, ast.Pass, ast.Break, ast.Continue, ast.Global, ast.Nonlocal,
                     ast.alias, type(None)})
_DEFINITIONS = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef})
_NOT_CHILDREN = frozenset({"ctx", "op", "ops", "type_comment", "kind", "level", "is_async",
                           "simple", "conversion", "id", "attr", "name", "arg", "asname",
                           "module", "names", "kwd_attrs", "rest", "tag", "type_ignores"})
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def _child_fields(kind: type) -> tuple[str, ...]:
    """The fields of an AST node class that can hold child nodes, last first (cached by the caller)."""
    fields: tuple[str, ...] = getattr(kind, "_fields", ())
    return tuple(f for f in reversed(fields) if f not in _NOT_CHILDREN)


def _header_exprs(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> list[ast.expr]:
    """Expressions evaluated where a definition runs: defaults, keywords, computed bases.

    Plain dotted base classes are left out: ``Implements`` already names them.
    """
    if isinstance(node, ast.ClassDef):
        return [*(b for b in node.bases if _dotted(b) is None), *(k.value for k in node.keywords)]
    args = node.args
    return [*args.defaults, *(d for d in args.kw_defaults if d is not None)]


class PythonExtractor:
    """Python source files (implements ``Extractor``)."""

    name: str = "python"
    suffixes: tuple[str, ...] = (".py", ".pyi")
    filters_confidence: bool = True

    def module_name(self, path: str) -> str:
        """Return the dotted module name of a repository-relative path (``module_name``)."""
        return module_name(path)

    def extract(self, path: str, text: str, *, min_confidence: Confidence = "low"
                ) -> Extraction:
        """Extract modules, classes, functions, imports and calls; never raises.

        Args:
            path: The repository-relative path (names the module).
            text: The source.
            min_confidence: Relations below it are counted, not built.

        Returns:
            The extraction, empty and incomplete when the source does not parse.
        """
        data = source_bytes(text)
        if data is None:
            return Extraction(self.name, complete=False)
        # A UTF-8 byte-order mark is valid Python (the interpreter skips it); ast.parse of a
        # str refuses it as a character. Left out, line 1's columns count from after it.
        source = text[1:] if text.startswith("\ufeff") else text
        try:
            tree = ast.parse(source, filename=path or "<unknown>", type_comments=False)
        except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
            return Extraction(self.name, complete=False)
        walker = _Walker(path, data, CONFIDENCE_RANK.get(min_confidence, 0))
        try:
            walker.run(tree)
        except RecursionError:  # pragma: no cover - the parser's own nesting limit stops it first
            return Extraction(self.name, tuple(walker.symbols), tuple(walker.relations),
                              complete=False, dropped=walker.dropped)
        return Extraction(self.name, tuple(walker.symbols), tuple(walker.relations),
                          dropped=walker.dropped)
