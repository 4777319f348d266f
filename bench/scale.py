"""A new user's steps on a large real project, each against its goal (issue 30).

Run through ``python bench/pack.py --scale`` (see there). In a Git repository of F real files
(``corpus.write_real_tree``), committed, with ``ctx init`` committed too:

| step | goal |
|---|---|
| ``ctx index`` (every file; one run) | reported |
| the first ``ctx pack`` after it | <= 500 ms (spec 002: cold start under 500 ms at 10,000 files) |
| the first ``ctx search`` after it | <= 500 ms |
| ``ctx commit`` | <= 1 s |
| files ``git add .ctx`` then stages | a handful (O(1)) |
| ``ctx pack`` p50 (import cycles as ``ctx index`` keeps them) | <= 1.5x the floor |
| ``ctx rebuild --full`` | <= 5 s |
| ``ctx index`` after one file changed | <= 150 ms |
| index size (index.sqlite + code.sqlite) / the size of the files it covers | <= 1.5 |
| a fresh ``git clone``: ``ctx index``, then its first ``ctx pack`` | <= 500 ms |
| ``git pull`` of a knowledge commit, then the first ``ctx pack`` | <= 500 ms |

Whole processes (``python -P -m ctxstore.cli``, byte-code caches on, as a user's shell runs
ctx), the floor ``python -c "import click"`` interleaved with the timed packs. Medians of
``runs`` where a step is repeated.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from corpus import EVAL_DIR, tree_bytes, write_real_tree

CTX = [sys.executable, "-P", "-m", "ctxstore.cli"]
FLOOR = [sys.executable, "-c", "import click"]
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"} | {
    "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@example.com",
    "GIT_CONFIG_NOSYSTEM": "1"}


def _run(argv: list[str], cwd: Path, check: bool = True) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, check=False, env=ENV)
    took = (time.perf_counter() - start) * 1000
    if check and proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:5])} failed ({proc.returncode}): "
                         f"{proc.stderr.decode()[-800:]}")
    return took, proc.stdout.decode()


def git(cwd: Path, *args: str) -> str:
    """Run git; its stdout."""
    return _run(["git", *args], cwd)[1]


def ctx(cwd: Path, *args: str) -> float:
    """Run one ctx process; its wall time in ms."""
    return _run([*CTX, *args], cwd)[0]


def du(path: Path) -> int:
    """Bytes of the regular files below ``path``."""
    if not path.exists():
        return 0
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def page_bytes(database: Path, top: int = 8) -> tuple[list[tuple[str, int]], int]:
    """Where a SQLite file's bytes are: its ``top`` largest tables and indexes by the pages
    they fill (SQLite's ``dbstat``: whole pages, their unused room included), and the bytes of
    its free pages (in the file and in the figure ``du`` gives, though no table holds them)."""
    conn = sqlite3.connect(f"{database.absolute().as_uri()}?mode=ro", uri=True)
    try:
        tables = conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"
                              " ORDER BY 2 DESC LIMIT ?", (top,)).fetchall()
        size = conn.execute("PRAGMA page_size").fetchone()[0]
        free = conn.execute("PRAGMA freelist_count").fetchone()[0] * size
    finally:
        conn.close()
    return [(str(n), int(b)) for n, b in tables], int(free)


def _floor(cwd: Path, n: int = 3) -> float:
    return statistics.median(_run(FLOOR, cwd)[0] for _ in range(n))


def interleaved(cwd: Path, commands: dict[str, list[str]], runs: int) -> dict[str, float]:
    """Median ms per command and of the floor, round by round."""
    times: dict[str, list[float]] = {k: [] for k in [*commands, "floor"]}
    for _ in range(runs):
        for label, argv in commands.items():
            times[label].append(_run(argv, cwd)[0])
        times["floor"].append(_run(FLOOR, cwd)[0])
    return {k: statistics.median(v) for k, v in times.items()}


Row = tuple[str, float, str, str]  # step, figure, unit, goal verdict


def run_scale(work: Path, files: int, runs: int, tasks_pick: int = 3,
              eval_dir: Path = EVAL_DIR, log: Callable[[str], None] = print) -> list[Row]:
    """Run every step; return the rows of the table (also printed as they come)."""
    rows: list[Row] = []

    def row(step: str, value: float, unit: str, goal: float | None = None,
            floor: float | None = None, ratio_goal: float | None = None) -> None:
        verdict = ""
        if goal is not None:
            verdict = f"<= {goal:g} {unit}: {'ok' if value <= goal else 'MISSED'}"
        if floor is not None:
            ratio = value / floor
            verdict += (f"{'; ' if verdict else ''}{ratio:.2f}x floor"
                        + (f" (goal <= {ratio_goal:g}x: {'ok' if ratio <= ratio_goal else 'MISSED'})"
                           if ratio_goal is not None else ""))
        rows.append((step, value, unit, verdict))
        log(f"  {step:52} {value:10,.1f} {unit:3} {verdict}")

    repo = work / "repo"
    if repo.exists():
        shutil.rmtree(repo)
    tasks = write_real_tree(repo, files, eval_dir)
    n_files, n_bytes = tree_bytes(repo)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "the project")
    ctx(repo, "init")
    git(repo, "commit", "-qm", "ctx init")
    os.sync()
    picked = [t for t in tasks.values()][:tasks_pick]
    log(f"scale: {n_files:,} files, {n_bytes / 1e6:.1f} MB, in {repo}; "
        f"{os.cpu_count()} cpus, load {os.getloadavg()[0]:.1f}")
    row("ctx index (every file)", ctx(repo, "index") / 1000, "s")
    floor = _floor(repo)
    row("first ctx pack after ctx index", ctx(repo, "pack", picked[0], "--format", "json"),
        "ms", 500, floor)
    row("first ctx search after it", ctx(repo, "search", "retry timeout", "--format", "json"),
        "ms", 500, floor)
    row("ctx commit", ctx(repo, "commit", "-m", "indexed") / 1000, "s", 1.0)
    status = [line for line in git(repo, "status", "--short", "--", ".ctx").splitlines() if line]
    row("files `git add .ctx` staged after it", float(len(status)), "", 10)
    git(repo, "commit", "-qm", "ctx after index", "--allow-empty")
    med = interleaved(repo, {f"pack {i}": [*CTX, "pack", t, "--format", "json"]
                             for i, t in enumerate(picked)}, runs)
    floor = med.pop("floor")
    pooled = statistics.median(med.values())
    row("ctx pack p50 (import cycles from ctx index)", pooled, "ms", None, floor, 1.5)
    row("floor: python -c 'import click'", floor, "ms")
    rebuilds = [ctx(repo, "rebuild", "--full") / 1000 for _ in range(max(1, runs // 2))]
    row("ctx rebuild --full", statistics.median(rebuilds), "s", 5.0)
    ctx(repo, "status")
    time.sleep(2.1)  # modification times older than the stat cache's racy window
    ctx(repo, "index")
    py = sorted(repo.rglob("*.py"))
    py = [p for p in py[:: max(1, len(py) // 50)] if ".ctx" not in p.parts]
    one = []
    for i in range(runs):
        victim = py[(i * 7) % len(py)]
        with victim.open("a") as fh:
            fh.write(f"\n\ndef _bench_changed_{i}():\n    return {i}\n")
        one.append(ctx(repo, "index"))
        time.sleep(0.2)
    row("ctx index after one file changed", statistics.median(one), "ms", 150)
    index = du(repo / ".ctx" / "index")
    sqlite = sum(du(repo / ".ctx" / "index" / (db + s)) for db in ("index.sqlite", "code.sqlite")
                 for s in ("", "-wal", "-shm"))  # the knowledge index and this clone's code index
    derived = index + du(repo / ".ctx" / "DERIVED")
    objects = du(repo / ".ctx" / "objects") + du(repo / ".ctx" / "local" / "work")
    row("index.sqlite + code.sqlite / tree bytes", sqlite / n_bytes, "x", 1.5)
    code = repo / ".ctx" / "index" / "code.sqlite"
    if code.is_file():  # where the code index's bytes are (docs/performance.md, issue 30)
        tables, free = page_bytes(code)
        for name, size in tables:
            row(f"  code.sqlite: {name} MB", size / 1e6, "MB")
        row("  code.sqlite: free pages MB", free / 1e6, "MB")
    row("index/ + DERIVED/ / tree bytes", derived / n_bytes, "x")
    row("objects (canonical + staging) MB", objects / 1e6, "MB")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "changes", "--allow-empty")
    clone = work / "clone"
    if clone.exists():
        shutil.rmtree(clone)
    git(work, "clone", "-q", str(repo), str(clone))
    row("fresh clone: ctx index", ctx(clone, "index") / 1000, "s")
    floor = _floor(clone)
    row("fresh clone: first ctx pack after ctx index",
        ctx(clone, "pack", picked[1 % len(picked)], "--format", "json"), "ms", 500, floor)
    ctx(repo, "add", "--type", "decision", "We parse cookie headers lazily, see lib/http/cookies.py")
    ctx(repo, "commit", "-m", "a decision")
    git(repo, "add", "-A", ".ctx")
    git(repo, "commit", "-qm", "a decision")
    git(clone, "pull", "-q", "--no-rebase")
    row("after git pull: first ctx pack",
        ctx(clone, "pack", picked[2 % len(picked)], "--format", "json"), "ms", 500, floor)
    return rows
