"""Transcript memory as context: for prompt-submit retrieval and ``<ctx:recall>``.

``memory_context`` finds the past turns most relevant to a prompt. A turn counts only when it holds
at least two of the prompt's terms (all of them for a one-term prompt) or sits next to a turn that
does (the answer to a question, or the question it answers, is its context), and turns of the last
``RECENT_MINUTES`` are left out: they are most likely the current conversation, which the model
already sees. Each item opens with the day the turn was said, and the relative times in it
("last Tuesday") are followed by the dates they meant then. Never raises for a missing or
damaged memory: context is best effort (``ctx memory stats`` and the Stop hook name the
damage). Nothing is offered when ``[memory] enabled`` is false.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ctxstore.errors import CtxError

if TYPE_CHECKING:
    from ctxstore.config import Config
    from ctxstore.embed.engine import Embedder
    from ctxstore.memory.db import TurnRow
    from ctxstore.memory.settings import MemorySettings

__all__ = ["RECENT_MINUTES", "ITEM_CHARS", "MemoryItem", "memory_context", "excerpt",
           "recall_section"]

RECENT_MINUTES = 30
"""Turns younger than this are left out of context (the current conversation)."""
ITEM_CHARS = 400
"""Characters of a turn's text shown in context (``excerpt``)."""


class MemoryItem(NamedTuple):
    """One past turn offered as context.

    Attributes:
        key: ``turn:<session>:<seq>`` (stable across prompts).
        text: One Markdown list line: date, topic, the turn's text.
        score: 1 plus the search score (it passed the term gate).
        why: The prompt terms it holds.
    """

    key: str
    text: str
    score: float
    why: str


def memory_context(ctx_dir: Path, prompt: str, limit: int, *,
                   now_ms: int | None = None, config: Config | None = None) -> list[MemoryItem]:
    """The past turns most relevant to ``prompt``, best first.

    Args:
        ctx_dir: The store's ``.ctx`` directory (its ``local/memory.sqlite``).
        prompt: Any text.
        limit: At most this many items.
        now_ms: "Now" in milliseconds (default: the clock).
        config: The store's settings when the caller holds them (else config.toml is read).

    Returns:
        The items; none when there is no memory or nothing relevant.
    """
    from ctxstore.memory.db import open_memory
    from ctxstore.memory.search import iso, search_memory
    from ctxstore.memory.settings import memory_settings, settings_of
    from ctxstore.memory.timeexpr import resolve_relative
    from ctxstore.search.tokenize import PROSE, PROSE_QUERY

    now = int(time.time() * 1000) if now_ms is None else now_ms
    words = set(PROSE_QUERY.tokenize(prompt))
    settings = memory_settings(ctx_dir) if config is None else settings_of(config)
    if not words or not settings.enabled:
        return []
    try:
        db = open_memory(ctx_dir, create=False)
        if db is None:
            return []
        with db:
            result = search_memory(db, prompt, now_ms=now, until=now - RECENT_MINUTES * 60_000,
                                   limit=limit * 2, engine=_engine(settings))
    except (CtxError, sqlite3.Error, OSError):
        return []
    wanted = min(2, len(words))
    found = {(h.turn.session, h.turn.seq): h.turn for h in result.hits}
    known: dict[tuple[str, int], list[str]] = {}

    def held_at(place: tuple[str, int]) -> list[str]:  # tokenised once, when first asked
        if place not in known:
            turn = found.get(place)
            known[place] = [] if turn is None else sorted(words & set(PROSE.tokenize(
                f"{turn.user_text}\n{turn.assistant_text}")))
        return known[place]

    items = []
    for hit in result.hits:
        turn = hit.turn
        held = held_at((turn.session, turn.seq))
        # a turn beside one that holds the terms (the answer to it, or the question it answers)
        # counts as its context
        # and, with vectors, a turn among the nearest to the prompt by meaning
        beside = len(held) < wanted and any(
            len(held_at((turn.session, turn.seq + d))) >= wanted for d in (-1, 1))
        if len(held) < wanted and not beside and hit.near_rank is None:
            continue
        text = " ".join(excerpt(turn, words).split())
        if turn.ts_start is not None:  # "last week" said then, as the dates it meant
            text = resolve_relative(text, turn.ts_start)
        line = f"- [{(iso(turn.ts_start) or 'undated')[:10]} session {turn.session[:8]}] {text}\n"
        why = ("matched: " + ", ".join(held) if len(held) >= wanted else
               "beside a turn that matched" if beside else "near in meaning")
        items.append(MemoryItem(f"turn:{turn.session}:{turn.seq}", line, 1.0 + hit.score, why))
        if len(items) >= limit:
            break
    return items


def excerpt(turn: TurnRow, terms: set[str], width: int = ITEM_CHARS) -> str:
    """A turn in about ``width`` characters: what it says about the prompt, not only its start.

    A turn that fits is shown whole (``hit_text``). A longer one keeps the first sentence of
    each message (who speaks and to what), then the sentences holding the most of ``terms``
    while they fit, shown in the order said with ``...`` where sentences were left out: a long
    prompt no longer hides its reply, nor a long reply the sentence that answers.
    """
    import re

    from ctxstore.memory.search import hit_text
    from ctxstore.search.tokenize import PROSE

    whole = hit_text(turn, width)
    if not whole.endswith(" [...]"):
        return whole
    messages = [m for m in (turn.user_text.strip(), turn.assistant_text.strip()) if m]
    said = [(m, k, sentence) for m, text in enumerate(messages)
            for k, sentence in enumerate(s for s in re.split(r"(?<=[.!?])\s+", text) if s)]

    def rank(j: int) -> tuple[bool, int, int]:
        m, k, sentence = said[j]
        return k != 0, -len(terms & set(PROSE.tokenize(sentence))), j

    kept: set[int] = set()
    used = 0
    for j in sorted(range(len(said)), key=rank):
        if used + len(said[j][2]) + 1 <= width:
            kept.add(j)
            used += len(said[j][2]) + 1
    out = []
    for m in range(len(messages)):
        pieces, last = [], -1
        for j in sorted(j for j in kept if said[j][0] == m):
            pieces += ["..."] if said[j][1] != last + 1 else []
            pieces.append(said[j][2])
            last = said[j][1]
        if pieces:
            out.append(" ".join(pieces))
    return "\n-> ".join(out) if out else whole


def _engine(settings: MemorySettings) -> Embedder | None:
    """The embedding engine when vectors are on and it loads, else None.

    Context is best effort: a missing extra means words only here (the hooks log why).
    """
    from ctxstore.memory.settings import engine_or_note

    return engine_or_note(settings)[0]


def recall_section(ctx_dir: Path, query: str, *, limit: int = 3, now_ms: int | None = None) -> str:
    """The ``<ctx:recall>`` section for past sessions: a heading and the items, or "" for none."""
    items = memory_context(ctx_dir, query, limit, now_ms=now_ms)
    if not items:
        return ""
    return "\n### From past sessions (transcript memory)\n\n" + "".join(i.text for i in items)
