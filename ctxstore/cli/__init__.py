"""The ``ctx`` command: a thin click layer over the library.

Only this package reads the environment, argv, stdin and the terminal. Commands are
loaded lazily (``--help`` and hot commands import only what they use), and every
error goes through one funnel: ``CtxGroup.invoke`` turns a ``CtxError`` into one line
``ctx: error[E00x]: ...`` and its exit code, and anything unexpected into
"internal error (rerun with --debug)".
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

import click

__all__ = ["cli", "main", "COMMANDS"]

# name -> (module, attribute, one-line help). Help text lives here too so that
# `ctx --help` does not import every command module.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "init": ("ctxstore.cli.init", "init_command", "Create a .ctx/ store here."),
    "add": ("ctxstore.cli.nodes", "add_command", "Add a knowledge node."),
    "show": ("ctxstore.cli.nodes", "show_command", "Show a node."),
    "update": ("ctxstore.cli.nodes", "update_command", "Write a new version of a node."),
    "delete": ("ctxstore.cli.nodes", "delete_command", "Delete a node (and its edges)."),
    "list": ("ctxstore.cli.nodes", "list_command", "List nodes."),
    "link": ("ctxstore.cli.edges", "link_command", "Link two nodes."),
    "unlink": ("ctxstore.cli.edges", "unlink_command", "Remove edges between two nodes."),
    "edges": ("ctxstore.cli.edges", "edges_command", "Show a node's edges."),
    "tag": ("ctxstore.cli.tags", "tag_command", "Add tags to a node."),
    "untag": ("ctxstore.cli.tags", "untag_command", "Remove tags from a node."),
    "tags": ("ctxstore.cli.tags", "tags_command", "List tags with counts."),
    "search": ("ctxstore.cli.search", "search_command", "Full-text search."),
    "query": ("ctxstore.cli.search", "query_command", "Query nodes with the query language."),
    "trace": ("ctxstore.cli.search", "trace_command", "Show provenance (what a node derives from)."),
    "related": ("ctxstore.cli.search", "related_command", "Nodes within N edges of a node."),
    "summarize": ("ctxstore.cli.nodes", "summarize_command", "Summarize nodes into a new one."),
    "supersede": ("ctxstore.cli.nodes", "supersede_command", "Mark a node superseded by another."),
    "view": ("ctxstore.cli.views", "view_group", "Manage saved views."),
    "compose": ("ctxstore.cli.views", "compose_command", "Compose context within a token budget."),
    "status": ("ctxstore.cli.status", "status_command", "Show what the store holds."),
    "export": ("ctxstore.cli.exchange", "export_command", "Export nodes, edges and views as JSON."),
    "import": ("ctxstore.cli.exchange", "import_command", "Import a JSON export."),
    "ingest": ("ctxstore.cli.exchange", "ingest_command", "Ingest a file as a source node."),
    "rebuild": ("ctxstore.cli.rebuild", "rebuild_command", "Rebuild the derived index."),
    "commit": ("ctxstore.cli.commit", "commit_command", "Fold staged work into a commit."),
    "stage": ("ctxstore.cli.stage", "stage_group", "Manage the staging session."),
    "log": ("ctxstore.cli.log", "log_command", "Show the commit history."),
    "gc": ("ctxstore.cli.gc", "gc_command", "Delete unreachable objects."),
    "debug": ("ctxstore.cli.debug", "debug_group", "Inspect objects, refs and integrity."),
    "merge-ref": ("ctxstore.cli.merge_ref", "merge_ref_command",
                  "Git merge driver for ctx pointer files."),
    "hook": ("ctxstore.cli.hook", "hook_group", "Claude Code hook entry points (JSON in, JSON out)."),
    "install": ("ctxstore.cli.install", "install_command",
                "Install the Claude Code skill and hooks (or a plugin)."),
    "uninstall": ("ctxstore.cli.install", "uninstall_command",
                  "Remove exactly what `ctx install` added."),
    "claude-md": ("ctxstore.cli.claude_md", "claude_md_command",
                  "Write the ranked project-memory section of CLAUDE.md."),
}


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


def main() -> None:
    """Console-script entry point (``ctx hook EVENT`` takes a fast path: hooks run on every prompt)."""
    if sys.argv[1:2] == ["hook"]:
        from ctxstore.cli.hook import fast_main

        if (code := fast_main(sys.argv[2:])) is not None:
            sys.exit(code)
    cli(prog_name="ctx")
