"""The global layer on the command line: ``--global/--no-global`` (DESIGN §2, issue 16).

Reads with ``--global`` (``ctx search``, ``ctx query``, ``ctx compose``) cover the project
store and the user store ``~/.ctx`` through ``knowledge.scopes``, and every result names
its store. ``ctx add --global`` writes to the user store (created on first use). The
commands' own modules only add the option and call one function here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import click

from ctxstore.cli._common import Env, emit_json, node_json, preview
from ctxstore.cli._notices import user_store

if TYPE_CHECKING:
    from ctxstore.knowledge.scopes import ScopedNode, Stores
    from ctxstore.search.search import RunHit

__all__ = ["global_option", "global_write_option", "search_global", "query_global", "compose_global",
           "recall_global"]


def global_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--global/--no-global`` on a read command (off by default)."""
    return click.option("--global/--no-global", "use_global", default=False,
                        help="Also read the user store ~/.ctx; each result names its store.")(func)


def _to_user_store(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    if value:
        from ctxstore.knowledge.scopes import open_user_store

        path = user_store()
        open_user_store(path, create=True).close()  # type: ignore[union-attr]
        env = ctx.find_object(Env)
        assert env is not None
        env.ctx_dir, env.kind = str(path), "user"
    return value


def global_write_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--global`` on a write command: write to the user store ``~/.ctx`` instead."""
    return click.option("--global", "use_global", is_flag=True, expose_value=False,
                        callback=_to_user_store,
                        help="Write to the user store ~/.ctx (knowledge for every project).")(func)


def _stores(env: Env) -> Stores:
    from ctxstore.knowledge.scopes import Stores

    return Stores.open(env.session(), user_store())


def _print(env: Env, hits: Sequence[ScopedNode], stores: Stores,
           runs: Sequence[tuple[str, RunHit]] | None = None) -> None:
    """The results, labelled by store; markdown ids are short but unique in their store.

    ``runs`` (a recall's or a search's command runs, each with its store) follow the nodes;
    ``--format json`` gives them as ``runs``, each with ``kind: "run"``.
    """
    if env.fmt == "json":
        docs = []
        for h in hits:
            doc = {"store": h.scope, **node_json(h.node)}
            if h.score is not None:
                doc.update(score=round(h.score, 4), matched=list(h.matched))
            docs.append(doc)
        out: dict[str, Any] = {"count": len(hits), "nodes": docs}
        if runs is not None:
            from ctxstore.knowledge.recall import run_json

            out["runs"] = [{"kind": "run", "store": scope, **run_json(r)} for scope, r in runs]
        emit_json(out)
        return
    from ctxstore.cli._render import echo_stored, item_line  # text only: JSON skips it

    short: dict[tuple[str, str], str] = {}
    if env.fmt == "markdown":  # each store's own shortest unique prefixes (`ctx show` takes them)
        from ctxstore.knowledge.show import short_ids

        for scope, db in stores.each():
            ids = [h.node.id for h in hits if h.scope == scope]
            if ids:
                short.update(((scope, i), s) for i, s in short_ids(db, ids).items())
    for h in hits:
        n = h.node
        if env.fmt == "markdown":
            shown = short.get((h.scope, n.id), n.id)
            echo_stored(f"{item_line(n.type, shown, n.content)} ({h.scope})")
            continue
        tags = f"  [{', '.join(n.tags)}]" if n.tags else ""
        mark = " (superseded)" if n.superseded_by else ""
        echo_stored(f"{h.scope:<7}  {n.id}  {n.type:<13} {preview(n.content)}{tags}{mark}")
    if runs:
        from ctxstore.knowledge.recall import run_item, run_lines

        for _, run in runs:
            if env.fmt == "markdown":
                echo_stored(run_item(run, "command run: "))
            else:
                head, *rest = run_lines(run)
                echo_stored("\n".join([f"run      {head}", *(f"    {x}" for x in rest)]))


def search_global(env: Env, text: str, limit: int, include_superseded: bool,
                  kinds: Sequence[str] = ("node", "narrative", "run")) -> None:
    """``ctx search --global``: ranked search over both stores, each result labelled.

    Nodes, narrative and stored command runs (the search of ``ctx search``); runs follow
    the nodes.
    """
    from ctxstore.knowledge.scopes import search_scoped_hits

    stores = _stores(env)
    try:
        found = search_scoped_hits(stores, text, limit=limit, kinds=kinds,
                                   include_superseded=include_superseded)
        _print(env, found.nodes, stores,
               runs=[(r.scope, r.run) for r in found.runs] if "run" in kinds else None)
    finally:
        stores.close_user()


def query_global(env: Env, text: str, include_superseded: bool, limit: int | None) -> None:
    """``ctx query --global``: the query over both stores, project first, each labelled."""
    from ctxstore.knowledge.scopes import query_scoped

    stores = _stores(env)
    try:
        _print(env, query_scoped(stores, text, now=time.time(), limit=limit,
                                 include_superseded=include_superseded), stores)
    finally:
        stores.close_user()


def recall_global(env: Env, text: str, limit: int, use_global: bool) -> int:
    """``ctx recall``: recall over the project store (and ``~/.ctx``), each result labelled.

    Lifecycle-archived nodes it returns are restored (spec 003: archived -> active when
    recalled).

    Returns:
        How many nodes were restored.
    """
    from ctxstore.knowledge.scopes import Stores
    from ctxstore.lifecycle.policy import recall_restoring

    stores = Stores.open(env.session(), user_store() if use_global else None)
    try:
        recalled = recall_restoring(stores, text, limit=limit, now=time.time())
        _print(env, recalled.hits, stores, runs=[("project", r) for r in recalled.runs])
    finally:
        stores.close_user()
    return recalled.restored


def compose_global(env: Env, query: str | None, budget: int | None) -> None:
    """``ctx compose --global``: the project's context, then the user store's in what is left."""
    from ctxstore.packs.compose import compose_view, scoped_composition_json

    stores = _stores(env)
    try:
        comp = compose_view(env.session(), query=query, budget=budget,
                            default_budget=env.default_budget(), user=stores.user,
                            now_ms=int(time.time() * 1000))
    finally:
        stores.close_user()
    if env.fmt == "json":
        emit_json(scoped_composition_json(comp))
    else:
        from ctxstore.cli._render import composed_text, echo_stored

        echo_stored(composed_text(comp.text), nl=False)
    from ctxstore.cli._render import omitted_note

    omitted_note(comp.project.skipped + (comp.user.skipped if comp.user else 0), comp.budget)
