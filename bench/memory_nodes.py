"""Knowledge nodes found by meaning: ``ctx search`` with and without node vectors.

The node set is the transcript development set's (``bench/memory_devset.py``, seeded):
every prompt and every reply text of its sessions (at least ``MIN_CHARS`` characters) becomes
one knowledge node, imported in one batch, and each of its questions (worded with a synonym
for the component and a paraphrase of the fact) is asked through the installed CLI, ``ctx
search QUESTION --kind node --limit 10`` (in-process: ``search.search`` on the store's
session, what the command runs). A question's evidence is the nodes made from its
evidence entries. Reported: recall@5, recall@10 and MRR (first evidence node), by question
type, for each ranking asked (``--modes``):

- ``off``: ``[retrieval] vectors = "off"`` (words only);
- ``rrf``: vectors on, fused by reciprocal rank (k = 60), as shipped;
- ``sum``: vectors on, fused as memory search fuses turns: BM25 scaled by its best plus
  ``SUM_WEIGHT`` times the cosine scaled between the last of the nearest (0) and the first (1)
  (this script swaps it in for the measurement).

Usage:
    python bench/memory_nodes.py [--seed N] [--modes off,rrf,sum] [--ctx PATH]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import memory_devset  # noqa: E402

MIN_CHARS = 40
SUM_WEIGHT = 0.3


def _entries(projects: Path) -> list[tuple[str, str]]:
    """``(uuid, text)`` of every prompt and reply text in the transcripts."""
    out = []
    for path in sorted(projects.rglob("*.jsonl")):
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            msg = entry.get("message") or {}
            content = msg.get("content")
            if entry.get("type") == "user" and isinstance(content, str):
                text = content
            elif entry.get("type") == "assistant" and isinstance(content, list):
                text = "\n".join(b.get("text", "") for b in content if b.get("type") == "text")
            else:
                continue
            if len(text.strip()) >= MIN_CHARS:
                out.append((entry["uuid"], text.strip()))
    return out


def _store(work: Path, ctx: str, entries: list[tuple[str, str]], vectors: str) -> tuple[Path, dict[str, str]]:
    """A store holding one node per entry; returns it and uuid -> node id."""
    from ctxstore.ids import new_ulid

    repo = work / f"repo-{vectors}"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run([ctx, "init"], cwd=repo, check=True, capture_output=True)
    config = repo / ".ctx" / "config.toml"
    text = config.read_text()
    head, sep, tail = text.partition("[retrieval]")
    config.write_text(head + sep + tail.replace('vectors = "off"', f'vectors = "{vectors}"', 1))
    ids = {}
    nodes: list[dict[str, Any]] = []
    for uuid, body in entries:
        node = str(new_ulid())
        ids[uuid] = node
        nodes.append({"id": node, "type": "fact", "content": body, "summary": None, "tags": [],
                      "metadata": {}, "status": "active", "superseded_by": None,
                      "created_at": "2026-03-01T00:00:00.000Z",
                      "updated_at": "2026-03-01T00:00:00.000Z", "author": None})
    doc = json.dumps({"version": 1, "format": "ctx-export", "nodes": nodes, "edges": [],
                      "views": []})
    subprocess.run([ctx, "import"], cwd=repo, input=doc, text=True, check=True,
                   capture_output=True)
    return repo, ids


def _summed(conn: Any, hits: list[Any], near: Any, terms: Any, kinds: Any,
            include_superseded: bool) -> list[Any]:
    """The weighted sum of scaled scores (memory search's fusion of turns) over nodes."""
    from ctxstore.search.rows import nodes_at
    from ctxstore.search.search import Hit

    top = max((h.score for h in hits), default=0.0) or 1.0
    score = {h.key: h.score / top for h in hits}
    kept = {h.key: h for h in hits}
    rows = nodes_at(conn, [r for r, _ in near], flag="$.narrative_path",
                    include_superseded=include_superseded)
    near = [(rows[r], c) for r, c in near if r in rows]
    if near:
        best, floor = near[0][1], near[-1][1]
        span = (best - floor) or 1.0
        for row, cosine in near:
            score[row.id] = score.get(row.id, 0.0) + SUM_WEIGHT * (cosine - floor) / span
            kept.setdefault(row.id, Hit("node", row.id, 0.0, ()))
    return [Hit(kept[k].kind, k, v, kept[k].matched) for k, v in score.items()]


def _ask(session: Any, question: str) -> list[str]:
    from ctxstore.search.search import search

    return [h.key for h in search(session, question, kinds=["node"], limit=10)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=memory_devset.DEFAULT_SEED)
    ap.add_argument("--modes", default="off,rrf,sum")
    ap.add_argument("--ctx", default=str(Path(sys.executable).with_name("ctx")))
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ctx-nodes-") as tmp:
        work = Path(tmp)
        memory_devset.build(work / "devset", a.seed)
        entries = _entries(work / "devset" / "projects")
        questions = [json.loads(line) for line in
                     (work / "devset" / "questions.jsonl").read_text().splitlines()]
        print(f"{len(entries)} nodes, {len(questions)} questions (seed {a.seed})")
        print(f"{'mode':<6} {'recall@5':>8} {'recall@10':>9} {'MRR':>6}  by type (recall@10)")
        stores: dict[str, tuple[Path, dict[str, str]]] = {}
        from ctxstore.search.search import _fused_nodes as fused

        for mode in a.modes.split(","):
            vectors = "off" if mode == "off" else "on"
            if vectors not in stores:
                stores[vectors] = _store(work, a.ctx, entries, vectors)
            repo, ids = stores[vectors]
            import ctxstore.search.search as search_module
            from ctxstore.session import Session

            search_module._fused_nodes = _summed if mode == "sum" else fused
            session = Session.open(repo / ".ctx")
            r5 = r10 = rr = 0.0
            by_type: dict[str, list[float]] = {}
            for q in questions:
                gold = {ids[u] for u in q["evidence"] if u in ids}
                if not gold:
                    continue
                found = _ask(session, q["question"])
                r5 += len(gold & set(found[:5])) / len(gold)
                hit10 = len(gold & set(found)) / len(gold)
                r10 += hit10
                rr += next((1 / (k + 1) for k, key in enumerate(found) if key in gold), 0.0)
                by_type.setdefault(q["type"], []).append(hit10)
            session.close()
            n = sum(len(v) for v in by_type.values())
            kinds = " ".join(f"{t} {sum(v) / len(v):.3f}" for t, v in sorted(by_type.items()))
            print(f"{mode:<6} {r5 / n:>8.3f} {r10 / n:>9.3f} {rr / n:>6.3f}  {kinds}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
