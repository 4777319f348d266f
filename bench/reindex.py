"""``ctx index`` after one file changed, in an indexed repository: CPU and wall time (issue 30).

Each round appends a function to one ``.py`` file of the repository (another file each round),
runs a whole ``ctx index`` process and, interleaved, the floor ``python -c "import click"``
and the ``git status`` that ``ctx index`` runs (on its copy of Git's index, as it runs it):
Git's share of the CPU. CPU is the process's and its children's (the ``git status`` it
runs), from ``getrusage(RUSAGE_CHILDREN)``. With ``--before CHECKOUT --before-repo REPO`` another checkout
of ctx (its ``ctxstore`` first on ``PYTHONPATH``) is timed in the same rounds on its own copy
of the repository (a code index of another schema is not shared).

    python bench/pack.py --scale --work /tmp/scale           # builds /tmp/scale/repo, indexed
    python bench/reindex.py --repo /tmp/scale/repo --runs 7
    python bench/reindex.py --repo /tmp/new --before /tmp/old-checkout --before-repo /tmp/old
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

CTX = [sys.executable, "-P", "-m", "ctxstore.cli", "index"]
FLOOR = [sys.executable, "-c", "import click"]
# As ctx index runs it, but never writing the copy (which would make the next run copy again).
GIT_STATUS = ["git", "--no-optional-locks", "-c", "core.quotepath=off", "-c",
              "core.untrackedCache=true", "status", "--porcelain=v2", "--branch", "--no-ahead-behind", "-z",
              "--no-renames", "--ignore-submodules=none", "--untracked-files=normal"]
# As a user's shell runs ctx: byte-code caches written and used (with PYTHONDONTWRITEBYTECODE
# set, a checkout never run before compiles every module in every process).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[float, float]:
    """Run ``argv``; (wall ms, CPU ms of it and its children)."""
    cpu, start = _child_cpu(), time.perf_counter()
    res = subprocess.run(argv, cwd=cwd, capture_output=True, env=env, check=False)
    took = (time.perf_counter() - start) * 1000
    if res.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:5])} failed: {res.stderr.decode()[-500:]}")
    return took, (_child_cpu() - cpu) * 1000


def victims(repo: Path, n: int) -> list[Path]:
    """``n`` tracked ``.py`` files spread over the repository."""
    out = subprocess.run(["git", "ls-files", "*.py"], cwd=repo, capture_output=True, text=True,
                         check=True).stdout.split()
    step = max(1, len(out) // (n + 1))
    return [repo / p for p in out[step::step][:n]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", type=Path, required=True, help="an indexed repository")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--before", type=Path, help="another checkout of ctx, timed too")
    parser.add_argument("--before-repo", type=Path, help="the repository --before indexes")
    args = parser.parse_args()
    sides: dict[str, tuple[Path, dict[str, str] | None]] = {"ctx": (args.repo, ENV)}
    if args.before is not None:
        if args.before_repo is None:
            parser.error("--before needs --before-repo")
        sides["before"] = (args.before_repo,
                           ENV | {"PYTHONPATH": str(args.before.resolve())})
    for repo, env in sides.values():
        run(CTX, repo, env)  # settle: whatever an earlier run left to do
    time.sleep(2.1)  # modification times older than the stat cache's racy window
    files = {k: victims(repo, args.runs) for k, (repo, _) in sides.items()}
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in [*sides, "floor"]}
    for i in range(args.runs):
        order = list(sides.items())
        for label, (repo, env) in order[::-1] if i % 2 else order:  # neither side always first
            with files[label][i].open("a") as fh:
                fh.write(f"\n\ndef _bench_reindex_{time.time_ns()}():\n    return {i}\n")
            times[label].append(run(CTX, repo, env))
        times["floor"].append(run(FLOOR, args.repo, ENV))
        copy = args.repo / ".ctx" / "index" / "git-index"
        if copy.is_file():  # what ctx index ran, once more
            times.setdefault("git", []).append(
                run(GIT_STATUS, args.repo, ENV | {"GIT_INDEX_FILE": str(copy)}))
        time.sleep(0.2)
    print(f"ctx index after one file changed: {args.runs} rounds, load {os.getloadavg()[0]:.1f}")
    for label, rows in times.items():
        wall = statistics.median(w for w, _ in rows)
        cpu = statistics.median(c for _, c in rows)
        print(f"  {label:8} CPU {cpu:7.1f} ms   wall {wall:7.1f} ms")
    if "before" in times:  # paired by round: steadier than two medians on a busy machine
        diffs = [a[1] - b[1] for a, b in zip(times["ctx"], times["before"], strict=True)]
        print(f"  ctx - before, CPU: median of paired differences {statistics.median(diffs):+.1f} ms"
              f" ({sum(d < 0 for d in diffs)} of {len(diffs)} rounds cheaper)")


if __name__ == "__main__":
    main()
