"""Python extraction with the standard library's ``ast``: one ``Extractor``.

Symbols: the module (named from its path: ``pkg/mod.py`` is ``pkg.mod``, a package's
``__init__.py`` is the package), classes, functions and methods, qualified as Python's
``__qualname__`` does (``mod.C.m``, ``mod.f.<locals>.g``). A name defined twice in one
scope (a property setter, a definition under ``if``/``else``) gets ``#2``, ``#3``... in
order of appearance, so qualified names stay unique per file.

Relations (spec 002 §9.2): ``Defines`` from each scope to what it defines (high
confidence), ``Imports`` from the importing scope to the dotted module or name
(high; relative imports are resolved against the module's package), ``Calls`` from
the calling scope to the callee by name: resolved through the file's imports and
top-level definitions (medium), or as written (low). Names only: no types, no
inference; the code-intelligence work extends this.

Pure: no I/O. It never raises: a file that does not parse, holds NUL bytes, nests
too deep or is over ``MAX_SOURCE_BYTES`` gives an empty, incomplete extraction.
"""

from __future__ import annotations

import ast
from pathlib import PurePosixPath

from ctxstore.code.languages import (
    MAX_SOURCE_BYTES,
    Confidence,
    Evidence,
    Extraction,
    Relation,
    Span,
    Symbol,
    SymbolKind,
    line_starts,
    span_of_lines,
)

__all__ = ["PythonExtractor", "module_name"]

_TOOL = "parser"


def module_name(path: str) -> str:
    """Return the dotted module name of a repository-relative path.

    Args:
        path: e.g. ``src/pkg/mod.py``.

    Returns:
        e.g. ``src.pkg.mod``; ``pkg/__init__.py`` gives ``pkg``; never empty.
    """
    pure = PurePosixPath(path)
    parts = [p for p in pure.parts if p not in ("", "/", ".", "..")]
    if parts and pure.suffix:
        parts[-1] = parts[-1][:-len(pure.suffix)]
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

    def __init__(self, path: str, text: str) -> None:
        self.module = module_name(path)
        self.is_package = PurePosixPath(path).stem == "__init__"
        data = text.encode("utf-8", "surrogatepass")
        self.size = len(data)
        self.starts = line_starts(data)
        self.symbols: list[Symbol] = []
        self.relations: list[Relation] = []
        self.taken: set[str] = set()
        self.aliases: dict[str, str] = {}  # local name -> imported dotted name
        self.top: dict[str, str] = {}  # module-level def name -> qualname

    def span(self, node: ast.AST) -> Span:
        start_line = getattr(node, "lineno", 1)
        end_line = getattr(node, "end_lineno", None) or start_line
        return span_of_lines(self.starts, self.size, start_line, getattr(node, "col_offset", 0),
                             end_line, getattr(node, "end_col_offset", None) or 0)

    def unique(self, qualname: str) -> str:
        if qualname not in self.taken:
            self.taken.add(qualname)
            return qualname
        n = 2
        while f"{qualname}#{n}" in self.taken:
            n += 1
        self.taken.add(f"{qualname}#{n}")
        return f"{qualname}#{n}"

    def relate(self, label: str, source: str, target: str, node: ast.AST,
               confidence: Confidence) -> None:
        self.relations.append(Relation(label, source, target,
                                       Evidence(_TOOL, self.span(node), confidence)))

    def run(self, tree: ast.Module) -> None:
        self.symbols.append(Symbol(self.unique(self.module), self.module.rsplit(".", 1)[-1],
                                   "module", Span(0, self.size, 1, max(len(self.starts) - 1, 1)),
                                   None))
        for stmt in tree.body:  # top-level names first, so calls can resolve forward
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.top.setdefault(stmt.name, f"{self.module}.{stmt.name}")
        self.scope(tree.body, self.module, prefix=self.module, in_class=False)

    def scope(self, body: list[ast.stmt], owner: str, *, prefix: str, in_class: bool) -> None:
        """Walk statements whose definitions belong to ``owner`` (named ``prefix.*``)."""
        pending: list[ast.AST] = list(reversed(body))
        while pending:
            node = pending.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                for expr in [*node.decorator_list, *_header_exprs(node)]:
                    self.calls(expr, owner)
                self.define(node, owner, prefix, in_class)
                continue
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                self.imports(node, owner)
                continue
            if isinstance(node, ast.Call):
                self.call(node, owner)
            # Statements nested in if/for/try/with stay in this scope; expressions too.
            pending.extend(reversed(list(ast.iter_child_nodes(node))))

    def define(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef, owner: str,
               prefix: str, in_class: bool) -> None:
        kind: SymbolKind = "class" if isinstance(node, ast.ClassDef) else \
            "method" if in_class else "function"
        qualname = self.unique(f"{prefix}.{node.name}")
        self.symbols.append(Symbol(qualname, node.name, kind, self.span(node), owner))
        self.relate("Defines", owner, qualname, node, "high")
        if isinstance(node, ast.ClassDef):
            self.scope(node.body, qualname, prefix=qualname, in_class=True)
        else:
            self.scope(node.body, qualname, prefix=f"{qualname}.<locals>", in_class=False)

    def imports(self, node: ast.Import | ast.ImportFrom, owner: str) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                self.relate("Imports", owner, alias.name, node, "high")
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
            self.relate("Imports", owner, target, node, "high")
            if alias.name != "*":
                self.aliases[alias.asname or alias.name] = target

    def calls(self, expr: ast.AST, owner: str) -> None:
        for node in ast.walk(expr):
            if isinstance(node, ast.Call):
                self.call(node, owner)

    def call(self, node: ast.Call, owner: str) -> None:
        name = _dotted(node.func)
        if name is None:
            return
        head, _, rest = name.partition(".")
        if head in self.aliases:
            target = self.aliases[head] + (f".{rest}" if rest else "")
            confidence: Confidence = "medium"
        elif head in self.top:
            target, confidence = self.top[head] + (f".{rest}" if rest else ""), "medium"
        else:
            target, confidence = name, "low"
        self.relate("Calls", owner, target, node, confidence)


def _header_exprs(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> list[ast.expr]:
    """Expressions evaluated where a definition runs: defaults and base classes."""
    if isinstance(node, ast.ClassDef):
        return [*node.bases, *(k.value for k in node.keywords)]
    args = node.args
    return [*args.defaults, *(d for d in args.kw_defaults if d is not None)]


class PythonExtractor:
    """Python source files (implements ``Extractor``)."""

    name: str = "python"
    suffixes: tuple[str, ...] = (".py", ".pyi")

    def extract(self, path: str, text: str) -> Extraction:
        """Extract modules, classes, functions, imports and calls; never raises.

        Args:
            path: The repository-relative path (names the module).
            text: The source.

        Returns:
            The extraction, empty and incomplete when the source does not parse.
        """
        if len(text) > MAX_SOURCE_BYTES or len(text.encode("utf-8", "surrogatepass")) \
                > MAX_SOURCE_BYTES:
            return Extraction(self.name, complete=False)
        try:
            tree = ast.parse(text, filename=path or "<unknown>", type_comments=False)
        except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
            return Extraction(self.name, complete=False)
        walker = _Walker(path, text)
        try:
            walker.run(tree)
        except RecursionError:  # pragma: no cover - the parser's own nesting limit stops it first
            return Extraction(self.name, tuple(walker.symbols), tuple(walker.relations),
                              complete=False)
        return Extraction(self.name, tuple(walker.symbols), tuple(walker.relations))
