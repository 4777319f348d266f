"""Diagnostics: parsing tool output into ``Diagnostic`` records (spec 002 §7.2.4, §16.5).

One parser per output format (``code.diagnostic_formats``, which this module runs): rustc/cargo
JSON and human output, pytest, mypy, ruff, tsc and gcc/clang. ``detect_tool`` names the
tool from the command's argv, its name and, last, the output itself; ``parse_output`` runs
the tool's parser. ``relative_spans`` rewrites span paths relative to the repository. It
must not do I/O, touch the store or run SQL.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import PurePosixPath

from ctxstore.code.diagnostic_formats import (
    ANSI,
    MAX_DIAGNOSTICS,
    parse_gcc,
    parse_mypy,
    parse_pytest,
    parse_ruff,
    parse_rust,
    parse_tsc,
)
from ctxstore.model.build import Diagnostic
from ctxstore.records import dataclass

# The parsers themselves are ``code.diagnostic_formats``'s (import them from there).
__all__ = ["TOOLS", "ParseResult", "detect_tool", "parse_output", "relative_spans",
           "MAX_DIAGNOSTICS"]

@dataclass(frozen=True, slots=True)
class ParseResult:
    """What ``parse_output`` found.

    Attributes:
        tool: The tool whose parser ran (``custom``: none recognised the output).
        diagnostics: In order of appearance, at most ``MAX_DIAGNOSTICS``.
        notes: What was cut or could not be read, one line each.
    """

    tool: str
    diagnostics: tuple[Diagnostic, ...]
    notes: tuple[str, ...] = ()


# -- tools -----------------------------------------------------------------------------------------

_PARSERS: dict[str, Callable[[str, int], list[Diagnostic]]] = {
    "cargo": parse_rust, "rustc": parse_rust, "clippy": parse_rust,
    "pytest": parse_pytest, "mypy": parse_mypy, "ruff": parse_ruff, "tsc": parse_tsc,
    "gcc": parse_gcc, "clang": parse_gcc,
}
TOOLS = (*_PARSERS, "custom")

# argv[0] (or `python -m X`'s X) to tool.
_PROGRAMS = {"cargo": "cargo", "rustc": "rustc", "clippy-driver": "clippy", "cargo-clippy": "clippy",
             "pytest": "pytest", "py.test": "pytest", "mypy": "mypy", "dmypy": "mypy",
             "ruff": "ruff", "tsc": "tsc", "vue-tsc": "tsc", "gcc": "gcc", "g++": "gcc",
             "cc": "gcc", "c++": "gcc", "clang": "clang", "clang++": "clang"}
_LAUNCHERS = ("npx", "uv", "uvx", "poetry", "pipenv", "pnpm", "yarn", "bunx", "run", "exec")

# Output sniffing, in order: the first that matches names the tool.
_SNIFF: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("cargo", re.compile(r'^\{"(reason|\$message_type)"|"reason":"compiler-message"', re.M)),
    ("cargo", re.compile(r"^(error|warning)(\[E\d{4}\])?: .+\n\s*--> .+\.rs:\d+:\d+$", re.M)),
    ("cargo", re.compile(r"^thread '.+' (\(\d+\) )?panicked at ", re.M)),
    ("pytest", re.compile(r"^=+ (short test summary info|FAILURES|ERRORS|test session starts) =+$",
                          re.M)),
    ("tsc", re.compile(r"^\S+(\(\d+,\d+\):| *:\d+:\d+ -) error TS\d+:", re.M)),
    ("mypy", re.compile(r"^\S+\.pyi?:\d+:(\d+:){0,3} (error|note): ", re.M)),
    # ``^[ \t]*``, never ``^\s*`` with re.M: from every line start of a run of blank lines
    # ``\s*`` scanned the rest of the run (60,000 blank lines: 6 s).
    ("ruff", re.compile(r"^\S+:\d+:\d+: [A-Z]+\d+ |^[ \t]*\[\s*\{\s*\"cell\"|"
                        r"^[A-Z]+\d+ (\[\*\] )?.+\n\s*--> \S+:\d+:\d+$", re.M)),
    ("gcc", re.compile(r"^\S+\.(c|cc|cpp|cxx|h|hh|hpp|m|mm):\d+:(\d+:)? (fatal error|error|warning):",
                       re.M)),
)


def _program(argv: Sequence[str]) -> str | None:
    args = list(argv)
    while args:
        name = PurePosixPath(args[0]).name
        if re.fullmatch(r"python[\d.]*", name) and len(args) > 2 and args[1] == "-m":
            return args[2]
        if name in _LAUNCHERS and len(args) > 1:
            args = args[1:]
            continue
        return name
    return None


def detect_tool(argv: Sequence[str], name: str, text: str) -> str:
    """Which tool produced ``text``: from the program run, the command's name, then the output.

    Args:
        argv: The command line run (empty when the output came on stdin).
        name: The command's name (``cargo test``).
        text: The output (only its first 256 KiB is sniffed).

    Returns:
        One of ``TOOLS``; ``custom`` when nothing is recognised.
    """
    for program in (_program(argv), _program(name.split())):
        if program is not None and program in _PROGRAMS:
            return _PROGRAMS[program]
    head = ANSI.sub("", text[:256 << 10])
    for tool, pattern in _SNIFF:
        if pattern.search(head):
            return tool
    return "custom"


def parse_output(text: str, tool: str, *, max_diagnostics: int = MAX_DIAGNOSTICS) -> ParseResult:
    """Parse a command's output with its tool's parser; never raises.

    Args:
        text: The output, decoded (ANSI colours are removed first).
        tool: One of ``TOOLS`` (``custom`` parses nothing).
        max_diagnostics: Keep at most this many (a note says how many were cut).

    Returns:
        The diagnostics and notes.
    """
    parser = _PARSERS.get(tool)
    if parser is None:
        return ParseResult(tool, ())
    notes: list[str] = []
    try:
        found = parser(ANSI.sub("", text), max_diagnostics)
    except RecursionError:  # a pathological input: say so rather than fail the command
        return ParseResult(tool, (), (f"the {tool} output could not be parsed",))
    if len(found) > max_diagnostics:  # parsers stop one past the limit
        notes.append(f"kept the first {max_diagnostics} diagnostics; the rest were not read")
        found = found[:max_diagnostics]
    return ParseResult(tool, tuple(found), tuple(notes))


def relative_spans(diags: Sequence[Diagnostic], *, root: str, cwd: str) -> tuple[Diagnostic, ...]:
    """Span paths as repository-relative POSIX paths where they fall under ``root``.

    A relative path is taken from ``cwd`` (where the command ran); ``./`` and ``..``
    are folded. Paths outside the repository stay as the tool wrote them.

    Args:
        diags: The diagnostics.
        root: The repository root (absolute POSIX path).
        cwd: The command's working directory (absolute POSIX path).

    Returns:
        The diagnostics with their span paths rewritten.
    """
    base = PurePosixPath(root)

    def rel(path: str) -> str:
        full = PurePosixPath(path) if path.startswith("/") else PurePosixPath(cwd) / path
        parts: list[str] = []
        for part in full.parts:
            if part == "..":
                if len(parts) > 1:
                    parts.pop()
            elif part != ".":
                parts.append(part)
        norm = PurePosixPath(*parts)
        try:
            return norm.relative_to(base).as_posix()
        except ValueError:
            return path

    return tuple(replace(d, spans=tuple(replace(s, path=rel(s.path)) for s in d.spans))
                 for d in diags)
