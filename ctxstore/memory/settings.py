"""The ``[memory]`` settings of a store: the privacy switch of transcript memory.

``enabled = false`` stops the hooks from indexing sessions, ``ctx memory backfill`` from reading
transcripts, and prompt context from showing past turns (docs/memory.md "Privacy");
``index_tool_output`` and ``max_tool_output_chars`` bound the tool calls and results a turn keeps.
Kept apart from ``memory.index`` so the prompt hook can read it without loading the indexer.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from ctxstore.config import Config
    from ctxstore.embed.engine import Embedder

__all__ = ["OFF_NOTE", "MISSING_NOTE", "MemorySettings", "memory_settings", "settings_of", "vector_engine",
           "engine_or_note"]

OFF_NOTE = "transcript memory is off ([memory] enabled = false in config.toml)"
MISSING_NOTE = ("there is no transcript memory yet (`ctx memory backfill --all` indexes past "
                "sessions; the Stop hook new ones)")


class MemorySettings(NamedTuple):
    """The ``[memory]`` settings of a store's config.toml (docs/memory.md "Privacy").

    Attributes:
        enabled: Whether sessions are indexed at all.
        tool_budget: Characters of tool calls and results kept per turn (0: none).
        vectors: Whether turns get vectors and searches fuse them with BM25
            (``[memory] vectors = "on"``; ``memory.vectors``).
    """

    enabled: bool
    tool_budget: int
    vectors: bool = False


def settings_of(config: Config) -> MemorySettings:
    """The ``[memory]`` settings of a loaded configuration."""
    keep = config.get("memory", "index_tool_output")
    return MemorySettings(bool(config.get("memory", "enabled")),
                          int(config.get("memory", "max_tool_output_chars")) if keep else 0,
                          config.get("memory", "vectors") == "on")


def memory_settings(ctx_dir: Path) -> MemorySettings:
    """The ``[memory]`` settings of the store at ``ctx_dir``.

    Fails closed: a config.toml that cannot be read or validated means memory is off (a privacy
    switch that was mistyped must not index anything; the store's commands name the problem).
    """
    from ctxstore.errors import CtxError
    from ctxstore.limits import load_store_config

    try:
        return settings_of(load_store_config(ctx_dir))
    except CtxError:
        return MemorySettings(False, 0)


def vector_engine(settings: MemorySettings) -> Embedder | None:
    """The embedding engine when ``[memory] vectors = "on"``, else None (nothing imported).

    Raises:
        EmbedUnavailable: (E027) vectors are on but the extra is not installed.
    """
    if not settings.vectors:
        return None
    from ctxstore.embed.engine import load_embedder

    return load_embedder()


def engine_or_note(settings: MemorySettings) -> tuple[Embedder | None, str | None]:
    """The embedding engine for a search, or None and, when vectors are on, why words alone serve.

    A search is best effort about vectors (docs/memory.md "Vector search"): vectors on and the
    extra missing, or its files damaged, still searches by words, and the note names the
    problem and its remedy (E027's message and hint) for the asker to show.
    """
    from ctxstore.errors import EmbedUnavailable

    try:
        return vector_engine(settings), None
    except EmbedUnavailable as exc:
        remedy = f"; {exc.hint}" if exc.hint else ""
        return None, (f"searched by words only: [memory] vectors = \"on\" but vector search is "
                      f"unavailable ({exc.message}{remedy})")
