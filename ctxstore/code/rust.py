"""Rust extraction with tree-sitter (the ``tree-sitter-rust`` wheel): one ``Extractor``.

Module names (``module_name``): the crate root is the parent directory of the nearest
``src/`` directory, named after that directory (``-`` becomes ``_``, as Cargo names
crates), or ``crate`` when ``src/`` is at the repository root. Below it, ``lib.rs`` and
``main.rs`` are the crate root, ``mod.rs`` is its directory's module and any other
``x.rs`` is module ``x``: ``crates/ignore/src/walk.rs`` is ``ignore::walk``,
``crates/ignore/src/dir/mod.rs`` is ``ignore::dir``, ``src/lib.rs`` is ``crate``. A file
outside every ``src/`` (``build.rs``, ``tests/x.rs``) is its own crate root named by its
path: ``tests::x``.

Symbols (spec 002 §7.2.3 ItemKind): the file's module, inline ``mod x { }`` and
declared ``mod x;`` modules (``detail`` ``declaration=external``: the body is the file
whose ``module_name`` is the same qualified name), functions, structs (unions too),
enums, traits, impls, consts, statics, type aliases and ``macro_rules!`` macros, each
with its Visibility and a one-line signature. Items are ``<module>::<name>``; methods
are ``<module>::<Type>::<name>`` (``<module>::<Trait>::<name>`` inside a trait); an impl
block is ``<module>::<impl Trait for Type>`` with its ``self_type`` and ``trait`` in
``detail``. Relations: ``Contains`` (parent to child) and ``Defines`` (the file's module
to each item), ``Imports`` per leaf of each ``use`` tree (braces expanded) with its
``import_kind`` (``glob`` for ``*``; ``self`` for ``{self}``; else ``crate``,
``super`` or ``self`` by the path's first segment; else ``single``), ``Implements`` from an impl to its
trait, ``References`` from an impl to its self type, and ``Calls`` for ``foo()``,
``Type::foo()``, ``self.foo()`` and ``x.foo()``.

Resolution: ``crate::``, ``self::`` and ``super::`` paths and names of modules and items
declared in the module are made absolute (high for imports, medium for calls); a
name brought in by a ``use`` expands to its target (medium); other paths (an
external crate, the prelude) stay as written: ``medium`` for imports, ``low`` for calls.
"""

from __future__ import annotations

import re
from dataclasses import field
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
from ctxstore.records import dataclass

if TYPE_CHECKING:
    from tree_sitter import Node

__all__ = ["RustExtractor", "module_name"]

_GENERIC = re.compile(r"<[^<>]*>")
_NOT_IDENT = re.compile(r"\W")
_CALLS = "(call_expression function: (_) @f)"
_ITEMS: dict[str, SymbolKind] = {
    "function_item": "function", "function_signature_item": "function",
    "struct_item": "struct", "union_item": "struct", "enum_item": "enum",
    "trait_item": "trait", "const_item": "const", "static_item": "static",
    "type_item": "type_alias", "associated_type": "type_alias", "macro_definition": "macro",
}
# The node types ``_Walker.item`` reads (the rest of a body is skipped).
_READ = frozenset([*_ITEMS, "use_declaration", "extern_crate_declaration", "mod_item",
                   "impl_item"])


def _crate_and_module(path: str) -> tuple[str, str]:
    """Return (crate root, module) qualified names of a repository-relative path."""
    parts = [p for p in PurePosixPath(path).parts if p not in ("", "/", ".", "..")]
    if not parts:
        return "crate", "crate"
    stem = _NOT_IDENT.sub("_", PurePosixPath(parts[-1]).stem)
    dirs = [_NOT_IDENT.sub("_", p) for p in parts[:-1]]
    if "src" in dirs:
        at = len(dirs) - 1 - dirs[::-1].index("src")
        crate = dirs[at - 1] if at > 0 else "crate"
        mods = dirs[at + 1:]
        if stem != "mod" and (mods or stem not in ("lib", "main")):
            mods = [*mods, stem]
        return crate, "::".join([crate, *mods])
    root = "::".join([*dirs, stem] if stem != "mod" or not dirs else dirs)
    return root, root


def module_name(path: str) -> str:
    """Return the Rust module path of a repository-relative file path (module docs).

    Args:
        path: e.g. ``crates/ignore/src/walk.rs``.

    Returns:
        e.g. ``ignore::walk``.
    """
    return _crate_and_module(path)[1]


def _segments(written: str) -> list[str]:
    """``a::b::<T>::c`` -> ``[a, b, c]``: generic arguments and spaces dropped."""
    flat = "".join(written.split()) if " " in written or "\n" in written else written
    for _ in range(8 if "<" in flat else 0):
        stripped = _GENERIC.sub("", flat)
        if stripped == flat:
            break
        flat = stripped
    return [s for s in flat.split("::") if s]


def _visibility(node: Node, data: bytes) -> Visibility:
    for child in node.children:
        if child.type == "visibility_modifier":
            written = "".join(ts.text(child, data).split())
            if written in ("pub(crate)", "crate") or written.startswith("pub(in"):
                return "crate"
            if written == "pub(super)":
                return "super"
            return "private" if written == "pub(self)" else "public"
    return "private"


def _signature(node: Node, data: bytes) -> str:
    body = node.child_by_field_name("body")
    end = body.start_byte if body is not None else node.end_byte
    return one_line(data[node.start_byte:end].decode("utf-8", "replace").rstrip(" ;"))


def _type_name(node: Node | None, data: bytes) -> str:
    """The base name of a type: ``&'a mut crate::x::Bar<T>`` -> ``Bar``."""
    while node is not None and node.type in ("reference_type", "generic_type", "pointer_type"):
        node = node.child_by_field_name("type")
    if node is not None and node.type in ("scoped_type_identifier", "scoped_identifier"):
        node = node.child_by_field_name("name")
    return one_line(ts.text(node, data), 80) or "_"


@dataclass
class _Module:
    """A module scope: its qualified name and the names it binds."""

    qualname: str
    names: dict[str, str] = field(default_factory=dict)  # local name -> qualified name


@dataclass(frozen=True)
class _Container:
    """Where an item sits: its module, its parent symbol, and an impl's or trait's path."""

    module: _Module
    parent: str
    owner_path: str | None = None  # methods are named <owner_path>::<name>
    in_trait: Visibility | None = None  # a trait's items take the trait's visibility


class _Walker:
    def __init__(self, path: str, data: bytes, builder: ts.Builder) -> None:
        self.crate, root = _crate_and_module(path)
        self.data = data
        self.b = builder
        self.root = _Module(root)
        self.fn_context: dict[str, tuple[_Module, str | None]] = {}  # fn -> (module, impl path)

    def resolve_use(self, segs: list[str], module: _Module) -> tuple[list[str], Confidence]:
        head = segs[0]
        current = module.qualname.split("::")
        if head == "crate":
            return [*self.crate.split("::"), *segs[1:]], "high"
        if head == "self":
            return [*current, *segs[1:]], "high"
        if head == "super":
            ups = len(segs) - len([s for s in segs if s != "super"])
            rest = segs[ups:] if all(s == "super" for s in segs[:ups]) else segs[1:]
            return [*current[:max(len(current) - ups, 1)], *rest], "high"
        if head in module.names:
            return [*module.names[head].split("::"), *segs[1:]], "high"
        return segs, "medium"

    def run(self, root: Node) -> None:
        b = self.b
        b.symbol(self.root.qualname, self.root.qualname.rsplit("::", 1)[-1], "module",
                 Span(0, len(self.data), 1, max(root.end_point[0] + 1, 1)), None,
                 visibility="public")
        pending: list[tuple[Node, _Container]] = []
        self.enter(root, _Container(self.root, self.root.qualname), pending)
        while pending:
            node, where = pending.pop()
            self.item(node, where, pending)
        self.calls(root)

    def enter(self, body: Node, where: _Container, pending: list[tuple[Node, _Container]]) -> None:
        """Queue a body's items; a module body binds its item names first.

        Items nested deeper than ``_treesitter.MAX_DEPTH`` are not read (the file is
        generated or hostile; names would grow without bound).
        """
        if where.parent.count("::") > ts.MAX_DEPTH:
            return
        children = body.named_children
        errors = [c for c in children if c.type == "ERROR"]
        if errors:  # items inside a syntax error are still items of this body
            while errors:
                inner = errors.pop().named_children
                children.extend(inner)
                errors.extend(c for c in inner if c.type == "ERROR")
            children.sort(key=lambda c: c.start_byte)
        # Only what ``item`` reads: a function body's statements and expressions are many.
        children = [c for c in children if c.type in _READ]
        if where.parent == where.module.qualname:
            for child in children:
                if child.type in _ITEMS or child.type == "mod_item":
                    name = ts.text(child.child_by_field_name("name"), self.data)
                    if name:
                        where.module.names.setdefault(name, f"{where.module.qualname}::{name}")
        pending.extend((c, where) for c in reversed(children))

    def item(self, node: Node, where: _Container, pending: list[tuple[Node, _Container]]) -> None:
        kind = node.type
        if kind == "use_declaration":
            self.use(node, where)
        elif kind == "extern_crate_declaration":
            name = ts.text(node.child_by_field_name("name"), self.data)
            alias = ts.text(node.child_by_field_name("alias"), self.data) or name
            where.module.names[alias] = name
            self.b.relate("Imports", where.parent, name, node, "medium", (("import_kind", "crate"),))
        elif kind == "mod_item":
            self.module(node, where, pending)
        elif kind == "impl_item":
            self.impl(node, where, pending)
        elif kind in _ITEMS:
            self.define(node, _ITEMS[kind], where, pending)

    def define(self, node: Node, kind: SymbolKind, where: _Container,
               pending: list[tuple[Node, _Container]]) -> None:
        data = self.data
        name = ts.text(node.child_by_field_name("name"), data)
        if not name:
            return
        if kind == "function" and where.owner_path is not None:
            kind = "method"
        base = where.owner_path or where.parent
        visibility = where.in_trait or _visibility(node, data)
        signature = (f"macro_rules! {name}" if kind == "macro" else _signature(node, data))
        qualname = self.b.symbol(f"{base}::{name}", name, kind, ts.span(node), where.parent,
                                 visibility=visibility, signature=signature,
                                 scope=node.type == "function_item")
        body = node.child_by_field_name("body")
        if node.type == "function_item":
            self.fn_context[qualname] = (where.module, where.owner_path)
            if body is not None:  # items nested in a function belong to it
                self.enter(body, _Container(where.module, qualname), pending)
        elif kind == "trait" and body is not None:
            self.enter(body, _Container(where.module, qualname, qualname, visibility), pending)

    def module(self, node: Node, where: _Container,
               pending: list[tuple[Node, _Container]]) -> None:
        name = ts.text(node.child_by_field_name("name"), self.data)
        if not name:
            return
        body = node.child_by_field_name("body")
        qualname = self.b.symbol(f"{where.module.qualname}::{name}", name, "module",
                                 ts.span(node), where.parent, visibility=_visibility(node, self.data),
                                 signature=_signature(node, self.data),
                                 detail=() if body is not None else (("declaration", "external"),))
        if body is not None:
            inner = _Module(qualname)
            self.enter(body, _Container(inner, qualname), pending)

    def impl(self, node: Node, where: _Container, pending: list[tuple[Node, _Container]]) -> None:
        data = self.data
        self_type = node.child_by_field_name("type")
        trait = node.child_by_field_name("trait")
        type_name = _type_name(self_type, data)
        written_type = one_line(ts.text(self_type, data), 120)
        written_trait = one_line(ts.text(trait, data), 120)
        name = f"impl {written_trait} for {written_type}" if trait else f"impl {written_type}"
        detail = (("self_type", written_type), *((("trait", written_trait),) if trait else ()))
        qualname = self.b.symbol(f"{where.module.qualname}::<{name}>", name, "impl", ts.span(node),
                                 where.parent, signature=_signature(node, data), detail=detail)
        if trait is not None:
            target, confidence = self.resolve_name(_segments(ts.text(trait, data)), where.module)
            self.b.relate("Implements", qualname, target, trait, confidence)
        if self_type is not None:
            type_path = _type_path(self_type, data)
            target, confidence = self.resolve_name(_segments(type_path), where.module)
            self.b.relate("References", qualname, target, self_type, confidence)
        body = node.child_by_field_name("body")
        if body is not None:
            owner = f"{where.module.qualname}::{type_name}"
            self.enter(body, _Container(where.module, qualname, owner), pending)

    def use(self, node: Node, where: _Container) -> None:
        argument = node.child_by_field_name("argument")
        if argument is None:
            return
        stack: list[tuple[Node, list[str]]] = [(argument, [])]
        leaves: list[tuple[list[str], str | None, bool, Node]] = []
        while stack:
            tree, prefix = stack.pop()
            if tree.type == "scoped_use_list":
                path = tree.child_by_field_name("path")
                lst = tree.child_by_field_name("list")
                if lst is not None:
                    stack.append((lst, [*prefix, *_segments(ts.text(path, self.data))]))
            elif tree.type == "use_list":
                stack.extend((c, prefix) for c in reversed(tree.named_children))
            elif tree.type == "use_as_clause":
                written = ts.text(tree.child_by_field_name("path"), self.data)
                alias_text = ts.text(tree.child_by_field_name("alias"), self.data)
                leaves.append(([*prefix, *_segments(written)], alias_text or None, False, tree))
            elif tree.type == "use_wildcard":
                inner = tree.named_children
                leaves.append(([*prefix, *(_segments(ts.text(inner[0], self.data))
                                           if inner else [])], None, True, tree))
            elif tree.type != "comment":
                leaves.append(([*prefix, *_segments(ts.text(tree, self.data))], None, False, tree))
        for segs, alias, glob, leaf in leaves:
            self.use_leaf(segs, alias, glob, leaf, where)

    def use_leaf(self, segs: list[str], alias: str | None, glob: bool, leaf: Node,
                 where: _Container) -> None:
        if not segs:
            return
        self_leaf = len(segs) > 1 and segs[-1] == "self"
        if self_leaf:
            segs = segs[:-1]
        import_kind = "glob" if glob else "self" if self_leaf \
            else segs[0] if segs[0] in ("crate", "super", "self") else "single"
        resolved, confidence = self.resolve_use(segs, where.module)
        target = "::".join(resolved)
        if not glob:
            where.module.names[alias or resolved[-1]] = target
        detail = (("import_kind", import_kind), *((("alias", alias),) if alias else ()))
        self.b.relate("Imports", where.parent, target, leaf, confidence, detail)

    def resolve_name(self, segs: list[str], module: _Module,
                     impl: str | None = None) -> tuple[str, Confidence]:
        """Resolve a path used in code (not a ``use``): medium when resolved, else low."""
        if not segs:
            return "_", "low"
        if segs[0] == "Self" and impl is not None:
            return "::".join([impl, *segs[1:]]), "medium"
        if segs[0] in ("crate", "self", "super") or segs[0] in module.names:
            resolved, _ = self.resolve_use(segs, module)
            return "::".join(resolved), "medium"
        return "::".join(segs), "low"

    def calls(self, root: Node) -> None:
        b, data = self.b, self.data
        confidence: Confidence
        for callee in ts.query_captures("rust", _CALLS, root).get("f", []):
            caller = b.scope_at(callee.start_byte, self.root.qualname)
            module, impl = self.fn_context.get(caller, (self.root, None))
            if callee.type == "generic_function":
                callee = callee.child_by_field_name("function") or callee
            if callee.type == "identifier":
                name = ts.text(callee, data)
                bound = module.names.get(name)
                target, confidence = (bound, "medium") if bound else (name, "low")
            elif callee.type == "scoped_identifier":
                target, confidence = self.resolve_name(_segments(ts.text(callee, data)), module, impl)
            elif callee.type == "field_expression":
                value = callee.child_by_field_name("value")
                method = ts.text(callee.child_by_field_name("field"), data)
                if value is not None and value.type == "self" and impl is not None:
                    target, confidence = f"{impl}::{method}", "medium"
                elif value is not None and value.type in ("identifier", "self"):
                    target, confidence = f"{ts.text(value, data)}.{method}", "low"
                else:
                    target, confidence = method, "low"
            else:
                continue
            if target:
                b.relate("Calls", caller, target, callee, confidence)


def _type_path(node: Node, data: bytes) -> str:
    """The path of a type without references and generic arguments."""
    current: Node | None = node
    while current is not None and current.type in ("reference_type", "generic_type",
                                                   "pointer_type"):
        current = current.child_by_field_name("type")
    return ts.text(current, data) if current is not None else ts.text(node, data)


class RustExtractor(ts.TreeSitterExtractor):
    """Rust source files: items, uses, impls and calls (implements ``Extractor``).

    A file's path names its crate and module (``module_name``).
    """

    name: str = "rust"
    suffixes: tuple[str, ...] = (".rs",)

    def module_name(self, path: str) -> str:
        """Return the module path of a repository-relative file (see the module docs)."""
        return module_name(path)

    def walk(self, path: str, grammar: str, root: Node, data: bytes, builder: ts.Builder) -> str:
        """Record the file's items and calls; return its module path."""
        walker = _Walker(path, data, builder)
        walker.run(root)
        return walker.root.qualname
