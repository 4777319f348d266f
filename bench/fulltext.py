"""Full-text engines on code chunks: SQLite FTS5 against Tantivy (issue 13, docs/index.md).

Both engines index the same chunks (``ctxstore.index.code.chunk_file`` over the symbols the
registered extractors find: one chunk per top-level definition plus a module header) with
the same three fields (path, qualified name, text) and the weights ctx uses (name 2.0,
path 1.5, text 1.0):

- FTS5: the ``chunks_fts`` table as ``index.schema`` declares it (``unicode61``), in a file
  database; a query is its words, each quoted, joined by OR, ranked by ``bm25()``.
- Tantivy: ``ctxstore.search.tantivy_index.CodeTextIndex`` (identifier-aware regex
  tokenizer), in a directory; its own free-text query (any word, BM25).

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
import re
import sqlite3
import statistics
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

from ctxstore.code.languages import extractor_for
from ctxstore.index.code import chunk_file
from ctxstore.model.code import CodeSymbol
from ctxstore.search.tantivy_index import CodeTextIndex

EVAL = Path(__file__).resolve().parents[2] / "shared" / "eval"
TOP_CHUNKS = 200
_WORDS = re.compile(r"\w+")
_NAME_PARTS = re.compile(r"[.:/]+")
Chunk = tuple[str, str, str]  # path, names, text


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
            q = chunk.qualname
            names = " ".join(dict.fromkeys([q, *_NAME_PARTS.split(q)] if q else []))
            out.append((rel, names, chunk.text))
    return out


class Fts5:
    """FTS5 as the index declares ``chunks_fts``."""

    name = "fts5"

    def __init__(self, folder: Path) -> None:
        self.conn = sqlite3.connect(folder / "fts.sqlite", isolation_level=None)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("CREATE VIRTUAL TABLE chunks_fts USING fts5(path, name, text,"
                          " tokenize = 'unicode61')")
        self.paths: list[str] = []

    def build(self, chunks: list[Chunk]) -> None:
        self.conn.execute("BEGIN")
        for rowid, (path, names, text) in enumerate(chunks):
            self.conn.execute("INSERT INTO chunks_fts(rowid, path, name, text) VALUES (?, ?, ?, ?)",
                              (rowid, path, names, text))
        self.conn.execute("COMMIT")
        self.paths = [c[0] for c in chunks]

    def search(self, query: str) -> list[tuple[str, float]]:
        words = list(dict.fromkeys(w.lower() for w in _WORDS.findall(query)))
        if not words:
            return []
        match = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
        rows = self.conn.execute(
            "SELECT rowid, bm25(chunks_fts, 1.5, 2.0, 1.0) AS s FROM chunks_fts"
            " WHERE chunks_fts MATCH ? ORDER BY s LIMIT ?", (match, TOP_CHUNKS)).fetchall()
        return [(self.paths[r], -s) for r, s in rows]


class Tantivy:
    """``CodeTextIndex`` in a directory."""

    name = "tantivy"

    def __init__(self, folder: Path) -> None:
        (folder / "tv").mkdir()
        self.index = CodeTextIndex(folder / "tv")

    def build(self, chunks: list[Chunk]) -> None:
        for rowid, (path, names, text) in enumerate(chunks):
            self.index.add("chunk", rowid, path, names, path, text)
        self.index.commit()

    def search(self, query: str) -> list[tuple[str, float]]:
        return [(h.ref, h.score) for h in self.index.search(query, limit=TOP_CHUNKS)]


def rank_files(hits: list[tuple[str, float]]) -> list[str]:
    """Files by their best chunk's score (the simple ranker)."""
    best: dict[str, float] = {}
    for path, score in hits:
        best[path] = max(score, best.get(path, float("-inf")))
    return sorted(best, key=lambda p: (-best[p], p))


def _score_module() -> Any:
    spec = importlib.util.spec_from_file_location("eval_score", EVAL / "score.py")
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
    args = parser.parse_args()
    score = _score_module()
    results: list[dict[str, Any]] = []
    all_items: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name, suffix in (("werkzeug", ".py"), ("starlette", ".py"), ("ripgrep", ".rs")):
            data = EVAL / "data" / f"localize-{name}.jsonl"
            items = [json.loads(line) for line in data.read_text().splitlines() if line.strip()]
            all_items += items
            chunks = chunks_of(EVAL / "data" / f"{name}-base", suffix)
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
