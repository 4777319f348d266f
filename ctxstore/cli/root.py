"""The root ``ctx`` click group: lazy subcommands and the single error funnel.

``CtxGroup.invoke`` turns a ``CtxError`` into one line ``ctx: error[E00x]: ...`` and its
exit code, and anything unexpected into "internal error (rerun with --debug)". Kept out
of ``ctxstore.cli`` itself so that ``ctx hook EVENT`` never imports click.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

import click

from ctxstore.cli import COMMANDS

__all__ = ["cli", "CtxGroup"]


class CtxGroup(click.Group):
    """Root group: lazy subcommands and the single error funnel."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        spec = COMMANDS.get(name)
        if spec is None:
            return None
        module = importlib.import_module(spec[0])
        return getattr(module, spec[1])

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][2]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> Any:
        from ctxstore.errors import CtxError, StorageIOError

        try:
            return super().invoke(ctx)
        except click.exceptions.Exit:
            raise
        except (click.ClickException, click.Abort):
            raise
        except CtxError as exc:
            raise _CtxClickError(exc, ctx) from exc
        except OSError as exc:
            err = StorageIOError(exc.filename or "?", op="I/O", error=exc)
            raise _CtxClickError(err, ctx) from exc
        except Exception as exc:  # the funnel: no traceback unless asked for
            raise _InternalError(exc, ctx) from exc


def _debug_enabled(ctx: click.Context) -> bool:
    root = ctx.find_root()
    return bool(root.params.get("debug")) or os.environ.get("CTX_DEBUG") == "1"


class _CtxClickError(click.ClickException):
    def __init__(self, error: Any, ctx: click.Context) -> None:
        super().__init__(error.message)
        self.error = error
        self.exit_code = error.exit_code
        self._debug = _debug_enabled(ctx)

    def show(self, file: Any = None) -> None:
        if self._debug:
            import traceback

            traceback.print_exception(self.error, file=sys.stderr)
        line = f"ctx: error[{self.error.code}]: {self.error.message}"
        if self.error.hint:
            line += f" (hint: {self.error.hint})"
        click.echo(line.replace("\n", " "), err=True)


class _InternalError(click.ClickException):
    exit_code = 1

    def __init__(self, exc: BaseException, ctx: click.Context) -> None:
        super().__init__(str(exc))
        self.exc = exc
        self._debug = _debug_enabled(ctx)

    def show(self, file: Any = None) -> None:
        if self._debug:
            import traceback

            traceback.print_exception(self.exc, file=sys.stderr)
        click.echo(f"ctx: internal error: {type(self.exc).__name__} (rerun with --debug)", err=True)


@click.group(cls=CtxGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--ctx-dir", "ctx_dir", type=click.Path(file_okay=False), default=None,
              envvar="CTX_DIR", help="The .ctx directory to use (default: the nearest .ctx/ "
              "above the current directory, else the user store ~/.ctx; env CTX_DIR).")
@click.option("--db", "db", type=click.Path(file_okay=False), default=None, envvar="CTX_DB",
              help="Alias of --ctx-dir (env CTX_DB), as in spec 000.")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown"]), default="text",
              help="Output format of read commands.")
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.version_option(package_name="ctxstore", prog_name="ctx")
@click.pass_context
def cli(ctx: click.Context, ctx_dir: str | None, db: str | None, fmt: str, debug: bool) -> None:
    """ctx: persistent, Git-friendly memory for coding agents.

    \b
    Example:
        ctx init && ctx add --type fact "We use SQLite in WAL mode" && ctx commit -m "first fact"
    """
    from ctxstore.cli._common import Env

    ctx.obj = Env(ctx_dir=ctx_dir or db, fmt=fmt, debug=debug)
