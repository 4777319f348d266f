"""``ctx ui``: the memory browser on 127.0.0.1, or its pages exported as files (docs/ui.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ctxstore.cli._common import Env, emit_json, format_option, pass_env, plural
from ctxstore.cli._notices import user_store
from ctxstore.errors import InvalidInput
from ctxstore.ui.export import export_pages
from ctxstore.ui.server import UiServer


@click.command("ui")
@click.option("--no-open", is_flag=True, help="Print the URL only; do not open a browser.")
@click.option("--export", "export_dir", default=None, metavar="DIR",
              type=click.Path(file_okay=False, path_type=Path),
              help="Write the pages as files into DIR (new, empty, or an earlier export), with "
                   "the data embedded, instead of serving them.")
@click.option("--pack", "packs", multiple=True, metavar="TASK",
              help="With --export: embed the prompt pack of TASK in the pack explorer "
                   "(repeatable).")
@format_option
@pass_env
def ui_command(env: Env, no_open: bool, export_dir: Path | None, packs: tuple[str, ...]) -> None:
    """Browse the memory in a web page: timeline, nodes, graph, packs, transcripts.

    Serves a read-only browser on 127.0.0.1 (a free port, a random token in the URL: anyone
    without the URL gets 403) and opens it in your browser; Ctrl-C stops it. The pages:
    the timeline of decisions, tasks, notes, commits and sessions; a node with its
    history, edges, evidence and stale mentions; the knowledge and code graph with its import
    cycles; a pack explorer (a task's items, why each, and the budget); transcript topics and
    search. Nothing is written to the store. --export DIR writes the same pages as files
    that open from disk. See docs/ui.md.

    \b
    Examples:
        ctx ui
        ctx ui --no-open
        ctx ui --export ctx-site --pack "fix the retry loop"
    """
    if packs and export_dir is None:
        raise InvalidInput("--pack goes with --export (the live pack explorer builds any task)")
    if export_dir is not None:
        _export(env, export_dir, packs)
        return

    server = UiServer.start(env.store_path())
    try:
        if env.fmt == "json":
            emit_json({"url": server.url, "store": str(env.store_path())})
        else:
            click.echo(server.url)
        sys.stdout.flush()  # a script reading the URL gets it now, not when the server stops
        if not no_open:
            import webbrowser

            if not webbrowser.open(server.url):
                click.echo("ctx: note: no browser could be opened; open the URL above",
                           err=True)
        click.echo(f"ctx ui: serving {env.store_path()} on 127.0.0.1 (read-only); press "
                   "Ctrl-C to stop", err=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            click.echo("", err=True)
    finally:
        server.close()


def _export(env: Env, directory: Path, packs: tuple[str, ...]) -> None:

    result = export_pages(env.session(), directory, packs=packs, also=[user_store()])
    if env.fmt == "json":
        emit_json({"directory": str(result.directory), "files": result.files,
                   "node_pages": result.node_pages, "packs": result.packs,
                   "left_out": result.left_out})
        return
    click.echo(f"exported {plural(result.node_pages, 'node page')} and "
               f"{plural(result.packs, 'pack')} in {plural(result.files, 'file')} to "
               f"{result.directory}; open {result.directory / 'index.html'}")
    if result.left_out:
        click.echo(f"ctx: note: {plural(result.left_out, 'page')} past the export's limit "
                   "were left out; `ctx ui` shows them", err=True)
