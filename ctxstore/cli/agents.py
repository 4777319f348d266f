"""``ctx install --agent NAME`` / ``ctx uninstall --agent NAME``: ``ctx mcp`` in other agents.

The plans come from ``ctxstore.agents.install``; this module gathers what they depend on
(the home folder, the platform, ``CODEX_HOME``, ``XDG_CONFIG_HOME``, ``APPDATA``), plans every
agent named before writing anything, applies, and reports, as text or JSON.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import click

from ctxstore.agents.install import Target, plan_agent, plan_unagent, server_entry, target
from ctxstore.agents.registry import AGENTS, Scope, Where, find_agent
from ctxstore.claude.install import Plan, apply_plan, backup_path, describe, resolve_ctx_command
from ctxstore.cli._common import Env, emit_json
from ctxstore.errors import InvalidInput

__all__ = ["AGENT_NAMES", "check_agent_options", "run_agents"]

AGENT_NAMES = tuple(AGENTS)
_ENV = ("CODEX_HOME", "XDG_CONFIG_HOME", "APPDATA")


def _where() -> Where:
    return Where(Path(os.path.expanduser("~")), sys.platform,
                 {name: os.environ[name] for name in _ENV if os.environ.get(name)})


def run_agents(env: Env, names: tuple[str, ...], scope: Scope | None, *, project: Path,
               dry_run: bool, remove: bool) -> None:
    """Install (or, with ``remove``, uninstall) ``ctx mcp`` for each agent of ``names``.

    Args:
        env: The root options (``--ctx-dir`` binds a user-scope entry to that store).
        names: Agent names.
        scope: ``project`` or ``user`` as given, or None: each agent's project file where it
            has one, else the user's.
        project: The project folder (the store's parent, else the current directory).
        dry_run: Plan and report only.
        remove: Uninstall instead.

    Raises:
        InvalidInput: (E011) for an agent without a file of the scope asked for, or a file
            ctx cannot edit; UnsafePath (E020) for a path it must not follow. Nothing is
            written then, for any agent.
    """
    where = _where()
    prefix = resolve_ctx_command(sys.executable, shutil.which("ctx"))
    planned: list[tuple[Target, Plan]] = []
    for name in dict.fromkeys(names):  # each agent once, in the order given
        agent = find_agent(name)
        chosen: Scope = scope or agent.scopes()[0]
        goal = target(agent, chosen, project=project, where=where)
        if remove:
            planned.append((goal, plan_unagent(goal)))
            continue
        store = env.store_path().absolute() if env.ctx_dir and chosen == "user" else None
        planned.append((goal, plan_agent(goal, server_entry(agent, chosen, prefix, store))))
    if not dry_run:  # every plan is made (and checked) before the first write
        for _, plan in planned:
            apply_plan(plan)
    changes = [c for _, plan in planned for c in plan.changes]
    if env.fmt == "json":
        emit_json({"dry_run": dry_run, "changed": bool(changes),
                   "changes": [{"action": c.action, "path": str(c.path), "backup": c.backup}
                               for c in changes],
                   "agents": [{"agent": goal.agent.name, "scope": goal.scope,
                               "file": str(goal.path), "changed": bool(plan.changes)}
                              for goal, plan in planned]})
        return
    for line in describe(changes):
        click.echo(("would " if dry_run else "") + line)
    if dry_run:
        for change in changes:
            if change.path.name != ".gitignore":
                click.echo(change.diff(), nl=False)
        click.echo("(dry run: nothing was written)")
        return
    for change in changes:
        if change.backup:
            click.echo(f"backup of the previous {change.path.name}: {backup_path(change.path)}")
    for goal, plan in planned:
        agent = goal.agent
        if remove:
            click.echo(f"{agent.title}: {'ctx mcp removed from' if plan.changes else 'ctx mcp is not in'}"
                       f" {goal.path}")
            continue
        state = "registered in" if plan.changes else "already registered in"
        click.echo(f"{agent.title}: ctx mcp {state} {goal.path} ({goal.scope})")
        if agent.note:
            click.echo(f"  note: {agent.note}")


def check_agent_options(names: tuple[str, ...], plugin_dir: str | None, with_mcp: bool,
                        local: bool) -> None:
    """``--agent`` combines with the scope options and ``--dry-run`` only.

    Raises:
        InvalidInput: (E011) naming the option that does not combine.
    """
    for given, option in ((plugin_dir is not None, "--plugin"), (with_mcp, "--mcp"),
                          (local, "--local")):
        if names and given:
            raise InvalidInput(f"--agent and {option} cannot be combined",
                               hint="run ctx install twice: once for Claude Code, once with --agent")
