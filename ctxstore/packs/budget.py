"""A pack's budget (spec 002 §12, step 5): the response reserve, the header, the recent log, the fill.

``reserved_for_response`` tokens are set aside; items are taken while they fit, each file's
best chunk first (``select.choose``);
the pack's ``used`` never exceeds ``total - reserved_for_response``. For the text and markdown
renderings (``render``), ``used`` counts what they print: the echoed task, each item's
printed lines, the narrative section.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ctxstore.packs.render import header_cost, narrative_cost

__all__ = ["reserve_for", "rooms", "smallest_budget", "budget_note"]

_NARRATIVE_SHARE = 0.2  # the recent log takes at most this share of the room
_SMALLEST_STEPS = 1_000    # search steps for the smallest budget that holds an item


def reserve_for(budget: int, max_response_tokens: int) -> int:
    """Tokens set aside for the model's answer: its limit, at most a quarter of the budget.

    Args:
        budget: The pack's total budget.
        max_response_tokens: ``[llm] max_response_tokens``.

    Returns:
        The reserve.
    """
    return max(0, min(max_response_tokens, budget // 4))


def rooms(task: str, fmt: str, total: int, reserve: int, log: str) -> tuple[int, str, int]:
    """What a budget spends before items: (header tokens, recent narrative kept, room left).

    The response reserve comes first, then the header (``render.header_cost``), then the
    whole entries of the recent log that fit ``_NARRATIVE_SHARE`` of the room.
    """
    echoed = header_cost(task, fmt, total=total, reserved=reserve)
    room = total - reserve - echoed
    recent = _whole_entries(log, min(int((total - reserve) * _NARRATIVE_SHARE), room), fmt) \
        if log else ""
    return echoed, recent, room - narrative_cost(recent, fmt)


def smallest_budget(need: int, start: int, room_of: Callable[[int], int]) -> int | None:
    """The smallest budget from ``start`` on whose room for items is at least ``need``.

    A budget one token larger has at most one token more room (the reserve, the header and
    the narrative only grow with it), so the search may skip ahead by what is missing and
    never pass the answer. None after ``_SMALLEST_STEPS`` steps (it has always been found
    within a few).
    """
    budget = start
    for _ in range(_SMALLEST_STEPS):
        room = room_of(budget)
        if room >= need:
            return budget
        budget += max(1, need - room)
    return None


def _whole_entries(log: str, tokens: int, fmt: str) -> str:
    """The first entries (lines) of the recent log that cost at most ``tokens`` together.

    Whole entries only: an entry that does not fit is left out, never cut (a half date
    reads as a wrong one). The cost is ``render.narrative_cost`` in the pack's format.
    """
    kept = ""
    for entry in log.split("\n"):
        more = f"{kept}\n{entry}" if kept else entry
        if narrative_cost(more, fmt) > tokens:
            break
        kept = more
    return kept


def budget_note(pack: Mapping[str, Any], smallest_budget: int, *,
                argument: str = "--budget") -> str:
    """The note of a pack whose budget holds none of the items found.

    One wording for every front end; only the way to ask for the larger budget differs
    (``ctx pack --budget 412``, the MCP ``pack`` tool's ``budget: 412``).

    Args:
        pack: The pack (its ``token_budget.total`` is the budget it was built within).
        smallest_budget: ``PackResult.smallest_budget``: the smallest budget that holds an item.
        argument: How the caller passes a budget, shown before the number (``--budget``,
            ``budget:``).

    Returns:
        One line, e.g. ``the budget of 20 tokens is too small to hold any item found; the
        smallest that holds one is 412 (--budget 412)``.
    """
    total = pack.get("token_budget", {}).get("total")
    return (f"the budget of {total} token{'' if total == 1 else 's'} is too small to hold any "
            f"item found; the smallest that holds one is {smallest_budget} "
            f"({argument} {smallest_budget})")
