"""Every regex ctx applies to text runs in time linear in that text (issue 34, RELIABILITY 2.8b).

Python's ``re`` backtracks: a pattern such as ``^\\s*`` under ``re.M``, ``.*?`` before optional
blanks, or ``<x>.*?</x>`` with unclosed openers costs time quadratic (or worse) in its input,
and repository files, transcripts and pasted output reach these patterns with megabytes.

The test enumerates the patterns: every compiled ``re.Pattern`` held at module level by a
``ctxstore`` module (directly, or in a tuple, list or dict), the groups ``memory.extract``
compiles on first use, and the pattern texts modules compile lazily (``LAZY``). For each it
builds adversarial inputs from the pattern's own characters and words (runs of one character
or of two alternating, a prefix then a long run of blanks or punctuation then a terminator),
picks the two whose cost grows fastest from 48 to 96 characters and the one that costs the
most there, counted in steps of a backtracking matcher (``_regex_steps.py``: the same choice on
every run, where timing a short text picked noise on a loaded machine), and runs those at
256 KiB in a child process with a timeout: linear matching takes milliseconds, quadratic takes
hours, so the timeout is the assertion. A pattern is applied as ``finditer`` over the text
(the strictest: every start), unless ``ANCHORED`` says it is only ever used as one
``match``/``fullmatch`` attempt (then it must be linear in that mode, on one long line). A new
quadratic pattern fails the suite.
"""

from __future__ import annotations

import importlib
import itertools
import json
import pkgutil
import random
import re
import string
import subprocess
import sys
import time
from typing import Any

import pytest
from _regex_steps import Steps

import ctxstore

COUNT_SIZES = (48, 96)  # characters at which each form's steps are counted
STEP_CAP = 50_000  # counting stops there: a form that reaches it is superlinear
BIG = 256 << 10  # quadratic there is hours of steps; linear, milliseconds
TIMEOUT = 10.0
KEEP = 2  # forms run at BIG per pattern for their growth, besides the costliest
MAX_FORMS = 300

# Pattern texts compiled on first use (module, attribute, flags).
LAZY = [
    ("ctxstore.memory.transcript", "_SURROGATE", 0),
    ("ctxstore.claude.transcript", "_STAMP", 0),
    ("ctxstore.search.task", "_MENTION", 0),
    ("ctxstore.memory.timeexpr", "_TIME_PATTERN", re.IGNORECASE),
    ("ctxstore.memory.timeexpr", "_SPACES", 0),
    ("ctxstore.memory.extract", "_FENCE", 0),
    ("ctxstore.memory.entities", "_HANDLE", 0),
    ("ctxstore.memory.entities", "_BACKTICK", 0),
    ("ctxstore.memory.entities", "_COLONS", 0),
    ("ctxstore.memory.entities", "_CALL", 0),
    ("ctxstore.memory.search", "_CODE_HINT", 0),
]

# Patterns only ever applied as one anchored attempt: name -> (mode, where it is used).
ANCHORED = {
    "ctxstore.narrative.markdown._META_OPEN": ("match", "one narrative line"),
    "ctxstore.narrative.markdown._META_FIELD": ("match", "one narrative line"),
    "ctxstore.narrative.markdown._HEADING": ("match", "one narrative line"),
    "ctxstore.memory.transcript._BLANK_RUN": ("match", "at a line start of a transcript block"),
    "ctxstore.query.parser._DURATION": ("fullmatch", "one query term"),
    "ctxstore.query.parser._DATETIME": ("fullmatch", "one query term"),
    "ctxstore.config._SIMPLE_LINE": ("fullmatch", "one config.toml line"),
    "ctxstore.claude.transcript._STAMP": ("fullmatch", "a line's timestamp"),
    "ctxstore.ui.export._DATA_FILE": ("fullmatch", "a file name in an export's data/"),
}


def _lazy_groups() -> dict[str, re.Pattern[Any]]:
    """The per-first-word regexes of the rule extractors' phrase groups, compiled."""
    from ctxstore.memory import entities, extract
    from ctxstore.memory.scan import Grouped

    out = {}
    for module in (extract, entities):
        for name, obj in vars(module).items():
            if isinstance(obj, Grouped):
                for first in sorted(obj.groups):
                    out[f"{module.__name__}.{name}<{first}>"] = obj._group(first)
    return out


def _module_patterns() -> dict[str, re.Pattern[Any]]:
    found: dict[int, tuple[str, re.Pattern[Any]]] = {}

    def visit(obj: Any, path: str, depth: int = 0) -> None:
        if isinstance(obj, re.Pattern):
            found.setdefault(id(obj), (path, obj))
        elif depth < 2 and isinstance(obj, (tuple, list)):
            for i, item in enumerate(obj):
                visit(item, f"{path}[{i}]", depth + 1)
        elif depth < 2 and isinstance(obj, dict):
            for key, item in list(obj.items()):
                visit(item, f"{path}[{key!r}]", depth + 1)

    for info in pkgutil.walk_packages(ctxstore.__path__, "ctxstore."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            visit(obj, f"{info.name}.{name}")
    return {path: pattern for path, pattern in found.values()}


def _all_patterns() -> dict[str, re.Pattern[Any]]:
    patterns = _module_patterns()
    for module, attr, flags in LAZY:
        patterns[f"{module}.{attr}"] = re.compile(getattr(importlib.import_module(module), attr), flags)
    patterns.update(_lazy_groups())
    return patterns


PATTERNS = _all_patterns()

_META = set("\\^$.|?*+()[]{}")


def _alphabet(source: str) -> list[str]:
    """Characters the pattern can consume, from its literals and classes."""
    chars = {" ", "\t", "\n", "a", "1"}
    i = 0
    while i < len(source):
        c = source[i]
        if c == "\\" and i + 1 < len(source):
            n = source[i + 1]
            chars |= {"s": {" ", "\t", "\n"}, "S": {"x"}, "d": {"1"}, "D": {"x"}, "w": {"a", "_"},
                      "W": {"-"}, "n": {"\n"}, "t": {"\t"}, "r": {"\r"}}.get(n, set())
            if n in string.punctuation:
                chars.add(n)
            i += 2
            continue
        if c not in _META and c.isprintable() and c.isascii():
            chars.add(c)
        i += 1
    return sorted(chars)


def _words(source: str) -> list[str]:
    return sorted(set(re.findall(r"[A-Za-z0-9_:<>/=#@!%&,;'\"-]{2,}", source)))[:16]


Form = tuple[str, str, str]  # prefix, unit repeated, suffix


def _sample(items: Any, groups: dict[int, str]) -> str:
    """A short text the parsed pattern ``items`` (a sequence) could match, roughly."""
    from re import _constants as c  # type: ignore[attr-defined]

    out = []
    for op, arg in items:
        if op is c.LITERAL:
            out.append(chr(arg))
        elif op is c.ANY:
            out.append("a")
        elif op is c.IN:
            out.append(_member(arg, c))
        elif op is c.BRANCH:
            out.append(_sample(arg[1][0], groups))
        elif op is c.SUBPATTERN:
            text = _sample(arg[3], groups)
            if arg[0] is not None:
                groups[arg[0]] = text
            out.append(text)
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", None)):
            out.append(_sample(arg[2], groups) * max(arg[0], 1) if arg[0] or arg[1] else "")
        elif op is c.GROUPREF:
            out.append(groups.get(arg, ""))
    return "".join(out)


def _member(items: Any, c: Any) -> str:
    """A character of a parsed class (``[...]``, ``\\s``, ``\\d``)."""
    if items and items[0][0] is c.NEGATE:
        return "a"
    for op, arg in items:
        if op is c.LITERAL:
            return chr(arg)
        if op is c.RANGE:
            return chr(arg[0])
        if op is c.CATEGORY:
            return {c.CATEGORY_SPACE: " ", c.CATEGORY_DIGIT: "1"}.get(arg, "a")
    return "a"


def _prefixes(source: str, flags: int) -> list[str]:
    """Texts a prefix of the pattern matches: ``<system-reminder>`` for ``<(...)>.*?</\\1>``."""
    from re import _parser  # type: ignore[attr-defined]

    try:
        items = list(_parser.parse(source, flags))
    except Exception:  # noqa: BLE001 - a pattern the parser API cannot walk: no prefixes
        return []
    groups: dict[int, str] = {}
    return list(dict.fromkeys(_sample(items[:k], groups) for k in range(1, len(items) + 1)))[:12]


def _forms(source: str, flags: int = 0) -> list[Form]:
    """Adversarial shapes for a pattern, the likeliest first, at most ``MAX_FORMS``."""
    alphabet = _alphabet(source)
    words = _words(source)
    forms: list[Form] = [("", c, "") for c in alphabet]
    for prefix in _prefixes(source, flags):
        if prefix:
            forms += [("", prefix, ""), ("", prefix + " ", ""), ("", prefix + "\n", ""),
                      (prefix, " ", "x"), (prefix, "\n", "x"), (prefix, " a", "x")]
    blanks = [" ", "\t", "\n", " \n"]
    for head in [*words, *alphabet]:
        for prefix in (head, head + " a", head + ": a"):
            for unit in blanks:
                forms += [(prefix, unit, "x")]
    for word in words:
        forms += [("", word, ""), ("", word + " ", ""), ("", word + "\n", ""), ("", word + "a", ""),
                  ("", word + '"', "")]
    for x, y in itertools.product(alphabet, alphabet):
        if x != y:
            forms += [("", x + y, ""), (x, y, "")]
    return list(dict.fromkeys(forms))[:MAX_FORMS]


def _text(form: Form, size: int, as_bytes: bool) -> Any:
    prefix, unit, suffix = form
    text = prefix + unit * max(1, size // len(unit)) + suffix
    return text.encode("latin-1", "replace") if as_bytes else text


def _run(pattern: re.Pattern[Any], mode: str, text: Any) -> None:
    if mode == "finditer":
        for _ in pattern.finditer(text):
            pass
    else:
        getattr(pattern, mode)(text)


def _mode(name: str) -> str:
    return ANCHORED.get(name, ("finditer", ""))[0]


def _costliest(pattern: re.Pattern[Any], mode: str) -> list[Form]:
    """The forms on which the pattern's cost grows fastest, then the one that costs the most.

    Costs are steps counted by a backtracking matcher (``tests/_regex_steps.py``) at
    ``COUNT_SIZES`` characters, so the choice is the same on every run, however loaded the
    machine. Growth is the second difference ``cost(2n) - 2 * cost(n)``: about zero (or below)
    when the cost is linear, ``2an^2`` when it is ``an^2``. The forms that grow fastest come
    first (``KEEP``), then the one that costs the most at ``2n`` if it is another."""
    as_bytes = isinstance(pattern.pattern, bytes)
    source = pattern.pattern.decode("latin-1") if as_bytes else pattern.pattern
    flags = pattern.flags & ~re.UNICODE if as_bytes else pattern.flags
    steps = Steps(source, flags)
    small, double = COUNT_SIZES
    scored = []
    for order, form in enumerate(_forms(source, flags)):
        at_small = steps.cost(_text(form, small, False), mode, STEP_CAP)
        at_double = steps.cost(_text(form, double, False), mode, STEP_CAP)
        scored.append((at_double - 2 * at_small, at_double, -order, form))
    growing = [form for *_, form in sorted(scored, reverse=True)[:KEEP]]
    costliest = max(scored, key=lambda item: (item[1], item[2]))[3]
    return growing + ([costliest] if costliest not in growing else [])


# The child reads one JSON line per pattern (its source, flags, mode and forms), runs the
# forms at ``BIG`` characters and says "done": the parent gives each pattern ``TIMEOUT`` s.
_CHILD = """
import json, re, sys
for line in sys.stdin:
    source, as_bytes, flags, mode, forms, size = json.loads(line)
    pattern = re.compile(source.encode("latin-1") if as_bytes else source, flags)
    for prefix, unit, suffix in forms:
        text = prefix + unit * max(1, size // len(unit)) + suffix
        text = text.encode("latin-1", "replace") if as_bytes else text
        if mode == "finditer":
            for _ in pattern.finditer(text):
                pass
        else:
            getattr(pattern, mode)(text)
    print("done", flush=True)
"""


def _job(pattern: re.Pattern[Any], mode: str, forms: list[Form]) -> str:
    as_bytes = isinstance(pattern.pattern, bytes)
    source = pattern.pattern.decode("latin-1") if as_bytes else pattern.pattern
    return json.dumps([source, as_bytes, pattern.flags, mode, forms, BIG]) + "\n"


def _check_all(work: list[tuple[str, re.Pattern[Any], str, list[Form]]]) -> list[str]:
    """Run ``work`` in child processes; the names of the patterns that outlived ``TIMEOUT``."""
    import selectors

    slow: list[str] = []
    pending = list(work)
    while pending:
        child = subprocess.Popen([sys.executable, "-c", _CHILD], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)
        assert child.stdin is not None and child.stdout is not None
        selector = selectors.DefaultSelector()
        selector.register(child.stdout, selectors.EVENT_READ)
        try:
            while pending:
                name, pattern, mode, forms = pending[0]
                child.stdin.write(_job(pattern, mode, forms))
                child.stdin.flush()
                if not selector.select(TIMEOUT):
                    slow.append(f"{name} ({mode}) on {BIG} characters of one of "
                                f"{[(p[:16], u[:16], x) for p, u, x in forms]}")
                    pending.pop(0)
                    break  # that child is stuck: a new one takes the rest
                line = child.stdout.readline()
                assert line.strip() == "done", (name, line, child.poll())
                pending.pop(0)
        finally:
            child.kill()
            child.wait()
            selector.close()
    return slow


def test_every_regex_is_linear_on_adversarial_input() -> None:
    work = [(name, PATTERNS[name], _mode(name), _costliest(PATTERNS[name], _mode(name)))
            for name in sorted(PATTERNS)]
    slow = _check_all(work)
    assert not slow, "not linear:\n" + "\n".join(slow)


# Patterns ctx used before they were found quadratic, as they were: (pattern, mode).
OLD_QUADRATIC = {
    "old._HARNESS_ELEMENT": (re.compile(r"<(system-reminder|task-notification)>.*?</\1>", re.DOTALL),
                             "finditer"),
    "old._SNIFF_ruff": (re.compile(r"^\s*\[\s*\{\s*\"cell\"", re.M), "finditer"),
    "old._HEADING": (re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$"), "match"),
    "old._META_FIELD": (re.compile(r"[ \t]*(created|updated|tags|mentions)[ \t]*:[ \t]*(.*?)[ \t]*$"),
                        "match"),
    "old._MERGE": (re.compile(r"^\s*merge (pull request|branch)\b.*$", re.I | re.M), "finditer"),
    "old._URL": (re.compile(r"\b[a-z][a-z0-9+.-]*://\S+", re.I), "finditer"),
    "old._ATTR": (re.compile(r"([a-z_]+)=(?:\"([^\"]*)\"|'([^']*)')"), "finditer"),
    "old._WHEN": (re.compile(r"\s*(?:when\b|how long\b|(?:what|which) (?:year|month|date|day|week|time)\b)",
                             re.I), "finditer"),
}


@pytest.mark.slow  # about 5 s
def test_the_forms_chosen_for_old_quadratic_patterns_grow_quadratically() -> None:
    """For every pattern once found quadratic, the first form chosen costs about four times the
    steps at twice the length (a linear one: twice), at lengths past those it was chosen at."""
    for name, (pattern, mode) in OLD_QUADRATIC.items():
        form = _costliest(pattern, mode)[0]
        steps = Steps(pattern.pattern, pattern.flags)
        at_200, at_400 = (steps.cost(_text(form, size, False), mode, 10**7) for size in (200, 400))
        assert at_400 > 3.5 * at_200, (name, form, at_200, at_400)


def test_the_choice_of_forms_reads_no_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """The forms a pattern is checked on are the same on a loaded machine: with a clock that
    jumps at random (a process preempted between readings) nothing chosen changes."""
    some = {name: OLD_QUADRATIC[name] for name in ("old._HARNESS_ELEMENT", "old._HEADING", "old._ATTR")}
    chosen = {name: _costliest(pattern, mode) for name, (pattern, mode) in some.items()}
    jumps = random.Random(34)
    now = [0.0]

    def preempted() -> float:
        now[0] += jumps.choice((1e-6, 1e-6, 1e-6, 0.05))
        return now[0]

    for clock in ("perf_counter", "monotonic", "time", "process_time", "thread_time"):
        monkeypatch.setattr(time, clock, preempted)
    assert {name: _costliest(pattern, mode) for name, (pattern, mode) in some.items()} == chosen


@pytest.mark.slow  # about 30 s (three timeouts); the check itself runs on every pattern in the everyday run
def test_the_check_catches_a_quadratic_pattern() -> None:
    """The harness fails patterns issue 34 found, as they were (so it can fail)."""
    work = [(name, pattern, mode, _costliest(pattern, mode)) for name, (pattern, mode)
            in OLD_QUADRATIC.items() if name in ("old._HARNESS_ELEMENT", "old._SNIFF_ruff", "old._HEADING")]
    assert len(_check_all(work)) == 3


def test_the_enumeration_finds_the_patterns_it_must() -> None:
    """The patterns issue 34 named are among those checked (the walk did not miss them)."""
    for name in ("ctxstore.memory.transcript._HARNESS_OPEN", "ctxstore.code.diagnostics._SNIFF[6][1]",
                 "ctxstore.narrative.markdown._META_FIELD", "ctxstore.claude.tags._OPEN",
                 "ctxstore.search.task._TRAILER"):
        assert name in PATTERNS
    assert sum(".memory.extract._" in n and "<" in n for n in PATTERNS) > 10
    assert sum(".memory.entities._" in n and "<" in n for n in PATTERNS) > 10
    assert len(PATTERNS) > 100
    for name in ANCHORED:
        assert name in PATTERNS, name
