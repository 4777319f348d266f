"""``ctx init``."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import click

from ctxstore.cli._common import Env, emit_json, format_option, pass_env


def _ctx_command() -> str:
    # The merge driver runs `ctx` by absolute path: a version-manager shim on PATH
    # would cost every merge (and hook) its start-up time.
    argv0 = Path(sys.argv[0])
    if argv0.name == "ctx" and argv0.exists():
        return str(argv0.resolve())
    found = shutil.which("ctx")
    return str(Path(found).resolve()) if found else "ctx"


@click.command("init")
@click.option("--force", is_flag=True, help="Re-initialise an existing store's layout files "
              "(config, .gitignore, .gitattributes); objects and history are kept.")
@click.option("--no-git", is_flag=True, help="Do not register the merge driver or `git add` .ctx.")
@format_option
@pass_env
def init_command(env: Env, force: bool, no_git: bool) -> None:
    """Create a .ctx/ store in the current directory (or at --ctx-dir).

    Writes the layout, config.toml with defaults, .gitignore, .gitattributes and an
    initial commit. Inside a Git work tree it registers the pointer merge driver and
    stages .ctx/ for your next Git commit.

    \b
    Example:
        git init demo && cd demo && ctx init
    """
    from ctxstore.init import init_store

    target = Path(env.ctx_dir) if env.ctx_dir else Path(os.getcwd()) / ".ctx"
    res = init_store(target, force=force, git=not no_git, ctx_command=_ctx_command())
    if env.fmt == "json":
        emit_json({"ctx_dir": str(res.ctx_dir), "reinitialized": res.reinitialized,
                   "commit": res.commit.hex() if res.commit else None,
                   "git_toplevel": str(res.git_toplevel) if res.git_toplevel else None,
                   "git_actions": res.git_actions, "notes": res.notes})
        return
    verb = "Reinitialized" if res.reinitialized else "Initialized"
    click.echo(f"{verb} ctx store in {res.ctx_dir}")
    if res.commit:
        click.echo(f"initial commit {res.commit.hex()}")
    for line in res.git_actions + res.notes:
        click.echo(f"  {line}")
