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
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ctxstore.memory.db import MemoryDB

if TYPE_CHECKING:
    from ctxstore.embed.engine import Embedder

__all__ = ["BATCH", "BUDGET_BATCH", "VectorFill", "fill_store_vectors", "turn_text",
           "fill_vectors", "nearest_turns", "rebuild_vectors"]

BATCH = 256
"""Turns embedded and stored per transaction."""
BUDGET_BATCH = 16
"""The same under a time budget (a hook): a batch stays well within it."""


class VectorFill(NamedTuple):
    """What a fill did: turns embedded, and turns still without a vector."""

    embedded: int
    missing: int


def turn_text(user_text: str, assistant_text: str) -> str:
    """What of a turn is embedded: the person's words and the reply (tool text is left out)."""
    return f"{user_text}\n{assistant_text}".strip()


def fill_vectors(db: MemoryDB, engine: Embedder, *, deadline: float | None = None,
                 progress: Callable[[int], None] | None = None) -> VectorFill:
    """Embed the turns that have no vector of ``engine``'s model, a batch per transaction.

    Args:
        db: The open memory.
        engine: The model.
        deadline: A ``time.monotonic()`` after which no new batch starts (a hook's budget).
        progress: Called with the turns embedded so far after each batch.

    Returns:
        What was done.
    """
    from ctxstore.embed.vectors import to_blob

    done = 0
    size = BATCH if deadline is None else BUDGET_BATCH
    while deadline is None or time.monotonic() < deadline:
        rows = db.turns_without_vector(engine.model_id, size)
        if not rows:
            break
        vectors = engine.embed([turn_text(u, a) for _, u, a in rows])
        with db.batch():
            db.save_vectors(engine.model_id, [(i, to_blob(v)) for (i, _, _), v in
                                              zip(rows, vectors, strict=True)])
        done += len(rows)
        if progress is not None:
            progress(done)
    have, total = db.vector_count(engine.model_id)
    return VectorFill(done, total - have)


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
                  intent: str | None) -> list[tuple[int, float]]:
    """``(turn id, cosine)`` of the ``limit`` turns nearest to ``text``, best first.

    Only turns with a stored vector count (``fill_vectors`` makes them).
    """
    from ctxstore.embed.vectors import from_blobs, nearest

    rows = db.turn_vectors(engine.model_id, since=since, until=until, session=session,
                           intent=intent)
    if not rows:
        return []
    query = engine.embed_query(text)
    if not query.any():
        return []
    found = nearest(from_blobs([blob for _, blob in rows], engine.dim), query, limit)
    return [(rows[i][0], score) for i, score in found]


