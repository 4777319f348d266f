"""Start-up benchmark: whole processes of read commands and the prompt hook, wall and CPU time.

The other scripts time wall clock only, which a loaded machine swamps. This one also takes
each child's CPU time (user + system, from ``wait4``), which load disturbs much less, and
can time another tree of ctx in the same run (``--before DIR``: that tree's ``ctxstore``
comes first on ``PYTHONPATH``), interleaved round by round with the floor
``python -c "import click"``. Cases, against a store built like bench/knowledge.py's:

- ``ctx search``, ``ctx list``, ``ctx memory search`` (over the 36 sessions of
  bench/memory_devset.py, backfilled once);
- ``ctx hook prompt-submit`` with a real question (ranked relevant memory).

Each runs the installed ``ctx`` console script (as bench/search.py finds it).

Usage:
    python bench/startup.py                    # 10,000 nodes x 15 rounds
    python bench/startup.py --quick            # 1,000 nodes x 7 rounds
    python bench/startup.py --before /tmp/old  # also time the tree at /tmp/old
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from knowledge import DEFAULT_SEED, build_store, load_text  # noqa: E402
from memory_devset import build as build_devset  # noqa: E402
from search import ctx_script  # noqa: E402

QUESTION = ("Why does the retry loop in the upload worker time out when the index lock is held, "
            "and what did we decide about backoff?")


def run(argv: list[str], cwd: Path, env: dict[str, str], stdin: bytes = b"") -> tuple[float, float]:
    """Wall and CPU milliseconds of one child process (which must succeed)."""
    t = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stderr is not None
    proc.stdin.write(stdin)
    proc.stdin.close()
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = (time.perf_counter() - t) * 1000
    if proc.returncode != 0:
        raise SystemExit(f"{argv[:5]} failed: {proc.returncode} {err[:300]!r}")
    return wall, (usage.ru_utime + usage.ru_stime) * 1000


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--quick", action="store_true", help="1,000 nodes x 7 rounds")
    ap.add_argument("--before", type=Path, help="another source tree of ctx to time as well")
    args = ap.parse_args(argv)
    if args.quick:
        args.nodes, args.runs = 1_000, 7
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    trees = {"after": env}
    if args.before:
        trees = {"before": {**env, "PYTHONPATH": str(args.before.resolve())}, "after": env}
    tmp = Path(tempfile.mkdtemp(prefix="ctx-bench-startup-"))
    try:
        work = tmp / "work"
        work.mkdir()
        build_store(work / ".ctx", args.nodes, DEFAULT_SEED, log=lambda *a, **k: None)
        ctx = ctx_script()
        hook = json.dumps({"session_id": "b", "cwd": str(work), "prompt": QUESTION}).encode()
        start = json.dumps({"session_id": "b", "cwd": str(work), "source": "startup"}).encode()
        cases: list[tuple[str, list[str], bytes]] = [
            ("search", [*ctx, "search", "retry loop backoff"], b""),
            ("list", [*ctx, "list", "--limit", "20"], b""),
            ("memory search", [*ctx, "memory", "search", "retry loop backoff"], b""),
            ("prompt-submit (relevant memory)", [*ctx, "hook", "prompt-submit"], hook),
        ]
        build_devset(tmp / "dev", questions=False)
        run([*ctx, "memory", "backfill", str(tmp / "dev" / "projects")], work, env)
        for tree_env in trees.values():  # warm-up: index synced, hook state created, .pyc written
            run([*ctx, "hook", "session-start"], work, tree_env, start)
            for _, case_argv, stdin in cases:
                run(case_argv, work, tree_env, stdin)
        print(f"store: {args.nodes} nodes; {args.runs} rounds; python {sys.executable}")
        print(f"load: {load_text()} at start")
        samples: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for _ in range(args.runs):
            samples.setdefault(("floor", ""), []).append(
                run([sys.executable, "-c", "import click"], work, env))
            for label, case_argv, stdin in cases:
                for tree, tree_env in trees.items():
                    samples.setdefault((label, tree), []).append(run(case_argv, work, tree_env, stdin))
        print(f"load: {load_text()} after the measurements\n")
        floor = samples[("floor", "")]
        fw = statistics.median(w for w, _ in floor)
        fc = statistics.median(c for _, c in floor)
        print(f"{'case':<34} {'tree':<7} {'wall ms':>8} {'x floor':>8} {'cpu ms':>8} {'x floor':>8}")
        floor_label = 'python -c "import click"'
        print(f"{floor_label:<34} {'':<7} {fw:8.1f} {1:8.2f} {fc:8.1f} {1:8.2f}")
        for (label, tree), xs in samples.items():
            if label == "floor":
                continue
            w = statistics.median(x for x, _ in xs)
            c = statistics.median(y for _, y in xs)
            print(f"{label:<34} {tree:<7} {w:8.1f} {w / fw:8.2f} {c:8.1f} {c / fc:8.2f}")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
