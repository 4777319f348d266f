"""The pack explorer page: a prompt pack for any task, each item with its cost and its ``why``.

``ctx pack``'s pipeline (``packs.pack.build_pack_result``) and the notes ``ctx pack`` prints
on stderr (``pack_notes``), in the JSON rendering (each item costs its title and snippet plus
8 tokens, ``packs.render.item_cost``). Building a pack writes nothing (a pack is computed,
never stored; docs/retrieval.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ctxstore.packs.pack import build_pack_result, has_search_terms, pack_notes
from ctxstore.packs.render import item_cost
from ctxstore.records import dataclass

if TYPE_CHECKING:
    from ctxstore.session import Session

__all__ = ["PackView", "explore_pack", "MAX_TASK_CHARS"]

MAX_TASK_CHARS = 100_000  # a task typed in a page; ``ctx pack -`` takes longer ones


@dataclass(frozen=True, slots=True)
class PackView:
    """A pack and what ``ctx pack`` would say about it.

    Attributes:
        pack: The pack, as ``ctx pack --format json`` prints it (docs/pack.schema.json).
        costs: Each retrieved item's cost in tokens, in the pack's order.
        notes: The notes ``ctx pack`` prints on stderr (no searchable word, a budget too
            small, no code indexed, files changed since ``ctx index``).
    """

    pack: dict[str, Any]
    costs: tuple[int, ...]
    notes: tuple[str, ...]


def explore_pack(db: Session, task: str, *, budget: int | None = None, depth: int | None = None,
                 include_narrative: bool | None = None, graph: bool = True,
                 active_task: str | None = None) -> PackView:
    """Build the pack of ``task`` as ``ctx pack --format json`` does, with its notes.

    Args:
        db: The open session.
        task: Any text (at most ``MAX_TASK_CHARS`` characters).
        budget: Total tokens (None: ``[retrieval] default_budget``).
        depth: Graph expansion depth (None: ``[retrieval] default_depth``).
        include_narrative: Add nodes, decisions, tasks and the recent log (None: the setting).
        graph: Expand over the import graph.
        active_task: The task the hooks started and did not end, whose nodes join the pack.

    Returns:
        The pack, its items' costs and its notes.

    Raises:
        InvalidInput: (E011) for a task over the limit or a budget below 1.
        IndexCorrupt: (E007) if the index cannot answer.
    """
    from ctxstore.errors import InvalidInput

    if len(task) > MAX_TASK_CHARS:
        raise InvalidInput(f"the task is over {MAX_TASK_CHARS} characters",
                           hint="ctx pack - reads a longer one from standard input")
    if budget is not None and budget < 1:
        raise InvalidInput(f"the budget must be at least 1 token, not {budget}")
    if depth is not None and not 0 <= depth <= 16:
        raise InvalidInput(f"the depth must be between 0 and 16, not {depth}")
    result = build_pack_result(db, task, budget=budget, depth=depth,
                               include_narrative=include_narrative, graph=graph, fmt="json",
                               active_task=active_task)
    notes = []
    if not has_search_terms(task):
        notes.append("the task has no searchable words: no files or memory were ranked")
    notes += pack_notes(db, result.pack, smallest_budget=result.smallest_budget)
    costs = tuple(item_cost(item, "json") for item in result.pack.get("retrieved", ()))
    return PackView(result.pack, costs, tuple(notes))
