"""Go extraction with tree-sitter (the ``tree-sitter-go`` wheel): one ``Extractor``.

A Go package is a directory, so the module of ``cmd/tool/main.go`` is ``cmd/tool``
(``module_name``); a file at the repository root is named by its ``package`` clause.
Import paths are kept as written (``fmt``, ``github.com/x/y/z``): without ``go.mod``
(the extractor does no I/O) a path cannot be mapped to a directory.

Symbols: the module, functions (``<module>.F``), methods (``<module>.<Recv>.M``, the
receiver's type without ``*`` and type parameters), and top-level types (``struct``,
``interface``, other types and aliases as ``type_alias``), constants and variables.
Visibility: ``public`` when the name is capitalised (exported), else ``private``.
Relations: ``Contains`` and ``Defines`` (high), ``Imports`` per import spec (high;
``alias`` in ``detail``), and ``Calls``: ``F()`` to a function of the file, ``pkg.F()``
through the file's imports to ``<import path>.F``, ``r.M()`` on a method's receiver
to ``<module>.<Recv>.M`` when the file defines it (medium); else the name as written
(low).
"""

from __future__ import annotations

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

__all__ = ["GoExtractor", "module_name"]

_CALLS = "(call_expression function: (_) @f)"
_TYPE_KINDS: dict[str, SymbolKind] = {"struct_type": "struct", "interface_type": "interface"}


def module_name(path: str) -> str | None:
    """Return a Go file's package directory (``cmd/tool``), None at the repository root.

    Args:
        path: The repository-relative path.

    Returns:
        The directory, or None when the file sits at the root.
    """
    parent = PurePosixPath(path).parent.as_posix()
    return None if parent in ("", ".", "/") else parent.strip("/")


def _visibility(name: str) -> Visibility:
    return "public" if name[:1].isupper() else "private"


def _receiver(node: Node, data: bytes) -> tuple[str, str]:
    """(receiver variable, receiver type name) of a method declaration."""
    receiver = node.child_by_field_name("receiver")
    params = [c for c in receiver.named_children if c.type == "parameter_declaration"] \
        if receiver is not None else []
    if not params:
        return "", "_"
    variable = ts.text(params[0].child_by_field_name("name"), data)
    kind: Node | None = params[0].child_by_field_name("type")
    while kind is not None and kind.type in ("pointer_type", "generic_type"):
        kind = kind.child_by_field_name("type") if kind.type == "generic_type" else \
            (kind.named_children[0] if kind.named_children else None)
    return variable, ts.text(kind, data) or "_"


class _Walker:
    def __init__(self, path: str, data: bytes, builder: ts.Builder, root: Node) -> None:
        self.data = data
        self.b = builder
        package = next((c for c in root.named_children if c.type == "package_clause"), None)
        name = ts.text(package.named_children[0], data) if package and package.named_children \
            else "main"
        self.module = module_name(path) or name
        self.imports: dict[str, str] = {}  # local package name -> import path
        self.receivers: dict[str, tuple[str, str]] = {}  # method -> (variable, type path)

    def run(self, root: Node) -> None:
        data, b, module = self.data, self.b, self.module
        b.symbol(module, module.rsplit("/", 1)[-1], "module",
                 Span(0, len(data), 1, max(root.end_point[0] + 1, 1)), None, visibility="public")
        for node, _ in ts.walk(root, lambda n: n.type in ("source_file", "ERROR")):
            if node.type == "import_spec":
                self.import_spec(node)
            elif node.type == "import_declaration":
                for spec, _ in ts.walk(node, lambda n: n.type != "import_spec"):
                    if spec.type == "import_spec":
                        self.import_spec(spec)
            elif node.type == "function_declaration":
                self.define(node, "function", f"{module}.", module)
            elif node.type == "method_declaration":
                variable, recv = _receiver(node, data)
                qualname = self.define(node, "method", f"{module}.{recv}.", module)
                if qualname:
                    self.receivers[qualname] = (variable, f"{module}.{recv}")
            elif node.type in ("type_declaration", "const_declaration", "var_declaration"):
                self.declaration(node)
        self.calls(root)

    def define(self, node: Node, kind: SymbolKind, prefix: str, parent: str) -> str:
        name = ts.text(node.child_by_field_name("name"), self.data)
        if not name:
            return ""
        body = node.child_by_field_name("body")
        end = body.start_byte if body is not None else node.end_byte
        signature = one_line(self.data[node.start_byte:end].decode("utf-8", "replace"))
        return self.b.symbol(f"{prefix}{name}", name, kind, ts.span(node), parent,
                             visibility=_visibility(name), signature=signature,
                             scope=kind in ("function", "method"))

    def declaration(self, node: Node) -> None:
        for spec in node.named_children:
            name_node = spec.child_by_field_name("name")
            names = [name_node] if name_node is not None else []
            if spec.type in ("const_spec", "var_spec"):
                names = [c for c in spec.children_by_field_name("name") if c.type == "identifier"]
            for name_node in names:
                name = ts.text(name_node, self.data)
                if not name or name == "_":
                    continue
                kind: SymbolKind = "const" if spec.type == "const_spec" else \
                    "variable" if spec.type == "var_spec" else \
                    _TYPE_KINDS.get(getattr(spec.child_by_field_name("type"), "type", ""),
                                    "type_alias")
                keyword = node.type.split("_", 1)[0]  # type, const, var
                header = f"{keyword} {ts.text(spec, self.data).split('{', 1)[0]}"
                self.b.symbol(f"{self.module}.{name}", name, kind, ts.span(spec), self.module,
                              visibility=_visibility(name), signature=one_line(header))

    def import_spec(self, spec: Node) -> None:
        path = ts.text(spec.child_by_field_name("path"), self.data).strip("\"`")
        if not path:
            return
        alias = ts.text(spec.child_by_field_name("name"), self.data)
        local = alias or path.rsplit("/", 1)[-1]
        if local not in ("_", "."):
            self.imports[local] = path
        self.b.relate("Imports", self.module, path, spec, "high",
                      (("alias", alias),) if alias else ())

    def calls(self, root: Node) -> None:
        b = self.b
        defined = {s.qualname for s in b.symbols}
        for callee in ts.query_captures("go", _CALLS, root).get("f", []):
            caller = b.scope_at(callee.start_byte, self.module)
            target, confidence = self.resolve(callee, caller, defined)
            if target:
                b.relate("Calls", caller, target, callee, confidence)

    def resolve(self, callee: Node, caller: str, defined: set[str]) -> tuple[str, Confidence]:
        data = self.data
        if callee.type == "identifier":
            name = ts.text(callee, data)
            local = f"{self.module}.{name}"
            return (local, "medium") if local in defined else (name, "low")
        if callee.type != "selector_expression":
            return "", "low"
        operand = callee.child_by_field_name("operand")
        field = ts.text(callee.child_by_field_name("field"), data)
        head = ts.text(operand, data) if operand is not None and operand.type == "identifier" \
            else ""
        if head in self.imports:
            return f"{self.imports[head]}.{field}", "medium"
        variable, type_path = self.receivers.get(caller, ("", ""))
        if head and head == variable and f"{type_path}.{field}" in defined:
            return f"{type_path}.{field}", "medium"
        return (f"{head}.{field}" if head else field), "low"


class GoExtractor(ts.TreeSitterExtractor):
    """Go source files: functions, methods, types, imports and calls (implements ``Extractor``).

    A file's directory names its package (``module_name``).
    """

    name: str = "go"
    suffixes: tuple[str, ...] = (".go",)

    def module_name(self, path: str) -> str | None:
        """Return the file's package directory (see ``module_name``)."""
        return module_name(path)

    def walk(self, path: str, grammar: str, root: Node, data: bytes, builder: ts.Builder) -> str:
        """Record the file's package members and calls; return the package."""
        walker = _Walker(path, data, builder, root)
        walker.run(root)
        return walker.module
