"""Query commands: search, query, trace, related."""

from __future__ import annotations

import time

import click

from ctxstore.cli._common import Env, emit_json, format_option, pass_env, preview
from ctxstore.cli._global import global_option, query_global, search_global
from ctxstore.cli._render import echo_stored
from ctxstore.cli.nodes import _print_nodes


@click.command("search")
@click.argument("text")
@click.option("--limit", type=click.IntRange(min=1), default=20, help="At most N results (20).")
@click.option("--include-superseded", is_flag=True, help="Also superseded nodes.")
@global_option
@format_option
@pass_env
def search_command(env: Env, text: str, limit: int, include_superseded: bool, use_global: bool) -> None:
    """Full-text search over node content and summaries, best match first.

    Every word must occur; "quoted phrases" match as phrases.

    \b
    Example:
        ctx search "auth pattern"
    """
    from ctxstore.query.executor import search_nodes

    if use_global:  # the project store and ~/.ctx, each result labelled (issue 16)
        return search_global(env, text, limit, include_superseded)
    hits = search_nodes(env.index(), text, limit=limit, include_superseded=include_superseded)
    _print_nodes(env, [n for n, _ in hits], [s for _, s in hits])


@click.command("query")
@click.argument("text")
@click.option("--include-superseded", is_flag=True, help="Also superseded nodes.")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="At most N results.")
@global_option
@format_option
@pass_env
def query_command(env: Env, text: str, include_superseded: bool, limit: int | None,
                  use_global: bool) -> None:
    """Select nodes with the query language (see docs/query.md).

    \b
    Examples:
        ctx query "type:fact AND tag:project:viberent"
        ctx query "(type:decision OR type:pattern) AND created:>7d"
        ctx query "retry AND type:decision"
    """
    from ctxstore.query.executor import run_query
    from ctxstore.query.parser import misspelt_fields, parse_query

    if use_global:  # the project store and ~/.ctx, each result labelled (issue 16)
        return query_global(env, text, include_superseded, limit)
    now = time.time()
    nodes = run_query(env.index(), text, now=now, include_superseded=include_superseded,
                      limit=limit)
    # `tpye:fact` is a full-text word (any unknown prefix is one), not an error: say what was
    # probably meant, on stderr, so the output stays what the query selected.
    for word, field in misspelt_fields(parse_query(text, now=now)):
        click.echo(f"ctx: note: {word!r} is searched as text; did you mean {field + ':'!r}?",
                   err=True)
    _print_nodes(env, nodes)


@click.command("trace")
@click.argument("node_id")
@click.option("--reverse", is_flag=True, help="Show what depends on / derives from this node.")
@format_option
@pass_env
def trace_command(env: Env, node_id: str, reverse: bool) -> None:
    """Show provenance: what a node was derived from (DERIVED_FROM, DEPENDS_ON), recursively.

    \b
    Examples:
        ctx trace 01HQ1A2G
        ctx trace 01HQ1A2B --reverse
    """
    from ctxstore.graph import trace
    from ctxstore.index.read import find_node, read_node

    conn = env.index()
    root = read_node(conn, node_id)
    steps = trace(conn, root.id, reverse=reverse)
    if env.fmt == "json":
        emit_json({"id": root.id, "reverse": reverse,
                   "steps": [{"id": s.node_id, "depth": s.depth, "type": s.label,
                              "parent": s.parent} for s in steps]})
        return
    echo_stored(f"{root.id}  {root.type:<13} {preview(root.content)}")
    for s in steps:
        node = find_node(conn, s.node_id)
        label = f"<-{s.label}-" if reverse else f"-{s.label}->"
        text = f"{node.type:<13} {preview(node.content, 60)}" if node else "(missing)"
        echo_stored(f"{'  ' * s.depth}{label} {s.node_id}  {text}")


@click.command("related")
@click.argument("node_id")
@click.option("--depth", type=click.IntRange(min=1, max=10), default=2, help="Edge hops (2).")
@format_option
@pass_env
def related_command(env: Env, node_id: str, depth: int) -> None:
    """Nodes within DEPTH edges of a node, in either direction, nearest first.

    \b
    Example:
        ctx related 01HQ1A2B --depth 2
    """
    from ctxstore.graph import related
    from ctxstore.index.read import find_node, read_node

    conn = env.index()
    root = read_node(conn, node_id)
    found = related(conn, root.id, depth=depth)
    if env.fmt == "json":
        emit_json({"id": root.id, "related": [
            {"id": r.node_id, "distance": r.distance, "type": r.label, "direction": r.direction,
             "via": r.via} for r in found]})
        return
    for r in found:
        node = find_node(conn, r.node_id)
        arrow = "->" if r.direction == "out" else "<-"
        text = f"{node.type:<13} {preview(node.content, 60)}" if node else ""
        echo_stored(f"{r.distance}  {arrow} {r.label:<13} {r.node_id}  {text}")
