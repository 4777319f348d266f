"""``ctx recall``: what memory holds about a query, from the project store and ``~/.ctx``."""

from __future__ import annotations

import click

from ctxstore.cli._common import Env, format_option, pass_env
from ctxstore.cli._global import recall_global
from ctxstore.knowledge.scopes import recall_global_default


@click.command("recall")
@click.argument("query")
@click.option("--limit", type=click.IntRange(1, 100), default=20, help="At most N nodes (20).")
@click.option("--global/--no-global", "use_global", default=None,
              help="Also read the user store ~/.ctx (default: [retrieval] recall_global, on).")
@format_option
@pass_env
def recall_command(env: Env, query: str, limit: int, use_global: bool | None) -> None:
    """Recall memories by query or free text, as <ctx:recall> and the MCP recall tool do.

    Reads the project store, then the user store ~/.ctx ([retrieval] recall_global, on by
    default); each result names its store. Text is ranked by relevance; a query of filters
    only (type:task, tag:area:db) by decayed confidence, as compose ranks a tier. Forgotten
    nodes are left out; a node the lifecycle archived is returned and restored (spec 003),
    and shown as active.

    \b
    Examples:
        ctx recall "how do we retry uploads"
        ctx recall "type:decision AND retry" --no-global
        ctx recall "type:task OR tag:tier:pinned" --limit 5
        ctx recall sqlite --format json
    """
    wide = recall_global_default(env.store()) if use_global is None else use_global
    restored = recall_global(env, query, limit, wide)
    if restored and env.fmt != "json":
        click.echo(f"restored {restored} archived node{'s' if restored != 1 else ''}", err=True)
