"""``ctx mcp``: serve the store to MCP clients over stdio (``ctxstore.mcp.server``)."""

from __future__ import annotations

import os
from pathlib import Path

import click

from ctxstore.cli._common import Env, pass_env
from ctxstore.knowledge.scopes import user_store_path
from ctxstore.mcp.server import serve


@click.command("mcp")
@click.option("--global/--no-global", "use_global", default=True,
              help="Also serve the user store ~/.ctx (recall, search, compose, remember "
                   "with scope global). On by default.")
@click.option("--fast-start/--no-fast-start", default=True,
              help="Answer the handshake (initialize, ping, tools/list) as the MCP SDK would "
                   "while the SDK loads, so clients list ctx's tools at once (default); "
                   "--no-fast-start lets the SDK answer everything, 0.6-3 s later.")
@pass_env
def mcp_command(env: Env, use_global: bool, fast_start: bool) -> None:
    """Run a stdio MCP server over this store (for Claude Code and other MCP clients).

    Tools: remember, recall, search, pack, memory_search, compose, show, link, forget,
    task_start, task_end, status. Resources: ctx://view/default and ctx://node/{id}. One long-lived process:
    every call first catches up with writes made by other processes (hooks, ctx add).
    Stdout carries JSON-RPC only. The handshake is answered before the MCP SDK has loaded
    (--no-fast-start: by the SDK). `ctx install --mcp` registers it with Claude Code.

    \b
    Examples:
        ctx mcp
        claude mcp add --transport stdio ctx -- ctx mcp
    """
    user = user_store_path(Path(os.path.expanduser("~"))) if use_global else None
    serve(env.session(), user_store=user, fast_start=fast_start)
