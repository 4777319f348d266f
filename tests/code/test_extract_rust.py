"""The Rust extractor on a small real module: items, visibility, uses, impls, calls, spans."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxstore.code.languages import Extraction
from ctxstore.code.rust import RustExtractor, module_name

FIXTURE = Path(__file__).parent / "fixtures" / "extract" / "walk.rs"
PATH = "crates/ignore/src/walk.rs"


def _extract() -> tuple[bytes, Extraction]:
    text = FIXTURE.read_text()
    return text.encode(), RustExtractor().extract(PATH, text)


def _rels(got: Extraction, label: str) -> list[tuple[str, str, str]]:
    return [(r.source, r.target, r.evidence.confidence) for r in got.relations if r.label == label]


@pytest.mark.parametrize("path,name", [
    ("crates/ignore/src/walk.rs", "ignore::walk"), ("crates/ignore/src/lib.rs", "ignore"),
    ("crates/ignore/src/dir/mod.rs", "ignore::dir"), ("crates/ignore/src/dir/glob.rs",
                                                      "ignore::dir::glob"),
    ("crates/grep-cli/src/main.rs", "grep_cli"), ("src/main.rs", "crate"),
    ("src/net/client.rs", "crate::net::client"), ("build.rs", "build"),
    ("tests/integration.rs", "tests::integration")])
def test_extract_rust_module_name_scheme(path: str, name: str) -> None:
    assert module_name(path) == name


def test_extract_rust_every_item_kind_with_visibility() -> None:
    _, got = _extract()
    assert [(s.qualname, s.kind, s.visibility) for s in got.symbols] == [
        ("ignore::walk", "module", "public"),
        ("ignore::walk::stats", "module", "private"),
        ("ignore::walk::inner", "module", "crate"),
        ("ignore::walk::inner::helper", "function", "super"),
        ("ignore::walk::Visitor", "trait", "public"),
        ("ignore::walk::Visitor::visit", "method", "public"),
        ("ignore::walk::Visitor::done", "method", "public"),
        ("ignore::walk::Walk", "struct", "public"),
        ("ignore::walk::WalkState", "enum", "public"),
        ("ignore::walk::<impl Walk>", "impl", None),
        ("ignore::walk::Walk::new", "method", "public"),
        ("ignore::walk::Walk::step", "method", "private"),
        ("ignore::walk::Walk::count", "method", "private"),
        ("ignore::walk::<impl Visitor for Walk>", "impl", None),
        ("ignore::walk::Walk::visit", "method", "private"),
        ("ignore::walk::MAX_DEPTH", "const", "public"),
        ("ignore::walk::NAME", "static", "private"),
        ("ignore::walk::Map", "type_alias", "public"),
        ("ignore::walk::walk_log", "macro", "private"),
        ("ignore::walk::top", "function", "private"),
    ]
    assert got.complete


def test_extract_rust_mod_declaration_names_the_module_of_its_file() -> None:
    _, got = _extract()
    (stats,) = [s for s in got.symbols if s.name == "stats"]
    assert stats.detail == (("declaration", "external"),)
    assert stats.qualname == module_name("crates/ignore/src/walk/stats.rs")


def test_extract_rust_spans_point_at_the_items() -> None:
    data, got = _extract()
    by_name = {s.qualname: s for s in got.symbols}
    count = by_name["ignore::walk::Walk::count"].span
    assert data[count.start_byte:count.end_byte] == b"fn count(&self) -> usize { self.seen.len() }"
    assert data.splitlines()[count.start_line - 1].strip().startswith(b"fn count")
    for sym in got.symbols[1:]:
        assert sym.name.encode() in data[sym.span.start_byte:sym.span.end_byte] or \
            sym.kind == "impl", sym
        line = data.splitlines()[sym.span.start_line - 1]
        assert data[sym.span.start_byte:].startswith(line.lstrip()[:10]), sym


def test_extract_rust_signatures() -> None:
    _, got = _extract()
    sigs = {s.qualname: s.signature for s in got.symbols}
    assert sigs["ignore::walk::Walk::new"] == "pub fn new(root: &Path) -> Walk"
    assert sigs["ignore::walk::walk_log"] == "macro_rules! walk_log"
    assert sigs["ignore::walk::MAX_DEPTH"] == "pub const MAX_DEPTH: usize = 64"


def test_extract_rust_use_trees_expand_with_import_kinds() -> None:
    _, got = _extract()
    uses = [(r.target, r.evidence.confidence, dict(r.detail)) for r in got.relations
            if r.label == "Imports"]
    assert uses == [
        ("std::collections::HashMap", "medium", {"import_kind": "single"}),
        ("std::path::Path", "medium", {"import_kind": "single"}),
        ("std::path::PathBuf", "medium", {"import_kind": "single"}),
        ("ignore::dir", "high", {"import_kind": "self"}),
        ("ignore::dir::Ignore", "high", {"import_kind": "crate", "alias": "DirIgnore"}),
        ("ignore::util", "high", {"import_kind": "glob"}),
    ]


def test_extract_rust_super_and_self_paths_resolve() -> None:
    got = RustExtractor().extract("src/a/b.rs", "use super::x::Y;\nuse self::c::D;\n"
                                                "use super::super::Z;\n")
    assert [(r.target, dict(r.detail)["import_kind"]) for r in got.relations
            if r.label == "Imports"] == [("crate::a::x::Y", "super"), ("crate::a::b::c::D", "self"),
                                         ("crate::Z", "super")]


def test_extract_rust_impls_carry_self_type_and_trait() -> None:
    _, got = _extract()
    impl = next(s for s in got.symbols if s.qualname == "ignore::walk::<impl Visitor for Walk>")
    assert impl.detail == (("self_type", "Walk"), ("trait", "Visitor"))
    assert _rels(got, "Implements") == [("ignore::walk::<impl Visitor for Walk>",
                                         "ignore::walk::Visitor", "medium")]
    assert ("ignore::walk::<impl Visitor for Walk>", "ignore::walk::Walk::visit", "high") in \
        _rels(got, "Contains")


def test_extract_rust_calls_resolve_or_stay_low() -> None:
    _, got = _extract()
    calls = _rels(got, "Calls")
    assert ("ignore::walk::inner::helper", "ignore::walk::top", "medium") in calls  # crate::
    assert ("ignore::walk::Walk::new", "ignore::dir::Ignore::new", "medium") in calls  # alias
    assert ("ignore::walk::Walk::new", "std::collections::HashMap::new", "medium") in calls
    assert ("ignore::walk::Walk::step", "ignore::walk::Walk::count", "medium") in calls  # self.
    assert ("ignore::walk::Walk::step", "ignore::walk::inner::helper", "medium") in calls
    assert ("ignore::walk::Visitor::done", "ignore::walk::Visitor::visit", "medium") in calls
    assert ("ignore::walk::top", "unknown::thing", "low") in calls


def test_extract_rust_syntax_error_keeps_what_parses() -> None:
    got = RustExtractor().extract("src/lib.rs", "fn ok() {}\nfn broken( {\npub struct S;\n")
    assert not got.complete
    assert "crate::ok" in {s.qualname for s in got.symbols}
