"""HyDE in the search commands: the drafter, its notes on stderr, its part of the JSON.

``ctx memory search`` and ``ctx search`` (its nodes) draft alike (``llm.hyde``); this module is
the one rendering of what a draft did.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from ctxstore.cli._common import Env
    from ctxstore.llm.hyde import Drafter


def drafter_for(env: Env, section: str) -> Drafter | None:
    """HyDE's drafter for this store's ``[section] vectors`` (``llm.hyde.memory_drafter``).

    A server this store may not use (a clone's committed remote URL) is a note, not a
    failed search.
    """
    from ctxstore.errors import CtxError
    from ctxstore.llm.hyde import memory_drafter

    session = env.session()
    try:
        return memory_drafter(session.root, session.config, env.llm_server(None),
                              total_budget=env.default_budget(), section=section)
    except CtxError as exc:
        click.echo(f"ctx: note: HyDE: {exc.message}; searched with the question alone", err=True)
        return None


def echo_notes(drafter: Drafter | None) -> None:
    """What the draft did, on stderr: each failure (the question searched alone) and note."""
    if drafter is None:
        return
    for failure in drafter.failures:
        click.echo(f"ctx: note: HyDE: {failure}; searched with the question alone", err=True)
    for note in drafter.notes:
        click.echo(f"ctx: note: HyDE: {note}", err=True)


def hyde_json(doc: dict[str, Any], drafter: Drafter | None) -> dict[str, Any]:
    """``doc`` with its ``hyde`` member (the draft used and the failures) when HyDE applied."""
    if drafter is not None:
        doc["hyde"] = {"draft": drafter.drafts[-1] if drafter.drafts else None,
                       "failures": list(drafter.failures)}
    return doc
