"""``ctx claude-md``."""

from __future__ import annotations

import os
from pathlib import Path

import click

from ctxstore.cli._common import Env, emit_json, format_option, pass_env


@click.command("claude-md")
@click.option("--path", "path", type=click.Path(dir_okay=False), default=None,
              help="The file to write (default: [claude] claude_md_path of config.toml, "
                   "CLAUDE.md at the repository root).")
@click.option("--lines", type=int, default=None,
              help="Line budget of the section (default: [claude] claude_md_lines, 80).")
@format_option
@pass_env
def claude_md_command(env: Env, path: str | None, lines: int | None) -> None:
    """Write the ranked project-memory section of CLAUDE.md.

    The section sits between `<!-- ctx:memory begin ... -->` and `<!-- ctx:memory end -->`;
    everything outside the markers stays exactly as it is. The file is created if
    missing, and a run that would change nothing writes nothing. Memories are ranked by
    confidence, priority, centrality and access count, within per-type line budgets.

    \b
    Examples:
        ctx claude-md
        ctx claude-md --path docs/CLAUDE.md --lines 40
    """
    from ctxstore.claude.claudemd import write_claude_md

    target = None if path is None else Path(os.getcwd()) / path
    written = write_claude_md(env.session(), target, lines)
    if env.fmt == "json":
        emit_json({"path": str(written.path), "changed": written.changed, "lines": written.lines})
        return
    click.echo(f"{'updated' if written.changed else 'unchanged'}: {written.path}")
