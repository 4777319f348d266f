"""View commands: view create|list|render|update|delete, and compose."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import click

from ctxstore.cli._common import Env, emit_json, format_option, pass_env
from ctxstore.cli._render import composed_text, echo_stored, omitted_note
from ctxstore.errors import InvalidInput

if TYPE_CHECKING:
    from ctxstore.packs.compose import Composition


@click.group("view")
def view_group() -> None:
    """Manage saved views: a named query with a token budget.

    \b
    Example:
        ctx view create facts --query "type:fact OR type:decision" --budget 40000
    """


def _render(env: Env, comp: Composition) -> None:
    from ctxstore.packs.compose import render_json

    if env.fmt == "json":
        emit_json(render_json(comp))
    else:
        echo_stored(composed_text(comp.text), nl=False)  # stored text, printed inertly
    omitted_note(comp.skipped, comp.budget)


@view_group.command("create")
@click.argument("name")
@click.option("--query", required=True, help="The query (see docs/query.md).")
@click.option("--budget", type=click.IntRange(min=1), default=None,
              help="Token budget (default: CTX_DEFAULT_BUDGET, else config.toml "
                   "[retrieval] default_budget, else 50000).")
@click.option("--description", default=None, help="What the view is for.")
@format_option
@pass_env
def view_create_command(env: Env, name: str, query: str, budget: int | None,
                        description: str | None) -> None:
    """Save a view.

    \b
    Example:
        ctx view create facts --query "type:fact OR type:decision" --budget 40000
    """
    from ctxstore.knowledge.views import create_view

    create_view(env.session(), name, query, budget or env.default_budget(), description)
    if env.fmt == "json":
        emit_json({"name": name, "created": True})
    else:
        click.echo(f"created view {name}")


@view_group.command("list")
@format_option
@pass_env
def view_list_command(env: Env) -> None:
    """List views (the built-in default included).

    \b
    Example:
        ctx view list
    """
    from ctxstore.knowledge.views import list_views

    views = list_views(env.index(), default_budget=env.default_budget())
    if env.fmt == "json":
        emit_json({"views": [{"name": v.name, "query": v.query, "budget": v.budget,
                              "description": v.description, "builtin": v.builtin} for v in views]})
        return
    for v in views:
        click.echo(f"{v.name:<16} {v.budget:>7}  {v.query}" + ("  (built-in)" if v.builtin else ""))


@view_group.command("render")
@click.argument("name")
@click.option("--budget", type=click.IntRange(min=1), default=None, help="Override the budget.")
@format_option
@pass_env
def view_render_command(env: Env, name: str, budget: int | None) -> None:
    """Compose context from a view (Markdown, or --format json).

    Never over the budget: nodes it leaves out are counted in a note on stderr.

    \b
    Examples:
        ctx view render default
        ctx view render facts --budget 30000 --format json
    """
    from ctxstore.packs.compose import compose_view

    env.index()  # a large catch-up shows progress on a terminal
    comp = compose_view(env.session(), view=name, budget=budget,
                        default_budget=env.default_budget(), now_ms=int(time.time() * 1000))
    _render(env, comp.project)


@view_group.command("update")
@click.argument("name")
@click.option("--query", default=None, help="New query.")
@click.option("--budget", type=click.IntRange(min=1), default=None, help="New budget.")
@click.option("--description", default=None, help="New description.")
@format_option
@pass_env
def view_update_command(env: Env, name: str, query: str | None, budget: int | None,
                        description: str | None) -> None:
    """Change a view's query, budget or description.

    \b
    Example:
        ctx view update default --budget 80000
    """
    from ctxstore.knowledge.views import update_view

    update_view(env.session(), name, query=query, budget=budget, description=description,
                default_budget=env.default_budget())
    if env.fmt == "json":
        emit_json({"name": name, "updated": True})
    else:
        click.echo(f"updated view {name}")


@view_group.command("delete")
@click.argument("name")
@format_option
@pass_env
def view_delete_command(env: Env, name: str) -> None:
    """Delete a saved view.

    \b
    Example:
        ctx view delete facts
    """
    from ctxstore.knowledge.views import delete_view

    delete_view(env.session(), name)
    if env.fmt == "json":
        emit_json({"name": name, "deleted": True})
    else:
        click.echo(f"deleted view {name}")


SOURCES = ("startup", "resume", "clear", "compact", "fork")


@click.command("compose")
@click.option("--query", default=None, help="The query (default: the default view's).")
@click.option("--budget", type=click.IntRange(min=1), default=None,
              help="Token budget (default: the view's, CTX_DEFAULT_BUDGET, else config.toml "
                   "[retrieval] default_budget, else 50000).")
@click.option("--global/--no-global", "use_global", default=False,
              help="Then fill what the budget leaves from the user store ~/.ctx.")
@click.option("--session-start", "session_start", is_flag=True,
              help="Print exactly what the SessionStart hook would inject now (the default view "
                   "widened with the active task and recent memory, pending results), changing "
                   "nothing.")
@click.option("--source", type=click.Choice(SOURCES), default="startup", show_default=True,
              help="With --session-start: how the session (re)starts.")
@click.option("--session", "session_id", default=None, metavar="ID",
              help="With --session-start: a session id (its pending results and, with --source "
                   "compact, its recent prompts count); default: a new session.")
@format_option
@pass_env
def compose_command(env: Env, query: str | None, budget: int | None, use_global: bool,
                    session_start: bool, source: str, session_id: str | None) -> None:
    """Compose context without a saved view: pinned, then reference, then working, newest first.

    Never over the budget: nodes it leaves out are counted in a note on stderr.

    With --session-start, print instead the context the Claude Code SessionStart hook would
    inject for this store now, through the hook's own code, read-only: no hook state is
    written, pending results stay waiting, nothing is marked as shown. Problems the hook would
    report go to stderr as notes.

    \b
    Examples:
        ctx compose --query "tag:task:current" --budget 50000
        ctx compose --session-start
        ctx compose --session-start --source compact --session "$SESSION_ID" --format json
    """
    if session_start:
        return _session_start_preview(env, query, budget, use_global, source, session_id)
    if source != "startup" or session_id is not None:
        raise InvalidInput("--source and --session go with --session-start")
    if use_global:  # the project's context first, ~/.ctx in what is left (issue 16)
        from ctxstore.cli._global import compose_global

        return compose_global(env, query, budget)
    from ctxstore.packs.compose import compose_view

    env.index()  # a large catch-up shows progress on a terminal
    comp = compose_view(env.session(), query=query, budget=budget,
                        default_budget=env.default_budget(), now_ms=int(time.time() * 1000))
    _render(env, comp.project)


def _session_start_preview(env: Env, query: str | None, budget: int | None, use_global: bool,
                           source: str, session_id: str | None) -> None:
    """``ctx compose --session-start``: the hook's answer (``claude.hooks.preview_session_start``)."""
    if query is not None or budget is not None or use_global:
        raise InvalidInput("--session-start takes no --query, --budget or --global: it shows "
                           "what the hook composes")
    from ctxstore.claude.hooks import preview_session_start

    out = preview_session_start(env.store_path(), source=source, session=session_id)
    text = out.get("hookSpecificOutput", {}).get("additionalContext", "")
    message = out.get("systemMessage")
    if env.fmt == "json":
        emit_json({"source": source, "session": session_id, "additional_context": text,
                   "system_message": message})
        return
    if message:
        click.echo(f"ctx: note: the hook would report: {message}", err=True)
    if not text:
        # With a problem (an index not ready, ...) the store may hold plenty: the note above
        # says why nothing is shown, so this one does not claim the store is empty.
        why = "" if message else ": the store holds nothing to show"
        click.echo(f"ctx: note: session start injects nothing{why}", err=True)
        return
    from ctxstore.cli._render import stdout_is_terminal, strip_terminal_controls

    # Exactly the injected text (the hook escaped stored tags in it already); on a terminal
    # without escape sequences and controls, as every read command prints stored text.
    click.echo(strip_terminal_controls(text) if stdout_is_terminal() else text, nl=False)
