"""Prompt-pack benchmark: whole ``ctx pack`` and ``ctx search`` processes at 10,000 files and
10,000 nodes (issue 14).

Builds, once, in a temp directory (or ``--work DIR``, kept and reused): a store of N knowledge
nodes the way bench/knowledge.py does (its ``build_store``) and a work tree of F files, indexed
with ``ctx index``. Then it times whole processes of ``ctx pack`` (default budget, narrative
included) and ``ctx search``, interleaved round by round with the floor
``python -c "import click"``.

Corpora (``--corpus``):
    ``real`` (the goal row): the development set's three base trees (``--eval``) plus copies of
        the CPython standard library's ``.py`` files under ``lib0/``, ``lib1/``, ... up to F
        files; tasks are the set's commit messages (the first two of each repository) and
        two short texts.
    ``synthetic`` (a worst case): packages of modules whose identifiers all come from 49
        words, so every query word is in most files; tasks are short texts and a long message
        of those words.

Goals (medians, whole process): ``ctx pack`` <= 150 ms, ``ctx search`` <= 100 ms.

``--scale`` (issue 30) follows a new user through a real project instead, in a Git repository
of F real files (``bench/corpus.py``: the development set's trees and the standard library)
and no knowledge nodes: ``ctx index`` (one run), the first ``ctx pack`` and ``ctx search``
after it, ``ctx commit`` and the files it adds to Git, ``ctx pack`` p50 with the SCC view
present, ``ctx rebuild --full``, ``ctx index`` after one file changed, the index's size
against the tree's, and a fresh ``git clone``: ``ctx index`` there and its first pack, then
a ``git pull`` of a knowledge commit and the first pack after it. Each figure is set against
its goal and against the floor (``python -c "import click"``) measured in the same run.

Usage:
    python bench/pack.py                         # real corpus, 10,000 files, 10,000 nodes
    python bench/pack.py --work /tmp/packbench   # keep the built store for the next run
    python bench/pack.py --corpus synthetic      # the 49-word worst case
    python bench/pack.py --quick                 # 1,000 files, 1,000 nodes, 3 runs
    python bench/pack.py --work /tmp/packbench --fulltext fts5,tantivy
        # the same store served by FTS5 and by Tantivy, command by command, with the
        # median of the paired CPU differences; then build_pack in one resident process
        # (the MCP server's case), the two taking turns task by task (docs/index.md)
    python bench/pack.py --scale                 # a new user's steps at 10,000 real files
    python bench/pack.py --scale --files 5000 --work /tmp/scale   # keep the clone
    python bench/pack.py --work /tmp/packbench --caps 20000,10000,6000 --seeds 50,20,10
        # ranking at scale: every development-set item ranked inside the 10,000-file index
        # (the real corpus), MRR per repository and ranking time, per posting cap and per
        # number of files spreading score over the import graph
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from knowledge import DEFAULT_SEED, build_store  # noqa: E402

STDLIB = Path(os.__file__).parent
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


def write_real_tree(root: Path, files: int, eval_dir: Path) -> dict[str, str]:
    """The set's base trees plus stdlib copies up to ``files`` files; returns the tasks."""
    tasks: dict[str, str] = {}
    count = 0
    for name in ("werkzeug", "starlette", "ripgrep"):
        base = eval_dir / "data" / f"{name}-base"
        shutil.copytree(base, root / name, symlinks=True)
        count += sum(1 for p in (root / name).rglob("*") if p.is_file())
        with open(eval_dir / "data" / f"localize-{name}.jsonl", encoding="utf-8") as f:
            for i, line in zip(range(2), f, strict=False):
                tasks[f"{name} commit {i + 1}"] = json.loads(line)["query"]
    sources = sorted(p for p in STDLIB.rglob("*.py") if "site-packages" not in p.parts)
    copy = 0
    while count < files:
        for src in sources:
            if count >= files:
                break
            dst = root / f"lib{copy}" / src.relative_to(STDLIB)
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)
            count += 1
        copy += 1
    tasks["two words"] = "retry timeout"
    tasks["a question"] = "where do we parse the cookie header before sending the response?"
    return tasks


def synthetic_tasks(modules: list[str]) -> dict[str, str]:
    """Tasks over the synthetic tree: short texts, a symbol, a long message of its words."""
    rng = random.Random(DEFAULT_SEED)
    name = modules[len(modules) // 2].split(".")[-1]
    return {
        "two words": "retry timeout",
        "a question": "where do we validate the invoice amount before export?",
        "a symbol": f"fix {name} when the socket times out",
        "a commit message": "\n".join(
            [f"{_ident(rng, 1)}: {' '.join(rng.choice(WORDS) for _ in range(8))}", ""]
            + [" ".join(rng.choice(WORDS) for _ in range(12)) for _ in range(6)]),
    }


# As a user's shell runs ctx: byte-code caches written and used (PYTHONDONTWRITEBYTECODE=1
# would recompile every changed module in every timed process).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _run(argv: list[str], cwd: Path) -> float:
    return _run_cpu(argv, cwd)[0]


def _run_cpu(argv: list[str], cwd: Path) -> tuple[float, float]:
    """Wall and CPU time (user + system, the child's ``getrusage``) of one process, in ms.

    On a loaded machine the wall time swings by tens of milliseconds from run to run; the
    CPU a process spends is what a change moves, so the engines are compared on both.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, check=False, env=ENV)
    elapsed = (time.perf_counter() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])} failed: {proc.stderr.decode()[-500:]}")
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return elapsed, cpu


def in_process(work: Path, tasks: dict[str, str], runs: int, engine: str = "") -> None:
    """Median time of ``build_pack`` alone (no interpreter start-up, imports or printing)."""
    from ctxstore.packs.pack import build_pack
    from ctxstore.session import Session

    print(f"\n{'in-process build_pack' + (f' [{engine}]' if engine else ''):34} {'p50 ms':>8}")
    with Session.open(work / ".ctx") as session:
        session.index()
        for label, task in tasks.items():
            xs = []
            for _ in range(runs):
                start = time.perf_counter()
                build_pack(session, task)
                xs.append((time.perf_counter() - start) * 1000)
            print(f"{label:34} {statistics.median(xs):8.0f}")


def in_process_paired(work: Path, tasks: dict[str, str], runs: int, first: str, second: str
                      ) -> None:
    """CPU of ``build_pack`` in one resident process, two engines, paired task by task.

    The MCP server's case: the interpreter, ctx and Tantivy's library are loaded once, and
    each pack opens the indexes it reads. One session per ``[index] fulltext`` setting, the
    two taking turns on every task of every round (each first in turn); printed: each
    engine's CPU p50 per task and the median of the paired differences.
    """
    from contextlib import ExitStack

    from ctxstore.packs.pack import build_pack
    from ctxstore.session import Session

    cpu: dict[str, dict[str, list[float]]] = {e: {k: [] for k in tasks} for e in (first, second)}
    with ExitStack() as stack:
        sessions = {}
        for engine in (first, second):
            set_fulltext(work, engine)
            sessions[engine] = stack.enter_context(Session.open(work / ".ctx"))
            sessions[engine].index()
            for task in tasks.values():  # warm: imports, caches, each engine's first query
                build_pack(sessions[engine], task)
        for round_ in range(runs):
            for k, (label, task) in enumerate(tasks.items()):
                for engine in (first, second) if (round_ + k) % 2 == 0 else (second, first):
                    start = time.process_time()
                    build_pack(sessions[engine], task)
                    cpu[engine][label].append((time.process_time() - start) * 1000)
    print(f"\n{'in-process build_pack, CPU ms':34} {first:>8} {second:>8}")
    for label in tasks:
        print(f"{label:34} {statistics.median(cpu[first][label]):8.1f} "
              f"{statistics.median(cpu[second][label]):8.1f}")
    diffs = [b - a for label in tasks
             for a, b in zip(cpu[first][label], cpu[second][label], strict=True)]
    base = statistics.median([x for xs in cpu[first].values() for x in xs])
    d = statistics.median(diffs)
    print(f"{'paired ' + second + ' - ' + first:34} {d:+8.1f}  {d / base:+7.1%}  "
          f"({sum(x < 0 for x in diffs)} of {len(diffs)} pairs cheaper under {second})")


def at_scale(work: Path, eval_dir: Path, caps: list[int], seeds: list[int], runs: int,
             tantivy: bool = False) -> None:
    """MRR of the development set's items ranked inside the large index, per setting.

    Each repository's base tree is one of the index's folders among ~10,000 files, so the
    posting cap (``packs.seed.MAX_POSTINGS``) binds as it does for a large repository,
    which it never does on the set's own trees, and the graph's spreading files
    (``Params.max_seeds``) include files of the other trees. A ranking keeps the repository's
    language files; the statistics (document frequencies, lengths) are the whole index's.
    One row per cap (shipped ``max_seeds``), then one per ``max_seeds`` (shipped cap), then,
    with ``tantivy``, one ranked by the Tantivy index that serves this index (no cap: every
    term is scored).
    """
    from retrieval import NAMES, _load, items, language_ext, mrr

    from ctxstore.packs import pack, seed
    from ctxstore.search.rank import Params
    from ctxstore.search.tantivy_index import open_served
    from ctxstore.search.task import parse_query
    from ctxstore.session import Session

    is_test = _load(eval_dir, "bm25").is_test
    print(f"\n{'setting':>22}  " + "  ".join(f"{n:>9} {'-tests':>6}" for n in NAMES)
          + f"  {'rank ms':>8}")
    shipped = seed.MAX_POSTINGS
    settings = [(f"MAX_POSTINGS {cap}", cap, Params(), False) for cap in caps]
    settings += [(f"max_seeds {n}", shipped, Params(max_seeds=n), False) for n in seeds]
    if tantivy:
        settings.append(("Tantivy", shipped, Params(), True))
    try:
        for label, cap, params, served_by_tantivy in settings:
            seed.MAX_POSTINGS = cap
            cells: list[str] = []
            seconds: list[float] = []
            with Session.open(work / ".ctx") as session:
                conn = session.index()
                served = open_served(session.root, conn, session.config) \
                    if served_by_tantivy else None
                if served_by_tantivy and served is None:
                    raise SystemExit("Tantivy does not serve this index (run ctx rebuild --tantivy)")
                for name in NAMES:
                    rows = items(eval_dir, name)
                    ext = language_ext(rows)
                    total = total_no_tests = 0.0
                    for row in rows:
                        query = parse_query(row["query"])
                        xs = []
                        for _ in range(runs):
                            start = time.perf_counter()
                            hits = seed.rank_files(conn, query, params, limit=pack.RANKED_FILES,
                                                   matched_only=True, explain=pack.MAX_FILES,
                                                   served=served)
                            xs.append(time.perf_counter() - start)
                        seconds.append(statistics.median(xs))
                        ranked = [h.path[len(name) + 1:] for h in hits
                                  if h.path.startswith(f"{name}/") and h.path.endswith(ext)]
                        total += mrr(ranked, row["gold_files"])
                        total_no_tests += mrr([p for p in ranked if not is_test(p)],
                                              row["gold_files"])
                    cells.append(f"{total / len(rows):9.3f} {total_no_tests / len(rows):6.3f}")
            print(f"{label:>22}  " + "  ".join(cells)
                  + f"  {statistics.median(seconds) * 1000:8.1f}")
    finally:
        seed.MAX_POSTINGS = shipped


def build(work: Path, args: argparse.Namespace, ctx: list[str]) -> dict[str, str]:
    """Build and index the store in ``work`` (reused when ``tasks.json`` is there)."""
    saved = work / "tasks.json"
    if saved.exists():
        return dict(json.loads(saved.read_text()))
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    build_store(work / ".ctx", args.nodes, DEFAULT_SEED, log=lambda *a, **k: None)
    if args.corpus == "real":
        tasks = write_real_tree(work, args.files, args.eval)
    else:
        tasks = synthetic_tasks(write_tree(work, args.files, DEFAULT_SEED))
    t1 = time.perf_counter()
    _run([*ctx, "index"], work)
    _run([*ctx, "status"], work)  # the index catches up once, outside the timings
    t2 = time.perf_counter()
    print(f"built {args.nodes} nodes + {args.files} files in {t1 - t0:.1f} s; "
          f"ctx index + first catch-up {t2 - t1:.1f} s", flush=True)
    saved.write_text(json.dumps(tasks))
    return tasks


def _pooled(times: dict[str, list[float]]) -> dict[str, list[float]]:
    """``times`` with every command's samples pooled per kind (``pack``, ``search``, ...)."""
    pooled: dict[str, list[float]] = {"pack (all tasks)": [], "search (all tasks)": [],
                                      "search-long (all tasks)": []}
    for label, xs in times.items():
        pooled.get(f"{label.split(':')[0]} (all tasks)", []).extend(xs)
    return {**times, **{k: v for k, v in pooled.items() if v}}


def report(times: dict[str, list[float]], engine: str = "",
           cpu: dict[str, list[float]] | None = None) -> bool:
    """Print p50/p90 per command and pooled per kind; True when both goals are met.

    ``cpu``: the same commands' CPU times, printed beside (p50, and pooled x the floor's).
    """
    print(f"\n{'command' + (f' [{engine}]' if engine else ''):34} {'p50 ms':>8} {'p90 ms':>8}"
          f"{'  cpu p50' if cpu else ''}  goal")
    ok = True
    floor = statistics.median(times["floor: import click"])
    spent = _pooled(cpu) if cpu else {}
    cpu_floor = statistics.median(cpu["floor: import click"]) if cpu else 1.0
    for label, xs in _pooled(times).items():
        xs.sort()
        goal = PACK_GOAL_MS if label.startswith("pack") else \
            SEARCH_GOAL_MS if label.startswith("search") else None
        med = statistics.median(xs)
        mark = "" if goal is None else f"{goal:.0f} {'ok' if med <= goal else 'MISSED'}"
        own = statistics.median(spent[label]) if label in spent else None
        if label.endswith("(all tasks)"):
            ok = ok and med <= (goal or med)
            mark += f"  ({med / floor:.1f} x floor" + \
                (f"; cpu {own / cpu_floor:.2f} x floor's)" if own is not None else ")")
        print(f"{label:34} {med:8.0f} {xs[min(len(xs) - 1, int(len(xs) * 0.9))]:8.0f}"
              + (f" {own:8.1f}" if own is not None else "") + f"  {mark}")
    print(f"\n{os.cpu_count()} cpus, load average {os.getloadavg()[0]:.1f}; whole processes, warm cache")
    return ok


def paired(cpu: dict[str, dict[str, list[float]]], first: str, second: str) -> None:
    """Print, per kind of command, the median of the paired CPU differences of two engines.

    Each command ran under both engines back to back in every round, so the difference of
    a pair cancels what the machine's load did to both; the floor's pairs show what is left
    of that noise.
    """
    print(f"\ncpu {second} - {first}, median of paired differences (ms; share of {first}'s p50)")
    kinds: dict[str, tuple[list[float], list[float]]] = {}
    for label in cpu[first]:
        kind = label.split(":")[0]
        diffs, base = kinds.setdefault(kind, ([], []))
        diffs.extend(b - a for a, b in zip(cpu[first][label], cpu[second][label], strict=True))
        base.extend(cpu[first][label])
    for kind, (diffs, base) in kinds.items():
        if diffs:
            d = statistics.median(diffs)
            wins = sum(x < 0 for x in diffs)
            print(f"{kind:34} {d:+8.1f}  {d / statistics.median(base):+7.1%}  "
                  f"({wins} of {len(diffs)} pairs cheaper under {second})")


def set_fulltext(work: Path, engine: str) -> None:
    """Write ``[index] fulltext = ENGINE`` into the store's config.toml (docs/index.md)."""
    config = work / ".ctx" / "config.toml"
    text = config.read_text()
    start = text.index("fulltext = ")
    end = text.index("\n", start)
    config.write_text(f'{text[:start]}fulltext = "{engine}"{text[end:]}')


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--corpus", choices=("real", "synthetic"), default="real")
    parser.add_argument("--eval", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "eval")
    parser.add_argument("--work", type=Path, default=None, help="build here and keep it")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--caps", default=None,
                        help="comma-separated posting caps: report MRR at scale for each instead")
    parser.add_argument("--fulltext", default="auto",
                        help="[index] fulltext settings to time, comma-separated and interleaved "
                             "(fts5,tantivy compares the engines on one store); with --caps, "
                             "'tantivy' adds a row ranked by Tantivy")
    parser.add_argument("--seeds", default="",
                        help="with --caps: also these max_seeds values (comma-separated)")
    parser.add_argument("--scale", action="store_true",
                        help="a new user's steps on a real project (issue 30), against their goals")
    args = parser.parse_args()
    if args.quick:
        args.files, args.nodes, args.runs = 1_000, 1_000, 3
    if args.scale:
        from scale import run_scale

        with tempfile.TemporaryDirectory(prefix="ctx-bench-scale-") as tmp:
            rows = run_scale(args.work or Path(tmp), args.files, args.runs, eval_dir=args.eval)
        return 1 if any("MISSED" in verdict for *_, verdict in rows) else 0
    ctx = [sys.executable, "-m", "ctxstore.cli"]
    with tempfile.TemporaryDirectory(prefix="ctx-bench-pack-") as tmp:
        work = args.work or Path(tmp) / "work"
        tasks = build(work, args, ctx)
        if args.caps:
            if args.corpus != "real":
                raise SystemExit("--caps needs the real corpus (the development set's trees)")
            at_scale(work, args.eval, [int(c) for c in args.caps.split(",")],
                     [int(n) for n in args.seeds.split(",") if n], args.runs,
                     tantivy="tantivy" in args.fulltext)
            return 0
        short = [k for k in tasks if "commit" not in k]
        commands = {f"pack: {k}": [*ctx, "pack", v, "--format", "json"] for k, v in tasks.items()}
        commands |= {f"search: {k}": [*ctx, "search", tasks[k], "--format", "json"] for k in short}
        if args.fulltext != "auto":  # the commit messages too: long texts are where engines differ
            commands |= {f"search-long: {k}": [*ctx, "search", v, "--format", "json"]
                         for k, v in tasks.items() if k not in short}
        commands["floor: import click"] = [sys.executable, "-c", "import click"]
        engines = args.fulltext.split(",")
        if "tantivy" in engines and not (work / ".ctx" / "index" / "tantivy.synced").exists():
            set_fulltext(work, "tantivy")
            _run([*ctx, "rebuild", "--tantivy"], work)  # built once, outside the timings
        times: dict[str, dict[str, list[float]]] = {e: {k: [] for k in commands} for e in engines}
        cpu: dict[str, dict[str, list[float]]] = {e: {k: [] for k in commands} for e in engines}
        for round_ in range(args.runs):  # each command run by every engine back to back,
            for k, (label, argv) in enumerate(commands.items()):  # each engine first in turn
                for engine in engines if (round_ + k) % 2 == 0 else engines[::-1]:
                    if len(engines) > 1:
                        set_fulltext(work, engine)
                    wall, spent = _run_cpu(argv, work)
                    times[engine][label].append(wall)
                    cpu[engine][label].append(spent)
        ok = all([report({k: v for k, v in times[e].items() if v}, e if len(engines) > 1 else "",
                         cpu={k: v for k, v in cpu[e].items() if v})
                  for e in engines])
        if len(engines) == 2:
            paired(cpu, engines[0], engines[1])
        if len(engines) == 2:
            in_process_paired(work, tasks, args.runs, engines[0], engines[1])
        else:
            in_process(work, tasks, args.runs)
        set_fulltext(work, "auto")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
