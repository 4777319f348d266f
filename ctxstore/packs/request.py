"""What a prompt pack is asked for: a ``PackRequest``, and its settings resolved from config.

Every front end (``ctx pack``, ``ctx llm --query``, the MCP ``pack`` tool) fills one record;
``packs.pack.make_pack`` takes it with the session. A setting left None comes from
``[retrieval]`` (``default_budget``, ``default_depth``, ``include_narrative``,
``narrative_days``) and ``[llm] max_response_tokens`` of the store's config.toml.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctxstore.records import dataclass

if TYPE_CHECKING:
    from ctxstore.config import Config

__all__ = ["PackRequest", "PackSettings"]


@dataclass(frozen=True, slots=True)
class PackRequest:
    """A prompt pack asked for.

    Attributes:
        task: Any text.
        budget: Total tokens: items, recent narrative and the response reserve (None: the
            store's ``[retrieval] default_budget``).
        depth: Graph expansion depth, 0 for none (None: ``[retrieval] default_depth``).
        include_narrative: Add nodes, decisions, tasks and the recent log (None:
            ``[retrieval] include_narrative``).
        graph: Expand over the import graph and let it raise file scores.
        reserve: Tokens kept for the response (None: ``budget.reserve_for``).
        now_ms: The time "recent" is measured from (None: now).
        fmt: The rendering the pack is for (``render.FORMATS``): in ``text`` and
            ``markdown`` the budget holds for the printed text (the echoed task, each
            item's lines, the narrative section), in ``json`` and ``yaml`` for the items'
            titles and snippets plus 8 tokens each and the recent narrative.
        active_task: The task started with ``<ctx:task action="start">`` and not ended (the
            hooks' current task), or None: its nodes join the narrative items with
            ``why.active_task`` (with the narrative).
    """

    task: str
    budget: int | None = None
    depth: int | None = None
    include_narrative: bool | None = None
    graph: bool = True
    reserve: int | None = None
    now_ms: int | None = None
    fmt: str = "json"
    active_task: str | None = None

    def settings(self, config: Config) -> PackSettings:
        """The request with every setting left None taken from ``config``."""
        budget = config.get("retrieval", "default_budget") if self.budget is None else self.budget
        depth = config.get("retrieval", "default_depth") if self.depth is None else self.depth
        narrative = config.get("retrieval", "include_narrative") \
            if self.include_narrative is None else self.include_narrative
        return PackSettings(max(int(budget), 0), int(depth), bool(narrative),
                            int(config.get("retrieval", "narrative_days")),
                            int(config.get("llm", "max_response_tokens")))


@dataclass(frozen=True, slots=True)
class PackSettings:
    """A request's settings, resolved: the total budget, depth, narrative, days, response limit."""

    total: int
    depth: int
    include_narrative: bool
    narrative_days: int
    max_response_tokens: int
