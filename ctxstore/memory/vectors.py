"""Vectors of transcript turns: filled when memory is indexed, searched beside BM25.

Optional (``[memory] vectors = "on"`` and the ``ctxstore[embed]`` extra). Each turn's person and
reply text (not its tool text) is embedded (``ctxstore.embed``) and stored in
``memory.sqlite``'s ``turn_vectors`` table, keyed by the turn and the model: derived data, made
again from the turns by ``ctx memory vectors --rebuild``; a turn whose text grows loses its
vector and is embedded again by the next fill. A query is embedded the same way and compared
with every stored vector the search's filters keep (brute force; ``ctxstore.embed.vectors``
gives the scale), and the nearest turns join BM25's, their scores summed with a weight
(``memory.search``). Whether vectors are on, and the engine, is ``memory.settings.vector_engine``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ctxstore.memory.db import MemoryDB
from ctxstore.memory.db.handle import VECTOR_KINDS, VectorKind

if TYPE_CHECKING:
    from ctxstore.embed.engine import Embedder

__all__ = ["BATCH", "BUDGET_BATCH", "IDEA_WEIGHT", "SPAN_WEIGHT", "SPAN_CHARS", "VectorFill",
           "fill_store_vectors", "turn_text",
           "fill_vectors", "nearest_turns", "rebuild_vectors"]

BATCH = 256
"""Turns embedded and stored per transaction."""
BUDGET_BATCH = 16
"""The same under a time budget (a hook): a batch stays well within it."""
IDEA_WEIGHT = 1.0
"""For a query asking for an intent, an idea's cosine (times this) counts as its turn's when
higher (0: ideas' vectors are not searched). Measured: docs/memory.md "Vector search"."""
SPAN_WEIGHT = 0.0
"""The share of a turn's topic span's cosine added to its own: 0, spans are neither embedded
nor searched (0.1 to 0.5 measured no better than none: docs/memory.md "Vector search")."""
SPAN_CHARS = 8000
"""Characters of a span's turns that are embedded (its start)."""


class VectorFill(NamedTuple):
    """What a fill did: turns embedded, rows still without a vector, ideas embedded."""

    embedded: int
    missing: int
    ideas: int = 0


def turn_text(user_text: str, assistant_text: str) -> str:
    """What of a turn is embedded: the person's words and the reply (tool text is left out)."""
    return f"{user_text}\n{assistant_text}".strip()


def fill_vectors(db: MemoryDB, engine: Embedder, *, deadline: float | None = None,
                 progress: Callable[[int], None] | None = None) -> VectorFill:
    """Embed what has no vector of ``engine``'s model: turns, then ideas, then topic spans.

    A batch per transaction.

    Args:
        db: The open memory.
        engine: The model.
        deadline: A ``time.monotonic()`` after which no new batch starts (a hook's budget);
            the first batch is embedded whatever the time.
        progress: Called with the rows embedded so far after each batch.

    Returns:
        What was done.
    """
    from ctxstore.embed.vectors import to_blob

    done = 0
    count = dict.fromkeys(VECTOR_KINDS, 0)
    size = BATCH if deadline is None else BUDGET_BATCH
    kinds = VECTOR_KINDS if SPAN_WEIGHT else VECTOR_KINDS[:2]
    for kind in kinds:
        # the first batch even past the deadline: the model is loaded by now (the dearest
        # part), and a hook on a busy machine that embedded nothing would never catch up
        while deadline is None or not done or time.monotonic() < deadline:
            rows = _unembedded(db, engine.model_id, kind, size)
            if not rows:
                break
            vectors = engine.embed([text for _, text in rows])
            with db.batch():
                db.save_vectors(engine.model_id, [(i, to_blob(v)) for (i, _), v in
                                                  zip(rows, vectors, strict=True)], kind)
            done += len(rows)
            count[kind] += len(rows)
            if progress is not None:
                progress(done)
    have, total = db.vector_count(engine.model_id, kinds)
    return VectorFill(count["turn"], total - have, count["idea"])


def _unembedded(db: MemoryDB, model: str, kind: VectorKind, size: int) -> list[tuple[int, str]]:
    """``(id, text to embed)`` of up to ``size`` rows of ``kind`` without a vector of ``model``."""
    if kind == "turn":
        return [(i, turn_text(u, a)) for i, u, a in db.turns_without_vector(model, size)]
    if kind == "idea":
        return db.ideas_without_vector(model, size)
    return [(i, db.span_text(i, SPAN_CHARS)) for i in db.spans_without_vector(model, size)]


def fill_store_vectors(ctx_dir: Path, seconds: float) -> VectorFill | None:
    """Embed the store's turns that have no vector yet, within ``seconds``.

    For a hook, after it indexed the new turns. None when vectors are off or there is no
    memory.

    Raises:
        EmbedUnavailable: (E027) vectors are on but the extra is not installed.
        MemoryDamaged: (E023) the memory file is damaged.
        sqlite3.OperationalError: another writer held the memory past the budget.
    """
    from ctxstore.memory.db import open_memory
    from ctxstore.memory.settings import memory_settings, vector_engine

    deadline = time.monotonic() + seconds
    engine = vector_engine(memory_settings(ctx_dir))
    if engine is None:
        return None
    db = open_memory(ctx_dir, create=False, busy_seconds=max(seconds, 0.05))
    if db is None:
        return None
    with db:
        return fill_vectors(db, engine, deadline=deadline)


def rebuild_vectors(db: MemoryDB, engine: Embedder,
                    progress: Callable[[int], None] | None = None) -> VectorFill:
    """Delete every stored vector and embed every turn again with ``engine``."""
    with db.batch():
        db.drop_vectors()
    return fill_vectors(db, engine, progress=progress)


def nearest_turns(db: MemoryDB, engine: Embedder, text: str, limit: int, *,
                  since: int | None, until: int | None, session: str | None,
                  intent: str | None, asked: Collection[str] = ()) -> list[tuple[int, float]]:
    """``(turn id, similarity)`` of the ``limit`` turns nearest to ``text``, best first.

    A turn's similarity is its vector's cosine. When the query asks for ideas of an intent
    (``asked``: "decisions about the cache", ``--intent``), it is the best of that and its
    ideas' cosines (``IDEA_WEIGHT``): an idea is one sentence, a sharper vector than its
    turn's, and what such a query looks for. With ``SPAN_WEIGHT``, a share of its topic span's
    cosine is added. Only rows with a stored vector count (``fill_vectors`` makes them).
    """
    from ctxstore.embed.vectors import best, from_blobs, nearest

    rows = db.turn_vectors(engine.model_id, since=since, until=until, session=session,
                           intent=intent)
    if not rows:
        return []
    query = engine.embed_query(text)
    if not query.any():
        return []
    matrix = from_blobs([blob for _, blob in rows], engine.dim)
    wanted = sorted({*asked, *([intent] if intent else [])})
    if not (IDEA_WEIGHT and wanted) and not SPAN_WEIGHT:  # the turns' own vectors only
        return [(rows[i][0], score) for i, score in nearest(matrix, query, limit)]
    scores = matrix @ query
    at = {turn: k for k, (turn, _) in enumerate(rows)}
    if IDEA_WEIGHT and wanted:
        ideas = db.idea_vectors(engine.model_id, wanted, since=since, until=until,
                                session=session, intent=intent)
        if ideas:
            found = from_blobs([blob for _, blob in ideas], engine.dim) @ query
            for (turn, _), cosine in zip(ideas, found, strict=True):
                if turn in at:
                    scores[at[turn]] = max(scores[at[turn]], IDEA_WEIGHT * cosine)
    if SPAN_WEIGHT:
        spans, members = db.span_vectors(engine.model_id, since=since, until=until,
                                         session=session, intent=intent)
        if spans:
            near = from_blobs([blob for _, blob in spans], engine.dim) @ query
            of_span = {span: float(c) for (span, _), c in zip(spans, near, strict=True)}
            for turn, span in members:
                if turn in at and span in of_span:
                    scores[at[turn]] += SPAN_WEIGHT * of_span[span]
    return [(rows[i][0], score) for i, score in best(scores, limit)]
