"""The ``ctx mcp`` server entry ``ctx install --mcp`` adds to Claude Code's MCP configuration.

``ctx install --mcp`` registers ``ctx mcp`` as the stdio server ``ctx`` in the project's
``.mcp.json`` (committed, shared) or, with ``--user``, in ``~/.claude.json`` (Claude Code's
own file: only the ``mcpServers.ctx`` key is touched); the plugin declares it in its
``.mcp.json``. Everything is planned through ``plan.Plan`` (checked paths, dry runs, atomic
writes); this module writes nothing itself and reads no environment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ctxstore.claude.install.plan import Plan, dump_json, load_json
from ctxstore.errors import InvalidInput

__all__ = ["CLAUDE_JSON_LIMIT", "MCP_SERVER_NAME", "mcp_entry", "plan_mcp", "plan_unmcp"]

MCP_SERVER_NAME = "ctx"
# Claude Code keeps every project's state in ``~/.claude.json``, which grows to tens of MB for
# a long-time user. It is the user's own file, never a clone's: read up to this much of it
# (``plan.FILE_LIMIT`` bounds every other file ctx install reads).
CLAUDE_JSON_LIMIT = 256 * 1024 * 1024


def mcp_entry(prefix: list[str]) -> dict[str, Any]:
    """The ``mcpServers.ctx`` entry: a stdio server running ``<ctx> mcp``.

    Args:
        prefix: The argv prefix that runs ctx (``resolve_ctx_command``).

    Returns:
        ``{"type": "stdio", "command": ..., "args": [..., "mcp"], "env": {}}``.
    """
    return {"type": "stdio", "command": prefix[0], "args": [*prefix[1:], "mcp"], "env": {}}


def _load(plan: Plan, path: Path) -> tuple[bytes | None, dict[str, Any]]:
    raw = plan.read(path)
    if raw is None:
        return None, {}
    try:
        data = load_json(raw)  # strict, as settings.json: what is read can be written back
    except ValueError:
        raise InvalidInput(f"{path} is not valid JSON; nothing was changed",
                           hint="fix or move the file, then run the command again") from None
    if not isinstance(data, dict) or not isinstance(data.get("mcpServers", {}), dict):
        raise InvalidInput(f"{path}: must be a JSON object whose \"mcpServers\" is an object; "
                           "nothing was changed")
    return raw, data


def plan_mcp(plan: Plan, path: Path, prefix: list[str], *, claude_json: bool = False) -> None:
    """Plan the ``ctx`` server entry in an MCP configuration file (other keys kept).

    Args:
        plan: The install plan.
        path: ``<project>/.mcp.json``, ``~/.claude.json`` or a plugin's ``.mcp.json``.
        prefix: The argv prefix that runs ctx.
        claude_json: ``path`` is Claude Code's own ``~/.claude.json``: its previous bytes are
            kept in ``<name>.bak``, and it may be up to ``CLAUDE_JSON_LIMIT``.

    Raises:
        UnsafePath: (E020) if the path fails the plan's checks.
        InvalidInput: if the file exists and is not such JSON, or is larger than its limit.
    """
    if claude_json:
        plan.limits[path] = CLAUDE_JSON_LIMIT
    raw, data = _load(plan, path)
    servers = dict(data.get("mcpServers", {}))
    entry = mcp_entry(prefix)
    if raw is not None and servers.get(MCP_SERVER_NAME) == entry:
        return
    servers[MCP_SERVER_NAME] = entry
    plan.add(path, dump_json({**data, "mcpServers": servers}), backup=claude_json)


def plan_unmcp(plan: Plan, path: Path, *, claude_json: bool = False) -> None:
    """Plan removing the ``ctx`` server entry (the file goes when nothing else is left in it).

    Args:
        plan: The uninstall plan.
        path: The MCP configuration file.
        claude_json: ``path`` is Claude Code's own ``~/.claude.json``: never deleted, and it
            may be up to ``CLAUDE_JSON_LIMIT``.

    Raises:
        UnsafePath: (E020) if the path fails the checks, or a file to delete is a link.
        InvalidInput: if the file exists and is not such JSON, or is larger than its limit.
    """
    if claude_json:
        plan.limits[path] = CLAUDE_JSON_LIMIT
    raw, data = _load(plan, path)
    servers = dict(data.get("mcpServers", {}))
    entry = servers.get(MCP_SERVER_NAME)
    if raw is None or not isinstance(entry, dict) or entry.get("args", [None])[-1] != "mcp":
        return  # not there, or a "ctx" server that ctx did not write
    del servers[MCP_SERVER_NAME]
    rest = {**data, "mcpServers": servers} if servers else {k: v for k, v in data.items()
                                                           if k != "mcpServers"}
    plan.add(path, None if not rest and not claude_json else dump_json(rest))
