"""The Go extractor on a small real file: names, exported visibility, imports, calls, spans."""

from __future__ import annotations

from pathlib import Path

from ctxstore.code.go import GoExtractor, module_name
from ctxstore.code.languages import Extraction

FIXTURE = Path(__file__).parent / "fixtures" / "extract" / "server.go"
PATH = "internal/server/server.go"


def _extract() -> tuple[bytes, Extraction]:
    text = FIXTURE.read_text()
    return text.encode(), GoExtractor().extract(PATH, text)


def _rels(got: Extraction, label: str) -> list[tuple[str, str, str]]:
    return [(r.source, r.target, r.evidence.confidence) for r in got.relations if r.label == label]


def test_extract_go_module_is_the_package_directory() -> None:
    assert module_name("internal/server/server.go") == "internal/server"
    assert module_name("main.go") is None
    got = GoExtractor().extract("main.go", "package tool\nfunc Run() {}\n")
    assert [s.qualname for s in got.symbols] == ["tool", "tool.Run"]


def test_extract_go_symbols_with_exported_visibility() -> None:
    _, got = _extract()
    assert [(s.qualname, s.kind, s.visibility) for s in got.symbols] == [
        ("internal/server", "module", "public"),
        ("internal/server.Server", "struct", "public"),
        ("internal/server.Handler", "interface", "public"),
        ("internal/server.handlerFunc", "type_alias", "private"),
        ("internal/server.DefaultAddr", "const", "public"),
        ("internal/server.started", "variable", "private"),
        ("internal/server.New", "function", "public"),
        ("internal/server.Server.Start", "method", "public"),
        ("internal/server.Server.log", "method", "private"),
    ]
    assert got.complete


def test_extract_go_spans_and_signatures() -> None:
    data, got = _extract()
    by_name = {s.qualname: s for s in got.symbols}
    log = by_name["internal/server.Server.log"]
    assert data[log.span.start_byte:log.span.end_byte] == \
        b"func (s *Server) log(msg string) {\n\tfmt.Println(msg)\n\tother.Thing()\n}"
    assert data.splitlines()[log.span.start_line - 1] == b"func (s *Server) log(msg string) {"
    assert log.signature == "func (s *Server) log(msg string)"
    assert by_name["internal/server.Server"].signature == "type Server struct"


def test_extract_go_imports_keep_paths_and_aliases() -> None:
    _, got = _extract()
    assert [(r.target, r.detail) for r in got.relations if r.label == "Imports"] == [
        ("fmt", ()), ("net/http", (("alias", "nethttp"),)), ("embed", (("alias", "_"),))]


def test_extract_go_calls_resolve_through_imports_and_receivers() -> None:
    _, got = _extract()
    assert _rels(got, "Calls") == [
        ("internal/server.New", "net/http.NewServeMux", "medium"),
        ("internal/server.Server.Start", "internal/server.Server.log", "medium"),
        ("internal/server.Server.Start", "net/http.ListenAndServe", "medium"),
        ("internal/server.Server.log", "fmt.Println", "medium"),
        ("internal/server.Server.log", "other.Thing", "low"),
    ]


def test_extract_go_syntax_error_is_incomplete() -> None:
    got = GoExtractor().extract("a/b.go", "package b\nfunc Ok() {}\nfunc broken( {\n")
    assert not got.complete and "a.Ok" in {s.qualname for s in got.symbols}
