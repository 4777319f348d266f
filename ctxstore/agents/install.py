"""Registering ``ctx mcp`` in another agent's own configuration file (``ctx install --agent``).

The same guarantees as the Claude Code install (``ctxstore.claude.install``), through the same
checked plans: the file is merged, never replaced (its other settings, its comments and its
formatting stay byte for byte: the server entry is spliced into the text, ``jsonc`` and
``tomltext``); a file without ctx's entry is backed up to ``<name>.bak`` before the first
change (in a project, ``.gitignore`` beside it lists the backup so it is never committed);
running it again changes nothing; an invalid file is refused with one line and nothing is
written; uninstall removes exactly ctx's entry, and when what is left equals the backup the
backup's exact bytes come back. A project's files are checked like a clone's content (no link
followed); the user's own may be linked into a dotfiles repository.

The entry is the stdio server ``ctx``: in a project (a committed file) ``ctx mcp`` found on
``PATH``, on every teammate's machine; in the user's own file this ctx by absolute path, and
the store too when the caller names one.
"""

from __future__ import annotations

import copy
import tomllib
from pathlib import Path
from typing import Any

from ctxstore.agents.jsonc import JsonTextError, parse, remove_member, set_member
from ctxstore.agents.registry import Agent, Scope, Where
from ctxstore.agents.tomltext import TomlEditRefused, remove_table, set_table
from ctxstore.claude.install.plan import Plan, backup_path
from ctxstore.claude.install.settings import gitignore_text
from ctxstore.errors import InvalidInput
from ctxstore.records import dataclass

__all__ = ["SERVER_NAME", "Target", "plan_agent", "plan_unagent", "server_entry", "target"]

SERVER_NAME = "ctx"
_BOM = "\ufeff"


@dataclass(frozen=True, slots=True)
class Target:
    """Where one agent's server entry goes: the file, and how its path is checked.

    ``root`` is the folder below which every path is checked: the project (no link
    followed), or the user's home (links followed: ``follow_links``).
    """

    agent: Agent
    scope: Scope
    path: Path
    root: Path
    follow_links: bool


def target(agent: Agent, scope: Scope, *, project: Path, where: Where) -> Target:
    """The file ``agent`` keeps its servers in for ``scope``.

    Raises:
        InvalidInput: (E011) if the agent has no file of that scope.
    """
    path = agent.config_path(scope, project, where)
    if scope == "project":
        return Target(agent, scope, path, project, False)
    root = where.home if path.is_relative_to(where.home) else Path(path.anchor)
    return Target(agent, scope, path, root, True)


def server_entry(agent: Agent, scope: Scope, prefix: list[str], store: Path | None = None
                 ) -> dict[str, Any]:
    """The ``ctx`` server entry for ``agent``'s file of ``scope``.

    Args:
        agent: The agent.
        scope: ``project`` (a committed file: ``ctx`` on PATH, nothing of this machine) or
            ``user`` (this ctx by absolute path).
        prefix: The argv prefix that runs this ctx (``resolve_ctx_command``).
        store: A store to bind the server to (``--ctx-dir``), user scope only.

    Returns:
        The entry, in the agent's own shape.
    """
    if scope == "project":
        return agent.entry("ctx", ["mcp"])
    bound = ["--ctx-dir", str(store)] if store is not None else []
    return agent.entry(prefix[0], [*prefix[1:], *bound, "mcp"])


def _refused(path: Path, agent: Agent, why: str) -> InvalidInput:
    kind = {"toml": "TOML", "json": "JSON", "jsonc": "JSON"}[agent.format]
    return InvalidInput(f"{path} is not valid {kind} ({why}); nothing was changed",
                        hint="fix or move the file, then run the command again")


def _decode(raw: bytes, path: Path) -> tuple[str, str]:
    """The byte-order mark (kept as it was) and the text."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput(f"{path} is not UTF-8 text; nothing was changed") from None
    bom = _BOM if text.startswith(_BOM) else ""
    return bom, text[len(bom):]


def _data(agent: Agent, text: str, path: Path) -> dict[str, Any]:
    """The file's content, checked to hold the servers table where ctx expects it.

    Raises:
        InvalidInput: (E011) if it is not the agent's format, or not shaped as documented.
    """
    if not text.strip():
        return {}
    try:
        if agent.format == "toml":
            data: Any = tomllib.loads(text)
        else:
            data, _ = parse(text, comments=agent.format == "jsonc")
    except (tomllib.TOMLDecodeError, JsonTextError) as exc:
        raise _refused(path, agent, str(exc)) from None
    except RecursionError:  # arrays nested thousands deep in a cloned config.toml
        raise _refused(path, agent, "nested too deeply") from None
    if not isinstance(data, dict):
        raise _refused(path, agent, "it must hold an object at the top")
    if not isinstance(data.get(agent.servers_key, {}), dict):
        raise _refused(path, agent, f"{agent.servers_key!r} must be a table of servers")
    return data


def _quiet_data(agent: Agent, raw: bytes | None, path: Path) -> dict[str, Any] | None:
    """A backup's content, or None when there is none or it cannot be read."""
    if raw is None:
        return None
    try:
        return _data(agent, _decode(raw, path)[1], path)
    except InvalidInput:
        return None


def _entry_of(agent: Agent, data: dict[str, Any]) -> Any:
    return data.get(agent.servers_key, {}).get(SERVER_NAME)


def _is_ours(entry: Any) -> bool:
    """Whether a ``ctx`` server entry runs ``... mcp`` (written by ctx, whatever its path)."""
    args = entry.get("args") if isinstance(entry, dict) else None
    return isinstance(args, list) and bool(args) and args[-1] == "mcp"


def _stripped(agent: Agent, data: dict[str, Any]) -> dict[str, Any]:
    """``data`` without ctx's server, and without the servers table if that leaves it empty."""
    out = copy.deepcopy(data)
    servers = out.get(agent.servers_key)
    if isinstance(servers, dict):
        servers.pop(SERVER_NAME, None)
        if not servers:
            del out[agent.servers_key]
    return out


def _edit(agent: Agent, text: str, path: Path, entry: dict[str, Any] | None) -> str:
    """``text`` with ctx's server set to ``entry`` (None: removed), checked by parsing it again."""
    try:
        if agent.format == "toml":
            if entry is None:
                return remove_table(text, (agent.servers_key, SERVER_NAME))
            return set_table(text, (agent.servers_key, SERVER_NAME), entry)
        comments = agent.format == "jsonc"
        if entry is None:
            new = remove_member(text, agent.servers_key, SERVER_NAME, comments=comments)
        else:
            new = set_member(text, agent.servers_key, SERVER_NAME, entry, comments=comments)
        before, _ = parse(text, comments=comments) if text.strip() else ({}, None)
        after, _ = parse(new, comments=comments)
    except (TomlEditRefused, JsonTextError) as exc:
        raise InvalidInput(f"{path}: cannot add ctx's server without changing the rest "
                           f"({exc}); nothing was changed",
                           hint="add it by hand: see docs/agents.md") from None
    # Only ctx's entry may differ, and it must be what was asked for.
    if _stripped(agent, after) != _stripped(agent, before) or _entry_of(agent, after) != entry:
        raise InvalidInput(f"{path}: the edit would change more than ctx's server; nothing was "
                           "changed", hint="add it by hand: see docs/agents.md")
    return new


def _checked_plan(where: Target) -> tuple[Plan, Path, Path | None]:
    plan = Plan(where.root, follow_links=where.follow_links)
    backup = backup_path(where.path)
    gitignore = where.path.parent / ".gitignore" if where.scope == "project" else None
    plan.check(where.path, backup, *([gitignore] if gitignore is not None else []))
    return plan, backup, gitignore


def plan_agent(where: Target, entry: dict[str, Any]) -> Plan:
    """What ``ctx install --agent`` changes: ctx's server entry in the agent's file.

    Args:
        where: The agent's file (``target``).
        entry: The server entry (``server_entry``).

    Returns:
        The plan (empty when the entry is already there).

    Raises:
        UnsafePath: (E020) if a path fails the checks (a link in a project, a FIFO, ...).
        InvalidInput: (E011) if the file is not the agent's format, holds a ``ctx`` server
            that ctx did not write, or cannot take the entry without other changes.
    """
    plan, backup, gitignore = _checked_plan(where)
    raw = plan.read(where.path)
    bom, text = _decode(raw, where.path) if raw is not None else ("", "")
    data = _data(where.agent, text, where.path)
    current = _entry_of(where.agent, data)
    if current is not None and not _is_ours(current):
        raise InvalidInput(f"{where.path} already has a server named {SERVER_NAME!r} that ctx did "
                           "not write; nothing was changed",
                           hint="rename or remove it, then run the command again")
    if raw is None or current != entry:
        new = _edit(where.agent, text, where.path, entry)
        # Only a file without ctx's entry is the user's own: a reinstall keeps the backup
        # of the file as it was before the first install.
        plan.add(where.path, (bom + new).encode("utf-8"), backup=current is None)
    if gitignore is not None and (any(c.backup for c in plan.changes)
                                  or plan.read(backup) is not None):
        plan.add(gitignore, gitignore_text(plan.read(gitignore), ["/" + backup.name]))
    return plan


def plan_unagent(where: Target) -> Plan:
    """What ``ctx uninstall --agent`` changes: ctx's server entry goes, nothing else.

    When what is left equals the backup taken before the install, the backup's exact bytes
    come back (and the backup goes); a file ctx created and that holds nothing else is
    deleted; otherwise only the entry's text is removed. A ``ctx`` server ctx did not write
    stays.

    Returns:
        The plan (empty when ctx's server is not there).

    Raises:
        UnsafePath: (E020) if a path fails the checks, or a file to delete is a link.
        InvalidInput: (E011) if the file is not the agent's format, or the entry cannot be
            removed without other changes.
    """
    plan, backup, gitignore = _checked_plan(where)
    agent = where.agent
    raw = plan.read(where.path)
    if raw is not None:
        bom, text = _decode(raw, where.path)
        data = _data(agent, text, where.path)
        if _is_ours(_entry_of(agent, data)):
            stripped = _stripped(agent, data)
            saved = plan.read(backup)
            saved_data = _quiet_data(agent, saved, where.path)
            if saved is not None and saved_data is not None \
                    and _stripped(agent, saved_data) == stripped:
                plan.add(where.path, saved)  # the file as it was, to the byte
                plan.add(backup, None)
            elif not stripped and saved is None and not plan.is_link(where.path):
                plan.add(where.path, None)  # ctx created it
                plan.prune_dirs.append((where.path.parent, where.path.parent))
            else:
                plan.add(where.path, (bom + _edit(agent, text, where.path, None)).encode("utf-8"))
    if gitignore is not None:
        old = plan.read(gitignore)
        dropped = any(c.path == backup and c.new is None for c in plan.changes)
        if old is not None and (dropped or plan.read(backup) is None):
            plan.add(gitignore, gitignore_text(old, None))  # no backup left to keep out of Git
    return plan
