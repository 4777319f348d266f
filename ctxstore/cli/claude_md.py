"""``ctx claude-md`` and ``ctx agents-md``: the ranked memory section in CLAUDE.md or AGENTS.md."""

from __future__ import annotations

import os
from pathlib import Path

import click

from ctxstore.claude.claudemd import write_claude_md
from ctxstore.cli._common import Env, emit_json, format_option, pass_env


def _write(env: Env, path: str | None, lines: int | None, kind: str) -> None:

    target = None if path is None else Path(os.getcwd()) / path
    written = write_claude_md(env.session(), target, lines, kind="agents" if kind == "agents" else "claude")
    if env.fmt == "json":
        emit_json({"path": str(written.path), "changed": written.changed, "lines": written.lines})
        return
    click.echo(f"{'updated' if written.changed else 'unchanged'}: {written.path}")


_LINES = click.option("--lines", type=int, default=None,
                      help="Line budget of the section (default: [claude] claude_md_lines, 80).")


@click.command("claude-md")
@click.option("--path", "path", type=click.Path(dir_okay=False), default=None,
              help="The file to write (default: [claude] claude_md_path of config.toml, "
                   "CLAUDE.md at the repository root).")
@_LINES
@format_option
@pass_env
def claude_md_command(env: Env, path: str | None, lines: int | None) -> None:
    """Write the ranked project-memory section of CLAUDE.md.

    The section sits between `<!-- ctx:memory begin ... -->` and `<!-- ctx:memory end -->`;
    everything outside the markers stays exactly as it is. The file is created if
    missing, and a run that would change nothing writes nothing. Memories are ranked by
    confidence, priority, centrality and access count, within per-type line budgets.
    `ctx agents-md` writes the same section into AGENTS.md, for other agents.

    \b
    Examples:
        ctx claude-md
        ctx claude-md --path docs/CLAUDE.md --lines 40
    """
    _write(env, path, lines, "claude")


@click.command("agents-md")
@click.option("--path", "path", type=click.Path(dir_okay=False), default=None,
              help="The file to write (default: [claude] agents_md_path of config.toml, "
                   "AGENTS.md at the repository root).")
@_LINES
@format_option
@pass_env
def agents_md_command(env: Env, path: str | None, lines: int | None) -> None:
    """Write the ranked project-memory section of AGENTS.md (Codex CLI, Gemini CLI, Cursor, VS Code).

    The same section as `ctx claude-md`, between the same markers; everything outside
    them stays exactly as it is, and a run that would change nothing writes nothing. The
    default file is `[claude] agents_md_path` (AGENTS.md), confined to the repository like
    `claude_md_path`. With `[claude] agents_md_on_stop = true` the Stop hook keeps it
    current too, once you consent to those values in a clone (`ctx trust`).

    \b
    Examples:
        ctx agents-md
        ctx agents-md --path docs/AGENTS.md --lines 40
        ctx agents-md --format json
    """
    _write(env, path, lines, "agents")
