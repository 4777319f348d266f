"""Tag commands: tag, untag, tags."""

from __future__ import annotations

import click

from ctxstore.cli._common import Env, emit_json, format_option, pass_env
from ctxstore.cli._render import echo_stored, tag_text
from ctxstore.knowledge.nodes import tag_node, untag_node
from ctxstore.knowledge.show import tag_counts


@click.command("tag")
@click.argument("node_id")
@click.argument("tags", nargs=-1, required=True)
@format_option
@pass_env
def tag_command(env: Env, node_id: str, tags: tuple[str, ...]) -> None:
    """Add tags to a node (tags it already has are fine).

    \b
    Example:
        ctx tag 01HQ1A2B task:current tier:working
    """
    res = tag_node(env.session(), node_id, list(tags))
    if env.fmt == "json":
        emit_json({"changed": res.changed})
    else:
        click.echo("tagged" if res.changed else "already tagged")


@click.command("untag")
@click.argument("node_id")
@click.argument("tags", nargs=-1, required=True)
@format_option
@pass_env
def untag_command(env: Env, node_id: str, tags: tuple[str, ...]) -> None:
    """Remove tags from a node (tags it does not have are fine).

    \b
    Example:
        ctx untag 01HQ1A2B tier:working
    """
    res = untag_node(env.session(), node_id, list(tags))
    if env.fmt == "json":
        emit_json({"changed": res.changed})
    else:
        click.echo("untagged" if res.changed else "not tagged")


@click.command("tags")
@click.option("--prefix", default=None, help="Only tags starting with this (e.g. task:).")
@format_option
@pass_env
def tags_command(env: Env, prefix: str | None) -> None:
    """List the tags of live nodes with their counts.

    \b
    Example:
        ctx tags --prefix task:
    """
    env.index()  # a large catch-up shows progress on a terminal
    counts = tag_counts(env.session(), prefix)
    if env.fmt == "json":
        emit_json({"tags": [{"tag": t, "count": c} for t, c in counts]})
        return

    for tag, count in counts:
        echo_stored(f"{tag_text(tag)}  {count}")
