"""How transcript memory's vectors rank: the variants of docs/memory.md "Vector search", in-process.

Builds one store per LoCoMo development conversation, as ``../shared/eval/memory/locomo_dev.py``
does (its own functions write the transcripts; ``ctx init``, ``[memory] vectors = "on"``,
``ctx memory backfill``, and ``ctx memory vectors`` through the installed CLI), and, with
``--devset``, one store of the seeded transcript development set (``bench/memory_devset.py``).
Then every question is asked in-process (``memory.search.search_memory``, what ``ctx memory
search --limit 10`` runs) once per variant, and evidence recall@10 is printed, per LoCoMo
category and per dev-set question type. Stores are kept under ``--work`` and reused.

Variants (``--variants``): ``off`` (words only), ``turns`` (turn vectors, the schema 6
search), ``ideas`` (the shipped rule: ideas of the intent a query asks for), and
``spans0.1``/``spans0.2``/``spans0.5`` (that share of a turn's topic span's cosine added; the
spans are embedded first when missing).

The LoCoMo data is CC BY-NC 4.0: evaluation only; it is read from the repository mirror and
never written anywhere but the temporary stores.

Usage:
    python bench/memory_vectors.py --mirror DIR [--eval ../shared/eval/memory] [--devset]
        [--variants off,turns,ideas] [--work /tmp/ctx-memory-vectors]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import memory_devset  # noqa: E402

VARIANTS = {"off": (False, 0.0, 0.0), "turns": (True, 0.0, 0.0), "ideas": (True, 1.0, 0.0),
            "spans0.1": (True, 0.0, 0.1), "spans0.2": (True, 0.0, 0.2),
            "spans0.5": (True, 0.0, 0.5)}


def _store(work: Path, ctx: str, transcripts: Path) -> Path:
    """A store with vectors on holding ``transcripts``, made once; its ``.ctx`` directory."""
    repo = work / "repo"
    if (work / "done").exists():
        return repo / ".ctx"
    repo.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, HOME=str(work / "home"))
    (work / "home").mkdir(exist_ok=True)

    def run(*args: str) -> None:
        res = subprocess.run(args, cwd=repo, env=env, capture_output=True, text=True)
        if res.returncode:
            raise SystemExit(f"{' '.join(args[:3])}: {res.stderr.strip()[-300:]}")

    run("git", "init", "-q")
    run(ctx, "init")
    config = repo / ".ctx" / "config.toml"
    head, sep, tail = config.read_text().partition("[memory]\n")
    config.write_text(head + sep + tail.replace('vectors = "off"', 'vectors = "on"', 1))
    run(ctx, "memory", "backfill", str(transcripts))
    run(ctx, "memory", "vectors")
    (work / "done").write_text("1")
    return repo / ".ctx"


def _locomo(args: argparse.Namespace) -> Iterator[tuple[Path, list[tuple[str, int, str, set[str]]],
                                                         Any]]:
    """Per conversation: its store, its questions ``(text, category, now, gold)`` and how a
    result maps back to LoCoMo's turn ids."""
    sys.path.insert(0, str(Path(args.eval).resolve()))
    import locomo_dev  # type: ignore[import-not-found]  # its transcript writer, hit mapping

    data = {s["sample_id"]: s for s in locomo_dev.load(args.mirror)}
    for sid in locomo_dev.DEV.split(","):
        work = Path(args.work) / sid
        meta = work / "meta.json"
        if not meta.exists():
            work.mkdir(parents=True, exist_ok=True)
            where, text_of = locomo_dev.write_transcripts(data[sid], str(work / "transcripts"))
            meta.write_text(json.dumps({"where": [[f, n, d] for (f, n), d in where.items()],
                                        "text_of": text_of}))
        saved = json.loads(meta.read_text())
        where = {(f, n): d for f, n, d in saved["where"]}
        text_of = saved["text_of"]
        ctx_dir = _store(work, args.ctx, work / "transcripts")
        questions = []
        for q in data[sid]["qa"]:
            gold = {e.strip() for ev in q.get("evidence") or [] for e in re.split(r"[;,\s]+", ev)
                    if e.strip() in text_of}
            if q.get("category") in (1, 2, 3, 4) and gold:
                questions.append((q["question"], int(q["category"]), "", gold))

        def mapping(doc: Any, _res: Any, where: Any = where, text_of: Any = text_of) -> list[str]:
            return list(locomo_dev.hits_to_dias(doc, where, text_of))[:10]
        yield ctx_dir, questions, mapping


def _evaluate(stores: list[tuple[Path, list[tuple[str, Any, str, set[str]]], Any]],
              variant: str, label: str) -> None:
    import ctxstore.memory.vectors as vectors
    from ctxstore.memory.db import open_memory
    from ctxstore.memory.search import result_json, search_memory
    from ctxstore.memory.settings import memory_settings, vector_engine

    on, vectors.IDEA_WEIGHT, vectors.SPAN_WEIGHT = VARIANTS[variant]
    total = count = 0.0
    groups: dict[Any, list[float]] = {}
    start = time.monotonic()
    for ctx_dir, questions, mapping in stores:
        engine = vector_engine(memory_settings(ctx_dir))
        db = open_memory(ctx_dir, create=False)
        assert db is not None and engine is not None
        with db:
            if vectors.SPAN_WEIGHT:
                vectors.fill_vectors(db, engine)  # the spans, embedded once
            for text, group, now, gold in questions:
                now_ms = (int(datetime.fromisoformat(now.replace("Z", "+00:00")).timestamp()
                              * 1000) if now else int(time.time() * 1000))
                res = search_memory(db, text, now_ms=now_ms, limit=10,
                                    engine=engine if on else None)
                found = mapping(result_json(res), res)
                recall = len(gold & set(found)) / len(gold)  # of the ten hits
                total += recall
                count += 1
                groups.setdefault(group, []).append(recall)
    parts = " ".join(f"{g} {sum(v) / len(v):.3f}" for g, v in sorted(groups.items()))
    print(f"{label:<8} {variant:<9} recall@10 {total / count:.3f}  {parts}  "
          f"({time.monotonic() - start:.0f} s)", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mirror", help="the LoCoMo repository (bare Git directory)")
    ap.add_argument("--eval", default="../shared/eval/memory",
                    help="the folder of locomo_dev.py")
    ap.add_argument("--devset", action="store_true", help="the seeded dev-set too")
    ap.add_argument("--variants", default="off,turns,ideas")
    ap.add_argument("--work", default="/tmp/ctx-memory-vectors")
    ap.add_argument("--ctx", default=str(Path(sys.executable).with_name("ctx")))
    a = ap.parse_args(argv)
    wanted = a.variants.split(",")
    if unknown := [v for v in wanted if v not in VARIANTS]:
        ap.error(f"unknown variants {unknown}; known: {', '.join(VARIANTS)}")
    if a.mirror:
        stores = list(_locomo(a))
        for variant in wanted:
            _evaluate(stores, variant, "LoCoMo")
    if a.devset:
        work = Path(a.work) / "devset"
        if not (work / "questions.jsonl").exists():
            memory_devset.build(work, memory_devset.DEFAULT_SEED)
        ctx_dir = _store(work / "store", a.ctx, work / "projects")
        questions = [(q["question"], q["type"], q["now"], set(q["evidence"])) for q in
                     map(json.loads, (work / "questions.jsonl").read_text().splitlines())]

        def uuids(_doc: Any, res: Any) -> list[str]:
            return [u for hit in res.hits for u in hit.turn.uuids]
        for variant in wanted:
            _evaluate([(ctx_dir, questions, uuids)], variant, "dev-set")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
