"""Prompt-pack benchmark: whole ``ctx pack`` and ``ctx search`` processes at 10,000 files and
10,000 nodes (issue 14).

Builds, once, in a temp directory: a store of N knowledge nodes the way bench/knowledge.py
does (its ``build_store``), and a synthetic Python work tree of F files (packages of modules,
each with a docstring, a class with methods and functions built from a seeded vocabulary,
importing two or three sibling modules), indexed with ``ctx index``. Then it times whole
processes of ``ctx pack`` (default budget, narrative included) and ``ctx search`` for a few
kinds of task text, interleaved round by round with the floor ``python -c "import click"``.

Goals (medians, whole process): ``ctx pack`` <= 150 ms, ``ctx search`` <= 100 ms.

Usage:
    python bench/pack.py                 # 10,000 files, 10,000 nodes, 9 runs
    python bench/pack.py --quick         # 1,000 files, 1,000 nodes, 3 runs
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from knowledge import DEFAULT_SEED, build_store  # noqa: E402

PACK_GOAL_MS = 150.0
SEARCH_GOAL_MS = 100.0
WORDS = ("account", "amount", "backoff", "batch", "buffer", "cache", "client", "config", "cursor",
         "decode", "digest", "encode", "event", "export", "fetch", "filter", "format", "handler",
         "header", "index", "invoice", "journal", "ledger", "limit", "loader", "merge", "message",
         "parser", "payload", "policy", "queue", "reader", "record", "request", "response", "retry",
         "router", "schema", "session", "signal", "socket", "stream", "timeout", "token", "upload",
         "validate", "window", "worker", "writer")


def _ident(rng: random.Random, parts: int) -> str:
    return "_".join(rng.choice(WORDS) for _ in range(parts))


def write_tree(root: Path, files: int, seed: int) -> list[str]:
    """A synthetic Python package tree of ``files`` modules; returns their module names."""
    rng = random.Random(seed)
    modules = [f"pkg{i // 100:03d}.{_ident(rng, 2)}_{i}" for i in range(files)]
    for i, module in enumerate(modules):
        path = root / (module.replace(".", "/") + ".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        imports = sorted({rng.choice(modules[max(0, i - 50):i + 50]) for _ in range(3)} - {module})
        cls = "".join(w.capitalize() for w in _ident(rng, 2).split("_"))
        lines = [f'"""{" ".join(rng.choice(WORDS) for _ in range(12))}."""', ""]
        lines += [f"import {m}" for m in imports] + ["", "", f"class {cls}:",
                                                     f'    """{_ident(rng, 3).replace("_", " ")}."""']
        for _ in range(3):
            lines += ["", f"    def {_ident(rng, 2)}(self, {_ident(rng, 1)}):",
                      f"        return self.{_ident(rng, 2)}({_ident(rng, 1)})"]
        for _ in range(2):
            lines += ["", "", f"def {_ident(rng, 3)}({_ident(rng, 1)}, {_ident(rng, 1)}=None):",
                      f'    """{" ".join(rng.choice(WORDS) for _ in range(8))}."""',
                      f"    return {_ident(rng, 2)}"]
        path.write_text("\n".join(lines) + "\n")
    for package in {m.split(".")[0] for m in modules}:
        (root / package / "__init__.py").write_text("")
    return modules


def _run(argv: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, check=False)
    elapsed = (time.perf_counter() - start) * 1000
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])} failed: {proc.stderr.decode()[-500:]}")
    return elapsed


def in_process(work: Path, tasks: dict[str, str], runs: int) -> None:
    """Median time of ``build_pack`` alone (no interpreter start-up, imports or printing)."""
    from ctxstore.retrieval.pack import build_pack
    from ctxstore.session import Session

    print(f"\n{'in-process build_pack':34} {'p50 ms':>8}")
    with Session.open(work / ".ctx") as session:
        session.index()
        for label, task in tasks.items():
            xs = []
            for _ in range(runs):
                start = time.perf_counter()
                build_pack(session, task)
                xs.append((time.perf_counter() - start) * 1000)
            print(f"{label:34} {statistics.median(xs):8.0f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.files, args.nodes, args.runs = 1_000, 1_000, 3
    ctx = [sys.executable, "-m", "ctxstore.cli"]
    with tempfile.TemporaryDirectory(prefix="ctx-bench-pack-") as tmp:
        work = Path(tmp) / "work"
        work.mkdir()
        t0 = time.perf_counter()
        build_store(work / ".ctx", args.nodes, DEFAULT_SEED, log=lambda *a, **k: None)
        modules = write_tree(work, args.files, DEFAULT_SEED)
        t1 = time.perf_counter()
        _run([*ctx, "index"], work)
        _run([*ctx, "status"], work)  # the index catches up once, outside the timings
        t2 = time.perf_counter()
        print(f"built {args.nodes} nodes + {args.files} files in {t1 - t0:.1f} s; "
              f"ctx index + first catch-up {t2 - t1:.1f} s", flush=True)
        rng = random.Random(DEFAULT_SEED)
        name = modules[len(modules) // 2].split(".")[-1]
        tasks = {
            "two words": "retry timeout",
            "a question": "where do we validate the invoice amount before export?",
            "a symbol": f"fix {name} when the socket times out",
            "a commit message": "\n".join(
                [f"{_ident(rng, 1)}: {' '.join(rng.choice(WORDS) for _ in range(8))}", ""]
                + [" ".join(rng.choice(WORDS) for _ in range(12)) for _ in range(6)]),
        }
        commands = {f"pack: {k}": [*ctx, "pack", v, "--format", "json"] for k, v in tasks.items()}
        commands |= {f"search: {k}": [*ctx, "search", v, "--format", "json"]
                     for k, v in tasks.items() if k != "a commit message"}
        commands["floor: import click"] = [sys.executable, "-c", "import click"]
        times: dict[str, list[float]] = {k: [] for k in commands}
        for _ in range(args.runs):
            for label, argv in commands.items():
                times[label].append(_run(argv, work))
        print(f"\n{'command':34} {'p50 ms':>8} {'p90 ms':>8}  goal")
        ok = True
        for label, xs in times.items():
            xs.sort()
            goal = PACK_GOAL_MS if label.startswith("pack") else \
                SEARCH_GOAL_MS if label.startswith("search") else None
            med = statistics.median(xs)
            met = goal is None or med <= goal
            ok = ok and met
            mark = "" if goal is None else f"{goal:.0f} {'ok' if met else 'MISSED'}"
            print(f"{label:34} {med:8.0f} {xs[min(len(xs) - 1, int(len(xs) * 0.9))]:8.0f}  {mark}")
        print(f"\n{os.cpu_count()} cpus; whole processes, warm cache")
        in_process(work, tasks, args.runs)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
