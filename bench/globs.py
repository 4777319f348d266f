"""Glob matching benchmark: RE2 (what ``code/walk.py`` uses) beside Python's ``re``.

Two measures, in one process, interleaved round by round:

- typical: 20,000 generated repository paths against six usual ignore globs
  (``target/**``, ``*.min.js``, ``node_modules``, ``docs/*.md``, ``**/build/``,
  ``vendor/**/*.go``): ``GlobSet.any`` (one RE2 alternation a path) against the same globs
  translated for Python's ``re`` and tried one by one (the code before issue 34);
- pathological: one 40-character name of ``a`` against ``*a`` repeated N times then ``*b``
  (N = 6, 7, 8): RE2 against Python's ``re``, whose time grows exponentially with N (stopped
  once a round passes 10 s).

Medians in microseconds a path. The floor is Python's ``re`` on the typical paths: RE2 pays
its wrapper's call cost there, and the point of the choice is the pathological column.

Usage:
    python bench/globs.py              # 3 rounds, medians
    python bench/globs.py --rounds 5
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import time

from ctxstore.code.walk import GlobSet

TYPICAL = ["target/**", "*.min.js", "node_modules", "docs/*.md", "**/build/", "vendor/**/*.go"]


def _python_regex(pattern: str) -> re.Pattern[str]:
    """The translation ``glob_regex`` made for Python's ``re`` before issue 34."""
    pat = pattern.strip().rstrip("/")
    anchored = "/" in pat
    pat = pat.lstrip("/")
    out, i = [], 0
    while i < len(pat):
        if pat.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pat.startswith("**", i):
            out.append(".*")
            i += 2
        elif pat[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pat[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pat[i]))
            i += 1
    return re.compile(f"{'' if anchored else '(?:.*/)?'}{''.join(out)}(?:/.*)?", re.DOTALL)


def _paths(count: int) -> list[str]:
    rng = random.Random(1)
    words = ["src", "lib", "core", "utils", "tests", "docs", "a", "module_name", "x", "target", "pkg"]
    return ["/".join(rng.choice(words) for _ in range(rng.randint(1, 5)))
            + rng.choice([".py", ".rs", ".md", ".min.js", ".go"]) for _ in range(count)]


def _per_path(run: object, paths: list[str]) -> float:
    began = time.perf_counter()
    for path in paths:
        run(path)  # type: ignore[operator]
    return (time.perf_counter() - began) / len(paths) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    paths = _paths(20_000)
    globs = GlobSet(TYPICAL)
    regexes = [_python_regex(g) for g in TYPICAL]
    typical: dict[str, list[float]] = {"re2": [], "python re": []}
    stars = (6, 7, 8)
    evil: dict[tuple[str, int], list[float]] = {}
    name = "a" * 40 + ".py"
    for _ in range(args.rounds):
        typical["re2"].append(_per_path(globs.any, paths))
        typical["python re"].append(_per_path(lambda p: any(r.fullmatch(p) for r in regexes), paths))
        for n in stars:
            pattern = "*a" * n + "*b"
            evil.setdefault(("re2", n), []).append(_per_path(GlobSet([pattern]).any, [name]))
            if statistics.median(evil.get(("python re", n - 2), [0.0])) < 10e6:
                evil.setdefault(("python re", n), []).append(
                    _per_path(_python_regex(pattern).fullmatch, [name]))
    print("typical paths, us a path (median):")
    for engine, values in typical.items():
        print(f"  {engine:10s} {statistics.median(values):8.2f}")
    print("pathological: a name of 40 'a' against *a x N + *b, us (median):")
    for n in stars:
        row = [f"{engine} {statistics.median(evil[(engine, n)]):14.1f}"
               for engine in ("re2", "python re") if (engine, n) in evil]
        print(f"  N={n:2d}  " + "   ".join(row))


if __name__ == "__main__":
    main()
