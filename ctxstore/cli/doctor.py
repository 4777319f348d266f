"""``ctx doctor``: one line per check of the setup, each with its fix (ctxstore.claude.doctor)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import click

import ctxstore
from ctxstore.claude.doctor import Setup, run_checks
from ctxstore.claude.install import resolve_ctx_command
from ctxstore.cli._common import Env, emit_json, format_option, pass_env


@click.command("doctor")
@format_option
@pass_env
def doctor_command(env: Env) -> None:
    """Check everything that silently breaks a ctx setup; print each fix.

    One line per check: the hooks are installed (project settings, local settings,
    ~/.claude or a plugin) and find a working ctx of this version (on the hooks' PATH,
    as CTX_BIN or by absolute path), the store is found from the repository root, the
    merge driver is registered in this clone, the index is current (brought up to
    date if it is behind), `ctx mcp` starts and answers tools/list, and the installed
    skill and plugin match this ctx.
    Exit status 0 when every check passes, 1 otherwise.

    \b
    Examples:
        ctx doctor
        ctx doctor --format json | jq '.checks[] | select(.ok | not)'
    """
    configured = os.environ.get("CLAUDE_CONFIG_DIR")
    home = Path(os.path.expanduser("~"))
    setup = Setup(cwd=Path(os.getcwd()), home=home,
                  claude_config=Path(configured) if configured else home / ".claude",
                  path=os.environ.get("PATH", os.defpath), ctx_bin=os.environ.get("CTX_BIN") or None,
                  ctx_dir=env.ctx_dir, version=ctxstore.__version__,
                  ctx_command=tuple(resolve_ctx_command(sys.executable, shutil.which("ctx"))))
    checks = run_checks(setup)
    ok = all(c.ok for c in checks)
    if env.fmt == "json":
        emit_json({"ok": ok, "checks": [c.as_dict() for c in checks]})
    else:
        width = max(len(c.name) for c in checks)
        for c in checks:
            line = f"{'ok  ' if c.ok else 'FAIL'}  {c.name:<{width}}  {c.detail}"
            click.echo(line + (f"  -> fix: {c.fix}" if c.fix and not c.ok else ""))
        click.echo("all checks passed" if ok else
                   f"{sum(not c.ok for c in checks)} of {len(checks)} checks failed")
    if not ok:
        raise click.exceptions.Exit(1)
