"""Edge commands: link, unlink, edges."""

from __future__ import annotations

from typing import Literal

import click

from ctxstore.cli._common import Env, emit_json, format_option, pass_env, plural, preview
from ctxstore.knowledge.edges import link_nodes, unlink_nodes
from ctxstore.knowledge.show import node_edges

EDGE_HELP = ("DERIVED_FROM, DEPENDS_ON, SUPERSEDES, RELATES_TO, CHILD_OF, CONTRADICTS, REFINES, "
             "EXEMPLIFIES or SOURCE_OF.")


@click.command("link")
@click.argument("from_id")
@click.argument("to_id")
@click.option("--type", "label", required=True, help=EDGE_HELP)
@format_option
@pass_env
def link_command(env: Env, from_id: str, to_id: str, label: str) -> None:
    """Link FROM_ID -> TO_ID with an edge type (an existing identical edge is fine).

    \b
    Example:
        ctx link 01HQ1A2B 01HQ1A2C --type DEPENDS_ON
    """
    res = link_nodes(env.session(), from_id, to_id, label)
    if env.fmt == "json":
        emit_json({"created": res.changed})
    else:
        click.echo("linked" if res.changed else "already linked")


@click.command("unlink")
@click.argument("from_id")
@click.argument("to_id")
@click.option("--type", "label", default=None, help="Only edges of this type (default: all).")
@format_option
@pass_env
def unlink_command(env: Env, from_id: str, to_id: str, label: str | None) -> None:
    """Remove the edges FROM_ID -> TO_ID (all types unless --type).

    \b
    Example:
        ctx unlink 01HQ1A2B 01HQ1A2C --type DEPENDS_ON
    """
    res = unlink_nodes(env.session(), from_id, to_id, label)
    if env.fmt == "json":
        emit_json({"removed": len(res.records)})
    else:
        click.echo(f"removed {plural(len(res.records), 'edge')}")


@click.command("edges")
@click.argument("node_id")
@click.option("--direction", type=click.Choice(["in", "out", "both"]), default="both",
              help="Edges into the node, out of it, or both (default).")
@format_option
@pass_env
def edges_command(env: Env, node_id: str, direction: Literal["in", "out", "both"]) -> None:
    """Show a node's edges.

    \b
    Example:
        ctx edges 01HQ1A2B --direction out
    """
    env.index()  # a large catch-up shows progress on a terminal
    node, edges = node_edges(env.session(), node_id, direction)
    rows = [{"direction": e.direction, "type": e.label, "node": e.key, "kind": e.kind,
             "node_type": e.other.type if e.other else None,
             "preview": preview(e.other.content, 50) if e.other else None} for e in edges]
    if env.fmt == "json":
        emit_json({"id": node.id, "edges": rows})
        return
    for r in rows:
        arrow = "->" if r["direction"] == "out" else "<-"
        click.echo(f"{arrow} {r['type']:<13} {r['node']}  {r['node_type'] or r['kind']:<13} "
                   f"{r['preview'] or ''}".rstrip())
