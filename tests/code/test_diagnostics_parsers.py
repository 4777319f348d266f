"""code.diagnostics: every tool's parser on recorded real output, detection, bounds, garbage.

The fixtures under fixtures/build/ were produced by the real tools (cargo/rustc 1.95, pytest 9,
mypy 2.4, ruff 0.17, gcc 12); tsc is not installed here, so its two fixtures are written by
hand in the documented formats (plain ``file(line,col): error TS...`` and ``--pretty``).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxstore.code.diagnostics import (
    MAX_DIAGNOSTICS,
    detect_tool,
    parse_output,
    relative_spans,
)

FIXTURES = Path(__file__).parent / "fixtures" / "build"


def _found(name: str, tool: str | None = None) -> tuple[str, list[tuple]]:
    text = (FIXTURES / name).read_text()
    chosen = tool or detect_tool([], "", text)
    res = parse_output(text, chosen)
    assert res.notes == ()
    return chosen, [(d.severity, d.code, d.spans[0].path if d.spans else None,
                     d.spans[0].start_line if d.spans else None,
                     d.spans[0].start_col if d.spans else None) for d in res.diagnostics]


@pytest.mark.parametrize("fixture,tool,expected", [
    ("cargo_build_human.txt", "cargo", [("error", "E0308", "src/main.rs", 3, 18)]),
    ("cargo_build_json.txt", "cargo", [("error", "E0308", "src/main.rs", 3, 18)]),
    ("rustc_json.txt", "cargo", [("error", "E0308", "src/main.rs", 3, 18)]),
    ("cargo_build_json_warning.txt", "cargo",
     [("warning", "unused_variables", "src/lib.rs", 2, 9)]),
    ("cargo_test_human.txt", "cargo", [("warning", None, "src/lib.rs", 2, 9),
                                       ("error", "panic", "src/lib.rs", 17, 9)]),
    ("pytest_failures.txt", "pytest", [("error", "FAILED", "test_a.py", 13, 0),
                                       ("error", "FAILED", "test_a.py", 18, 0)]),
    ("pytest_collect_error.txt", "pytest", [("error", "ERROR", "test_b.py", 1, 0)]),
    ("mypy.txt", "mypy", [("error", "return-value", "typed.py", 4, 0),
                          ("error", "assignment", "typed.py", 6, 0),
                          ("note", None, "typed.py", 7, 0)]),
    ("mypy_columns.txt", "mypy", [("error", "return-value", "typed.py", 4, 12),
                                  ("error", "assignment", "typed.py", 6, 10),
                                  ("note", None, "typed.py", 7, 13)]),
    ("gcc.txt", "gcc", [("error", None, "a.c", 4, 20),
                        ("warning", "-Wunused-variable", "a.c", 3, 9)]),
    ("tsc_plain.txt", "tsc", [("error", "TS2322", "src/a.ts", 3, 5),
                              ("error", "TS2345", "src/b.ts", 10, 1)]),
    ("tsc_pretty.txt", "tsc", [("error", "TS2322", "src/a.ts", 3, 5),
                               ("error", "TS6133", "src/lib/util.ts", 12, 10)]),
])
def test_diagnostics_each_tool_parses_its_recorded_output(fixture: str, tool: str,
                                                          expected: list[tuple]) -> None:
    assert _found(fixture) == (tool, expected)


def test_diagnostics_ruff_concise_full_and_json_agree() -> None:
    tool_c, concise = _found("ruff_concise.txt")
    tool_f, full = _found("ruff_full.txt")
    assert tool_c == tool_f == "ruff" and concise == full and len(concise) == 12
    assert ("error", "F401", "test_a.py", 1, 8) in concise
    tool_j, as_json = _found("ruff.json")
    assert tool_j == "ruff"
    assert [(c, p.rsplit("/", 1)[-1], ln, col) for _, c, p, ln, col in as_json] == \
        [(c, p, ln, col) for _, c, p, ln, col in concise if p == "typed.py"]


def test_diagnostics_details_spans_bytes_and_related() -> None:
    text = (FIXTURES / "cargo_build_json.txt").read_text()
    (diag,) = parse_output(text, "cargo").diagnostics
    primary = diag.spans[0]
    assert (primary.primary, primary.label) == (True, "expected `i32`, found `&str`")
    assert primary.start_byte is not None and primary.end_byte - primary.start_byte == 3
    assert diag.message == "mismatched types"
    (warn,) = parse_output((FIXTURES / "cargo_build_json_warning.txt").read_text(),
                           "cargo").diagnostics
    assert any("unused_variables" in r for r in warn.related)
    gcc = parse_output((FIXTURES / "gcc.txt").read_text(), "gcc").diagnostics
    assert gcc[0].related and "reported only once" in gcc[0].related[0]
    tsc = parse_output((FIXTURES / "tsc_plain.txt").read_text(), "tsc").diagnostics
    assert tsc[1].related == ("Property 'name' is missing in type '{ id: string; }' but "
                              "required in type 'User'.",)
    pytest_out = parse_output((FIXTURES / "pytest_failures.txt").read_text(), "pytest")
    assert pytest_out.diagnostics[0].message == "test_a.py::test_fails: assert 4 == 5"


@pytest.mark.parametrize("argv,name,tool", [
    (["cargo", "test"], "", "cargo"),
    (["/usr/bin/python3", "-m", "pytest", "-q"], "", "pytest"),
    (["python3.11", "-m", "mypy", "src"], "", "mypy"),
    (["npx", "tsc", "--noEmit"], "", "tsc"),
    (["uv", "run", "ruff", "check"], "", "ruff"),
    (["clang++", "-c", "a.cc"], "", "clang"),
    ([], "cargo test", "cargo"),
    ([], "my build", "custom"),
    (["./build.sh"], "build", "custom"),
])
def test_diagnostics_tool_is_detected_from_the_command(argv: list[str], name: str,
                                                       tool: str) -> None:
    assert detect_tool(argv, name, "") == tool


def test_diagnostics_ansi_colours_are_ignored() -> None:
    text = "\x1b[1m\x1b[31merror[E0425]\x1b[0m: cannot find value `x`\n \x1b[34m-->\x1b[0m src/a.rs:2:5\n"
    assert detect_tool([], "", text) == "cargo"
    (diag,) = parse_output(text, "cargo").diagnostics
    assert (diag.code, diag.spans[0].path, diag.spans[0].start_line) == ("E0425", "src/a.rs", 2)


def test_diagnostics_relative_spans_fold_paths_under_the_repository() -> None:
    text = ("/repo/src/a.py:1: error: x  [misc]\nsub/b.py:2: error: y  [misc]\n"
            "../other/c.py:3: error: z  [misc]\n./d.py:4: error: w  [misc]\n"
            "../../elsewhere/e.py:5: error: v  [misc]\n")
    diags = parse_output(text, "mypy").diagnostics
    rel = relative_spans(diags, root="/repo", cwd="/repo/pkg")
    assert [d.spans[0].path for d in rel] == ["src/a.py", "pkg/sub/b.py", "other/c.py",
                                              "pkg/d.py", "../../elsewhere/e.py"]


def test_diagnostics_are_bounded_and_fast_on_ten_megabytes() -> None:
    line = "src/a.py:1: error: too many  [misc]\n"
    text = line * (10_000_000 // len(line))
    started = time.monotonic()
    res = parse_output(text, "mypy")
    assert time.monotonic() - started < 10
    assert len(res.diagnostics) == MAX_DIAGNOSTICS
    assert res.notes == (f"kept the first {MAX_DIAGNOSTICS} diagnostics; the rest were not read",)
    long_line = "x" * 10_000_000  # one minified line: no diagnostic, no time
    started = time.monotonic()
    for tool in ("cargo", "pytest", "mypy", "ruff", "tsc", "gcc"):
        assert parse_output(long_line, tool).diagnostics == ()
    assert time.monotonic() - started < 10


def test_diagnostics_messages_are_cut() -> None:
    res = parse_output("a.py:1: error: " + "m" * 5000 + "\n", "mypy")
    assert len(res.diagnostics[0].message) == 2000


@given(st.binary(max_size=2000))
def test_diagnostics_parsers_never_raise_on_bytes(data: bytes) -> None:
    text = data.decode("utf-8", "replace")
    for tool in ("cargo", "pytest", "mypy", "ruff", "tsc", "gcc", "custom"):
        res = parse_output(text, tool)
        assert res.tool == tool


@given(st.text(alphabet=st.sampled_from(list("{}[]\":,0123456789abcdefghij \n-_>|=E:.()/")),
               max_size=400))
def test_diagnostics_parsers_never_raise_on_near_miss_text(text: str) -> None:
    for tool in ("cargo", "pytest", "mypy", "ruff", "tsc", "gcc"):
        parse_output(text, tool)
    detect_tool([], "", text)


def test_diagnostics_nested_json_does_not_crash() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    assert parse_output(deep, "ruff").diagnostics == ()
    assert parse_output("{" + '"a":' * 50_000 + "1" + "}" * 50_000, "cargo").diagnostics == ()


def test_diagnostics_fixture_files_are_real_tool_output() -> None:
    # Guard against a fixture edited into a shape no tool prints: the recorded ones still
    # carry the tools' own banners.
    assert "test session starts" in (FIXTURES / "pytest_failures.txt").read_text()
    assert "Found 2 errors in 1 file" in (FIXTURES / "mypy.txt").read_text()
    assert os.path.getsize(FIXTURES / "cargo_build_json.txt") > 500
