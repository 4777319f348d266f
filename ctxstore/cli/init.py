"""``ctx init``."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import click

from ctxstore.cli._common import Env, emit_json, format_option, pass_env
from ctxstore.init import CONFIG_TEMPLATES, default_ctx_dir, init_store


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
@click.option("--here", is_flag=True, help="Create .ctx/ in the current directory even inside a "
              "Git work tree (default: at the work tree's root).")
@click.option("--template", default=None, metavar="NAME|PATH",
              help="Configuration template for config.toml: default, solo, team, large, or the "
                   "path of a config.toml (or a .ctx directory) to copy settings from.")
@format_option
@pass_env
def init_command(env: Env, force: bool, no_git: bool, here: bool, template: str | None) -> None:
    """Create a .ctx/ store at the Git repository's root (or here, or at --ctx-dir).

    Writes the layout, config.toml with defaults (or a --template's settings),
    .gitignore, .gitattributes and an initial commit. Inside a Git work tree the store
    goes to the root of the work tree, wherever you run it (--here: the current
    directory); ctx also registers the pointer merge driver and stages .ctx/ for your
    next Git commit. In a fresh clone of a repository with a store, it only registers
    the merge driver.

    \b
    Templates (--template):
        default  ctx's defaults
        solo     one person, one clone: gc reclaims unreachable objects after a day
        team     shared through Git: unreachable objects kept 30 days, 30 s lock wait
        large    zstd level 9 objects, a larger default context budget
        PATH     the settings of another config.toml (or .ctx directory)

    \b
    Examples:
        git init demo && cd demo && ctx init
        ctx init --template team
    """
    target = Path(env.ctx_dir) if env.ctx_dir else default_ctx_dir(Path(os.getcwd()), here=here)
    res = init_store(target, force=force, git=not no_git, ctx_command=_ctx_command(),
                     template=template)
    if env.fmt == "json":
        emit_json({"ctx_dir": str(res.ctx_dir), "reinitialized": res.reinitialized,
                   "commit": res.commit.hex() if res.commit else None,
                   "git_toplevel": str(res.git_toplevel) if res.git_toplevel else None,
                   "template": res.template,
                   "git_actions": res.git_actions, "notes": res.notes})
        return
    verb = "Reinitialized" if res.reinitialized else "Initialized"
    click.echo(f"{verb} ctx store in {res.ctx_dir}" + (f" (template {res.template})"
                                                        if res.template in CONFIG_TEMPLATES else ""))
    if res.commit:
        click.echo(f"initial commit {res.commit.hex()}")
    for line in res.git_actions + res.notes:
        click.echo(f"  {line}")
