"""The slash-command skills and the MCP server entry that ``ctx install`` adds (issue 16).

Skills: ``/recall``, ``/remember``, ``/forget``, ``/consolidate``, ``/index-code``, ``/pin``
and the transcript-memory skills ``/memory-recall``, ``/memory-stats``, ``/memory-topics``,
``/memory-backfill`` (spec 004 §6),
packaged as ``ctxstore/claude/skills/<name>/SKILL.md`` and installed next to the ``ctx``
skill (``.claude/skills/<name>/SKILL.md``, or ``skills/<name>/`` of the plugin). Each file
carries ``SKILL_MARKER``: a skill of the same name that the user wrote (no marker) is left
alone, and uninstall removes only files that still carry it.

MCP: ``ctx install --mcp`` registers ``ctx mcp`` as the stdio server ``ctx`` in the
project's ``.mcp.json`` (committed, shared) or, with ``--user``, in ``~/.claude.json``
(Claude Code's own file: only the ``mcpServers.ctx`` key is touched); the plugin declares
it in its ``.mcp.json``. Everything is planned through ``install.Plan`` (checked paths,
dry runs, atomic writes); this module writes nothing itself and reads no environment.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

from ctxstore.claude.install import SKILL_MARKER, Plan, _dump, _loads
from ctxstore.errors import InvalidInput

__all__ = ["SKILL_NAMES", "MCP_SERVER_NAME", "CLAUDE_JSON_LIMIT", "skill_files", "plan_skills",
           "plan_unskills", "mcp_entry", "plan_mcp", "plan_unmcp"]

SKILL_NAMES = ("recall", "remember", "forget", "consolidate", "index-code", "pin",
               "memory-recall", "memory-stats", "memory-topics", "memory-backfill")
MCP_SERVER_NAME = "ctx"
# Claude Code keeps every project's state in ``~/.claude.json``, which grows to tens of MB for
# a long-time user. It is the user's own file, never a clone's: read up to this much of it
# (``install.FILE_LIMIT`` bounds every other file ctx install reads).
CLAUDE_JSON_LIMIT = 256 * 1024 * 1024


def skill_files() -> dict[str, bytes]:
    """The packaged skills: name -> SKILL.md bytes.

    Returns:
        One entry per name of ``SKILL_NAMES``.
    """
    root = resources.files("ctxstore.claude").joinpath("skills")
    return {name: root.joinpath(name, "SKILL.md").read_bytes() for name in SKILL_NAMES}


def plan_skills(plan: Plan, skills_dir: Path) -> None:
    """Plan writing every skill under ``skills_dir`` (``.claude/skills`` or a plugin's).

    A SKILL.md there without ``SKILL_MARKER`` is the user's own skill of that name and is
    kept as it is.

    Args:
        plan: The install plan (its boundary checks every path).
        skills_dir: The folder holding one folder per skill.

    Raises:
        UnsafePath: (E020) if a path fails the plan's boundary.
        InvalidInput: if a file there is too large.
    """
    for name, text in skill_files().items():
        path = skills_dir / name / "SKILL.md"
        old = plan.read(path)
        if old is not None and SKILL_MARKER.encode() not in old:
            continue  # someone's own /<name>: never replaced
        plan.add(path, text)


def plan_unskills(plan: Plan, skills_dir: Path, stop: Path) -> None:
    """Plan removing the skills ``plan_skills`` wrote (only files still carrying the marker).

    Args:
        plan: The uninstall plan.
        skills_dir: The folder holding one folder per skill.
        stop: The highest folder removed when left empty.

    Raises:
        UnsafePath: (E020) if a path fails the boundary, or a file to delete is a link.
        InvalidInput: if a file there is too large.
    """
    for name in SKILL_NAMES:
        path = skills_dir / name / "SKILL.md"
        old = plan.read(path)
        if old is not None and SKILL_MARKER.encode() in old:
            plan.add(path, None)
            plan.prune_dirs.append((path.parent, stop))


def mcp_entry(prefix: list[str]) -> dict[str, Any]:
    """The ``mcpServers.ctx`` entry: a stdio server running ``<ctx> mcp``.

    Args:
        prefix: The argv prefix that runs ctx (``install.resolve_ctx_command``).

    Returns:
        ``{"type": "stdio", "command": ..., "args": [..., "mcp"], "env": {}}``.
    """
    return {"type": "stdio", "command": prefix[0], "args": [*prefix[1:], "mcp"], "env": {}}


def _load(plan: Plan, path: Path) -> tuple[bytes | None, dict[str, Any]]:
    raw = plan.read(path)
    if raw is None:
        return None, {}
    try:
        data = _loads(raw)  # strict, as settings.json: what is read can be written back
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
        UnsafePath: (E020) if the path fails the plan's boundary.
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
    plan.add(path, _dump({**data, "mcpServers": servers}), backup=claude_json)


def plan_unmcp(plan: Plan, path: Path, *, claude_json: bool = False) -> None:
    """Plan removing the ``ctx`` server entry (the file goes when nothing else is left in it).

    Args:
        plan: The uninstall plan.
        path: The MCP configuration file.
        claude_json: ``path`` is Claude Code's own ``~/.claude.json``: never deleted, and it
            may be up to ``CLAUDE_JSON_LIMIT``.

    Raises:
        UnsafePath: (E020) if the path fails the boundary, or a file to delete is a link.
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
    plan.add(path, None if not rest and not claude_json else _dump(rest))
