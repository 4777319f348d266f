"""``ctx install`` and ``ctx uninstall``: Claude Code skill, hooks and plugin; other agents (``--agent``)."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from click.core import ParameterSource

from ctxstore.agents.registry import AGENTS
from ctxstore.claude.install import (
    apply_plan,
    backup_path,
    describe,
    plan_install,
    plan_plugin,
    plan_uninstall,
    plan_unmcp,
    plan_unplugin,
    resolve_ctx_command,
)
from ctxstore.cli._common import Env, emit_json, format_option, pass_env
from ctxstore.cli._notices import user_store
from ctxstore.cli.agents import run_agents
from ctxstore.discovery import discover_store
from ctxstore.errors import InvalidInput, StoreNotFound

if TYPE_CHECKING:
    from ctxstore.claude.install import Plan


def _claude_dir(env: Env, scope: str) -> Path:
    """``~/.claude`` (or ``CLAUDE_CONFIG_DIR``) for --user; ``<project>/.claude`` for --project.

    The project is the directory holding the store (``--ctx-dir`` or the nearest
    ``.ctx/``), else the current directory: Claude Code reads ``.claude/settings.json``
    from the folder it starts in.
    """
    if scope == "user":
        configured = os.environ.get("CLAUDE_CONFIG_DIR")
        return Path(configured) if configured else Path.home() / ".claude"
    if env.ctx_dir:
        # --ctx-dir names the .ctx folder or the project holding it; with it set,
        # store_path only resolves the name (it never creates the user store).
        return env.store_path().absolute().parent / ".claude"

    try:
        return discover_store(Path(os.getcwd())).parent / ".claude"
    except StoreNotFound:
        return Path(os.getcwd()) / ".claude"


def _plugin_path(plugin_dir: str) -> tuple[Path, Path]:
    """The absolute plugin folder (``..`` resolved by name) and the folder below which no link is followed.

    The current directory for a relative path inside it (run in a clone, ``--plugin plugins/ctx``
    must not follow a committed ``plugins`` link), else the plugin folder's parent.
    """
    where = Path(os.path.abspath(plugin_dir))
    cwd = Path(os.getcwd())
    inside = not os.path.isabs(plugin_dir) and cwd in where.parents
    return where, cwd if inside else where.parent


def _ctx_prefix() -> list[str]:

    return resolve_ctx_command(sys.executable, shutil.which("ctx"))


def _report(env: Env, plan: Plan, *, dry_run: bool, done: str, nothing: str,
            extra: dict[str, object]) -> None:
    """Apply the plan (unless --dry-run) and say what changed, as text or JSON."""
    if not dry_run:
        apply_plan(plan)
    lines = describe(plan.changes)
    if env.fmt == "json":
        emit_json({"dry_run": dry_run, "changed": bool(plan.changes),
                   "changes": [{"action": c.action, "path": str(c.path), "backup": c.backup}
                               for c in plan.changes], **extra})
        return
    if not plan.changes:
        click.echo(nothing)
        return
    for line in lines:
        click.echo(("would " if dry_run else "") + line)
    if dry_run:
        for change in plan.changes:
            if change.path.suffix == ".json":
                click.echo(change.diff(), nl=False)
        click.echo("(dry run: nothing was written)")
    else:
        for change in plan.changes:
            if change.backup:
                click.echo(f"backup of the previous {change.path.name}: {backup_path(change.path)}")
        click.echo(done)


_SCOPE = [click.option("--user", "scope", flag_value="user",
                       help="~/.claude/settings.json and ~/.claude/skills/ctx (every project)."),
          click.option("--project", "scope", flag_value="project", default=True,
                       help="<project>/.claude/settings.json and .claude/skills/ctx (default).")]


def _scope_options(func: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(_SCOPE):
        func = option(func)
    return func


_AGENT = click.option("--agent", "agents", multiple=True, type=click.Choice(list(AGENTS)),
                      help="Register `ctx mcp` in this agent's own configuration instead "
                           "(repeatable): its project file, or with --user its user file. "
                           "See docs/agents.md.")


def _agents(env: Env, agents: tuple[str, ...], scope: str, *, dry_run: bool, remove: bool) -> None:
    """``--agent``: each agent's project file unless --user/--project was given."""
    given = click.get_current_context().get_parameter_source("scope") != ParameterSource.DEFAULT
    run_agents(env, agents, "user" if scope == "user" else "project" if given else None,
               project=_claude_dir(env, "project").parent, dry_run=dry_run, remove=remove)


def _user_store(dry_run: bool) -> tuple[Path, bool]:
    """The user store ``~/.ctx``, created (spec 001 §18: store, schema, default view) unless it exists.

    Returns:
        Its path, and whether this run created it (or, with ``dry_run``, would).
    """
    home = user_store()
    if (home / "HEAD").is_file():
        return home, False
    if not dry_run:
        from ctxstore.init import init_store

        init_store(home, git=False)
    return home, True


def _mcp_config(claude: Path, scope: str) -> Path:
    """Where Claude Code reads MCP servers: ``<project>/.mcp.json``, or ``~/.claude.json``.

    With ``CLAUDE_CONFIG_DIR`` set, Claude Code keeps ``.claude.json`` in that folder.
    """
    if scope == "user" and not os.environ.get("CLAUDE_CONFIG_DIR"):
        return claude.parent / ".claude.json"
    return claude / ".claude.json" if scope == "user" else claude.parent / ".mcp.json"


@click.command("install")
@_scope_options
@click.option("--shared/--local", "shared", default=True,
              help="--project only. --shared (default): the committed .claude/settings.json gets "
                   "hooks that find ctx on each machine, this machine's ctx goes to the uncommitted "
                   "settings.local.json. --local: hooks only in settings.local.json.")
@click.option("--plugin", "plugin_dir", type=click.Path(file_okay=False), default=None,
              help="Write a Claude Code plugin (and its marketplace.json) into DIR instead.")
@click.option("--dry-run", is_flag=True, help="Print what would change and write nothing.")
@click.option("--mcp", "with_mcp", is_flag=True,
              help="Also register `ctx mcp` as Claude Code's MCP server `ctx` (the project's "
                   ".mcp.json, or ~/.claude.json with --user). A plugin always declares it.")
@_AGENT
@format_option
@pass_env
def install_command(env: Env, scope: str, shared: bool, plugin_dir: str | None,
                    dry_run: bool, with_mcp: bool, agents: tuple[str, ...]) -> None:
    """Install the ctx skill and hooks into Claude Code (or write a plugin).

    Writes the skill to .claude/skills/ctx/SKILL.md and adds hooks for SessionStart,
    UserPromptSubmit, Stop, PreCompact and SessionEnd. Other settings and hooks are
    kept; a settings file ctx changes is first saved as <name>.bak; running it again
    changes nothing.

    For a project (--project, the default) the hooks in .claude/settings.json are
    portable: on every machine they run $CTX_BIN, else ctx on PATH, else
    ~/.local/bin/ctx, and without ctx they do nothing (exit 0) and say so at session
    start. This machine's ctx is set as CTX_BIN in .claude/settings.local.json, which is
    not committed (.claude/.gitignore lists it and ctx's backups). --local puts
    hooks with this ctx's absolute path in settings.local.json only. --user
    writes under ~/.claude (hooks by absolute path) and creates the user store ~/.ctx.

    A symbolic link anywhere under a project's .claude (or a plugin folder) is refused
    and nothing is written; under --user, links are followed and a linked settings.json
    is written through, so it stays a link. `ctx doctor` checks the result.

    --agent NAME registers `ctx mcp` with another agent instead (codex, gemini, cursor,
    claude-desktop, vscode, windsurf): merged into its own configuration file, comments
    and formatting kept, the file backed up first; `ctx uninstall --agent NAME` restores it.

    \b
    Examples:
        ctx install                 # this project, shared with the team through Git
        ctx install --project --local
        ctx install --user --dry-run
        ctx install --plugin ./ctx-plugin && claude --plugin-dir ./ctx-plugin
        ctx install --mcp           # and the MCP server in .mcp.json
        ctx install --agent codex --agent gemini   # their project files
        ctx install --agent claude-desktop         # user-only agents need no --user
    """
    if agents:
        from ctxstore.cli.agents import check_agent_options

        check_agent_options(agents, plugin_dir, with_mcp, not shared)
        _agents(env, agents, scope, dry_run=dry_run, remove=False)
        return

    prefix = _ctx_prefix()
    extra: dict[str, object] = {"command": prefix}
    if plugin_dir is not None:
        where, root = _plugin_path(plugin_dir)
        plan = plan_plugin(where, root=root)
        extra["plugin_dir"] = str(where)
        _report(env, plan, dry_run=dry_run, extra=extra, nothing="plugin is up to date",
                done=f"plugin written; run: claude --plugin-dir {where}  (or publish it: "
                     f"/plugin marketplace add {where}, then /plugin install ctx@ctx)")
        return
    if scope == "user" and not shared:
        raise InvalidInput("--local applies to --project installs only",
                           hint="--user settings are this machine's own already")
    claude = _claude_dir(env, scope)
    mode = "absolute" if scope == "user" else ("shared" if shared else "local")
    # Only the user's own ~/.claude may hold links (into a dotfiles repository, say); a
    # project's .claude may come from a clone, so nothing there is followed.
    plan = plan_install(claude, prefix, follow_links=scope == "user", mode=mode)
    if with_mcp:  # issue 16; a project's .mcp.json is committed: it names no path of this machine
        from ctxstore.claude.install import plan_mcp

        plan_mcp(plan, _mcp_config(claude, scope), prefix if scope == "user" else ["ctx"],
                 claude_json=scope == "user")
    project_store = scope == "project" and (claude.parent / ".ctx" / "HEAD").is_file()
    store, created = (claude.parent / ".ctx", False) if project_store else _user_store(dry_run)
    name = "settings.json" if mode != "local" else "settings.local.json"
    extra.update(scope=scope, mode=mode, settings=str(claude / name), store=str(store),
                 store_created=created)
    _report(env, plan, dry_run=dry_run, extra=extra,
            nothing=f"ctx is already installed ({scope}: {claude})",
            done=f"ctx installed ({scope}); Claude Code picks it up in its next session")
    if env.fmt == "json":
        return
    if created:
        click.echo(f"{'would create' if dry_run else 'created'} the user store {store}")
    if scope == "project" and not project_store:
        click.echo(f"note: no ctx store in {claude.parent} yet; run `ctx init` there "
                   f"(until then the hooks use the user store {store})")


@click.command("uninstall")
@_scope_options
@click.option("--plugin", "plugin_dir", type=click.Path(file_okay=False), default=None,
              help="Remove the plugin that `ctx install --plugin DIR` wrote instead.")
@click.option("--dry-run", is_flag=True, help="Print what would change and write nothing.")
@_AGENT
@format_option
@pass_env
def uninstall_command(env: Env, scope: str, plugin_dir: str | None, dry_run: bool,
                      agents: tuple[str, ...]) -> None:
    """Remove exactly what `ctx install` added: its hook entries and its skill file.

    Every other setting and hook stays as it is. A settings.json that ends up as it was
    before the install gets its backup's exact bytes back. With --plugin DIR, the files
    ctx wrote there go (and DIR, if nothing else is left in it).

    \b
    Examples:
        ctx uninstall
        ctx uninstall --user --dry-run
        ctx uninstall --plugin ./ctx-plugin
        ctx uninstall --agent codex   # ctx's server leaves .codex/config.toml
    """
    if agents:
        from ctxstore.cli.agents import check_agent_options

        check_agent_options(agents, plugin_dir, False, False)
        _agents(env, agents, scope, dry_run=dry_run, remove=True)
        return

    if plugin_dir is not None:
        where, root = _plugin_path(plugin_dir)
        _report(env, plan_unplugin(where, root=root), dry_run=dry_run, extra={"plugin_dir": str(where)},
                nothing=f"no ctx plugin in {where}", done=f"ctx plugin removed from {where}")
        return
    claude = _claude_dir(env, scope)
    plan = plan_uninstall(claude, follow_links=scope == "user")

    plan_unmcp(plan, _mcp_config(claude, scope), claude_json=scope == "user")
    _report(env, plan, dry_run=dry_run, extra={"scope": scope},
            nothing=f"ctx is not installed ({scope}: {claude})",
            done=f"ctx uninstalled ({scope})")
