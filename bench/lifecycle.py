"""Lifecycle benchmark: the lifecycle pass, consolidation proposals and auto-linking.

Builds, once, a store of N knowledge nodes (seeded RNG; every type; 5-60 words of a
~1,500-word Zipf-like vocabulary; updated 0-120 days ago, so tasks and observations
have decayed and some are due for archive; ~1 edge per node), committed as one canonical
commit and indexed. Then, in-process, median (and min/max) over ``--runs`` rounds:

- ``ctx lifecycle --dry-run``: ``run_lifecycle(dry_run=True)`` (read + score every node);
- ``ctx lifecycle``: the pass applying its transitions, each round on a fresh copy of
  the store (the copy is not timed);
- ``ctx consolidate --dry-run``: ``propose`` over every node;
- auto-linking: ``add_node`` of a new memory with ``[lifecycle] autolink`` on, minus the
  same with it off (the BM25 lookup over at most 20 candidates).

Goal (issue 16): the lifecycle pass over 10,000 nodes <= 2 s.

Usage:
    python bench/lifecycle.py            # 10,000 nodes x 5 runs
    python bench/lifecycle.py --quick    # 1,000 nodes x 3 runs
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ctxstore.clock import now_ms
from ctxstore.ids import new_ulid
from ctxstore.index import open_index
from ctxstore.init import init_store
from ctxstore.knowledge.nodes import add_node
from ctxstore.lifecycle.consolidate import propose
from ctxstore.lifecycle.policy import run_lifecycle
from ctxstore.model.knowledge import EdgeRecord, KnowledgeRecord, NodeRecord
from ctxstore.repo import Store, open_store
from ctxstore.session import Session
from ctxstore.staging import commit_stage, stage_records

TYPES = ("fact", "decision", "pattern", "observation", "hypothesis", "task", "open-question")
DAY = 86_400_000


def _vocabulary(rng: random.Random) -> tuple[list[str], list[float]]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = sorted({"".join(rng.choice(letters) for _ in range(rng.randint(3, 9)))
                    for _ in range(1_600)})[:1_500]
    weights = [1 / (i + 1) for i in range(len(words))]
    return words, weights


def build(root: Path, n: int, seed: int = 7) -> Store:
    """A store of ``n`` nodes as described in the module docstring."""
    rng = random.Random(seed)
    words, weights = _vocabulary(rng)
    init_store(root, git=False)
    store = open_store(root)
    now = now_ms()
    records: list[KnowledgeRecord] = []
    ids: list[str] = []
    for _ in range(n):
        stamp = now - rng.randint(0, 120) * DAY - rng.randint(0, DAY)
        nid = new_ulid()
        tags = ("tier:pinned",) if rng.random() < 0.02 else ()
        records.append(NodeRecord(
            id=nid, type=rng.choice(TYPES),
            content=" ".join(rng.choices(words, weights, k=rng.randint(5, 60))),
            content_blob=None, summary=None, tags=tags, metadata={}, status="active",
            superseded_by=None, created_at=stamp, updated_at=stamp, author=None, prev=None))
        if ids and rng.random() < 0.9:
            other = rng.choice(ids)
            records.append(EdgeRecord(from_ref=("node", nid), to_ref=("node", other),
                                      label="RELATES_TO", weight=None, metadata={},
                                      evidence={"tool": "human"}, created_at=stamp,
                                      updated_at=stamp, prev=None))
        ids.append(nid)
    for start in range(0, len(records), 5_000):
        stage_records(store, records[start:start + 5_000], message="bench")
    commit_stage(store, "bench store")
    open_index(store).close()
    return store


def timed(fn: Callable[[], object], runs: int, setup: Callable[[], object] | None = None
          ) -> list[float]:
    """Seconds per run of ``fn`` (``setup`` before each run, not timed)."""
    out = []
    for _ in range(runs):
        if setup is not None:
            setup()
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def line(label: str, seconds: list[float], unit: str = "ms") -> str:
    """One row of the report: median, min, max."""
    scale = 1000 if unit == "ms" else 1
    med, lo, hi = (statistics.median(seconds) * scale, min(seconds) * scale,
                   max(seconds) * scale)
    return f"| {label} | {med:,.1f} {unit} | {lo:,.1f} | {hi:,.1f} |"


def main() -> int:
    """Run the benchmark and print a Markdown table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="1,000 nodes x 3 runs")
    args = ap.parse_args()
    if args.quick:
        args.nodes, args.runs = 1_000, 3
    tmp = Path(tempfile.mkdtemp(prefix="ctx-bench-lifecycle-"))
    try:
        t0 = time.perf_counter()
        master = build(tmp / "master" / ".ctx", args.nodes)
        print(f"store of {args.nodes:,} nodes built in {time.perf_counter() - t0:.1f} s",
              file=sys.stderr)
        copy = tmp / "copy" / ".ctx"
        state: dict[str, Session] = {}

        def fresh() -> None:
            if "db" in state:
                state["db"].close()
            shutil.rmtree(copy.parent, ignore_errors=True)
            shutil.copytree(master.root.parent, copy.parent)
            state["db"] = Session(open_store(copy))
            state["db"].index()

        now = now_ms()
        master_db = Session(master)
        dry = timed(lambda: run_lifecycle(master_db, now_ms=now, dry_run=True), args.runs)
        report = run_lifecycle(master_db, now_ms=now, dry_run=True)
        apply = timed(lambda: run_lifecycle(state["db"], now_ms=now), args.runs, setup=fresh)

        def proposals() -> None:
            conn = open_index(master)
            try:
                propose(conn)
            finally:
                conn.close()

        cons = timed(proposals, args.runs)
        conn = open_index(master)
        try:
            n_props = len(propose(conn))
        finally:
            conn.close()
        fresh()
        (copy / "config.toml").write_text("[lifecycle]\nautolink = true\n")
        linked = open_store(copy)
        text = "retry the flaky upload with exponential backoff and jitter"
        plain_cfg = tmp / "plain"
        shutil.copytree(master.root.parent, plain_cfg)
        plain2 = open_store(plain_cfg / ".ctx")
        open_index(plain2).close()
        plain_db, linked_db = Session(plain2), Session(linked)
        off = timed(lambda: add_node(plain_db, "observation", text), args.runs * 3)
        on = timed(lambda: add_node(linked_db, "observation", text), args.runs * 3)
        plain_db.close()
        linked_db.close()
        print(f"\n{args.nodes:,} nodes, {args.runs} runs; the dry run finds "
              f"{report.count('archive')} to archive; {n_props} merge proposals\n")
        print("| figure | median | min | max |")
        print("|---|---:|---:|---:|")
        print(line("lifecycle pass, dry run (read + score every node)", dry))
        print(line(f"lifecycle pass, applied ({report.count('archive')} archived)", apply))
        print(line("consolidation proposals (every node)", cons))
        print(line("add_node, autolink off (in-process)", off))
        print(line("add_node, autolink on (in-process)", on))
        ok = statistics.median(apply) <= 2.0
        print(f"\ngoal: lifecycle pass over {args.nodes:,} nodes <= 2 s: "
              f"{'PASS' if ok else 'FAIL'}")
        return 0 if ok else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
