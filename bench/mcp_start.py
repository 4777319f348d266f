"""`ctx mcp` start-up: time from the process's start to its answer to `initialize` and to
`tools/list`, with the fast start (the default) and without it (`--no-fast-start`: the MCP
SDK answers), against the floor `python -c pass` measured in the same rounds.

Claude Code connects MCP servers in the background and lists their tools when they answer: a
server slow to answer can miss the first turn. Each round starts, in an order that rotates,
the floor (a child that answers one line at once: `python -c` reading stdin and writing a
line, no import), `ctx mcp` and `ctx mcp --no-fast-start` on a fresh store, sends
`initialize`, then `notifications/initialized` and `tools/list` once `initialize` is
answered (as a client does), and takes the wall time to each answer. Medians over the rounds,
and each as a ratio of the floor's median.

Usage:
    python bench/mcp_start.py              # 15 rounds
    python bench/mcp_start.py --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from search import ctx_script  # noqa: E402

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "bench", "version": "0"}}}
LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
# The floor: a Python that answers each line it reads, importing nothing.
ECHO = ("import sys\n"
        "for line in sys.stdin:\n"
        "    sys.stdout.write(line); sys.stdout.flush()\n")


def once(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Milliseconds from the start to the answer to initialize, and to tools/list."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write((json.dumps(INIT) + "\n").encode())
        proc.stdin.flush()
        first = proc.stdout.readline()
        initialized = time.perf_counter()
        assert json.loads(first)["id"] == 1, first
        proc.stdin.write((json.dumps(INITIALIZED) + "\n" + json.dumps(LIST) + "\n").encode())
        proc.stdin.flush()
        while True:  # the floor echoes the notification too
            line = json.loads(proc.stdout.readline())
            if line.get("id") == 2:
                break
        listed = time.perf_counter()
    finally:
        proc.kill()
        proc.wait()
    return (initialized - start) * 1000, (listed - start) * 1000


def main() -> None:
    """Run the rounds and print the medians and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "w"
        work.mkdir()
        env = {**os.environ, "HOME": tmp}
        ctx = ctx_script()
        subprocess.run([*ctx, "init", "--no-git"], cwd=work, env=env, check=True,
                       capture_output=True)
        cases = {"floor (python echo)": [sys.executable, "-c", ECHO],
                 "ctx mcp": [*ctx, "mcp", "--no-global"],
                 "ctx mcp --no-fast-start": [*ctx, "mcp", "--no-global", "--no-fast-start"]}
        names = list(cases)
        times: dict[str, list[tuple[float, float]]] = {n: [] for n in names}
        for n in names[1:]:
            once(cases[n], work, env)  # warm the file cache and the bytecode
        for r in range(args.rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                times[name].append(once(cases[name], work, env))
        floor = statistics.median(t[0] for t in times[names[0]])
        load = os.getloadavg()[0]
        print(f"{args.rounds} rounds, load {load:.1f}; medians, ratio to the floor's "
              f"initialize ({floor:.1f} ms)")
        print(f"{'case':<26} {'initialize':>12} {'ratio':>7} {'tools/list':>12} {'ratio':>7}")
        for name in names:
            init = statistics.median(t[0] for t in times[name])
            listed = statistics.median(t[1] for t in times[name])
            print(f"{name:<26} {init:>9.1f} ms {init / floor:>6.2f}x {listed:>9.1f} ms "
                  f"{listed / floor:>6.2f}x")


if __name__ == "__main__":
    main()
