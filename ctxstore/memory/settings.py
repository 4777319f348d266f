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

__all__ = ["OFF_NOTE", "MemorySettings", "memory_settings", "settings_of", "vector_engine"]

OFF_NOTE = "transcript memory is off ([memory] enabled = false in config.toml)"


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
