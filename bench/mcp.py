"""`ctx mcp` tool-call latency: p50/p90 over 200 recall calls in one MCP session (issue 16).

Builds the 10,000-node store of bench/knowledge.py (same generator, same seed), starts
`ctx mcp` as a subprocess and speaks JSON-RPC to it over stdio with the official SDK
client, as Claude Code would. After 10 warm-up calls it times 200 `recall` calls
round trip (client send -> result parsed), cycling through a rare word, a common word
and a query-language query (`type:decision AND <common>`), limit 20, and then 200
`search`, 100 `show` and 100 `pack` calls (a task of the rare and the common word, budget
4,000 tokens; the bench store has no code index, so a pack is its memory part). The project
store only (`--no-global`: the user store is
empty on a bench machine).

Goal: recall p50 <= 10 ms on 10,000 nodes.

Usage:
    python bench/mcp.py                 # 10,000 nodes
    python bench/mcp.py --nodes 1000    # quicker
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

# This file is named mcp.py: its folder must not shadow the `mcp` package.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

import anyio  # noqa: E402
from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402
from mcp.types import TextContent  # noqa: E402

_spec = importlib.util.spec_from_file_location("ctx_bench_knowledge", _HERE / "knowledge.py")
assert _spec is not None and _spec.loader is not None
knowledge = importlib.util.module_from_spec(_spec)
sys.modules["ctx_bench_knowledge"] = knowledge
_spec.loader.exec_module(knowledge)


def pct(xs: list[float], q: float) -> float:
    ordered = sorted(xs)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def measure(ctx_dir: Path, queries: list[str], words: list[str], ids: list[str],
                  calls: int) -> dict[str, list[float]]:
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "ctxstore.cli", "--ctx-dir", str(ctx_dir), "mcp",
                                         "--no-global"], env=dict(os.environ))
    out: dict[str, list[float]] = {"recall": [], "search": [], "show": [], "pack": []}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as client:
            await client.initialize()
            for i in range(10):
                await client.call_tool("recall", {"query": queries[i % len(queries)]})
            plan = [("recall", {"query": queries[i % len(queries)], "limit": 20}) for i in range(calls)]
            plan += [("search", {"text": words[i % len(words)], "limit": 20}) for i in range(calls)]
            plan += [("show", {"id": ids[i % len(ids)]}) for i in range(calls // 2)]
            task = f"why do we {words[0]} the {words[1]}?"
            plan += [("pack", {"task": task, "budget": 4000}) for _ in range(calls // 2)]
            for tool, args in plan:
                t0 = time.perf_counter()
                res = await client.call_tool(tool, args)
                first = res.content[0]
                assert isinstance(first, TextContent), first  # ctx's tools answer in JSON text
                json.loads(first.text)
                out[tool].append((time.perf_counter() - t0) * 1000)
                assert not res.is_error, first.text
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ctx-bench-mcp-") as tmp:
        root = Path(tmp) / "work" / ".ctx"
        root.parent.mkdir()
        built = knowledge.build_store(root, args.nodes, args.seed,
                                      log=lambda *a, **k: print(*a, file=sys.stderr, **k))
        common, df_c, rare, df_r = knowledge.pick_words(built, knowledge._vocabulary())
        queries = [rare, common, f"type:decision AND {common}"]
        ids = sorted(built.nodes)[:: max(1, len(built.nodes) // 50)]
        print(f"store: {len(built.nodes)} nodes; rare word {rare!r} in {df_r}, common {common!r} "
              f"in {df_c}; {args.calls} calls per tool")
        times = anyio.run(measure, root, queries, [rare, common], ids, args.calls)
    print(f"{'tool':<8} {'p50 ms':>8} {'p90 ms':>8} {'mean ms':>8}")
    for tool, xs in times.items():
        print(f"{tool:<8} {statistics.median(xs):8.2f} {pct(xs, 0.9):8.2f} {statistics.mean(xs):8.2f}")
    p50 = statistics.median(times["recall"])
    print(f"recall p50 {p50:.2f} ms: {'OK' if p50 <= 10 else 'OVER'} the 10 ms goal")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
