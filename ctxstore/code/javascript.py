"""JavaScript and TypeScript extraction with tree-sitter: two ``Extractor`` objects.

``javascript`` reads ``.js .mjs .cjs .jsx`` (the ``tree-sitter-javascript`` grammar,
JSX included); ``typescript`` reads ``.ts .mts .cts`` and ``.tsx`` (the two grammars of
``tree-sitter-typescript``). The module of a file is its path without the extension,
and without a final ``/index`` (``import "./ui"`` loads ``ui/index.js``): ``src/ui/button.tsx``
is ``src/ui/button`` (``module_name``).

Symbols: the module and its top-level functions (declarations, and ``const f = () =>``
or ``function`` expressions), classes and their methods (``<module>.C.m``), and in
TypeScript interfaces, type aliases and enums; other top-level ``const``/``let``/``var``
bindings are ``variable`` (but not ``const x = require("m")``: an import). Visibility:
top-level names ``public`` when exported (``export`` before them or in an
``export { }`` list), else ``private``; methods
``private`` when ``#name`` or declared ``private``, else ``public``.

Relations: ``Contains`` and ``Defines`` (high); ``Imports`` for each ES ``import``,
re-export ``export ... from`` and ``require("...")`` (high): a relative specifier is
resolved against the file's directory to a module name, with a script extension
dropped (``./util.js`` from ``src/a.ts`` is ``src/util``), a bare one (``react``,
``node:fs``) kept as written; named imports target ``<module>.<name>``, default imports
``<module>.default``, namespace and side-effect imports the module. ``Implements``
from a class to what it ``extends`` or ``implements``. ``Calls`` (and ``new``): a name
bound by an import or a top-level definition resolves to it, ``ns.f()`` through a
namespace import, ``this.m()`` in a class to its own method (medium); anything else is
the name as written (low).
"""

from __future__ import annotations

import posixpath
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from ctxstore.code import _treesitter as ts
from ctxstore.code.languages import (
    Confidence,
    Span,
    SymbolKind,
    Visibility,
    one_line,
)

if TYPE_CHECKING:
    from tree_sitter import Node

__all__ = ["JavaScriptExtractor", "TypeScriptExtractor", "module_name"]

_SCRIPT_SUFFIXES = (".js", ".mjs", ".cjs", ".jsx", ".ts", ".mts", ".cts", ".tsx", ".d.ts")
_CALLS = "[(call_expression function: (_) @f) (new_expression constructor: (_) @f)]"
_DECLARATIONS: dict[str, SymbolKind] = {
    "function_declaration": "function", "generator_function_declaration": "function",
    "class_declaration": "class", "abstract_class_declaration": "class",
    "interface_declaration": "interface", "type_alias_declaration": "type_alias",
    "enum_declaration": "enum",
}
_FUNCTION_VALUES = ("arrow_function", "function_expression", "function", "generator_function")


def _strip_suffix(path: str) -> str:
    for suffix in sorted(_SCRIPT_SUFFIXES, key=len, reverse=True):
        if path.endswith(suffix) and len(path) > len(suffix):
            path = path[:-len(suffix)]
            break
    if path.endswith("/index"):
        path = path[:-len("/index")]
    return path


def module_name(path: str) -> str:
    """Return the module name of a repository-relative path: no extension, no ``/index``.

    Args:
        path: e.g. ``src/ui/index.tsx``.

    Returns:
        e.g. ``src/ui``; never empty.
    """
    parts = [p for p in PurePosixPath(path).parts if p not in ("", "/", ".", "..")]
    return _strip_suffix("/".join(parts)) or "index"


def _resolve_specifier(specifier: str, module_dir: str) -> str:
    """``./x.js`` from ``src`` -> ``src/x``; bare specifiers are kept."""
    if not specifier.startswith((".", "/")):
        return specifier
    joined = posixpath.normpath(posixpath.join(module_dir, specifier)).lstrip("/")
    return _strip_suffix(joined) if joined not in ("", ".") else "index"


def _string(node: Node | None, data: bytes) -> str:
    return ts.text(node, data).strip("\"'`") if node is not None else ""


class _Walker:
    def __init__(self, path: str, data: bytes, builder: ts.Builder, grammar: str) -> None:
        self.data = data
        self.grammar = grammar
        self.b = builder
        self.module = module_name(path)
        parts = [p for p in PurePosixPath(path).parts if p not in ("", "/", ".", "..")]
        self.directory = "/".join(parts[:-1])
        self.bindings: dict[str, str] = {}  # local name -> qualified name
        self.exported: set[str] = set()  # names listed in `export { }`
        self.classes: dict[str, str] = {}  # method qualname -> class qualname

    def run(self, root: Node) -> None:
        data, b = self.data, self.b
        b.symbol(self.module, self.module.rsplit("/", 1)[-1], "module",
                 Span(0, len(data), 1, max(root.end_point[0] + 1, 1)), None, visibility="public")
        top = [n for n, _ in ts.walk(root, lambda n: n.type in ("program", "ERROR"))][1:]
        for node in top:  # bind names first, so uses can resolve forward
            self.bind(node)
        for node in top:
            exported = node.type == "export_statement"
            declaration = node.child_by_field_name("declaration") if exported else node
            if exported:
                self.reexport(node)
            if declaration is not None:
                self.declare(declaration, exported, node)
        self.calls(root)

    def bind(self, node: Node) -> None:
        """Record top-level names, export lists and imports (as ``Imports`` relations)."""
        data = self.data
        if node.type == "export_statement":
            for spec, _ in ts.walk(node, lambda n: n.type in ("export_statement", "export_clause")):
                if spec.type == "export_specifier":
                    self.exported.add(ts.text(spec.child_by_field_name("name"), data))
            declaration = node.child_by_field_name("declaration")
            if declaration is not None:
                self.bind(declaration)
            return
        if node.type == "import_statement":
            self.import_statement(node)
            return
        for name in self.declared_names(node):
            self.bindings.setdefault(name, f"{self.module}.{name}")
        if node.type in ("lexical_declaration", "variable_declaration"):
            for declarator in node.named_children:
                self.commonjs_import(declarator)

    def declared_names(self, node: Node) -> list[str]:
        if node.type in _DECLARATIONS:
            return [ts.text(node.child_by_field_name("name"), self.data)]
        if node.type in ("lexical_declaration", "variable_declaration"):
            return [ts.text(d.child_by_field_name("name"), self.data) for d in node.named_children
                    if d.type == "variable_declarator"
                    and getattr(d.child_by_field_name("name"), "type", "") == "identifier"]
        return []

    def import_statement(self, node: Node) -> None:
        data = self.data
        target = _resolve_specifier(_string(node.child_by_field_name("source"), data),
                                    self.directory)
        if not target:
            return
        clause = next((c for c in node.named_children if c.type == "import_clause"), None)
        if clause is None:  # import "./side-effect"
            self.b.relate("Imports", self.module, target, node, "high")
            return
        for part in clause.named_children:
            if part.type == "identifier":
                self.imported(ts.text(part, data), f"{target}.default", part)
            elif part.type == "namespace_import":
                local = next((ts.text(c, data) for c in part.named_children
                              if c.type == "identifier"), "")
                self.imported(local, target, part)
            elif part.type == "named_imports":
                for spec in part.named_children:
                    if spec.type != "import_specifier":
                        continue
                    name = ts.text(spec.child_by_field_name("name"), data).strip("\"'")
                    alias = ts.text(spec.child_by_field_name("alias"), data)
                    self.imported(alias or name, f"{target}.{name}", spec)

    def imported(self, local: str, target: str, node: Node) -> None:
        if local:
            self.bindings[local] = target
        self.b.relate("Imports", self.module, target, node, "high",
                      (("alias", local),) if local and local != target.rsplit(".", 1)[-1] else ())

    def commonjs_import(self, declarator: Node) -> None:
        """Bind and relate the module a CommonJS declarator loads (``x = require("m")``)."""
        value = declarator.child_by_field_name("value")
        if value is None or value.type != "call_expression" or \
                ts.text(value.child_by_field_name("function"), self.data) != "require":
            return
        arguments = value.child_by_field_name("arguments")
        first = arguments.named_children[0] if arguments is not None and \
            arguments.named_children else None
        if first is None or first.type != "string":
            return
        target = _resolve_specifier(_string(first, self.data), self.directory)
        name = declarator.child_by_field_name("name")
        if name is not None and name.type == "identifier":
            self.bindings[ts.text(name, self.data)] = target
        elif name is not None and name.type == "object_pattern":  # const { a } = require(..)
            for part in name.named_children:
                if part.type == "shorthand_property_identifier_pattern":
                    local = ts.text(part, self.data)
                    self.bindings[local] = f"{target}.{local}"
        self.b.relate("Imports", self.module, target, value, "high", (("import_kind", "require"),))

    def reexport(self, node: Node) -> None:
        source = node.child_by_field_name("source")
        if source is not None:
            target = _resolve_specifier(_string(source, self.data), self.directory)
            self.b.relate("Imports", self.module, target, node, "high",
                          (("import_kind", "reexport"),))

    def declare(self, node: Node, exported: bool, outer: Node) -> None:
        data = self.data
        kind = _DECLARATIONS.get(node.type)
        where = outer if exported else node
        if kind is not None:
            name = ts.text(node.child_by_field_name("name"), data)
            if not name:
                return
            qualname = self.define(name, kind, where, node, exported)
            if kind == "class":
                self.class_members(node, qualname)
            return
        if node.type not in ("lexical_declaration", "variable_declaration"):
            return
        for declarator in node.named_children:
            name_node = declarator.child_by_field_name("name")
            if declarator.type != "variable_declarator" or name_node is None or \
                    name_node.type != "identifier":
                continue
            value = declarator.child_by_field_name("value")
            if value is not None and value.type == "call_expression" and \
                    ts.text(value.child_by_field_name("function"), data) == "require":
                continue  # an import, not a definition
            is_function = value is not None and value.type in _FUNCTION_VALUES
            self.define(ts.text(name_node, data), "function" if is_function else "variable",
                        declarator if not exported else where, declarator, exported)

    def define(self, name: str, kind: SymbolKind, where: Node, declaration: Node,
               exported: bool) -> str:
        visibility: Visibility = "public" if exported or name in self.exported else "private"
        return self.b.symbol(f"{self.module}.{name}", name, kind, ts.span(where), self.module,
                             visibility=visibility, signature=self.signature(declaration),
                             scope=kind in ("function", "class"))

    def signature(self, node: Node) -> str:
        body = node.child_by_field_name("body")
        if body is None and node.type == "variable_declarator":
            value = node.child_by_field_name("value")
            body = value.child_by_field_name("body") if value is not None and \
                value.type in _FUNCTION_VALUES else value
        end = body.start_byte if body is not None else node.end_byte
        return one_line(self.data[node.start_byte:end].decode("utf-8", "replace").rstrip(" =;"))

    def class_members(self, node: Node, qualname: str) -> None:
        data = self.data
        heritage = next((c for c in node.named_children if c.type == "class_heritage"), None)
        if heritage is not None:
            for base, _ in ts.walk(heritage, lambda n: n.type in (
                    "class_heritage", "extends_clause", "implements_clause")):
                if base.type in ("identifier", "type_identifier", "member_expression",
                                 "nested_type_identifier", "generic_type"):
                    target, confidence = self.resolve_name(ts.text(base, data).split("<", 1)[0])
                    self.b.relate("Implements", qualname, target, base, confidence)
        body = node.child_by_field_name("body")
        for member in body.named_children if body is not None else []:
            if member.type not in ("method_definition", "abstract_method_signature",
                                   "method_signature"):
                continue
            name = ts.text(member.child_by_field_name("name"), data)
            if not name:
                continue
            private = name.startswith("#") or any(
                c.type == "accessibility_modifier" and ts.text(c, data) == "private"
                for c in member.children)
            method = self.b.symbol(f"{qualname}.{name}", name, "method", ts.span(member),
                                   qualname, visibility="private" if private else "public",
                                   signature=self.signature(member),
                                   scope=member.type == "method_definition")
            self.classes[method] = qualname

    def resolve_name(self, written: str) -> tuple[str, Confidence]:
        head, _, rest = written.partition(".")
        if head in self.bindings:
            return self.bindings[head] + (f".{rest}" if rest else ""), "medium"
        return written, "low"

    def calls(self, root: Node) -> None:
        b, data = self.b, self.data
        defined = {s.qualname for s in b.symbols}
        for callee in ts.query_captures(self.grammar, _CALLS, root).get("f", []):
            caller = b.scope_at(callee.start_byte, self.module)
            if callee.type == "identifier":
                name = ts.text(callee, data)
                if name in ("require", "import"):
                    continue
                target, confidence = self.resolve_name(name)
            elif callee.type == "member_expression":
                target, confidence = self.member(callee, caller, defined)
            else:
                continue
            if target:
                b.relate("Calls", caller, target, callee, confidence)

    def member(self, callee: Node, caller: str, defined: set[str]) -> tuple[str, Confidence]:
        data = self.data
        obj = callee.child_by_field_name("object")
        prop = ts.text(callee.child_by_field_name("property"), data)
        if obj is not None and obj.type == "this" and caller in self.classes:
            own = f"{self.classes[caller]}.{prop}"
            if own in defined:
                return own, "medium"
        if obj is not None and obj.type in ("identifier", "this"):
            head = ts.text(obj, data)
            if head in self.bindings:
                return f"{self.bindings[head]}.{prop}", "medium"
            return f"{head}.{prop}", "low"
        return prop, "low"


class _ScriptExtractor(ts.TreeSitterExtractor):
    """Shared by the JavaScript and TypeScript extractors.

    They record functions, classes, methods, types, imports and calls; a file's path names
    its module (``module_name``).
    """

    def module_name(self, path: str) -> str:
        """Return the file's module name (see ``module_name``)."""
        return module_name(path)

    def walk(self, path: str, grammar: str, root: Node, data: bytes, builder: ts.Builder) -> str:
        """Record the file's definitions, imports and calls; return its module name."""
        walker = _Walker(path, data, builder, grammar)
        walker.run(root)
        return walker.module


class JavaScriptExtractor(_ScriptExtractor):
    """JavaScript files, JSX included (implements ``Extractor``)."""

    name: str = "javascript"
    suffixes: tuple[str, ...] = (".js", ".mjs", ".cjs", ".jsx")

    def grammar(self, path: str) -> str:
        """Return ``javascript``: one grammar reads JS and JSX."""
        return "javascript"


class TypeScriptExtractor(_ScriptExtractor):
    """TypeScript files, TSX included (implements ``Extractor``)."""

    name: str = "typescript"
    suffixes: tuple[str, ...] = (".ts", ".mts", ".cts", ".tsx")

    def grammar(self, path: str) -> str:
        """Return ``tsx`` for ``.tsx`` files, else ``typescript``."""
        return "tsx" if path.lower().endswith(".tsx") else "typescript"
