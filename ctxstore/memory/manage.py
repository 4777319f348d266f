"""The upkeep use cases of transcript memory: ``ctx memory backfill|stats|topics|forget``.

Each opens ``local/memory.sqlite`` of the store at hand (``memory.db``), does one job and
returns plain values for the front end to render. A memory that was never created is
``NothingToDo`` for the commands that need one, and all zeros for ``stats``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from ctxstore.errors import InvalidInput, NothingToDo
from ctxstore.memory.db import STATS, MemoryDB, memory_path, open_memory
from ctxstore.memory.spans import SpanSummary, summarize

if TYPE_CHECKING:
    from ctxstore.memory.backfill import BackfillReport
    from ctxstore.session import Session

__all__ = ["MemoryStats", "VectorsReport", "open_existing", "backfill_memory", "memory_stats",
           "memory_topics", "memory_session", "forget_memory", "memory_vectors"]

_NO_MEMORY_HINT = ("`ctx memory backfill --all` indexes past sessions; the Stop hook indexes "
                   "new ones")


class VectorsReport(NamedTuple):
    """What ``ctx memory vectors`` did: the model; turns, then ideas, embedded and with a vector."""

    model: str
    embedded: int
    turns: int
    ideas_embedded: int
    ideas: int


class MemoryStats(NamedTuple):
    """What ``ctx memory stats`` shows.

    Attributes:
        counts: Rows of each table ``memory.db.STATS`` names (all 0 without a memory).
        intents: Ideas by intent.
        first: The earliest turn time (ms), or None.
        last: The latest turn time (ms), or None.
        path: The memory file.
        size: Bytes of the file and its write-ahead log.
    """

    counts: dict[str, int]
    intents: dict[str, int]
    first: int | None
    last: int | None
    path: Path
    size: int


def open_existing(ctx_dir: Path, *, create: bool = False, durable: bool = True) -> MemoryDB:
    """The transcript memory of the store at ``ctx_dir``, opened for writing.

    Raises:
        NothingToDo: (E018) when there is no memory yet (and ``create`` is False).
        CtxError: from ``memory.db.open_memory`` (a damaged or foreign file).
    """
    db = open_memory(ctx_dir, create=create, durable=durable)
    if db is None:
        raise NothingToDo("there is no transcript memory yet", hint=_NO_MEMORY_HINT)
    return db


def backfill_memory(session: Session, targets: Iterable[Path], *, tool_budget: int,
                    progress: Callable[[int, int], None] | None = None
                    ) -> tuple[BackfillReport, int, int]:
    """Index the transcripts below ``targets``, link code names, embed new turns.

    The files and symbols talked about are linked to the code index; with
    ``[memory] vectors = "on"`` the turns that have no vector yet are embedded.

    Args:
        session: The open session (its index is read to link code names).
        targets: Transcript files or folders of them.
        tool_budget: ``[memory] tool_budget``.
        progress: Called with (bytes read, bytes to read).

    Returns:
        The backfill's report, how many names were linked to the code index, and how many
        turns were embedded.

    Raises:
        EmbedUnavailable: (E027) vectors are on but the extra is missing (before anything is
            read).
    """
    from ctxstore.memory.backfill import backfill
    from ctxstore.memory.codelink import link_code
    from ctxstore.memory.index import history_position, transcript_redactor
    from ctxstore.memory.settings import settings_of, vector_engine
    from ctxstore.memory.vectors import fill_vectors

    engine = vector_engine(settings_of(session.config))  # a missing extra is named before any write
    with open_existing(session.root, create=True, durable=False) as db:
        report = backfill(db, targets, progress=progress, tool_budget=tool_budget,
                          redact=transcript_redactor(session.root),
                          where=history_position(session.root.parent),
                          worktree=session.root.parent)
        linked = link_code(db, session.index())
        embedded = fill_vectors(db, engine).embedded if engine is not None else 0
        db.checkpoint()
    return report, linked, embedded


def memory_stats(ctx_dir: Path) -> MemoryStats:
    """What the transcript memory of the store at ``ctx_dir`` holds (zeros when there is none)."""
    db = open_memory(ctx_dir, create=False)
    if db is None:  # nothing indexed yet: every count is 0 (a read, not an error)
        counts, intents, first, last = dict.fromkeys(STATS, 0), {}, None, None
    else:
        with db:
            counts = db.stats()
            intents = db.intent_counts()
            first, last = db.time_range()
    path = memory_path(ctx_dir)
    size = sum(os.path.getsize(str(path) + s) for s in ("", "-wal")
               if os.path.exists(str(path) + s))
    return MemoryStats(counts, intents, first, last, path, size)


def _one_session(db: MemoryDB, prefix: str, option: str | None) -> str:
    matches = db.sessions_like(prefix)
    if len(matches) != 1:
        raise InvalidInput(f"{option + ': ' if option else ''}"
                           f"{'no' if not matches else 'more than one'} session starts with "
                           f"{prefix!r}", hint="`ctx memory topics` lists them")
    return matches[0]


def memory_session(ctx_dir: Path, prefix: str, *, option: str | None = None) -> str:
    """The one session of the memory whose id is ``prefix`` or starts with it.

    Raises:
        NothingToDo: (E018) when there is no memory yet.
        InvalidInput: (E011) when no session or several match (named as ``option``).
    """
    with open_existing(ctx_dir) as db:
        return _one_session(db, prefix, option)


def memory_topics(ctx_dir: Path, session: str | None, limit: int
                  ) -> tuple[str | None, list[tuple[tuple[Any, ...], SpanSummary]]]:
    """Topic spans, newest topic first, each followed by its sub-spans: of one session or all.

    Each with its extractive summary (``memory.spans.summarize``).

    Args:
        ctx_dir: The store's ``.ctx`` directory.
        session: A session id or unique prefix; None for every session.
        limit: At most this many spans.

    Returns:
        The session (its full id) and the spans' rows (``MemoryDB.topics``), each with its
        summary.

    Raises:
        NothingToDo: (E018) when there is no memory yet.
        InvalidInput: (E011) when no session or several match ``session``.
    """
    with open_existing(ctx_dir) as db:
        if session:
            session = _one_session(db, session, None)
        return session, [(row, summarize(db, int(row[0]))) for row in db.topics(session, limit)]


def forget_memory(ctx_dir: Path, session: str | None) -> int:
    """Delete what memory holds of ``session`` (a full id) and its subagents, or of all (None).

    Returns:
        How many turns went.

    Raises:
        NothingToDo: (E018) when there is no memory yet.
    """
    with open_existing(ctx_dir) as db:
        return db.forget(session)


def memory_vectors(session: Session, *, rebuild: bool = False,
                   progress: Callable[[int, int], None] | None = None) -> VectorsReport:
    """Embed the turns and ideas that have no vector yet, or (``rebuild``) all of them again.

    Args:
        session: The open session (its ``[memory] vectors`` setting).
        rebuild: Delete every stored vector first (derived data: made again from the turns).
        progress: Called with (rows embedded, rows to embed).

    Returns:
        The model, what was embedded, and what has a vector now.

    Raises:
        NothingToDo: (E018) vectors are off, or there is no memory yet.
        EmbedUnavailable: (E027) the extra is not installed.
    """
    from ctxstore.memory.settings import settings_of, vector_engine
    from ctxstore.memory.vectors import fill_vectors, rebuild_vectors

    engine = vector_engine(settings_of(session.config))
    if engine is None:
        raise NothingToDo("vector search is off ([memory] vectors = \"off\" in config.toml)",
                          hint='set [memory] vectors = "on" (needs pip install \'ctxstore[embed]\')')
    with open_existing(session.root) as db:
        have, total = db.vector_count(engine.model_id, ("turn", "idea"))
        todo = total if rebuild else total - have
        step = None if progress is None else (lambda done: progress(done, todo))
        fill = (rebuild_vectors if rebuild else fill_vectors)(db, engine, progress=step)
        turns = db.vector_count(engine.model_id, ("turn",))[0]
        ideas = db.vector_count(engine.model_id, ("idea",))[0]
    return VectorsReport(engine.model_id, fill.embedded, turns, fill.ideas, ideas)
