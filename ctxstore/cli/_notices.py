"""One-line notices the root group prints on stderr around a command (``root.CtxGroup.invoke``).

* the merge driver is not registered in this clone: once per clone, after a command that
  succeeded (``git.driver_warning``);
* the command wrote to the user store ``~/.ctx`` because there is no project store: once
  per command, so memory never lands there unnoticed;
* an E001/E004/E005/E009 error caused by a dangling STAGE gets the hint to run
  ``ctx stage recover`` (``history.stage.needs_recover``).

Notices never fail a command: whatever goes wrong while looking is ignored.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

__all__ = ["user_store", "pointer_state", "after_command", "after_success", "add_stage_hint"]

# Commands after which no notice is given: `init` registers the driver itself, `merge-ref`
# runs inside Git's merge, `hook` prints only JSON.
_QUIET = ("init", "merge-ref", "hook")
_RECOVER_CODES = ("E001", "E004", "E005", "E009")


def user_store() -> Path:
    """The user store ``~/.ctx`` (the store of commands run outside any project)."""
    return Path(os.path.expanduser("~")) / ".ctx"


def pointer_state(ctx_dir: Path) -> tuple[bytes | None, ...]:
    """The bytes of a store's HEAD, refs/main and STAGE, local and legacy (None where missing)."""
    from ctxstore import fsio
    from ctxstore.errors import CtxError

    out: list[bytes | None] = []
    for name in ("HEAD", "refs/main", "local/STAGE", "STAGE"):
        try:
            out.append(fsio.read_regular(ctx_dir / name, 4096))  # bounded, never a FIFO
        except (OSError, CtxError):
            out.append(None)
    return tuple(out)


def _command_name(args: list[str]) -> str | None:
    return next((a for a in args if not a.startswith("-")), None)


def after_command(ctx: click.Context, args: list[str], before: tuple[bytes | None, ...]) -> None:
    """Say that the command wrote to the user store ``~/.ctx`` (there is no project store).

    Called whether the command succeeded or not.

    Args:
        ctx: The root context (its ``obj`` is the command's ``Env``).
        args: The command line after the root options (``stage commit ...``).
        before: ``pointer_state(user_store())`` before the command ran.
    """
    env: Any = ctx.obj
    if env is None or getattr(env, "_session", None) is None or _command_name(args) in _QUIET:
        return
    try:
        if env.kind == "user" and pointer_state(user_store()) != before:
            click.echo("ctx: writing to the user store ~/.ctx (no .ctx/ project store "
                       "here or above; `ctx init` at a repository's root starts one)", err=True)
    except Exception:  # noqa: BLE001 - a notice never fails the command
        return


def after_success(ctx: click.Context, args: list[str]) -> None:
    """Warn, once per clone, that this clone lacks the merge driver (``git.driver_warning``).

    After a command that succeeded on a project store, so that an error stays the one line
    a failing command prints.

    Args:
        ctx: The root context (its ``obj`` is the command's ``Env``).
        args: The command line after the root options.
    """
    env: Any = ctx.obj
    session = getattr(env, "_session", None)
    if session is None or env.kind == "user" or _command_name(args) in _QUIET:
        return
    try:
        from ctxstore.git import driver_warning

        warning = driver_warning(Path(session.root))
    except Exception:  # noqa: BLE001 - a notice never fails the command
        return
    if warning:
        click.echo(f"ctx: warning: {warning}", err=True)


def add_stage_hint(exc: Any, ctx: click.Context, args: list[str]) -> None:
    """Point an error that a dangling STAGE caused at ``ctx stage recover`` (sets its hint).

    Only for E001, E004, E005 and E009, when STAGE is unreadable or its staging chain has a
    missing or damaged work commit; never for ``ctx stage recover`` itself.

    Args:
        exc: The ``CtxError`` the command raised.
        ctx: The root context.
        args: The command line after the root options.
    """
    if exc.code not in _RECOVER_CODES or "stage recover" in f"{exc.message} {exc.hint or ''}":
        return
    if args[:2] == ["stage", "recover"] or "recover" in args:
        return
    env: Any = ctx.obj
    try:
        from ctxstore.history.stage import needs_recover
        from ctxstore.repo import STAGE_RECOVER_HINT, discover_store, open_store

        session = getattr(env, "_session", None)
        if session is not None:
            root = Path(session.root)
        elif env is not None and env.ctx_dir:
            root = Path(env.ctx_dir)
        else:
            root = discover_store(Path(os.getcwd()), user_store=user_store())
        if needs_recover(open_store(root)):
            exc.hint = STAGE_RECOVER_HINT
    except Exception:  # noqa: BLE001 - the error itself is what gets reported
        return
