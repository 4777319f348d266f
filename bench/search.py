"""Search benchmark: whole ``ctx search`` processes against a 10,000-node store (issue 14).

Builds the store the way bench/knowledge.py does (its ``build_store``), then times whole
processes of the installed ``ctx`` for a few kinds of text, interleaved round by round with
the floor ``python -c "import click"``:

- two rare words; a natural-language question; a line of code with punctuation;
- 10 KB of text (a pasted log: ranked by its rarest words, ``search.search.MAX_TERMS``).

Goal: every median at most 100 ms (whole process). Also prints the in-process time of the
ranking alone (``search.search.search``) for the same texts.

Usage:
    python bench/search.py               # 10,000 nodes x 15 runs
    python bench/search.py --quick       # 1,000 nodes x 5 runs
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from knowledge import DEFAULT_SEED, build_store, is_shim, load_text, node_text  # noqa: E402

GOAL_MS = 100.0
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def ctx_script() -> list[str]:
    """The real console script (the one next to this interpreter when PATH has a shim)."""
    found = shutil.which("ctx")
    if found and not is_shim(found):
        return [os.path.realpath(found)]
    beside = Path(sys.executable).parent / "ctx"
    if beside.exists():
        return [str(beside)]
    return [sys.executable, "-m", "ctxstore.cli"]


def texts(words: list[str]) -> list[tuple[str, str]]:
    """The searched texts, from words of the store's own vocabulary."""
    rng = random.Random(7)
    log = " ".join(rng.choice(words) + rng.choice([" ", ": ", "() ", "-", " \"", "\n"])
                   for _ in range(2000))[:10_240]
    return [
        ("two words", f"{words[0]} {words[1]}"),
        ("question", f"why does the {words[2]} {words[3]} fail when {words[4]} is slow?"),
        ("code", f'if (x->{words[5]}("*")) {{ return -1; }} // NOT {words[6]}'),
        ("10 KB log", log),
    ]


def timed(argv: list[str], cwd: Path) -> float:
    t = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, env=ENV)
    ms = (time.perf_counter() - t) * 1000
    if proc.returncode != 0:
        raise SystemExit(f"{argv[:4]} failed: {proc.returncode} {proc.stderr[:300]!r}")
    return ms


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--quick", action="store_true", help="1,000 nodes x 5 runs")
    ap.add_argument("--keep", action="store_true", help="keep the temp directory")
    args = ap.parse_args(argv)
    if args.quick:
        args.nodes, args.runs = 1_000, 5
    tmp = Path(tempfile.mkdtemp(prefix="ctx-bench-search-"))
    try:
        work = tmp / "work"
        work.mkdir()
        t = time.perf_counter()
        built = build_store(work / ".ctx", args.nodes, DEFAULT_SEED, log=lambda *a, **k: None)
        print(f"store: {args.nodes} nodes built in {time.perf_counter() - t:.1f} s")
        print(f"load: {load_text()} at start (other processes on the machine add noise)")
        from ctxstore.index import open_index
        from ctxstore.search.search import search
        from ctxstore.search.tokenize import words as words_of

        conn = open_index(built.store)
        sample = [c.lower() for rec in list(built.nodes.values())[:200] for c in words_of(node_text(rec))]
        words = [w for w in dict.fromkeys(sample) if len(w) > 4] or ["retry", "sqlite"] * 4
        cases = texts(words)
        for name, text in cases:
            t = time.perf_counter()
            hits = search(conn, text)
            print(f"in-process {name}: {(time.perf_counter() - t) * 1000:.1f} ms, {len(hits)} hits")
        conn.close()
        script = ctx_script()
        times: dict[str, list[float]] = {name: [] for name, _ in cases}
        floor: list[float] = []
        timed([*script, "search", "warm"], work)
        for _ in range(args.runs):
            floor.append(timed([sys.executable, "-c", "import click"], work))
            for name, text in cases:
                times[name].append(timed([*script, "search", "--", text], work))
        fl = statistics.median(floor)
        print(f"\n{'case':<12} {'p50 ms':>8} {'x floor':>8}  goal <= {GOAL_MS:.0f} ms")
        print(f"{'floor':<12} {fl:8.1f} {1.0:8.2f}")
        ok = True
        for name, xs in times.items():
            med = statistics.median(xs)
            ok &= med <= GOAL_MS
            print(f"{name:<12} {med:8.1f} {med / fl:8.2f}  {'ok' if med <= GOAL_MS else 'SLOW'}")
        return 0 if ok else 1
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
