"""Hook benchmark: whole ``ctx hook ...`` processes against a 10,000-node store.

Claude Code runs a hook on every session start, prompt and reply, so each one must cost
about what starting Python with click costs. This builds the store the way
bench/knowledge.py does (its ``build_store``: committed sessions plus staged work, the
index built once), writes a ~10 MB transcript in the real format (claude-code.md §4:
one block per assistant line, tool results as user lines) whose last turn holds
``<ctx:*>`` tags, and times whole processes of the installed ``ctx`` console script (the
real script next to the interpreter, never a version-manager shim), interleaved round by
round with the floor ``python -c "import click"`` of the same interpreter:

- session-start (source startup) on an unchanged store (the composed view comes from
  the cache in local/state.sqlite) and right after a write (composed anew);
- prompt-submit with nothing pending, and with a pending recall result (re-queued
  before each run, outside the timing), and with a real question (the ranked search of
  relevant memory, ``packs.session``);
- stop on the 10 MB transcript when its turn already ran (the common case: a reply
  without new tags, or a repeated Stop), and stop with one new remember per run (a turn
  appended before each run: the cost of a real write);
- session-end after such a write (it composes the default view into the cache) and the
  next session-start, which then reads the cache.

Goal: every hook's median within 1.3x the floor's median. Medians of ``--runs`` rounds.

Usage:
    python bench/hooks.py               # 10,000 nodes x 15 runs
    python bench/hooks.py --quick       # 1,000 nodes x 5 runs
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
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from knowledge import DEFAULT_SEED, build_store, is_shim, load_text  # noqa: E402

from ctxstore.claude.state import open_state  # noqa: E402

GOAL_RATIO = 1.3
RELEVANT_PROMPT = ("Why does the retry loop in the upload worker time out when the index lock "
                   "is held, and what did we decide about backoff?")
TRANSCRIPT_BYTES = 10 << 20
RECALL_TEXT = ("<ctx-data source=\"ctx\" kind=\"recall results\" trust=\"untrusted\">\n## Recall Results\n\n"
               + "".join(f"- [fact:01ABCDE{i}] a recalled fact number {i}\n" for i in range(20))
               + "</ctx-data>\n")


def ctx_script() -> list[str]:
    """The real console script (the one next to this interpreter when PATH has a shim)."""
    found = shutil.which("ctx")
    if found and not is_shim(found):
        return [os.path.realpath(found)]
    beside = Path(sys.executable).parent / "ctx"
    if beside.exists():
        return [str(beside)]
    return [sys.executable, "-m", "ctxstore.cli"]


def _line(entry: dict[str, Any]) -> str:
    return json.dumps(entry) + "\n"


def write_transcript(path: Path, target: int) -> None:
    """~``target`` bytes of realistic history, then a last turn with a remember and a recall."""
    n = 0
    with path.open("w") as fh:
        size = 0
        while size < target:
            n += 1
            chunk = _line({"type": "user", "uuid": f"u{n}", "message": {"role": "user",
                                                                        "content": f"prompt {n}"}})
            chunk += _line({"type": "assistant", "uuid": f"a{n}", "message": {
                "id": f"m{n}", "role": "assistant",
                "content": [{"type": "thinking", "thinking": "hm " * 50}]}})
            chunk += _line({"type": "assistant", "uuid": f"b{n}", "message": {
                "id": f"m{n}", "role": "assistant", "content": [
                    {"type": "tool_use", "id": f"t{n}", "name": "Read", "input": {"file_path": "/x"}}]}})
            chunk += _line({"type": "user", "uuid": f"r{n}", "message": {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"t{n}", "content": "file line\n" * 300}]}})
            chunk += _line({"type": "assistant", "uuid": f"c{n}", "message": {
                "id": f"m{n}b", "role": "assistant", "content": [{"type": "text", "text": "Done. " * 40}]}})
            fh.write(chunk)
            size += len(chunk)
        fh.write(_line({"type": "user", "uuid": "last-prompt", "message": {"role": "user",
                                                                          "content": "remember this"}}))
        fh.write(_line({"type": "assistant", "uuid": "last-a", "message": {"id": "mlast", "content": [
            {"type": "text", "text": '<ctx:remember type="fact" tags="tier:reference">The bench '
                                     'transcript is ten megabytes.</ctx:remember>\n'
                                     '<ctx:recall query="bench"/>'}]}}))


def append_turn(path: Path, i: int) -> None:
    """A new turn with one new remember (so the next Stop really writes)."""
    with path.open("a") as fh:
        fh.write(_line({"type": "user", "uuid": f"bench-u{i}", "message": {"role": "user",
                                                                           "content": f"round {i}"}}))
        fh.write(_line({"type": "assistant", "uuid": f"bench-a{i}", "message": {"id": f"bm{i}", "content": [
            {"type": "text", "text": f'<ctx:remember type="observation">bench round {i}</ctx:remember>'}]}}))


# Installed code runs from cached bytecode; without it every changed module is compiled
# on each start (several ms per module), which no user pays.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def timed(argv: list[str], cwd: Path, stdin: bytes, *, hook: bool = True) -> float:
    t = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, input=stdin, capture_output=True,
                          env=ENV)
    ms = (time.perf_counter() - t) * 1000
    if proc.returncode != 0 or (hook and not isinstance(json.loads(proc.stdout or b"null"), dict)):
        raise SystemExit(f"{argv} failed: {proc.returncode} {proc.stdout[:200]!r} {proc.stderr[:300]!r}")
    return ms


def main(argv: list[str] | None = None) -> int:
    """Build, measure, print the table; exit 0 (the goal is reported, not enforced)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--quick", action="store_true", help="1,000 nodes x 5 runs")
    ap.add_argument("--keep", action="store_true", help="keep the temp directory")
    args = ap.parse_args(argv)
    if args.quick:
        args.nodes, args.runs = 1_000, 5
    script = ctx_script()
    tmp = Path(tempfile.mkdtemp(prefix="ctx-bench-hooks-"))
    try:
        work = tmp / "work"
        work.mkdir()
        t = time.perf_counter()
        build_store(work / ".ctx", args.nodes, DEFAULT_SEED, log=lambda *a, **k: None)
        print(f"store: {args.nodes} nodes built in {time.perf_counter() - t:.1f} s")
        transcript = tmp / "session.jsonl"
        write_transcript(transcript, TRANSCRIPT_BYTES)
        writes = tmp / "writes.jsonl"
        shutil.copy(transcript, writes)
        print(f"transcript: {transcript.stat().st_size / 1e6:.1f} MB")
        print(f"ctx: {' '.join(script)}; python: {sys.executable}")
        print(f"load: {load_text()} at start (other processes on the machine add noise)")
        base = {"session_id": "bench", "cwd": str(work)}
        cases: list[tuple[str, list[str], dict[str, str]]] = [
            ("session-start (store unchanged: cached view)", ["session-start"],
             {**base, "source": "startup"}),
            ("prompt-submit (nothing pending)", ["prompt-submit"], {**base, "prompt": "hi"}),
            ("prompt-submit (pending recall)", ["prompt-submit"],
             {**base, "session_id": "p", "prompt": "hi"}),
            # Ranked search of memory relevant to a real question (packs.session, issue 14).
            ("prompt-submit (relevant-memory search)", ["prompt-submit"],
             {**base, "session_id": "r", "prompt": RELEVANT_PROMPT}),
            ("stop, 10 MB transcript, turn already run", ["stop"],
             {**base, "transcript_path": str(transcript)}),
        ]
        # Second loop: every round writes, so the session-start after it composes anew.
        remember = ("stop, 10 MB transcript, one new remember", ["stop"],
                    {**base, "transcript_path": str(writes)})
        writing: list[tuple[str, list[str], dict[str, str]]] = [
            remember,
            ("session-start (after a change, no session-end)", ["session-start"],
             {**base, "source": "startup"}),
        ]
        # Third loop, a session's end and the next start: the write (untimed here), then
        # session-end composes the view into the cache that the next session-start reads.
        session: list[tuple[str, list[str], dict[str, str]]] = [
            ("", *remember[1:]),
            ("session-end (after a change: composes the cache)", ["session-end"],
             {**base, "reason": "other"}),
            ("session-start (next session, after session-end)", ["session-start"],
             {**base, "source": "startup"}),
        ]
        floor_argv = [sys.executable, "-c", "import click"]
        samples: dict[str, list[float]] = {"floor": []}
        # Warm-up: the first stop runs the transcript's tags; caches get filled.
        for _, event, payload in cases:
            timed(script + ["hook", *event], work, json.dumps(payload).encode())
        for n, loop in enumerate((cases, writing, session)):
            for i in range(args.runs):
                samples["floor"].append(timed(floor_argv, work, b"", hook=False))
                for label, event, payload in loop:
                    if "pending recall" in label:
                        state = open_state(work / ".ctx", create=True)
                        assert state is not None
                        with state:
                            state.add_pending("p", "recall", RECALL_TEXT)
                    if event == ["stop"] and payload["transcript_path"] == str(writes):
                        append_turn(writes, n * args.runs + i)
                    took = timed(script + ["hook", *event], work, json.dumps(payload).encode())
                    if label:
                        samples.setdefault(label, []).append(took)
        floor = statistics.median(samples["floor"])
        print(f"load: {load_text()} after the measurements")
        print(f"\nmedians of {args.runs} runs "
              f"(floor: {3 * args.runs} runs; goal: <= {GOAL_RATIO}x the floor)\n")
        print(f"{'command':<52} {'median':>9} {'ratio':>7}  goal")
        floor_label = 'python -c "import click" (floor)'
        print(f"{floor_label:<52} {floor:>7.1f}ms {1.0:>7.2f}")
        for label, _, _ in [c for c in cases + writing + session if c[0]]:
            med = statistics.median(samples[label])
            ratio = med / floor
            # Session-end runs as the session closes, not before a reply: no one waits on it.
            verdict = "at exit" if label.startswith("session-end") else \
                "ok" if ratio <= GOAL_RATIO else "MISSED"
            print(f"{label:<52} {med:>7.1f}ms {ratio:>7.2f}  {verdict}")
    finally:
        if args.keep:
            print(f"kept: {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
