"""The Extractor contract, run against every registered extractor, plus Python specifics.

Every extractor: deterministic, spans inside the file, qualified names unique per
file, relations between its own symbols and names with evidence, and no exception on
any input (garbage, binary-ish, huge): an empty or partial extraction instead.
"""

from __future__ import annotations

import random

import pytest

from ctxstore.code.languages import (
    MAX_SOURCE_BYTES,
    Extraction,
    Extractor,
    extractor_for,
    register,
    registered,
)
from ctxstore.code.languages import (
    module_name as languages_module_name,
)
from ctxstore.code.python import PythonExtractor, module_name
from ctxstore.model.vocab import CODE_EDGE_LABELS

EXTRACTORS = registered()

SAMPLES = {
    "python": ('"""Doc."""\nimport os\nfrom .sib import thing as t\n\n\nclass Shape(Base):\n'
               '    def area(self) -> float:\n        return helper(self)\n\n'
               '    @property\n    def name(self):\n        return "é"\n\n'
               '    @name.setter\n    def name(self, v):\n        os.path.join("a", v)\n\n\n'
               'def helper(s):\n    def inner():\n        return t.go()\n    return inner()\n'),
    "markdown": ("# Title\n\nintro é\n\n## Install\n\n```sh\n# not a heading\n```\n\n"
                 "### Linux ###\n\n## Install\n\ntext\n# Appendix\n"),
    "rust": ("use std::io::{self, Read};\nmod net;\npub(crate) mod inner { pub fn f() {} }\n"
             "pub trait Shape { fn area(&self) -> f64; }\npub struct Circle { r: f64 }\n"
             "impl Shape for Circle {\n    fn area(&self) -> f64 { inner::f(); self.r }\n}\n"
             "impl Circle { fn new() -> Self { Circle { r: 1.0 } } fn new() {} }\n"
             "macro_rules! m { () => {} }\nconst K: u8 = 1;\nstatic S: &str = \"é\";\n"
             "type A = u8;\nenum E { X }\n"),
    "javascript": ("import React, { useState as us } from 'react';\nconst fs = require('fs');\n"
                   "export class Box extends React.Component {\n  render() { return us(1); }\n}\n"
                   "export function f(a) { return new Box(a); }\nconst g = () => f('é');\n"
                   "function f() {}\n"),
    "typescript": ("import { helper } from './util';\nexport interface Shape { area(): number }\n"
                   "export class Circle implements Shape {\n  area(): number { return helper(); }\n}\n"
                   "type Id = string;\nenum Color { Red }\nexport const é = (x: Id) => x;\n"),
    "go": ("package shapes\n\nimport (\n\t\"fmt\"\n\tm \"math\"\n)\n\n"
           "type Circle struct{ R float64 }\n\ntype Shape interface{ Area() float64 }\n\n"
           "func (c *Circle) Area() float64 { fmt.Println(\"é\"); return m.Pi * c.R }\n\n"
           "func New() *Circle { return &Circle{} }\n\nfunc New() {}\n"),
}


def _path(ex: Extractor) -> str:
    return f"pkg/sample{ex.suffixes[0]}"


def _sample(ex: Extractor) -> str:
    return SAMPLES.get(ex.name, "")


def _check_shape(ex: Extractor, text: str, got: Extraction) -> None:
    size = len(text.encode("utf-8", "surrogatepass"))
    assert got.language == ex.name
    names = [s.qualname for s in got.symbols]
    assert len(names) == len(set(names)), "qualified names must be unique per file"
    for sym in got.symbols:
        span = sym.span
        assert 0 <= span.start_byte <= span.end_byte <= size, sym
        assert 1 <= span.start_line <= span.end_line, sym
        assert sym.parent is None or sym.parent in names, sym
        assert sym.name and sym.qualname
    for rel in got.relations:
        assert rel.label in CODE_EDGE_LABELS, rel
        assert rel.source in names, rel
        assert rel.target
        ev = rel.evidence
        assert ev.tool and ev.confidence in ("high", "medium", "low")
        assert 0 <= ev.span.start_byte <= ev.span.end_byte <= size, rel


def _garbage() -> list[str]:
    rng = random.Random(12)
    noise = "".join(chr(rng.randrange(0, 0x3000)) for _ in range(4000))
    return [
        "",
        "\x00\x01\x02\xff" * 50,
        bytes(range(256)).decode("latin-1") * 20,
        noise,
        "\ud800 lone surrogate",
        "def (:\n  class\n\t\tx = = 1\n" * 30,
        "(" * 5000,
        "[" * 300 + "]" * 300,
        "if x:\n" + "".join("    " * i + "if x:\n" for i in range(1, 150)),
        "# " * 3000 + "\n" + "#" * 10 + "\n",
        "```\n# inside an unclosed fence\n",
        "\r\n".join(["# a", "def f(): pass", "## b"] * 50),
        "x\r" * 100,
        "{" * 5000 + "}" * 5000,  # deep nesting in brace languages
        "fn f() {" + "{" * 5000 + "}" * 5000 + "}\n",
        "function f() { return " + "(" * 5000 + "1" + ")" * 5000 + " }\n",
        "func f() {\n" + "if x {\n" * 2000 + "}\n" * 2000 + "}\n",
        "class A:\n" + "".join("    " * i + "def f():\n" for i in range(1, 90)) + "    " * 90 + "pass\n",
        "use a::" + "{b::" * 3000 + "c" + "}" * 3000 + ";\n",
        "mod m { " * 3000 + "}" * 3000,
        "x = 1\n\x00\x00 fn f() {}\x00 function g() {} \x00\n",
        "def f\udcff(): pass\nfn \ud800() {}\nfunction \udfff() {}\n",
    ]


@pytest.fixture(params=EXTRACTORS, ids=lambda e: e.name)
def extractor(request: pytest.FixtureRequest) -> Extractor:
    ex: Extractor = request.param
    return ex


class ExtractorContract:
    """What every registered Extractor does."""

    def test_extractor_implements_protocol(self, extractor: Extractor) -> None:
        assert isinstance(extractor, Extractor)
        assert extractor.suffixes and all(s.startswith(".") for s in extractor.suffixes)

    def test_extractor_is_found_by_suffix(self, extractor: Extractor) -> None:
        for suffix in extractor.suffixes:
            assert extractor_for(f"a/b/file{suffix}") is extractor
            assert extractor_for(f"a/b/FILE{suffix.upper()}") is extractor

    def test_extractor_sample_has_symbols_and_valid_shape(self, extractor: Extractor) -> None:
        text = _sample(extractor)
        assert text, f"add a sample for {extractor.name} to SAMPLES"
        got = extractor.extract(_path(extractor), text)
        assert got.complete and got.symbols
        _check_shape(extractor, text, got)

    def test_extractor_is_deterministic(self, extractor: Extractor) -> None:
        text = _sample(extractor)
        assert extractor.extract(_path(extractor), text) == \
            extractor.extract(_path(extractor), text)

    def test_extractor_spans_cover_the_text_they_name(self, extractor: Extractor) -> None:
        text = _sample(extractor)
        data = text.encode()
        for sym in extractor.extract(_path(extractor), text).symbols:
            if sym.kind != "module":
                assert sym.name.encode() in data[sym.span.start_byte:sym.span.end_byte], sym

    @pytest.mark.parametrize("case", range(len(_garbage())))
    def test_extractor_never_raises_on_garbage(self, extractor: Extractor, case: int) -> None:
        text = _garbage()[case]
        got = extractor.extract(_path(extractor), text)
        _check_shape(extractor, text, got)

    def test_extractor_huge_input_is_an_incomplete_extraction(self,
                                                              extractor: Extractor) -> None:
        text = ("# h\nx = 1\n" * (MAX_SOURCE_BYTES // 10 + 1))
        got = extractor.extract(_path(extractor), text)
        assert not got.complete and got.symbols == () and got.relations == ()

    def test_extractor_empty_path_is_accepted(self, extractor: Extractor) -> None:
        _check_shape(extractor, _sample(extractor), extractor.extract("", _sample(extractor)))


class TestExtractor(ExtractorContract):
    """Runs the contract against each registered extractor."""


def test_extractors_builtins_are_registered() -> None:
    assert {e.name for e in registered()} >= {"python", "markdown", "rust", "javascript",
                                              "typescript", "go"}
    assert extractor_for("x.rs").name == "rust"  # type: ignore[union-attr]
    assert extractor_for("x.tsx").name == "typescript"  # type: ignore[union-attr]
    assert extractor_for("Makefile") is None and extractor_for("x.c") is None


def test_extractors_builtin_suffix_table_matches_each_extractor() -> None:
    from ctxstore.code import languages

    for suffix, spec in languages._BUILTIN_BY_SUFFIX.items():
        assert suffix in languages._builtin(*spec).suffixes, suffix
    claimed = {s for e in registered() if e.name in {"python", "markdown", "rust", "javascript",
                                                      "typescript", "go"} for s in e.suffixes}
    assert claimed == set(languages._BUILTIN_BY_SUFFIX)


def test_extractors_a_lookup_imports_only_its_own_language() -> None:
    import subprocess
    import sys

    probe = ("import sys; from ctxstore.code.languages import extractor_for; "
             "assert extractor_for('a/b.py').name == 'python'; "
             "print(sorted(m for m in sys.modules if m.startswith(('ctxstore.code.', 'tree_sitter'))))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['ctxstore.code.languages', 'ctxstore.code.python']", out.stdout


@pytest.mark.parametrize("path,name", [("src/pkg/mod.py", "pkg.mod"),
                                       ("crates/ignore/src/walk.rs", "ignore::walk"),
                                       ("web/src/ui/index.tsx", "web/src/ui"),
                                       ("cmd/tool/main.go", "cmd/tool"), ("README.md", None),
                                       ("Makefile", None)])
def test_extractors_module_name_by_language(path: str, name: str | None) -> None:
    assert languages_module_name(path) == name


@pytest.mark.slow
def test_extractor_ten_megabyte_minified_line_is_incomplete_and_quick(
        extractor: Extractor) -> None:
    text = "a=1;" * (10 << 18)  # 10 MB on one line
    got = extractor.extract(_path(extractor), text)
    assert not got.complete and got.symbols == ()


def test_extractors_register_refuses_a_taken_suffix() -> None:
    class Other:
        name = "other-python"
        suffixes = (".py",)

        def extract(self, path: str, text: str) -> Extraction:
            return Extraction(self.name)

    with pytest.raises(ValueError):
        register(Other())
    assert extractor_for("a.py").name == "python"  # type: ignore[union-attr]


# -- Python specifics ---------------------------------------------------------------------

def _py(text: str, path: str = "pkg/mod.py") -> Extraction:
    return PythonExtractor().extract(path, text)


def _rels(got: Extraction, label: str) -> list[tuple[str, str, str]]:
    return [(r.source, r.target, r.evidence.confidence) for r in got.relations if r.label == label]


@pytest.mark.parametrize("path,name", [("pkg/mod.py", "pkg.mod"), ("pkg/__init__.py", "pkg"),
                                       ("mod.pyi", "mod"), ("__init__.py", "__main__")])
def test_python_module_name_from_path(path: str, name: str) -> None:
    assert module_name(path) == name


def test_python_qualified_names_follow_qualname() -> None:
    got = _py("class C:\n    def m(self):\n        def inner(): pass\n"
              "    class D:\n        async def n(self): pass\ndef f(): pass\n")
    kinds = {s.qualname: s.kind for s in got.symbols}
    assert kinds == {"pkg.mod": "module", "pkg.mod.C": "class", "pkg.mod.C.m": "method",
                     "pkg.mod.C.m.<locals>.inner": "function", "pkg.mod.C.D": "class",
                     "pkg.mod.C.D.n": "method", "pkg.mod.f": "function"}


def test_python_redefinition_gets_a_numbered_qualname() -> None:
    got = _py("class C:\n    @property\n    def x(self): pass\n    @x.setter\n"
              "    def x(self, v): pass\nif a:\n    def f(): pass\nelse:\n    def f(): pass\n")
    assert [s.qualname for s in got.symbols[1:]] == ["pkg.mod.C", "pkg.mod.C.x", "pkg.mod.C.x#2",
                                                     "pkg.mod.f", "pkg.mod.f#2"]


def test_python_spans_are_lines_and_bytes() -> None:
    text = "x = 'é'\n\ndef f():\n    return 1\n"
    (f,) = [s for s in _py(text).symbols if s.name == "f"]
    assert (f.span.start_line, f.span.end_line) == (3, 4)
    assert text.encode()[f.span.start_byte:f.span.end_byte] == b"def f():\n    return 1"


def test_python_contains_and_defines_relations() -> None:
    got = _py("class C:\n    def m(self): pass\n")
    assert _rels(got, "Contains") == [("pkg.mod", "pkg.mod.C", "high"),
                                      ("pkg.mod.C", "pkg.mod.C.m", "high")]
    assert _rels(got, "Defines") == [("pkg.mod", "pkg.mod.C", "high"),
                                     ("pkg.mod", "pkg.mod.C.m", "high")]


def test_python_imports_absolute_relative_and_aliased() -> None:
    got = _py("import os.path\nimport numpy as np\nfrom . import sib\nfrom ..up import x as y\n"
              "from .here import *\n", path="a/b/mod.py")
    assert [t for _, t, _ in _rels(got, "Imports")] == ["os.path", "numpy", "a.b.sib", "a.up.x",
                                                       "a.b.here"]
    pkg = _py("from . import sib\n", path="a/b/__init__.py")
    assert [t for _, t, _ in _rels(pkg, "Imports")] == ["a.b.sib"]


def test_python_calls_resolved_by_name() -> None:
    got = _py("import os\nfrom json import dumps as d\n\ndef helper(): pass\n\n"
              "def main():\n    helper()\n    os.path.join('a')\n    d({})\n    unknown.thing()\n"
              "    obj.method()[0]()\n")
    assert _rels(got, "Calls") == [("pkg.mod.main", "pkg.mod.helper", "medium"),
                                   ("pkg.mod.main", "os.path.join", "medium"),
                                   ("pkg.mod.main", "json.dumps", "medium"),
                                   ("pkg.mod.main", "unknown.thing", "low"),
                                   ("pkg.mod.main", "obj.method", "low")]


def test_python_calls_in_decorators_defaults_and_module_body() -> None:
    got = _py("@register('x')\ndef f(a=default()):\n    pass\nf()\n")
    assert _rels(got, "Calls") == [("pkg.mod", "register", "low"), ("pkg.mod", "default", "low"),
                                   ("pkg.mod", "pkg.mod.f", "medium")]


def test_python_syntax_error_is_empty_and_incomplete() -> None:
    got = _py("def f(:\n")
    assert (got.complete, got.symbols, got.relations) == (False, (), ())
