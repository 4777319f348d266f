"""Full-text engines on code chunks: SQLite FTS5 against Tantivy (issue 13, docs/index.md).

Both engines index the same chunks (``ctxstore.index.code.chunk_file`` over the symbols the
registered extractors find: one chunk per top-level definition plus a module header) with
the same three fields (path, qualified name, text), as ctx indexes them: the terms of the one
tokeniser (``search.tokenize``), each field weighted 1. A query is the terms ``ctx search``
takes from the commit message (``search.search.search_terms``), any of which may match:

- FTS5: ``search.fts5.Fts5Engine`` over ``chunks_fts`` as ``index.schema`` declares it, in a
  file database (``bm25()``).
- Tantivy: ``search.tantivy.TantivyEngine`` with the same fields, in a directory (what
  ``search.tantivy_index`` serves a large index with).

Per corpus it prints the index time (in-process, chunking excluded), the median and 95th
percentile of one query, and, on the development set of ../shared/eval (werkzeug,
starlette, ripgrep: a commit message as query, the files it changed as gold), the ranking
quality of a simple ranker: the top 200 chunks, each file scored by its best chunk,
scored by the set's own ``score.py`` (R@1, R@5, R@10, MRR). The CPython standard library
is timed with the same queries (no gold there).

Usage:
    python bench/fulltext.py            # eval trees + CPython stdlib
    python bench/fulltext.py --quick    # eval trees only
    python bench/fulltext.py --json
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sqlite3
import statistics
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

from ctxstore.code.languages import extractor_for
from ctxstore.index.code import chunk_file
from ctxstore.index.schema import SCHEMA
from ctxstore.model.code import CodeSymbol
from ctxstore.search.fts5 import Fts5Engine
from ctxstore.search.ranked import ranked_chunks
from ctxstore.search.search import search_terms
from ctxstore.search.tantivy import TantivyEngine

EVAL = Path(__file__).resolve().parents[2] / "shared" / "eval"
TOP_CHUNKS = 200
FIELDS = ("path", "name", "text")
Chunk = tuple[str, str, str]  # path, qualified name, text


def _is_test(path: str) -> bool:
    parts = path.split("/")
    name = parts[-1]
    if name.endswith(".rs"):
        return any(p in ("tests", "benches", "examples") for p in parts[:-1]) or name == "tests.rs"
    return (any(p in ("tests", "test", "testing") for p in parts[:-1])
            or name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py")


def chunks_of(root: Path, suffix: str, *, skip_tests: bool = False) -> list[Chunk]:
    """Every chunk of every ``suffix`` file under ``root`` (symbol granularity)."""
    out: list[Chunk] = []
    for path in sorted(root.rglob(f"*{suffix}")):
        rel = path.relative_to(root).as_posix()
        if not path.is_file() or path.is_symlink() or (skip_tests and _is_test(rel)):
            continue
        text = path.read_bytes().decode("utf-8", "replace")
        ext = extractor_for(rel)
        symbols: tuple[CodeSymbol, ...] = ()
        if ext is not None:
            got = ext.extract(rel, text)
            symbols = tuple(CodeSymbol(s.qualname, s.name, s.kind, s.parent, s.visibility,
                                       s.signature, s.span.start_byte, s.span.end_byte,
                                       s.span.start_line, s.span.end_line, tuple(s.detail))
                            for s in got.symbols)
        for chunk in chunk_file(text, symbols):
            out.append((rel, chunk.qualname or "", chunk.text))
    return out


class Fts5:
    """FTS5 as the index declares ``chunks_fts``."""

    name = "fts5"

    def __init__(self, folder: Path) -> None:
        self.conn = sqlite3.connect(folder / "fts.sqlite", isolation_level=None)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.executescript(SCHEMA)
        self.engine = Fts5Engine(self.conn, "chunks_fts", FIELDS)
        self.paths: list[str] = []

    def build(self, chunks: list[Chunk]) -> None:
        self.conn.execute("BEGIN")
        for rowid, (path, name, text) in enumerate(chunks, 1):
            self.conn.execute("INSERT INTO chunks(rowid, path, qualname, kind, start_line, end_line,"
                              " tokens, text) VALUES (?, ?, ?, 'chunk', 1, 1, 0, ?)",
                              (rowid, path, name or None, text))
            self.engine.index_document(rowid, {"path": path, "name": name, "text": text})
        self.conn.execute("COMMIT")

    def search(self, query: str) -> list[tuple[str, float]]:
        # what `ctx search` runs on FTS5 (its pruned scan of chunks_fts, search.ranked)
        terms = search_terms(query).terms
        return [(c.path, s) for c, s in ranked_chunks(self.conn, terms, limit=TOP_CHUNKS)]


class Tantivy:
    """``TantivyEngine`` in a directory, as ``search.tantivy_index`` keeps chunks."""

    name = "tantivy"

    def __init__(self, folder: Path) -> None:
        (folder / "tv").mkdir()
        self.engine = TantivyEngine(folder / "tv", FIELDS)
        self.paths: list[str] = []

    def build(self, chunks: list[Chunk]) -> None:
        for rowid, (path, name, text) in enumerate(chunks):
            self.engine.index_document(rowid, {"path": path, "name": name, "text": text})
        self.engine.commit()
        self.paths = [c[0] for c in chunks]

    def search(self, query: str) -> list[tuple[str, float]]:
        terms = search_terms(query).terms
        return [(self.paths[r], s) for r, s in self.engine.search(terms, mode="any",
                                                                  limit=TOP_CHUNKS)]


def rank_files(hits: list[tuple[str, float]]) -> list[str]:
    """Files by their best chunk's score (the simple ranker)."""
    best: dict[str, float] = {}
    for path, score in hits:
        best[path] = max(score, best.get(path, float("-inf")))
    return sorted(best, key=lambda p: (-best[p], p))


def _score_module(eval_dir: Path) -> Any:
    spec = importlib.util.spec_from_file_location("eval_score", eval_dir / "score.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def measure(engine_cls: type, chunks: list[Chunk], items: list[dict[str, Any]], work: Path
            ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    folder = Path(tempfile.mkdtemp(dir=work))
    engine = engine_cls(folder)
    start = time.perf_counter()
    engine.build(chunks)
    took = time.perf_counter() - start
    times, preds = [], []
    for item in items:
        t0 = time.perf_counter()
        hits = engine.search(item["query"])
        times.append(time.perf_counter() - t0)
        preds.append({"commit": item["commit"], "ranked_files": rank_files(hits)})
    times.sort()
    return ({"engine": engine.name, "index_s": round(took, 3),
             "query_p50_ms": round(statistics.median(times) * 1000, 2),
             "query_p95_ms": round(times[int(len(times) * 0.95) - 1] * 1000, 2)}, preds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="eval trees only")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.add_argument("--eval", type=Path, default=EVAL, help="the development set (../shared/eval)")
    args = parser.parse_args()
    score = _score_module(args.eval)
    results: list[dict[str, Any]] = []
    all_items: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name, suffix in (("werkzeug", ".py"), ("starlette", ".py"), ("ripgrep", ".rs")):
            data = args.eval / "data" / f"localize-{name}.jsonl"
            items = [json.loads(line) for line in data.read_text().splitlines() if line.strip()]
            all_items += items
            chunks = chunks_of(args.eval / "data" / f"{name}-base", suffix)
            for engine_cls in (Fts5, Tantivy):
                row, preds = measure(engine_cls, chunks, items, work)
                pred_path = work / f"{name}-{row['engine']}.jsonl"
                pred_path.write_text("".join(json.dumps(p) + "\n" for p in preds))
                quality = score.score(str(pred_path), str(data), warn=lambda _m: None)
                row.update({"corpus": name, "chunks": len(chunks),
                            **{k: round(v, 3) for k, v in quality.items()
                               if k in ("R@1", "R@5", "R@10", "MRR")}})
                results.append(row)
        if not args.quick:
            chunks = chunks_of(Path(sysconfig.get_paths()["stdlib"]), ".py")
            for engine_cls in (Fts5, Tantivy):
                row, _ = measure(engine_cls, chunks, all_items, work)
                row.update({"corpus": "cpython-stdlib", "chunks": len(chunks)})
                results.append(row)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"{'corpus':<15} {'engine':<8} {'chunks':>7} {'index s':>8} {'p50 ms':>7} {'p95 ms':>7}"
          f" {'R@1':>6} {'R@5':>6} {'R@10':>6} {'MRR':>6}")
    for r in results:
        q = " ".join(f"{r[k]:>6.3f}" if k in r else f"{'-':>6}" for k in ("R@1", "R@5", "R@10", "MRR"))
        print(f"{r['corpus']:<15} {r['engine']:<8} {r['chunks']:>7} {r['index_s']:>8.2f}"
              f" {r['query_p50_ms']:>7.2f} {r['query_p95_ms']:>7.2f} {q}")


if __name__ == "__main__":
    main()
