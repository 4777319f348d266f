"""Start-up benchmark: whole processes of read commands and the prompt hook, wall and CPU time.

The other scripts time wall clock only, which a loaded machine swamps. This one also takes
each child's CPU time (user + system, from ``wait4``), which load disturbs much less, and
can time another tree of ctx in the same run (``--before DIR``: that tree's ``ctxstore``
comes first on ``PYTHONPATH``), interleaved round by round with the floor
``python -c "import click"``. Cases, against a store built like bench/knowledge.py's:

- ``ctx search``, ``ctx list``, ``ctx memory search`` (over the 36 sessions of
  bench/memory_devset.py, backfilled once);
- ``ctx hook prompt-submit`` with a real question (ranked relevant memory);
- ``ctx hook stop`` on the largest dev-set session after a ~50 KB turn was appended (a normal
  turn: bench/memory.py's ``big_turn``), and the first Stop over a 10 MB transcript never
  indexed (bench/hooks.py's; a fresh copy each round), which transcript memory indexes only as
  far as the Stop budget for a backlog goes.

Each runs the installed ``ctx`` console script (as bench/search.py finds it). ``--vectors``
sets ``[memory] vectors = "on"`` in the store first (the ``ctxstore[embed]`` extra): the
backfill embeds the turns, and the memory search and prompt hook cases load the model.

Usage:
    python bench/startup.py                    # 10,000 nodes x 15 rounds
    python bench/startup.py --quick            # 1,000 nodes x 7 rounds
    python bench/startup.py --before /tmp/old  # also time the tree at /tmp/old
    python bench/startup.py --quick --vectors  # with vector search on
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
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hooks import write_transcript  # noqa: E402
from knowledge import DEFAULT_SEED, build_store, load_text  # noqa: E402
from memory import big_turn  # noqa: E402
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


class StopCases:
    """Stop-hook payloads per tree: a new ~50 KB turn, or a fresh unindexed 10 MB transcript."""

    def __init__(self, tmp: Path, work: Path, session_file: Path) -> None:
        self.tmp, self.work, self.source = tmp, work, session_file
        self.session = json.loads(session_file.read_text().splitlines()[-1]).get("sessionId", "b")
        self.big = tmp / "big.jsonl"
        write_transcript(self.big, 10 << 20)
        self.rounds: dict[str, int] = {}

    def _payload(self, session: str, path: Path) -> bytes:
        return json.dumps({"session_id": session, "cwd": str(self.work), "hook_event_name": "Stop",
                           "transcript_path": str(path)}).encode()

    def new_turn(self, tree: str) -> bytes:
        """The tree's copy of the session, a new turn appended (the first call: the copy)."""
        path = self.tmp / f"stop-{tree}.jsonl"
        i = self.rounds.get(tree, -1)
        if i < 0:
            shutil.copy(self.source, path)
        else:
            with path.open("a") as fh:
                fh.write(big_turn(i, self.session, f"bench-a{i - 1}" if i else "root"))
        self.rounds[tree] = i + 1
        return self._payload(self.session, path)

    def unindexed(self, tree: str) -> bytes:
        """A fresh copy of the 10 MB transcript (its last turn's tags ran in the warm-up)."""
        n = self.rounds.get(f"big-{tree}", 0)
        self.rounds[f"big-{tree}"] = n + 1
        path = self.tmp / f"big-{tree}-{n}.jsonl"
        shutil.copy(self.big, path)
        return self._payload(f"big-{tree}", path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--quick", action="store_true", help="1,000 nodes x 7 rounds")
    ap.add_argument("--before", type=Path, help="another source tree of ctx to time as well")
    ap.add_argument("--vectors", action="store_true", help='[memory] vectors = "on" in the store')
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
        if args.vectors:
            config = work / ".ctx" / "config.toml"
            text = config.read_text()
            head, sep, tail = text.partition("[memory]\n")
            if 'vectors = "off"' not in tail:
                raise SystemExit(f"{config} has no [memory] vectors line to turn on")
            config.write_text(head + sep + tail.replace('vectors = "off"', 'vectors = "on"', 1))
        ctx = ctx_script()
        hook = json.dumps({"session_id": "b", "cwd": str(work), "prompt": QUESTION}).encode()
        start = json.dumps({"session_id": "b", "cwd": str(work), "source": "startup"}).encode()
        build_devset(tmp / "dev", questions=False)
        stops = StopCases(tmp, work, max((tmp / "dev" / "projects").rglob("*.jsonl"),
                                         key=lambda p: p.stat().st_size))
        cases: list[tuple[str, list[str], bytes | Callable[[str], bytes]]] = [
            ("search", [*ctx, "search", "retry loop backoff"], b""),
            ("list", [*ctx, "list", "--limit", "20"], b""),
            ("memory search", [*ctx, "memory", "search", "retry loop backoff"], b""),
            ("prompt-submit (relevant memory)", [*ctx, "hook", "prompt-submit"], hook),
            ("stop, ~50 KB new turn", [*ctx, "hook", "stop"], stops.new_turn),
            ("stop, first over 10 MB unindexed", [*ctx, "hook", "stop"], stops.unindexed),
        ]
        run([*ctx, "memory", "backfill", str(tmp / "dev" / "projects")], work, env)
        for tree, tree_env in trees.items():  # warm-up: index synced, hook state, .pyc written
            run([*ctx, "hook", "session-start"], work, tree_env, start)
            for _, case_argv, stdin in cases:
                run(case_argv, work, tree_env, stdin(tree) if callable(stdin) else stdin)
        print(f"store: {args.nodes} nodes; {args.runs} rounds; vectors "
              f"{'on' if args.vectors else 'off'}; python {sys.executable}")
        print(f"load: {load_text()} at start")
        samples: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for _ in range(args.runs):
            samples.setdefault(("floor", ""), []).append(
                run([sys.executable, "-c", "import click"], work, env))
            for label, case_argv, stdin in cases:
                for tree, tree_env in trees.items():
                    data = stdin(tree) if callable(stdin) else stdin
                    samples.setdefault((label, tree), []).append(run(case_argv, work, tree_env, data))
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
