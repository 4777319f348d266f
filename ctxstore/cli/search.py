"""Query commands: search, query, trace, related.

The text renderers (``cli._render``, ``cli.nodes``) are imported by the commands that print
text: ``--format json``, what agents read, never loads them.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import click

from ctxstore.cli._common import Env, emit_json, format_option, node_json, pass_env, preview
from ctxstore.cli._global import global_option, query_global, search_global
from ctxstore.cli._hyde import drafter_for, echo_notes, hyde_json
from ctxstore.errors import InvalidInput

if TYPE_CHECKING:
    from ctxstore.llm.hyde import Drafter
    from ctxstore.search.search import Hit

# The kinds of `ctx search --kind` (``search.search.KINDS``, not imported at CLI start-up).
KINDS = ("node", "narrative", "chunk", "symbol", "run")
# What --global searches in both stores: their nodes and stored command runs (the code index,
# chunks and symbols, is the project's alone).
_GLOBAL_KINDS = ("node", "narrative", "run")
# The largest --limit: SQLite binds a LIMIT as a 64-bit integer (a larger one was an
# OverflowError), and search asks for four times the limit as candidates.
LIMIT_MAX = 1_000_000_000


@click.command("search")
@click.argument("text")
@click.option("--limit", type=click.IntRange(min=1, max=LIMIT_MAX), default=20,
              help="At most N results (20).")
@click.option("--kind", "kinds", type=click.Choice(KINDS), multiple=True,
              help="Only this kind of result (repeatable): node, narrative, chunk, symbol, run.")
@click.option("--include-superseded", is_flag=True, help="Also superseded nodes.")
@click.option("--no-hyde", is_flag=True,
              help="With [retrieval] vectors on and [llm] configured: find nodes by the "
                   "question's vector alone, no drafted answer.")
@global_option
@format_option
@pass_env
def search_command(env: Env, text: str, limit: int, kinds: tuple[str, ...],
                   include_superseded: bool, no_hyde: bool, use_global: bool) -> None:
    """Ranked search for any text over nodes, narrative, file chunks, symbols and command runs.

    Any word may match; results holding every word rank higher (BM25, docs/retrieval.md).
    "quoted phrases" match as phrases. Any text is accepted: a question, code, a log.
    --kind node takes every node, decisions and tasks of the narrative included.
    --kind run takes the stored runs of commands (ctx add command), each command's best
    run with what it did next (failed, then passed). With --global, the nodes and runs of
    the user store ~/.ctx too, each result naming its store (no chunks or symbols).

    \b
    Examples:
        ctx search "auth pattern"
        ctx search "why did we pick sqlite over postgres?" --kind node
        ctx search "why did the tests fail"
        ctx --format json search "read_config()" --kind symbol
        ctx search --global "which editor do I use?"
    """
    from ctxstore.search.search import search, search_terms

    if use_global:  # the nodes and runs of the project store and ~/.ctx, each labelled
        wanted = [k for k in kinds or _GLOBAL_KINDS if k in _GLOBAL_KINDS]
        if not wanted:
            raise InvalidInput("--global searches nodes, narrative and command runs, not chunks "
                               "or symbols",
                               hint="drop --global to search the project's code")
        return search_global(env, text, limit, include_superseded, wanted)
    drafter = None if no_hyde else _drafter(env, kinds or KINDS)
    embedder = None
    if drafter is not None:
        from ctxstore.llm.hyde import node_embedder

        embedder = node_embedder(env.session().config, drafter)
    hits = search(env.session(), text, kinds=kinds or KINDS, limit=limit,
                  include_superseded=include_superseded, embedder=embedder)
    echo_notes(drafter)
    if env.fmt == "json":
        emit_json(hyde_json(_hits_json(hits), drafter))
        return
    if not hits:  # said, so an empty answer is not mistaken for a failure to run
        why = "" if search_terms(text) else " (the query has no searchable words)"
        click.echo(f"ctx: no results{why}", err=True)
        return
    from ctxstore.cli._render import echo_stored
    from ctxstore.cli.nodes import _print_nodes

    node_hits = [h for h in hits if h.node is not None]
    if env.fmt == "markdown" or len(node_hits) == len(hits):
        _print_nodes(env, [h.node for h in node_hits], [h.score for h in node_hits])
        hits = [h for h in hits if h.node is None]
    for hit in hits:
        echo_stored(_hit_markdown(hit) if env.fmt == "markdown" else _hit_line(hit))


def _drafter(env: Env, kinds: tuple[str, ...]) -> Drafter | None:
    """HyDE's drafter for the nodes of this search, when ``[retrieval] vectors`` is on."""
    if env.session().config.get("retrieval", "vectors") != "on" \
            or not {"node", "narrative"} & set(kinds):
        return None
    return drafter_for(env, "retrieval")


def _hit_markdown(hit: Hit) -> str:
    """One Markdown list item for a chunk, symbol or run hit (``- `path:lines` name: preview``)."""
    if hit.chunk is not None:
        c = hit.chunk
        return f"- `{hit.key}` {c.qualname or c.kind}: {preview(c.text, 80)}"
    if hit.symbol is not None:
        y = hit.symbol
        return f"- `{y.path}:{y.start_line or 1}` {y.kind} `{y.qualname}`"
    if hit.run is not None:
        from ctxstore.knowledge.recall import run_item

        return run_item(hit.run)
    return _hit_line(hit)


def _hits_json(hits: list[Hit]) -> dict[str, Any]:
    """``{"count", "results": [...], "nodes": [...]}``: every hit, and the node hits as nodes."""
    results: list[dict[str, Any]] = []
    nodes = []
    for hit in hits:
        doc: dict[str, Any] = {"kind": hit.kind, "key": hit.key, "score": round(hit.score, 4),
                               "matched": list(hit.matched)}
        if hit.node is not None:
            node = {**node_json(hit.node), "score": doc["score"], "kind": hit.kind,
                    "matched": doc["matched"]}
            nodes.append(node)
            doc["node"] = node
        elif hit.run is not None:
            from ctxstore.knowledge.recall import run_json

            doc["run"] = run_json(hit.run)
        elif hit.chunk is not None:
            c = hit.chunk
            doc.update(path=c.path, qualname=c.qualname, chunk_kind=c.kind,
                       start_line=c.start_line, end_line=c.end_line, snippet=preview(c.text, 200))
        elif hit.symbol is not None:
            y = hit.symbol
            doc.update(path=y.path, qualname=y.qualname, name=y.name, symbol_kind=y.kind,
                       start_line=y.start_line, signature=y.signature)
        results.append(doc)
    return {"count": len(results), "results": results, "nodes": nodes}


def _hit_line(hit: Hit) -> str:
    """One line of text output for a hit that is not a node."""
    if hit.chunk is not None:
        c = hit.chunk
        return f"{hit.key}  chunk  {c.qualname or c.kind}  {preview(c.text, 60)}"
    if hit.symbol is not None:
        y = hit.symbol
        return f"{y.qualname}  {y.kind:<13} {y.path}:{y.start_line or 1}"
    if hit.run is not None:
        from ctxstore.knowledge.recall import run_lines

        head, *rest = run_lines(hit.run)
        return "\n".join([f"run  {head}", *(f"    {line}" for line in rest)])
    node = hit.node
    assert node is not None
    return f"{node.id}  {node.type:<13} {preview(node.content)}"


@click.command("query")
@click.argument("text")
@click.option("--include-superseded", is_flag=True, help="Also superseded nodes.")
@click.option("--limit", type=click.IntRange(min=1, max=LIMIT_MAX), default=None,
              help="At most N results.")
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
    from ctxstore.cli.nodes import _print_nodes

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
    from ctxstore.knowledge.graph import trace_node

    env.index()  # brought up to date, with progress on a terminal
    found = trace_node(env.session(), node_id, reverse=reverse)
    root = found.root
    if env.fmt == "json":
        emit_json({"id": root.id, "reverse": reverse,
                   "steps": [{"id": t.step.node_id, "depth": t.step.depth, "type": t.step.label,
                              "parent": t.step.parent} for t in found.steps]})
        return
    from ctxstore.cli._render import echo_stored

    echo_stored(f"{root.id}  {root.type:<13} {preview(root.content)}")
    for t in found.steps:
        s, node = t.step, t.node
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
    from ctxstore.knowledge.graph import related_nodes

    env.index()  # brought up to date, with progress on a terminal
    found = related_nodes(env.session(), node_id, depth=depth)
    root = found.root
    if env.fmt == "json":
        emit_json({"id": root.id, "related": [
            {"id": h.found.node_id, "distance": h.found.distance, "type": h.found.label,
             "direction": h.found.direction, "via": h.found.via} for h in found.hits]})
        return
    from ctxstore.cli._render import echo_stored

    for h in found.hits:
        r, node = h.found, h.node
        arrow = "->" if r.direction == "out" else "<-"
        text = f"{node.type:<13} {preview(node.content, 60)}" if node else ""
        echo_stored(f"{r.distance}  {arrow} {r.label:<13} {r.node_id}  {text}")
