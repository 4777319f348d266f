"""The Python extractor on a small real module: names, imports, calls, spans, visibility."""

from __future__ import annotations

from pathlib import Path

from ctxstore.code.languages import Extraction, module_name
from ctxstore.code.python import PythonExtractor

FIXTURE = Path(__file__).parent / "fixtures" / "extract" / "shapes.py"
PATH = "src/geo/shapes.py"


def _extract() -> tuple[str, Extraction]:
    text = FIXTURE.read_text()
    return text, PythonExtractor().extract(PATH, text)


def _rels(got: Extraction, label: str) -> list[tuple[str, str, str]]:
    return [(r.source, r.target, r.evidence.confidence) for r in got.relations if r.label == label]


def test_extract_python_module_name_handles_src_layout_and_packages() -> None:
    assert module_name("src/geo/shapes.py") == "geo.shapes"
    assert module_name("src/geo/__init__.py") == "geo"
    assert module_name("Lib/json/decoder.py") == "Lib.json.decoder"


def test_extract_python_qualified_names_kinds_and_visibility() -> None:
    _, got = _extract()
    assert [(s.qualname, s.kind, s.visibility) for s in got.symbols] == [
        ("geo.shapes", "module", "public"),
        ("geo.shapes.Circle", "class", "public"),
        ("geo.shapes.Circle.__init__", "method", "public"),
        ("geo.shapes.Circle.area", "method", "public"),
        ("geo.shapes.Circle._square", "method", "private"),
        ("geo.shapes.Circle.scaled", "method", "public"),
        ("geo.shapes.make", "function", "public"),
        ("geo.shapes._helper", "function", "private"),
    ]
    assert got.complete


def test_extract_python_spans_point_at_the_definitions() -> None:
    text, got = _extract()
    data = text.encode()
    by_name = {s.qualname: s for s in got.symbols}
    area = by_name["geo.shapes.Circle.area"].span
    assert data[area.start_byte:area.end_byte] == \
        b"def area(self) -> float:\n        return math.pi * self._square()"
    assert text.splitlines()[area.start_line - 1].strip() == "def area(self) -> float:"
    for sym in got.symbols[1:]:
        chunk = data[sym.span.start_byte:sym.span.end_byte].decode()
        assert chunk.startswith(("def ", "class ")) and sym.name in chunk.split("\n", 1)[0]


def test_extract_python_signatures_are_one_line_headers_without_comments() -> None:
    _, got = _extract()
    sigs = {s.qualname: s.signature for s in got.symbols}
    assert sigs["geo.shapes.Circle.__init__"] == "def __init__(self, r: float) -> None"
    assert sigs["geo.shapes.make"] == "def make(r: float = 1.0) -> Circle"
    assert sigs["geo.shapes.Circle"] == "class Circle(Shape)"


def test_extract_python_imports_are_absolute() -> None:
    _, got = _extract()
    assert _rels(got, "Imports") == [
        ("geo.shapes", "__future__.annotations", "high"), ("geo.shapes", "math", "high"),
        ("geo.shapes", "collections.abc", "high"), ("geo.shapes", "geo.units", "high"),
        ("geo.shapes", "geo.base.Shape", "high"), ("geo.shapes", "geo.base._registry", "high")]
    aliased = [r.detail for r in got.relations if r.label == "Imports" and r.detail]
    assert aliased == [(("alias", "cabc"),), (("alias", "registry"),)]


def test_extract_python_calls_resolve_through_imports_self_and_module() -> None:
    _, got = _extract()
    assert _rels(got, "Calls") == [
        ("geo.shapes.Circle.__init__", "geo.units.check", "medium"),
        ("geo.shapes.Circle.area", "geo.shapes.Circle._square", "medium"),
        ("geo.shapes.Circle.scaled", "geo.shapes.make", "medium"),
        ("geo.shapes.make", "geo.base._registry.add", "medium"),
        ("geo.shapes.make", "geo.shapes.Circle", "medium"),
        ("geo.shapes._helper", "geo.shapes.make", "medium"),
    ]


def test_extract_python_unresolved_names_are_low_confidence() -> None:
    got = PythonExtractor().extract("m.py", "def f(x):\n    x.go()\n    self.nope()\n")
    assert _rels(got, "Calls") == [("m.f", "x.go", "low"), ("m.f", "self.nope", "low")]
    assert _rels(got, "References") == []


def test_extract_python_bases_references_and_types() -> None:
    _, got = _extract()
    assert _rels(got, "Implements") == [("geo.shapes.Circle", "geo.base.Shape", "medium")]
    assert ("geo.shapes.Circle.area", "math.pi", "medium") in _rels(got, "References")
    assert ("geo.shapes.make", "geo.shapes.Circle", "medium") in _rels(got, "References")
    assert set(_rels(got, "UsesType")) == {
        ("geo.shapes.Circle.scaled", "geo.shapes.Circle", "medium"),
        ("geo.shapes.make", "geo.shapes.Circle", "medium"),
        ("geo.shapes._helper", "collections.abc.Iterable", "medium")}


def test_extract_python_contains_and_defines() -> None:
    _, got = _extract()
    assert ("geo.shapes.Circle", "geo.shapes.Circle.area", "high") in _rels(got, "Contains")
    assert ("geo.shapes", "geo.shapes.Circle.area", "high") in _rels(got, "Defines")
    assert len(_rels(got, "Defines")) == len(got.symbols) - 1


def test_extract_python_syntax_error_is_incomplete_not_an_exception() -> None:
    got = PythonExtractor().extract("m.py", "def f(:\n    pass\n")
    assert not got.complete and got.symbols == ()


def test_extract_python_a_byte_order_mark_is_valid_python() -> None:
    got = PythonExtractor().extract("bom.py", "\ufeffdef bom_fn():\n    pass\n\n\nclass K:\n    pass\n")
    assert got.complete
    assert [(s.name, s.kind, s.span.start_line) for s in got.symbols if s.kind != "module"] == [
        ("bom_fn", "function", 1), ("K", "class", 5)]
