"""The root ``ctx`` click group: lazy subcommands and the single error funnel.

``CtxGroup.invoke`` turns a ``CtxError`` into one line ``ctx: error[E00x]: ...`` and its
exit code, and anything unexpected into "internal error (rerun with --debug)". A closed
standard output (``ctx log | head -1``) ends the command quietly with exit status 141, as
git does (128 + SIGPIPE). Kept out of ``ctxstore.cli`` itself so that ``ctx hook EVENT``
never imports click. Also ``ctx help [COMMAND]`` (spec 002 §13.1).
"""

from __future__ import annotations

import errno
import importlib
import os
import sys
from collections.abc import Iterable
from typing import Any, NoReturn

import click

from ctxstore.cli.table import COMMANDS

__all__ = ["cli", "CtxGroup", "help_command", "nearest", "BROKEN_PIPE_EXIT"]

# Exit status when the reader of standard output went away: what a process killed by SIGPIPE
# reports (git's status for `git log | head -1`). Python ignores SIGPIPE, so we say it ourselves.
BROKEN_PIPE_EXIT = 141


def nearest(word: str, choices: Iterable[str]) -> str | None:
    """The choice closest to a misspelt ``word`` (``lsit`` -> ``list``), or None if none is close.

    Args:
        word: What was typed.
        choices: The valid words.

    Returns:
        The nearest valid word, or None.
    """
    import difflib

    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return close[0] if close else None


def _did_you_mean(word: str, choices: Iterable[str]) -> str:
    hint = nearest(word, choices)
    return f" Did you mean {hint!r}?" if hint else ""


def _end_quietly_on_broken_pipe() -> NoReturn:
    """The reader of stdout is gone: stop without a word, exit ``BROKEN_PIPE_EXIT``.

    Standard output is pointed at /dev/null first, so the flush at interpreter exit of what is
    still buffered cannot fail a second time ("Exception ignored ... BrokenPipeError").
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass  # not a real file (CliRunner), or already closed: nothing is left to flush there
    raise click.exceptions.Exit(BROKEN_PIPE_EXIT)


class CtxGroup(click.Group):
    """Root group: lazy subcommands and the single error funnel."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every command name, sorted, without importing any command module."""
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        """The command ``name``, importing its module only now; None if there is none."""
        spec = COMMANDS.get(name)
        if spec is None:
            return None
        module = importlib.import_module(spec[0])
        command: click.Command = getattr(module, spec[1])
        from ctxstore.cli import _collector

        _collector.resume()  # started: the command runs with the collector on
        return command

    def resolve_command(self, ctx: click.Context, args: list[str]
                        ) -> tuple[str | None, click.Command | None, list[str]]:
        """As click does, but an unknown command name suggests the nearest (``ctx lsit``).

        Raises:
            click.UsageError: for an unknown command (exit 2), with "Did you mean ...?".
        """
        name = args[0] if args else ""
        if name and not name.startswith("-") and name not in COMMANDS:
            raise click.UsageError(f"No such command {name!r}.{_did_you_mean(name, COMMANDS)}",
                                   ctx)
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """List the commands with their one-line help from ``COMMANDS`` (no module is imported)."""
        rows = [(name, COMMANDS[name][2]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def make_context(self, info_name: str | None, args: list[str],
                     parent: click.Context | None = None, **extra: Any) -> click.Context:
        """As click does; a usage error in the root options is one line (``_OneLineUsage``)."""
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as exc:
            raise _OneLineUsage.of(exc) from exc

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Refuse an argument that is not valid UTF-8 text, then parse as click does.

        Raises:
            InvalidInput: (E011, as a click error) if an argument is not valid UTF-8 text.
        """
        # Before any command runs: an argument that is not valid UTF-8 (Python hands it
        # over with lone surrogates, which no write can encode) is one clear error, so a
        # command never stages half its work and then fails (issue 11 item 12).
        if not all(_is_utf8(a) for a in args):
            try:
                bad = _undecodable_argument(self, ctx, args)
            except Exception:  # noqa: BLE001 - naming it is a courtesy, never a traceback
                i, arg = next((i, a) for i, a in enumerate(args, 1) if not _is_utf8(a))
                bad = (f"argument {i} of the command line", arg)
            if bad is not None:
                from ctxstore.errors import InvalidInput

                what, value = bad
                raise _CtxClickError(InvalidInput(
                    f"{what} is not valid UTF-8 text: {_shown(value)}",
                    hint="pass text as UTF-8 (only file paths may hold other bytes)"), ctx)
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; every error leaves as one ``ctx: error[E0xx]: ...`` line.

        Raises:
            click.ClickException: for a ``CtxError`` (its code and exit status), an ``OSError``
                (``StorageIOError``, E017) or any other exception (an internal error).
        """
        from ctxstore.cli import _notices
        from ctxstore.errors import CtxError, StorageIOError

        # The command line after the root options, and ~/.ctx before: for the notices.
        args = [*ctx.__dict__.get("_protected_args", ctx.__dict__.get("protected_args", [])),
                *ctx.args]
        user_before = _notices.pointer_state(_notices.user_store())
        try:
            result = super().invoke(ctx)
            _notices.after_success(ctx, args)  # a clone without the merge driver: once
            return result
        except click.exceptions.Exit:
            raise
        except click.UsageError as exc:  # a subcommand's options or arguments
            raise _OneLineUsage.of(exc) from exc
        except (click.ClickException, click.Abort):
            raise
        except CtxError as exc:
            if ctx.obj is not None:
                ctx.obj.failed(exc)  # a damaged index cell: the next command rebuilds
            _notices.add_stage_hint(exc, ctx, args)  # a dangling STAGE: `ctx stage recover`
            raise _CtxClickError(exc, ctx) from exc
        except OSError as exc:
            if isinstance(exc, BrokenPipeError) or exc.errno == errno.EPIPE:
                _end_quietly_on_broken_pipe()
            err = StorageIOError(exc.filename or "?", op="I/O", error=exc)
            raise _CtxClickError(err, ctx) from exc
        except MemoryError as exc:  # a limit on the process's memory: a clear E010, not a crash
            from ctxstore.errors import OutOfMemory

            doing = " ".join(["ctx", *(str(a) for a in args[:1])])
            raise _CtxClickError(OutOfMemory(f"running `{doing}`"), ctx) from exc
        except Exception as exc:  # the funnel: no traceback unless asked for
            raise _InternalError(exc, ctx) from exc
        finally:
            common = sys.modules.get("ctxstore.cli._common")  # a bar left open by an error
            if common is not None:
                common.finish_progress()
            for repair in _take_index_repairs(ctx):  # a damaged index was rebuilt: say so once
                click.echo(f"ctx: {repair.message()}", err=True)
            _notices.after_command(ctx, args, user_before)  # wrote to ~/.ctx: say so


def _take_index_repairs(ctx: click.Context) -> list[Any]:
    """The repairs of a damaged index this command's session made (none without a session)."""
    session = getattr(ctx.obj, "_session", None)
    return session.take_repairs() if session is not None else []


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _shown(text: str) -> str:
    """The bytes of an argument, printable: ``b'\\xff'`` (surrogateescape gives them back)."""
    try:
        shown = repr(text.encode("utf-8", "surrogateescape"))
    except UnicodeEncodeError:
        shown = ascii(text)
    return shown if len(shown) <= 60 else shown[:57] + "..."


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, (tuple, list)):
        return [s for item in value for s in _strings(item)]
    return []


def _undecodable_argument(group: click.Group, ctx: click.Context, args: list[str]
                          ) -> tuple[str, str] | None:
    """The first argument holding text that is not valid UTF-8, as (its name, its value).

    None when every such argument is a file path (``click.Path``: any bytes are a valid name on
    POSIX) or belongs to ``ctx hook``, which never fails on its input.

    The command line is parsed leniently once more to learn which parameter each value
    fills: ``resilient_parsing`` raises no usage error and runs no command.
    """
    allowed: list[str] = []
    value_options: set[str] = set()  # options of the commands on the way that take a value

    def check(cmd: click.Command, sub: click.Context) -> tuple[str, str] | None:
        value_options.update(o for p in cmd.params if isinstance(p, click.Option) and not p.is_flag
                             for o in p.opts)
        for param in cmd.params:
            for text in _strings(sub.params.get(param.name or "")):
                if _is_utf8(text):
                    continue
                if isinstance(param.type, click.Path):
                    allowed.append(text)
                    continue
                if isinstance(param, click.Option):
                    return f"the value of {max(param.opts, key=len)}", text
                return f"the argument {param.human_readable_name}", text
        return None

    cmd: click.Command | None = group
    sub = click.Context(group, info_name=ctx.info_name, resilient_parsing=True)
    rest = click.Group.parse_args(group, sub, list(args))
    while cmd is not None:
        if (found := check(cmd, sub)) is not None:
            return found
        if not isinstance(cmd, click.Group):
            break
        # click 8.2+ keeps the subcommand name in ``_protected_args``, older in ``protected_args``
        protected = sub.__dict__.get("_protected_args", sub.__dict__.get("protected_args", []))
        rest = [*protected, *rest]
        if not rest:
            break
        name, nxt, rest = cmd.resolve_command(sub, rest)
        if nxt is None:
            break
        if name == "hook":
            return None
        sub = nxt.make_context(name, list(rest), parent=sub, resilient_parsing=True)
        rest = list(sub.args)
        cmd = nxt
    # Not attributed above (a value its type refused, e.g. `--limit`, or a stray word):
    # name the option it follows, or its position.
    for i, arg in enumerate(args):
        if _is_utf8(arg) or any(text in arg for text in allowed):
            continue
        option = arg.split("=", 1)[0] if arg.startswith("-") and "=" in arg else \
            args[i - 1] if i and args[i - 1] in value_options else None
        if option in value_options:
            return f"the value of {option}", arg
        return f"argument {i + 1} of the command line", arg
    return None


def _debug_enabled(ctx: click.Context) -> bool:
    root = ctx.find_root()
    return bool(root.params.get("debug")) or os.environ.get("CTX_DEBUG") == "1"


class _CtxClickError(click.ClickException):
    def __init__(self, error: Any, ctx: click.Context) -> None:
        super().__init__(error.message)
        self.error = error
        # click declares exit_code a class variable (8.5+); this error's code is per instance.
        vars(self)["exit_code"] = error.exit_code
        self._debug = _debug_enabled(ctx)

    def show(self, file: Any = None) -> None:
        if self._debug:
            import traceback

            traceback.print_exception(self.error, file=sys.stderr)
        from ctxstore.cli._render import shown

        line = f"ctx: error[{self.error.code}]: {self.error.message}"
        if self.error.hint:
            line += f" (hint: {self.error.hint})"
        # A message may quote what a server, a compiler or a file said: its escape sequences
        # never reach the terminal, its <ctx:...> tags never reach an agent reading stderr.
        click.echo(shown(line.replace("\n", " "), terminal=True), err=True)


class _OneLineUsage(click.UsageError):
    """A usage error (exit 2) as one line: ``ctx: error: MESSAGE (see 'ctx CMD --help')``.

    click prints three (the usage, a hint, the error); a script reading stderr gets one, as
    for every other error.
    """

    @classmethod
    def of(cls, exc: click.UsageError) -> click.UsageError:
        if isinstance(exc, cls) or type(exc).__name__ == "NoArgsIsHelpError":
            return exc  # a group without its command shows its help, as click does
        out = cls(exc.format_message(), exc.ctx)
        vars(out)["exit_code"] = exc.exit_code
        return out

    def show(self, file: Any = None) -> None:
        path = " ".join(["ctx", *self.ctx.command_path.split()[1:]]) if self.ctx else "ctx"
        where = f" (see '{path} --help')"
        click.echo(f"ctx: error: {self.format_message()}{where}".replace("\n", " "), err=True)


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
    ctx.call_on_close(ctx.obj.close)


@click.command("help")
@click.argument("names", nargs=-1, metavar="[COMMAND]...")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown"]), default=None,
              help="text (as `ctx COMMAND --help`), json (name, summary, usage, arguments, "
                   "options, subcommands) or markdown (default: the global --format).")
@click.pass_context
def help_command(ctx: click.Context, names: tuple[str, ...], fmt: str | None) -> None:
    """Show the help of ctx, or of a command (the same text as `ctx COMMAND --help`).

    Without a command, the help of ctx itself, which lists every command. `--format json`
    gives the help as data: the command's name, summary, usage, arguments and options
    (flags, type, default, help, whether required, choices) and, for a group, its commands.
    `--format markdown` renders the help as Markdown.

    \b
    Examples:
        ctx help
        ctx help add
        ctx help view render
        ctx help pack --format json
        ctx help --format markdown
    """
    # An unknown name is InvalidInput (E011): one line with the nearest command.
    from ctxstore.errors import InvalidInput

    sub = ctx.find_root()
    cmd = sub.command
    for i, name in enumerate(names):
        found = cmd.get_command(sub, name) if isinstance(cmd, click.Group) else None
        if found is None:
            path = " ".join(names[: i + 1])
            choices = cmd.list_commands(sub) if isinstance(cmd, click.Group) else []
            hint = nearest(name, choices)
            raise InvalidInput(f"no such command: {path}",
                               hint=f"did you mean `ctx help {' '.join((*names[:i], hint))}`?"
                               if hint else "`ctx help` lists the commands")
        sub = click.Context(found, info_name=name, parent=sub)
        cmd = found
    chosen = fmt or ctx.find_root().params.get("fmt") or "text"  # the global --format
    if chosen == "text":
        click.echo(cmd.get_help(sub))
        return
    from ctxstore.cli._help import help_document, help_markdown

    if chosen == "json":
        import json

        click.echo(json.dumps(help_document(cmd, sub), indent=2, ensure_ascii=False))
    else:
        click.echo(help_markdown(cmd, sub), nl=False)
