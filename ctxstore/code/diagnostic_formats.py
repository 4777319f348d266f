"""Reading each tool's output format into ``Diagnostic`` records (``code.diagnostics``).

One parser per output format, each pure (text in, diagnostics out), bounded and never
raising on any input: rustc/cargo JSON (``--message-format=json`` compiler messages, or
rustc's ``--error-format=json`` lines) and human output (``error[E0308]: ...`` with
``--> src/main.rs:3:5``, and test panics), pytest (the failure sections, their
``file.py:12: AssertionError`` lines and the short test summary), mypy, ruff (concise, full
and JSON), tsc (``a.ts(3,5): error TS...`` and the pretty ``a.ts:3:5 - error TS...``) and
gcc/clang. Which tool printed an output, and running its parser, is ``code.diagnostics``.
It must not do I/O, touch the store or run SQL.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

from ctxstore.model.build import Diagnostic, DiagnosticSpan
from ctxstore.records import dataclass

__all__ = [
    "ANSI",
    "MAX_DIAGNOSTICS",
    "MAX_MESSAGE_CHARS",
    "parse_rust",
    "parse_rustc_json",
    "parse_rustc_human",
    "parse_pytest",
    "parse_mypy",
    "parse_ruff",
    "parse_tsc",
    "parse_gcc",
]

# What one run keeps at most: diagnostics, characters of one message, related notes, spans.
MAX_DIAGNOSTICS = 1000
MAX_MESSAGE_CHARS = 2000
_MAX_RELATED = 10
_MAX_SPANS = 16
# Lines longer than this are not diagnostic lines (a minified blob, binary noise): skipped by
# the regular-expression parsers. JSON lines (rustc's carry the rendered text) may be longer.
_MAX_LINE_CHARS = 8192
_MAX_JSON_LINE_CHARS = 1 << 20

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _span(path: str, line: int, col: int = 0, end_line: int | None = None,
          end_col: int | None = None, *, start_byte: int | None = None,
          end_byte: int | None = None, label: str | None = None,
          primary: bool = True) -> DiagnosticSpan:
    return DiagnosticSpan(path=path, start_line=line, start_col=col,
                          end_line=line if end_line is None else end_line,
                          end_col=col if end_col is None else end_col, start_byte=start_byte,
                          end_byte=end_byte, label=_cut(label) if label else None,
                          primary=primary)


def _cut(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _diag(severity: str, message: str, spans: Sequence[DiagnosticSpan] = (),
          code: str | None = None, related: Sequence[str] = ()) -> Diagnostic:
    return Diagnostic(severity=severity, code=code or None, message=_cut(message),
                      spans=tuple(spans[:_MAX_SPANS]),
                      related=tuple(_cut(r, 500) for r in related[:_MAX_RELATED]))


def _lines(text: str, limit: int = _MAX_LINE_CHARS) -> Iterator[str]:
    for line in text.splitlines():
        yield line if len(line) <= limit else ""


def _with_related(diag: Diagnostic, note: str) -> Diagnostic:
    if len(diag.related) >= _MAX_RELATED:
        return diag
    return replace(diag, related=(*diag.related, _cut(note, 500)))


# -- rustc / cargo ---------------------------------------------------------------------------------

_RUST_LEVELS = {"error": "error", "warning": "warning", "note": "note", "help": "help",
                "failure-note": "note", "error: internal compiler error": "error"}
# Summary lines cargo and rustc print as diagnostics of their own: not findings.
_RUST_SUMMARY = re.compile(r"^(aborting due to|could not compile|\d+ warnings? emitted|"
                           r"`[^`]+` \([^)]*\) generated \d+ warnings?|test failed, to rerun|"
                           r"build failed|Some errors have detailed explanations|"
                           r"For more information about)")


def _rust_json_diag(msg: dict[str, Any]) -> Diagnostic | None:
    level = _RUST_LEVELS.get(str(msg.get("level", "")))
    text = msg.get("message")
    if level is None or not isinstance(text, str) or _RUST_SUMMARY.match(text):
        return None
    code = msg.get("code")
    code_text = code.get("code") if isinstance(code, dict) else None
    spans = [_rust_json_span(s) for s in msg.get("spans") or () if isinstance(s, dict)]
    related = []
    for child in msg.get("children") or ():
        if isinstance(child, dict) and isinstance(child.get("message"), str):
            related.append(f"{child.get('level', 'note')}: {child['message']}")
            spans.extend(_rust_json_span(s, primary=False)
                         for s in child.get("spans") or () if isinstance(s, dict))
    return _diag(level, text, [s for s in spans if s is not None],
                 code_text if isinstance(code_text, str) else None, related)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _rust_json_span(span: dict[str, Any], *, primary: bool | None = None) -> DiagnosticSpan | None:
    path = span.get("file_name")
    line = _int(span.get("line_start"))
    if not isinstance(path, str) or line is None:
        return None
    label = span.get("label")
    return _span(path, line, _int(span.get("column_start")) or 0, _int(span.get("line_end")),
                 _int(span.get("column_end")), start_byte=_int(span.get("byte_start")),
                 end_byte=_int(span.get("byte_end")),
                 label=label if isinstance(label, str) else None,
                 primary=bool(span.get("is_primary")) if primary is None else primary)


def parse_rustc_json(text: str, limit: int = MAX_DIAGNOSTICS) -> list[Diagnostic]:
    """Diagnostics of cargo's ``--message-format=json`` or rustc's ``--error-format=json``.

    Lines that are not JSON (a test's human output beside it) are left to
    ``parse_rustc_human``; other cargo messages (artifacts, build scripts) are skipped.

    Args:
        text: The output.
        limit: Stop one past this many (so the caller can tell there were more).

    Returns:
        One diagnostic per compiler message, children as related notes.
    """
    out: list[Diagnostic] = []
    for line in _lines(text, _MAX_JSON_LINE_CHARS):
        if len(out) > limit:
            break
        if not line.startswith("{"):
            continue
        try:
            value = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if not isinstance(value, dict):
            continue
        msg = value.get("message") if value.get("reason") == "compiler-message" else (
            value if value.get("$message_type") == "diagnostic" else None)
        if isinstance(msg, dict) and (diag := _rust_json_diag(msg)) is not None:
            out.append(diag)
    return out


_RUST_HEADER = re.compile(r"^(error|warning)(?:\[(\w+)\])?: (.+)$")
_RUST_ARROW = re.compile(r"^\s*--> (.+?):(\d+):(\d+)$")
_RUST_CHILD = re.compile(r"^\s*= (note|help): (.+)$")
_RUST_PANIC = re.compile(r"^thread '(.+?)'(?: \(\d+\))? panicked at (.+?):(\d+):(\d+):$")
_RUST_PANIC_OLD = re.compile(r"^thread '(.+?)' panicked at '(.*)', (.+?):(\d+):(\d+)$")


def parse_rustc_human(text: str, limit: int = MAX_DIAGNOSTICS) -> list[Diagnostic]:
    """Diagnostics of rustc and cargo's human output, and the panics of ``cargo test``.

    Args:
        text: The output.
        limit: Stop one past this many (so the caller can tell there were more).

    Returns:
        One diagnostic per ``error``/``warning`` header (its ``-->`` location, ``= note``
        lines as related) and one per test panic (``thread 't' panicked at f.rs:3:5:``).
    """
    out: list[Diagnostic] = []
    current: Diagnostic | None = None
    lines = list(_lines(text))
    for i, line in enumerate(lines):
        if len(out) > limit:
            break
        if m := _RUST_HEADER.match(line):
            if current is not None:
                out.append(current)
            current = None if _RUST_SUMMARY.match(m.group(3)) else _diag(m.group(1), m.group(3),
                                                                          code=m.group(2))
        elif current is not None and (m := _RUST_ARROW.match(line)):
            current = replace(current, spans=(*current.spans, _span(
                m.group(1), int(m.group(2)), int(m.group(3)), primary=not current.spans))[:_MAX_SPANS])
        elif current is not None and (m := _RUST_CHILD.match(line)):
            current = _with_related(current, f"{m.group(1)}: {m.group(2)}")
        elif (m := _RUST_PANIC.match(line)) or (m := _RUST_PANIC_OLD.match(line)):
            if current is not None:
                out.append(current)
                current = None
            if m.re is _RUST_PANIC:
                test, path, row, col = m.groups()
                detail = lines[i + 1] if i + 1 < len(lines) else ""
            else:
                test, detail, path, row, col = m.groups()
            out.append(_diag("error", f"test {test} panicked: {detail}".rstrip(": "),
                             [_span(path.removeprefix("./"), int(row), int(col))], code="panic"))
    if current is not None:
        out.append(current)
    return out


def parse_rust(text: str, limit: int = MAX_DIAGNOSTICS) -> list[Diagnostic]:
    """Cargo's or rustc's output, JSON messages and human text alike (at most ``limit`` + 1).

    Args:
        text: The output.
        limit: Stop once more than this many are found.

    Returns:
        The JSON diagnostics, then the human ones.
    """
    # cargo test --message-format=json prints JSON for the build and human text for the tests.
    return (parse_rustc_json(text, limit) + parse_rustc_human(text, limit))[:limit + 1]


# -- pytest ----------------------------------------------------------------------------------------

_PYTEST_SECTION = re.compile(r"^_{3,} (.+?) _{3,}$")
_PYTEST_BANNER = re.compile(r"^={3,} (.+?) ={3,}$")
_PYTEST_LOCATION = re.compile(r"^(\S+?\.py):(\d+): (?:in \S+|(\w+(?:\.\w+)*))$")
_PYTEST_SUMMARY = re.compile(r"^(FAILED|ERROR) (\S+)(?: - (.*))?$")


@dataclass
class _Section:
    spans: list[DiagnosticSpan]
    error: str | None = None
    exc: str | None = None


def _pytest_sections(lines: Sequence[str]) -> dict[str, _Section]:
    """Each failure section's traceback locations and its ``E   `` message, by section title."""
    sections: dict[str, _Section] = {}
    cur: _Section | None = None
    for line in lines:
        if m := _PYTEST_BANNER.match(line):
            cur = None if m.group(1) not in ("FAILURES", "ERRORS") else cur
            continue
        if m := _PYTEST_SECTION.match(line):
            cur = sections.setdefault(m.group(1), _Section([]))
        elif cur is None:
            continue
        elif m := _PYTEST_LOCATION.match(line):
            span = _span(m.group(1), int(m.group(2)), primary=False)
            cur.spans = [s for s in cur.spans if s != span] + [span]
            if m.group(3):
                cur.exc = m.group(3)
        elif line.startswith("E   ") and cur.error is None:
            cur.error = line[1:].strip()
    for sec in sections.values():  # the last location of a traceback is where it failed
        if sec.spans:
            sec.spans[-1] = replace(sec.spans[-1], primary=True)
            sec.spans.reverse()
    return sections


def _section_title(nodeid: str) -> str:
    file, sep, rest = nodeid.partition("::")
    return rest.replace("::", ".") if sep else f"ERROR collecting {file}"


def parse_pytest(text: str, limit: int = MAX_DIAGNOSTICS) -> list[Diagnostic]:
    """Diagnostics of a pytest run: one per failed or erroring test.

    The short test summary (``FAILED a.py::test_x - msg``) names them; each failure
    section's traceback lines (``a.py:12: AssertionError``) give the spans, the last
    (where it failed) first. Without a summary (``-rN``), each section is one.

    Args:
        text: The output.
        limit: Stop one past this many (so the caller can tell there were more).

    Returns:
        The diagnostics, code ``FAILED`` or ``ERROR``.
    """
    lines = list(_lines(text))
    sections = _pytest_sections(lines)
    out: list[Diagnostic] = []
    seen: set[str] = set()
    for line in lines:
        if len(out) > limit:
            break
        if not (m := _PYTEST_SUMMARY.match(line)):
            continue
        kind, nodeid, message = m.groups()
        title = _section_title(nodeid)
        sec = sections.get(title, _Section([]))
        seen.add(title)
        file = nodeid.partition("::")[0]
        spans = sec.spans or [_span(file, 0)]
        text_of = message or sec.error or sec.exc or kind.lower()
        out.append(_diag("error", f"{nodeid}: {text_of}", spans, code=kind))
    for title, sec in sections.items():
        if title not in seen:
            kind = "ERROR" if title.startswith("ERROR ") else "FAILED"
            out.append(_diag("error", f"{title}: {sec.error or sec.exc or kind.lower()}",
                             sec.spans, code=kind))
    return out


# -- mypy, ruff, tsc, gcc --------------------------------------------------------------------------

_MYPY = re.compile(r"^(.+?\.pyi?):(\d+):(?:(\d+):)?(?:(\d+):(\d+):)? (error|warning|note): "
                   r"(.*?)(?:  \[([\w-]+)\])?$")


def parse_mypy(text: str, limit: int = MAX_DIAGNOSTICS) -> list[Diagnostic]:
    """Diagnostics of mypy: ``a.py:3: error: msg  [code]`` (columns and ends when shown).

    A ``note`` right after a diagnostic of the same file and line is related to it;
    other notes stand alone.

    Args:
        text: The output.
        limit: Stop one past this many (so the caller can tell there were more).

    Returns:
        The diagnostics.
    """
    out: list[Diagnostic] = []
    for line in _lines(text):
        if len(out) > limit:
            break
        if not (m := _MYPY.match(line)):
            continue
        path, row, col, end_row, end_col, severity, message, code = m.groups()
        span = _span(path, int(row), int(col or 0), int(end_row) if end_row else None,
                     int(end_col) if end_col else None)
        last = out[-1] if out else None
        if severity == "note" and last is not None and last.spans \
                and (last.spans[0].path, last.spans[0].start_line) == (path, int(row)):
            out[-1] = _with_related(last, f"note: {message}")
            continue
        out.append(_diag(severity, message, [span], code))
    return out


_RUFF_CONCISE = re.compile(r"^(.+?):(\d+):(\d+): ([A-Z]+[0-9]+|SyntaxError:?)(?: \[\*\])? (.*)$")
_RUFF_FULL_HEAD = re.compile(r"^([A-Z]+[0-9]+)(?: \[\*\])? (.+)$")
_RUFF_FULL_ARROW = re.compile(r"^\s*--> (.+?):(\d+):(\d+)$")


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _ruff_json(text: str, limit: int) -> list[Diagnostic] | None:
    stripped = text.lstrip()
    if not stripped.startswith("["):
        return None
    try:
        items = json.loads(stripped)
    except (ValueError, RecursionError):
        return None
    if not isinstance(items, list):
        return None
    out: list[Diagnostic] = []
    for item in items:
        if len(out) > limit:
            break
        if not isinstance(item, dict) or not isinstance(item.get("filename"), str):
            continue
        loc, end = _dict(item.get("location")), _dict(item.get("end_location"))
        row = _int(loc.get("row")) or 0
        span = _span(item["filename"], row, _int(loc.get("column")) or 0,
                     _int(end.get("row")) or row, _int(end.get("column")))
        code = item.get("code")
        out.append(_diag("error", str(item.get("message", "")), [span],
                         code if isinstance(code, str) else None))
    return out


def parse_ruff(text: str, limit: int = MAX_DIAGNOSTICS) -> list[Diagnostic]:
    """Diagnostics of ruff: JSON (``--output-format json``), concise or full text.

    Args:
        text: The output.
        limit: Stop one past this many (so the caller can tell there were more).

    Returns:
        The diagnostics (ruff's findings are errors: the check fails on them).
    """
    as_json = _ruff_json(text, limit)
    if as_json is not None:
        return as_json
    out: list[Diagnostic] = []
    head: tuple[str, str] | None = None
    for line in _lines(text):
        if len(out) > limit:
            break
        if m := _RUFF_CONCISE.match(line):
            out.append(_diag("error", m.group(5), [_span(m.group(1), int(m.group(2)),
                                                         int(m.group(3)))],
                             m.group(4).rstrip(":")))
            head = None
        elif m := _RUFF_FULL_HEAD.match(line):
            head = (m.group(1), m.group(2))
        elif head is not None and (m := _RUFF_FULL_ARROW.match(line)):
            out.append(_diag("error", head[1], [_span(m.group(1), int(m.group(2)),
                                                      int(m.group(3)))], head[0]))
            head = None
    return out


_TSC_PLAIN = re.compile(r"^(.+?)\((\d+),(\d+)\): (error|warning|message) (TS\d+): (.*)$")
_TSC_PRETTY = re.compile(r"^(.+?):(\d+):(\d+) - (error|warning|message) (TS\d+): (.*)$")


def parse_tsc(text: str, limit: int = MAX_DIAGNOSTICS) -> list[Diagnostic]:
    """Diagnostics of the TypeScript compiler, plain (``a.ts(3,5): error TS2322: ...``) or pretty.

    Indented lines after a plain diagnostic continue its message chain (related).

    Args:
        text: The output.
        limit: Stop one past this many (so the caller can tell there were more).

    Returns:
        The diagnostics, code ``TS2322`` and so on.
    """
    out: list[Diagnostic] = []
    plain = False
    for line in _lines(text):
        if len(out) > limit:
            break
        m = _TSC_PLAIN.match(line) or _TSC_PRETTY.match(line)
        if m:
            path, row, col, severity, code, message = m.groups()
            out.append(_diag("info" if severity == "message" else severity, message,
                             [_span(path, int(row), int(col))], code))
            plain = m.re is _TSC_PLAIN
        elif plain and out and line.startswith("  ") and line.strip():
            out[-1] = _with_related(out[-1], line.strip())
        else:
            plain = False
    return out


_GCC = re.compile(r"^(.+?):(\d+):(?:(\d+):)? (fatal error|error|warning|note|remark): "
                  r"(.*?)(?: \[(-W[^\]]+|-f[^\]]+)\])?$")


def parse_gcc(text: str, limit: int = MAX_DIAGNOSTICS) -> list[Diagnostic]:
    """Diagnostics of gcc and clang: ``a.c:3:5: error: msg [-Wflag]``.

    A ``note`` follows the diagnostic it explains and becomes related to it.

    Args:
        text: The output.
        limit: Stop one past this many (so the caller can tell there were more).

    Returns:
        The diagnostics (``fatal error`` is an error, the flag is the code).
    """
    out: list[Diagnostic] = []
    for line in _lines(text):
        if len(out) > limit:
            break
        if not (m := _GCC.match(line)):
            continue
        path, row, col, severity, message, flag = m.groups()
        if severity == "note" and out:
            out[-1] = _with_related(out[-1], f"note: {path}:{row}: {message}")
            continue
        severity = {"fatal error": "error", "remark": "info"}.get(severity, severity)
        out.append(_diag(severity, message, [_span(path, int(row), int(col or 0))], flag))
    return out
