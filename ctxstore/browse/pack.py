"""The pack explorer page: a prompt pack for any task, each item with its cost and its ``why``.

``ctx pack``'s pipeline (``packs.pack.make_pack``: a ``PackRequest`` in, a typed ``Pack``
out) and the notes ``ctx pack`` prints on stderr (``pack_notes``). Building a pack writes
nothing (a pack is computed, never stored; docs/retrieval.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctxstore.errors import InvalidInput
from ctxstore.packs.pack import make_pack, pack_notes
from ctxstore.packs.seed import has_search_terms
from ctxstore.records import dataclass

if TYPE_CHECKING:
    from ctxstore.packs.items import Pack
    from ctxstore.packs.request import PackRequest
    from ctxstore.session import Session

__all__ = ["PackView", "explore_pack", "MAX_TASK_CHARS"]

MAX_TASK_CHARS = 100_000  # a task typed in a page; ``ctx pack -`` takes longer ones


@dataclass(frozen=True, slots=True)
class PackView:
    """A pack and what ``ctx pack`` would say about it.

    Attributes:
        pack: The pack (``pack.to_json()`` is what ``ctx pack --format json`` prints).
        costs: Each retrieved item's cost in tokens in the request's format, in the pack's
            order.
        notes: The notes ``ctx pack`` prints on stderr (no searchable word, a budget too
            small, no code indexed, files changed since ``ctx index``).
    """

    pack: Pack
    costs: tuple[int, ...]
    notes: tuple[str, ...]


def explore_pack(db: Session, request: PackRequest) -> PackView:
    """Build the pack a request asks for, as ``ctx pack`` does, with its notes.

    Args:
        db: The open session.
        request: The task (at most ``MAX_TASK_CHARS`` characters) and the pack's settings.

    Returns:
        The pack, its items' costs and its notes.

    Raises:
        InvalidInput: (E011) for a task over the limit, a budget below 1 or a depth out of
            0 to 16 (``ctx pack``'s own bounds).
        IndexCorrupt: (E007) if the index cannot answer.
    """
    if len(request.task) > MAX_TASK_CHARS:
        raise InvalidInput(f"the task is over {MAX_TASK_CHARS} characters",
                           hint="ctx pack - reads a longer one from standard input")
    if request.budget is not None and request.budget < 1:
        raise InvalidInput(f"the budget must be at least 1 token, not {request.budget}")
    if request.depth is not None and not 0 <= request.depth <= 16:
        raise InvalidInput(f"the depth must be between 0 and 16, not {request.depth}")
    result = make_pack(db, request)
    notes = []
    if not has_search_terms(request.task):
        notes.append("the task has no searchable words: no files or memory were ranked")
    notes += pack_notes(db, result.pack.to_json(), smallest_budget=result.smallest_budget)
    costs = tuple(item.cost(request.fmt) for item in result.pack.retrieved)
    return PackView(result.pack, costs, tuple(notes))
