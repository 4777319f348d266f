"""Retrieval quality on the code-localisation development set: ctx against BM25, same run.

The set (``--eval``, default ``../shared/eval`` beside the checkout; its README describes it) pairs real
commit messages with the files they changed, over three base trees (werkzeug, starlette,
ripgrep). For each repository this script ranks the base tree's language files for every
item, writes ``runs/<mode>/localize-<name>.jsonl`` (and ``runs/<mode>-exclude-tests/``
without test files) under ``--out``, runs the set's own ``bm25.py`` (both corpora) and
``score.py`` in the same process, and prints R@1, R@5, R@10 and MRR per repository and
item-weighted, with ctx's deltas over BM25 and whether the goal (MRR +0.10 over all files,
+0.05 without tests, on every repository) is met.

Modes:
    ``--mode pack`` (default): the whole ``ctx`` path. Each base tree is copied to a temp
        directory (``git init`` + ``git add -A``), ``ctx init`` + ``ctx index`` run there,
        then ``ctx pack --format json`` runs once per item as its own process; the ranking
        is the pack's ``ranked_files``.
    ``--mode library``: the ranking library in-process over a corpus built straight from
        the tree with the registered extractors (development of the method).
        With ``--in-process``, the packs are built in this process (``packs.pack.make_pack``
        over the same index, the same request as ``ctx pack --format json --no-narrative``):
        the same figures several times faster, for iterating on the pack rules; the times
        printed are then not whole processes.
    ``--ablate``: library mode, once per step of the method (docs/retrieval.md table).
    ``--loo``: library mode, leave-one-repository-out choice of the tuned weights.

Usage:
    python bench/retrieval.py                       # ctx pack, all three repositories
    python bench/retrieval.py --mode library --ablate
    python bench/retrieval.py --mode library --loo
    python bench/retrieval.py --fulltext tantivy    # ctx pack served by Tantivy (docs/index.md)
    python bench/retrieval.py --in-process          # the same packs, built in this process
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from ctxstore.code.languages import extractor_for
from ctxstore.search.rank import Corpus, Document, Params, defined_names
from ctxstore.search.task import Query, parse_query
from ctxstore.search.tokenize import tokenize

NAMES = ("werkzeug", "starlette", "ripgrep")

GOAL_ALL, GOAL_NO_TESTS = 0.10, 0.05


def _load(eval_dir: Path, name: str) -> ModuleType:
    """Import one of the set's stdlib scripts (``bm25``, ``score``) by path."""
    spec = importlib.util.spec_from_file_location(f"eval_{name}", eval_dir / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def items(eval_dir: Path, name: str) -> list[dict[str, Any]]:
    """The items of one repository."""
    with open(eval_dir / "data" / f"localize-{name}.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def language_ext(rows: list[dict[str, Any]]) -> str:
    """The language suffix of a repository's gold files (``.py`` or ``.rs``)."""
    exts = {os.path.splitext(str(g))[1] for r in rows for g in r["gold_files"]}
    assert len(exts) == 1, exts
    return exts.pop()


def _walk(root: Path, ext: str) -> Iterator[str]:
    """Repository-relative paths of ``ext`` files, hidden directories skipped."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for filename in sorted(filenames):
            if filename.endswith(ext):
                yield Path(dirpath, filename).relative_to(root).as_posix()


def _module_keys(module: str) -> list[str]:
    """Every dotted suffix of a module name (``src.pkg.mod``: ``pkg.mod``, ``mod``...)."""
    parts = module.split(".")
    return [".".join(parts[i:]) for i in range(len(parts))]


def build_corpus(root: Path, ext: str) -> list[Document]:
    """Documents for every ``ext`` file of a tree, with definitions and resolved imports.

    Imports are resolved to files by the longest dotted prefix of the target that names a
    module of the tree (a module known by several files is left unresolved).
    """
    raw: list[tuple[str, list[str], list[str], list[str]]] = []
    modules: dict[str, set[str]] = {}
    for rel in _walk(root, ext):
        text = (root / rel).read_text(encoding="utf-8", errors="replace")
        extractor = extractor_for(rel)
        defs: list[str] = []
        imports: list[str] = []
        if extractor is not None:
            extraction = extractor.extract(rel, text)
            defs = defined_names((s.qualname, s.name, s.kind) for s in extraction.symbols)
            imports = [r.target.replace("::", ".") for r in extraction.relations
                       if r.label == "Imports"]
            namer = getattr(extractor, "module_name", None)
            module = namer(rel) if namer is not None else None
            if module:
                module = module.replace("::", ".")
                for key in _module_keys(module):
                    modules.setdefault(key, set()).add(rel)
        raw.append((rel, tokenize(text), defs, imports))
    docs = []
    for rel, tokens, defs, imports in raw:
        resolved: list[str] = []
        for target in imports:
            parts = target.split(".")
            for n in range(len(parts), 0, -1):
                hit = modules.get(".".join(parts[:n]))
                if hit:
                    if len(hit) == 1:
                        resolved.append(next(iter(hit)))
                    break
        docs.append(Document(rel, tokens, tuple(defs), tuple(dict.fromkeys(resolved))))
    return docs


def mrr(ranking: list[str], gold: list[str]) -> float:
    """1 / rank of the first gold file, 0 when none is ranked."""
    golden = set(gold)
    return next((1 / (i + 1) for i, p in enumerate(ranking) if p in golden), 0.0)


class Library:
    """The ranking library over in-process corpora, one per repository and test setting."""

    def __init__(self, eval_dir: Path) -> None:
        self.rows = {name: items(eval_dir, name) for name in NAMES}
        self.is_test = _load(eval_dir, "bm25").is_test
        self._corpora: dict[tuple[str, bool, float, float], Corpus] = {}
        self.docs = {name: build_corpus(eval_dir / "data" / f"{name}-base",
                                        language_ext(self.rows[name])) for name in NAMES}

    def corpus(self, name: str, exclude_tests: bool, params: Params) -> Corpus:
        """The corpus of one repository (the set's own test rule), built once per field setting."""
        key = (name, exclude_tests, params.body_b, params.path_b)
        corpus = self._corpora.get(key)
        if corpus is None:
            docs = [d for d in self.docs[name] if not (exclude_tests and self.is_test(d.path))]
            corpus = self._corpora[key] = Corpus.from_documents(docs, params)
        corpus.params = params  # the other weights act at query time
        return corpus

    def rankings(self, name: str, exclude_tests: bool) -> list[list[str]]:
        """The ranked files of every item of one repository, shipped defaults."""
        corpus = self.corpus(name, exclude_tests, Params())
        return [[h.path for h in corpus.rank(parse_query(r["query"]))] for r in self.rows[name]]


# The ablation: each step adds one part of the method to the previous one:
# (label, ranking weights, query options).
_OFF: dict[str, Any] = dict(path_weight=0.0, symbol_boost=0.0, test_prior=1.0, graph_weight=0.0,
                           file_boost=0.0)
STEPS: list[tuple[str, dict[str, Any], dict[str, float] | None]] = [
    ("BM25 body, plain query (baseline)", _OFF, None),
    ("+ query cleaner (noise stripped)", _OFF, dict(pair_weight=0.0)),
    ("+ test/example prior x0.3", {**_OFF, "test_prior": 0.3}, dict(pair_weight=0.0)),
    ("+ path field (w 2, b 0)", dict(symbol_boost=0.0, graph_weight=0.0, file_boost=0.0),
     dict(pair_weight=0.0)),
    ("+ word pairs as identifiers", dict(symbol_boost=0.0, graph_weight=0.0, file_boost=0.0), {}),
    ("+ defined-name boost", dict(graph_weight=0.0, file_boost=0.0), {}),
    ("+ import-graph neighbour", dict(file_boost=0.0), {}),
    ("+ named files", {}, {}),
]


def _plain(text: str) -> Query:
    """The baseline's query: every token, weight 1, no names."""
    weights: dict[str, float] = {}
    for token in tokenize(text):
        weights[token] = weights.get(token, 0.0) + 1.0
    return Query(weights)


def _mean_mrr(lib: Library, name: str, exclude_tests: bool, params: Params,
              queries: list[Query]) -> float:
    corpus = lib.corpus(name, exclude_tests, params)
    rows = lib.rows[name]
    return sum(mrr([h.path for h in corpus.rank(q)], r["gold_files"])
               for q, r in zip(queries, rows, strict=True)) / len(rows)


def ablate(lib: Library) -> None:
    """Print MRR per step, per repository, over all files and without tests."""
    print(f"{'step':36} " + " ".join(f"{n[:9]:>9} {'-tests':>6}" for n in NAMES))
    for label, change, query_options in STEPS:
        params = dataclasses.replace(Params(), **change)
        cells = []
        for name in NAMES:
            texts = [r["query"] for r in lib.rows[name]]
            queries = [_plain(t) if query_options is None else parse_query(t, **query_options)
                       for t in texts]
            cells += [_mean_mrr(lib, name, excl, params, queries) for excl in (False, True)]
        print(f"{label:36} " + " ".join(f"{c:9.3f}" if j % 2 == 0 else f"{c:6.3f}"
                                         for j, c in enumerate(cells)))


RANK_GRID = {
    "path_weight": (1.0, 2.0, 3.0),
    "path_b": (0.0, 0.3),
    "symbol_boost": (0.0, 0.25, 0.5),
    "graph_weight": (0.0, 0.1, 0.2),
}
QUERY_GRID = {"subject_weight": (1.0, 1.5, 2.0), "pair_weight": (0.0, 2.0)}


def loo(lib: Library) -> None:
    """Leave-one-repository-out: choose weights on two repositories, report the third.

    The objective is the mean of MRR over all files and without tests.
    """
    keys, qkeys = list(RANK_GRID), list(QUERY_GRID)
    table: dict[tuple[float, ...], dict[str, float]] = {}
    for qcombo in itertools.product(*QUERY_GRID.values()):
        options = dict(zip(qkeys, qcombo, strict=True))
        queries = {n: [parse_query(r["query"], **options) for r in lib.rows[n]] for n in NAMES}
        for combo in itertools.product(*RANK_GRID.values()):
            params = Params(**dict(zip(keys, combo, strict=True)))  # type: ignore[arg-type]
            table[(*qcombo, *combo)] = {
                n: sum(_mean_mrr(lib, n, excl, params, queries[n]) for excl in (False, True)) / 2
                for n in NAMES}
    names = qkeys + keys
    for held in NAMES:
        train = [n for n in NAMES if n != held]
        best = max(table, key=lambda c: (sum(table[c][n] for n in train), c))
        default = table[_default_key(names)][held]
        print(f"held out {held:9}: chosen on {'+'.join(train)} {dict(zip(names, best, strict=True))}\n"
              f"    {held} mean MRR {table[best][held]:.3f} (shipped defaults {default:.3f})")
    overall = max(table, key=lambda c: (sum(table[c].values()), c))
    print(f"best on all three: {dict(zip(names, overall, strict=True))}")


def _default_key(names: list[str]) -> tuple[float, ...]:
    """The shipped defaults as a grid key."""
    query_defaults = {"subject_weight": 1.0, "pair_weight": 2.0}
    params = Params()
    return tuple(query_defaults[k] if k in query_defaults else getattr(params, k) for k in names)


def _score_runs(score: ModuleType, eval_dir: Path, run: Path) -> dict[str, dict[str, float]]:
    """``score.py`` over one run folder: repository -> metrics (and ``all``)."""
    out: dict[str, dict[str, float]] = {}
    total = 0
    sums = {m: 0.0 for m in ("R@1", "R@5", "R@10", "MRR")}
    for name in NAMES:
        result = score.score(str(run / f"localize-{name}.jsonl"),
                             str(eval_dir / "data" / f"localize-{name}.jsonl"))
        out[name] = {m: result[m] for m in sums}
        total += result["items"]
        for m in sums:
            sums[m] += result[m] * result["items"]
    out["all"] = {m: v / total for m, v in sums.items()}
    return out


def _write_run(run: Path, name: str, rows: list[dict[str, Any]], rankings: list[list[str]]) -> None:
    run.mkdir(parents=True, exist_ok=True)
    with open(run / f"localize-{name}.jsonl", "w", encoding="utf-8") as f:
        for row, ranked in zip(rows, rankings, strict=True):
            f.write(json.dumps({"commit": row["commit"], "ranked_files": ranked}) + "\n")


def _ctx(args: list[str], cwd: Path) -> str:
    """Run ``ctx`` (this interpreter's ``ctxstore.cli``, a whole process) in ``cwd``; its stdout."""
    done = subprocess.run([sys.executable, "-m", "ctxstore.cli", *args], cwd=cwd,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"ctx {' '.join(args[:2])} failed in {cwd}: {done.stderr.strip()}")
    return done.stdout


PACK_BUDGETS = (4000, 16000)   # the budgets whose packs are measured (gold files, gold text)


@dataclasses.dataclass(frozen=True)
class PackCover:
    """How well one pack covers its task: a gold file among its items, the gold share of its text."""

    gold_in: bool
    gold_share: float


def cover(parts: list[tuple[str, str]], gold: list[str]) -> PackCover:
    """The cover of a pack given as (path, text) parts: items without a path count as not gold."""
    golden = set(gold)
    total = sum(len(text) for _, text in parts)
    in_gold = sum(len(text) for path, text in parts if path in golden)
    return PackCover(any(path in golden for path, _ in parts), in_gold / total if total else 0.0)


def baseline_pack(tree: Path, ranking: list[str], room_tokens: int) -> list[tuple[str, str]]:
    """The BM25 baseline's pack: its best files whole, in rank order, within ``room_tokens``.

    The file that no longer fits is cut to the room left and ends the pack (tokens are
    characters / 4, as ctx counts them).
    """
    room = room_tokens * 4
    parts: list[tuple[str, str]] = []
    for path in ranking:
        if room <= 0:
            break
        text = (tree / path).read_text(encoding="utf-8", errors="replace")[:room]
        parts.append((path, text))
        room -= len(text)
    return parts


def pack_rankings(eval_dir: Path, name: str, rows: list[dict[str, Any]], ext: str,
                  work: Path, fulltext: str = "auto", in_process: bool = False
                  ) -> tuple[list[list[str]], list[float], dict[int, list[PackCover]], dict[int, int]]:
    """Index a copy of one base tree with ctx and rank every item with ``ctx pack``.

    Each item is packed once per budget of ``PACK_BUDGETS`` (whole processes, or calls of
    ``make_pack`` in this process with ``in_process``).

    Returns:
        The rankings (``ranked_files`` of each pack, language files only as in the
        baseline's corpus), the seconds each ``ctx pack`` process took, each budget's
        covers (one per item), and each budget's room for items (total less the response
        reserve), for the baseline's packs.
    """
    tree = work / name
    shutil.copytree(eval_dir / "data" / f"{name}-base", tree, symlinks=True)
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"]):
        subprocess.run(cmd, cwd=tree, check=True, capture_output=True)
    _ctx(["init"], tree)
    if fulltext != "auto":  # which engine serves (docs/index.md); these trees are small: FTS5
        config = tree / ".ctx" / "config.toml"
        config.write_text(config.read_text().replace('fulltext = "auto"', f'fulltext = "{fulltext}"'))
    _ctx(["index"], tree)
    pack_of = _in_process_packs(tree) if in_process else None
    rankings, seconds = [], []
    covers: dict[int, list[PackCover]] = {b: [] for b in PACK_BUDGETS}
    room: dict[int, int] = {}
    for row in rows:
        for budget in PACK_BUDGETS:
            start = time.perf_counter()
            pack = pack_of(row["query"], budget) if pack_of is not None else json.loads(
                _ctx(["pack", row["query"], "--format", "json", "--no-narrative",
                      "--budget", str(budget)], tree))
            seconds.append(time.perf_counter() - start)
            covers[budget].append(cover([(str(i.get("path") or ""), i["title"] + i["snippet"])
                                         for i in pack["retrieved"]], row["gold_files"]))
            b = pack["token_budget"]
            room[budget] = b["total"] - b["reserved_for_response"]
        rankings.append([p for p in pack["ranked_files"] if p.endswith(ext)])
    return rankings, seconds, covers, room


def _in_process_packs(tree: Path) -> Any:
    """A function (task, budget) -> the pack ``ctx pack --format json --no-narrative`` prints."""
    from ctxstore.packs.pack import PackRequest, make_pack
    from ctxstore.session import Session

    session = Session.open(tree / ".ctx")

    def pack_of(task: str, budget: int) -> dict[str, Any]:
        request = PackRequest(task, budget=budget, include_narrative=False, fmt="json")
        pack: dict[str, Any] = make_pack(session, request).pack.to_json()
        return pack

    return pack_of


def table(eval_dir: Path, out: Path, mode: str, lib: Library | None, fulltext: str = "auto",
          in_process: bool = False) -> bool:
    """Rank, write, score and print the comparison; True when the goal is met everywhere."""
    bm25, score = _load(eval_dir, "bm25"), _load(eval_dir, "score")
    results: dict[str, dict[str, dict[str, float]]] = {}
    timings: list[float] = []
    cover_rows: dict[str, dict[str, dict[int, list[PackCover]]]] = {}
    runs = {suffix: (out / f"bm25{suffix}", out / f"ctx-{mode}{suffix}")
            for suffix in ("", "-exclude-tests")}
    with tempfile.TemporaryDirectory(prefix="ctx-retrieval-") as tmp:
        for name in NAMES:
            rows = items(eval_dir, name)
            if lib is not None:
                both = {"": lib.rankings(name, False), "-exclude-tests": lib.rankings(name, True)}
            else:
                ranked, secs, covers, room = pack_rankings(eval_dir, name, rows, language_ext(rows),
                                                           Path(tmp), fulltext, in_process)
                timings.extend(secs)
                cover_rows[name] = {"ctx": covers}
                both = {"": ranked, "-exclude-tests": [[p for p in r if not bm25.is_test(p)]
                                                       for r in ranked]}
            for suffix, (base_run, ctx_run) in runs.items():
                base_run.mkdir(parents=True, exist_ok=True)
                bm25.run(name, str(base_run), bool(suffix))
                _write_run(ctx_run, name, rows, both[suffix])
            if lib is None:  # the baseline's packs: BM25's best files (all language files)
                tree = eval_dir / "data" / f"{name}-base"
                with open(runs[""][0] / f"localize-{name}.jsonl", encoding="utf-8") as f:
                    ranked_bm25 = [json.loads(line)["ranked_files"] for line in f]
                cover_rows[name]["bm25"] = {
                    budget: [cover(baseline_pack(tree, r, room[budget]), row["gold_files"])
                             for r, row in zip(ranked_bm25, rows, strict=True)]
                    for budget in PACK_BUDGETS}
    for suffix, (base_run, ctx_run) in runs.items():
        results[f"bm25{suffix}"] = _score_runs(score, eval_dir, base_run)
        results[f"ctx{suffix}"] = _score_runs(score, eval_dir, ctx_run)
    ok = True
    for suffix, goal in (("", GOAL_ALL), ("-exclude-tests", GOAL_NO_TESTS)):
        print(f"\ncorpus: {'all language files' if not suffix else 'non-test files'} "
              f"(goal: ctx MRR >= BM25 + {goal:.2f} on every repository)")
        print(f"{'dataset':10} {'system':5} {'R@1':>6} {'R@5':>6} {'R@10':>6} {'MRR':>6} {'dMRR':>7}")
        for name in (*NAMES, "all"):
            b, c = results[f"bm25{suffix}"][name], results[f"ctx{suffix}"][name]
            delta = c["MRR"] - b["MRR"]
            met = delta >= goal - 1e-9
            ok = ok and (met or name == "all")
            for system, m in (("bm25", b), ("ctx", c)):
                tail = f" {delta:+7.3f}{'' if met else ' (goal missed)'}" if system == "ctx" else ""
                print(f"{name:10} {system:5} {m['R@1']:6.3f} {m['R@5']:6.3f} {m['R@10']:6.3f} "
                      f"{m['MRR']:6.3f}{tail}")
    if cover_rows:
        print_covers(cover_rows)
    if timings:
        timings.sort()
        how = "in process" if in_process else "whole process"
        print(f"\nctx pack per item ({how}): p50 {timings[len(timings) // 2] * 1000:.0f} ms, "
              f"p90 {timings[int(len(timings) * 0.9)] * 1000:.0f} ms")
    print(f"\nruns written under {out}")
    return ok


def print_covers(cover_rows: dict[str, dict[str, dict[int, list[PackCover]]]]) -> None:
    """The packs' table: per repository and system, gold files in the pack, gold text share.

    ``gold@4k``: the share of tasks whose 4,000-token pack holds at least one gold file;
    ``text@B``: the mean share of a B-token pack's text (titles and snippets) from gold files.
    """
    low, high = PACK_BUDGETS
    print(f"\npacks ({', '.join(f'{b:,}' for b in PACK_BUDGETS)} tokens; bm25: its best files whole, "
          "in rank order, the last cut to fit)")
    print(f"{'dataset':10} {'system':5} {f'gold@{low // 1000}k':>8} {f'text@{low // 1000}k':>8} "
          f"{f'text@{high // 1000}k':>9}")
    totals: dict[str, dict[int, list[PackCover]]] = {}
    for name in (*NAMES, "all"):
        for system in ("bm25", "ctx"):
            if name == "all":
                covers = totals.get(system, {})
            else:
                covers = cover_rows[name][system]
                for b, rows in covers.items():
                    totals.setdefault(system, {}).setdefault(b, []).extend(rows)
            if not covers:
                continue
            gold = sum(c.gold_in for c in covers[low]) / len(covers[low])
            shares = {b: sum(c.gold_share for c in rows) / len(rows) for b, rows in covers.items()}
            print(f"{name:10} {system:5} {gold:8.3f} {shares[low]:8.3f} {shares[high]:9.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--eval", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "eval")
    parser.add_argument("--out", type=Path, default=None, help="run folder (default: a temp dir)")
    parser.add_argument("--mode", choices=("pack", "library"), default="pack")
    parser.add_argument("--ablate", action="store_true")
    parser.add_argument("--loo", action="store_true")
    parser.add_argument("--fulltext", choices=("auto", "fts5", "tantivy"), default="auto",
                        help="pack mode: the [index] fulltext setting of the indexed trees")
    parser.add_argument("--in-process", action="store_true",
                        help="pack mode: build the packs in this process (faster, same packs)")
    args = parser.parse_args()
    lib = Library(args.eval) if args.mode == "library" or args.ablate or args.loo else None
    if args.ablate and lib is not None:
        ablate(lib)
        return 0
    if args.loo and lib is not None:
        loo(lib)
        return 0
    out = args.out or Path(tempfile.mkdtemp(prefix="ctx-retrieval-runs-"))
    return 0 if table(args.eval, out, args.mode, lib, args.fulltext, args.in_process) else 1


if __name__ == "__main__":
    sys.exit(main())
