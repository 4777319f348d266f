"""The JavaScript/TypeScript extractors on small real modules: names, imports, calls, spans."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxstore.code.javascript import JavaScriptExtractor, TypeScriptExtractor, module_name
from ctxstore.code.languages import Extraction, extractor_for

FIXTURES = Path(__file__).parent / "fixtures" / "extract"


def _ts() -> tuple[bytes, Extraction]:
    text = (FIXTURES / "store.ts").read_text()
    return text.encode(), TypeScriptExtractor().extract("web/src/store.ts", text)


def _js() -> tuple[bytes, Extraction]:
    text = (FIXTURES / "app.js").read_text()
    return text.encode(), JavaScriptExtractor().extract("web/app.js", text)


def _rels(got: Extraction, label: str) -> list[tuple[str, str, str]]:
    return [(r.source, r.target, r.evidence.confidence) for r in got.relations if r.label == label]


@pytest.mark.parametrize("path,name", [("web/src/store.ts", "web/src/store"),
                                       ("web/src/ui/index.tsx", "web/src/ui"),
                                       ("lib/types.d.ts", "lib/types"), ("a.mjs", "a")])
def test_extract_javascript_module_name_drops_extension_and_index(path: str, name: str) -> None:
    assert module_name(path) == name


def test_extract_javascript_suffixes_pick_the_language() -> None:
    assert {extractor_for(f"x{s}").name for s in (".js", ".mjs", ".cjs", ".jsx")} == {"javascript"}  # type: ignore[union-attr]
    assert {extractor_for(f"x{s}").name for s in (".ts", ".mts", ".cts", ".tsx")} == {"typescript"}  # type: ignore[union-attr]


def test_extract_typescript_symbols_kinds_and_export_visibility() -> None:
    _, got = _ts()
    assert [(s.qualname, s.kind, s.visibility) for s in got.symbols] == [
        ("web/src/store", "module", "public"),
        ("web/src/store.Store", "interface", "public"),
        ("web/src/store.MemoryStore", "class", "public"),
        ("web/src/store.MemoryStore.get", "method", "public"),
        ("web/src/store.MemoryStore.norm", "method", "private"),
        ("web/src/store.Key", "type_alias", "public"),
        ("web/src/store.Mode", "enum", "private"),
        ("web/src/store.open", "function", "public"),
        ("web/src/store.helper", "function", "public"),  # exported by `export { }`
    ]
    assert got.complete


def test_extract_typescript_spans_point_at_the_declarations() -> None:
    data, got = _ts()
    by_name = {s.qualname: s for s in got.symbols}
    norm = by_name["web/src/store.MemoryStore.norm"].span
    assert data[norm.start_byte:norm.end_byte] == \
        b"private norm(key: string): string {\n    return path.normalize(key);\n  }"
    opened = by_name["web/src/store.open"].span
    assert data[opened.start_byte:].startswith(b"export function open(")
    assert data.splitlines()[opened.start_line - 1].startswith(b"export function open(")


def test_extract_typescript_imports_resolve_relative_specifiers() -> None:
    _, got = _ts()
    assert [t for _, t, _ in _rels(got, "Imports")] == [
        "react.default", "react.useState", "node:path", "web/src/cache.Cache", "web/types.Options"]


def test_extract_typescript_calls_and_heritage() -> None:
    _, got = _ts()
    calls = _rels(got, "Calls")
    assert ("web/src/store.MemoryStore.get", "web/src/store.MemoryStore.norm", "medium") in calls
    assert ("web/src/store.MemoryStore.norm", "node:path.normalize", "medium") in calls
    assert ("web/src/store.open", "react.useState", "medium") in calls
    assert ("web/src/store.open", "web/src/store.MemoryStore", "medium") in calls  # new
    assert ("web/src/store.helper", "web/src/store.open", "medium") in calls
    assert _rels(got, "Implements") == [
        ("web/src/store.MemoryStore", "web/src/cache.Cache", "medium"),
        ("web/src/store.MemoryStore", "web/src/store.Store", "medium")]


def test_extract_javascript_require_and_default_imports() -> None:
    _, got = _js()
    assert [t for _, t, _ in _rels(got, "Imports")] == ["fs", "web/lib/paths", "web/defaults.default"]
    assert "web/app.fs" not in {s.qualname for s in got.symbols}
    calls = _rels(got, "Calls")
    assert ("web/app.App.run", "web/app.App.load", "medium") in calls
    assert ("web/app.App.run", "fs.readFileSync", "medium") in calls
    assert ("web/app.App.run", "web/lib/paths.join", "medium") in calls
    assert ("web/app.start", "run", "low") in calls
    assert [(s.qualname, s.visibility) for s in got.symbols if s.kind == "class"] == \
        [("web/app.App", "public")]


def test_extract_javascript_syntax_error_is_incomplete() -> None:
    got = JavaScriptExtractor().extract("a.js", "function ok() {}\nfunction (( {\n")
    assert not got.complete and "a.ok" in {s.qualname for s in got.symbols}
