"""Composing over the global layer: the project's context, then the user store's in what is left.

The compose half of ``knowledge.scopes`` (which reads; this module sits one layer up because
it composes). The project comes first: user-store knowledge takes only room the project did
not need, under its own heading, and the whole never exceeds the budget. No SQL, no I/O of
its own, no environment.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

from ctxstore.errors import BudgetExceeded
from ctxstore.knowledge.scopes import Scope, Stores
from ctxstore.packs.compose import Composition, compose_query, render_json
from ctxstore.records import dataclass
from ctxstore.tokens import estimate_tokens

__all__ = ["USER_HEADING", "ScopedComposition", "compose_scoped", "scoped_composition_json"]

USER_HEADING = "## From the user store (~/.ctx)\n\n"
_SLACK = 2  # joining two texts may round the estimate up by a token or two


@dataclass
class ScopedComposition:
    """A composition of the project store, with the user store's after it when global.

    Attributes:
        project: The project's composition.
        user: The user store's, composed in the budget the project left, or None.
        text: The Markdown of both (the user store's under ``USER_HEADING``).
        tokens: The estimated tokens of ``text``.
        budget: The budget both shared.
        labels: Each chosen node's store.
    """

    project: Composition
    user: Composition | None
    text: str
    tokens: int
    budget: int
    labels: dict[str, Scope] = field(default_factory=dict)


def compose_scoped(stores: Stores, query: str, budget: int, *, now_ms: int) -> ScopedComposition:
    """Compose the project's nodes, then fill what the budget has left from the user store.

    Args:
        stores: The stores to read (``Stores.open``).
        query: The query selecting nodes (docs/query.md).
        budget: The token budget for both.
        now_ms: Milliseconds since the epoch (the rendered-at stamp).

    Returns:
        Both compositions and their joint text.

    Raises:
        QuerySyntaxError: (E011) for a bad query.
        BudgetExceeded: (E010) for a budget below the project's frame.
    """
    project = compose_query(stores.project.index(), query, budget, now_ms=now_ms)
    labels: dict[str, Scope] = {n.id: "project" for n in project.nodes}
    text, tokens, user = project.text, project.tokens, None
    room = budget - tokens - estimate_tokens(USER_HEADING) - _SLACK
    if stores.user is not None and room > 0:
        try:
            user = compose_query(stores.user.index(), query, room, now_ms=now_ms)
        except BudgetExceeded:
            user = None  # no room for even the frame: the project filled the budget
    if user is not None and user.nodes:
        text = f"{text}\n{USER_HEADING}{user.text}"
        tokens = estimate_tokens(text)
        labels.update({n.id: "user" for n in user.nodes})
    else:
        user = None
    return ScopedComposition(project=project, user=user, text=text, tokens=tokens, budget=budget,
                             labels=labels)


def scoped_composition_json(comp: ScopedComposition) -> dict[str, Any]:
    """The JSON form: the project's (spec 001 §13) with each node's ``store``, plus ``global``.

    Args:
        comp: A scoped composition.

    Returns:
        ``render_json`` of the project's composition, every node labelled ``"store"``, and
        ``"global"``: the user store's (nodes labelled ``user``) or None.
    """
    doc = render_json(comp.project)
    for node in doc["nodes"]:
        node["store"] = "project"
    user = None
    if comp.user is not None:
        user = render_json(comp.user)
        user.pop("version", None)
        for node in user["nodes"]:
            node["store"] = "user"
    doc["global"] = user
    doc["meta"]["total_tokens"] = comp.tokens
    return doc
