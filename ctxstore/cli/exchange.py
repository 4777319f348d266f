"""Exchange commands: export, import, ingest."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click

from ctxstore.cli._common import (
    Env,
    emit_json,
    format_option,
    output_option,
    pass_env,
    plural,
    write_output,
)
from ctxstore.errors import InvalidInput
from ctxstore.knowledge.exchange import (
    MAX_DOCUMENT_BYTES,
    export_document,
    import_document,
    read_document_file,
)
from ctxstore.knowledge.sources import ingest_file


@click.command("export")
@click.option("--query", default=None, metavar="QUERY",
              help="Export only the nodes this query selects (and the edges between them; "
                   "views are exported only by a full export).")
@click.option("--include-superseded", is_flag=True,
              help="With --query, also export superseded nodes the query matches.")
@output_option("the document")
@format_option
@pass_env
def export_command(env: Env, query: str | None, include_superseded: bool,
                   output: str | None) -> None:
    """Export nodes, edges and views as one JSON document (format "ctx-export", version 1).

    Times are UTC with milliseconds, so `ctx import` of the output into an empty store
    followed by `ctx export` gives the same document. The document is JSON whatever
    --format says (the option is accepted, as by every command).

    \b
    Examples:
        ctx export > backup.json
        ctx export --query "tag:project:viberent" --output project.json
    """
    conn = env.index()
    node_ids = None
    if query is not None:
        from ctxstore.query.executor import run_query

        nodes = run_query(conn, query, now=time.time(), include_superseded=include_superseded)
        node_ids = [n.id for n in nodes]
    doc = export_document(conn, node_ids=node_ids)
    write_output(env, output, (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode())


@click.command("import")
@click.option("--merge", is_flag=True,
              help="Skip nodes, edges and views the store already has instead of failing.")
@click.argument("file", required=False, metavar="[FILE]")
@click.option("--allow-secret", is_flag=True,
              help="Import text that holds a secret (refused by default: E025).")
@format_option
@pass_env
def import_command(env: Env, merge: bool, file: str | None, allow_secret: bool) -> None:
    """Import a JSON export from FILE (or standard input) as one change batch.

    The whole document is checked first: if anything in it is invalid, or holds a
    secret (a token, a key: named by rule, item and line), nothing is written.
    Timestamps from the future are clamped to now.

    \b
    Examples:
        ctx import < backup.json
        ctx import --merge other.json
    """
    if file is None or file == "-":
        if sys.stdin is None or sys.stdin.isatty():
            raise InvalidInput("no document to import", hint="give FILE or pipe a document in")
        data = sys.stdin.buffer.read(MAX_DOCUMENT_BYTES + 1)
    else:
        data = read_document_file(Path(file))
    report = import_document(env.session(), data, merge=merge, allow_secret=allow_secret)
    if report.staged is not None:
        env.index()  # index what was imported now, with progress on a terminal, not at the next read
    if env.fmt == "json":
        emit_json({"imported": {"nodes": report.nodes, "edges": report.edges,
                                "views": report.views},
                   "skipped": {"nodes": len(report.skipped), "edges": report.skipped_edges,
                               "views": report.skipped_views},
                   "skipped_ids": report.skipped,
                   "work_commit": report.staged.work_commit.hex() if report.staged else None})
        return
    click.echo(f"imported {plural(report.nodes, 'node')}, {plural(report.edges, 'edge')}, "
               f"{plural(report.views, 'view')}")
    if merge:
        line = f"skipped {plural(len(report.skipped), 'existing node')}"
        if report.skipped_edges or report.skipped_views:
            line += f", {plural(report.skipped_edges, 'edge')}, {plural(report.skipped_views, 'view')}"
        click.echo(line)


@click.command("ingest")
@click.argument("file")
@click.option("--tag", "tags", multiple=True, metavar="NS:VALUE", help="A tag (repeatable).")
@click.option("--allow-secret", is_flag=True,
              help="Store a file that holds a secret (refused by default: E025).")
@format_option
@pass_env
def ingest_command(env: Env, file: str, tags: tuple[str, ...], allow_secret: bool) -> None:
    """Ingest a UTF-8 text file as a `source` node; prints its id.

    The metadata records the path as given, the size in bytes and the SHA-256.
    Binary and non-UTF-8 files are refused, and so is a file that holds a secret
    (the rule and the line are named; --allow-secret stores it anyway).

    \b
    Example:
        ctx ingest README.md --tag project:viberent --tag type:documentation
    """
    added = ingest_file(env.session(), Path(file), tags=list(tags), allow_secret=allow_secret)
    node = added.node
    if env.fmt == "json":
        emit_json({"id": node.id, "type": node.type, "tags": list(node.tags),
                   "metadata": node.metadata, "work_commit": added.staged.work_commit.hex()})
    else:
        click.echo(node.id)
