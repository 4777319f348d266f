"""``ctx add``: write a knowledge node."""

from __future__ import annotations

import sys

import click

from ctxstore.cli._common import Env, emit_json, format_option, pass_env
from ctxstore.errors import InvalidInput


def _parse_meta(items: tuple[str, ...]) -> dict[str, str]:
    meta: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InvalidInput(f"--meta needs key=value, got {item!r}")
        meta[key.strip()] = value
    return meta


@click.command("add")
@click.option("--type", "node_type", required=True, metavar="TYPE",
              help="fact, decision, pattern, observation, hypothesis, task, summary, "
              "source or open-question.")
@click.option("--tag", "tags", multiple=True, metavar="NS:VALUE", help="A tag (repeatable).")
@click.option("--meta", "meta", multiple=True, metavar="KEY=VALUE", help="Metadata (repeatable).")
@click.option("--stdin", "from_stdin", is_flag=True, help="Read the content from standard input.")
@click.argument("content", required=False)
@format_option
@pass_env
def add_command(env: Env, node_type: str, tags: tuple[str, ...], meta: tuple[str, ...],
                from_stdin: bool, content: str | None) -> None:
    """Add a knowledge node; prints its id. The write is durable when this returns.

    \b
    Examples:
        ctx add --type fact --tag project:demo "Database uses SQLite with WAL mode"
        echo "retries time out after 30 s" | ctx add --type observation --stdin
    """
    from ctxstore.nodes import add_node

    if from_stdin == (content is not None):
        raise InvalidInput("give the content as an argument or with --stdin (not both)")
    if from_stdin:
        raw = sys.stdin.buffer.read()
        try:
            content = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidInput("standard input is not UTF-8 text") from None
    assert content is not None
    added = add_node(env.store(), node_type, content, tags=list(tags), metadata=_parse_meta(meta))
    node = added.node
    if env.fmt == "json":
        emit_json({"id": node.id, "type": node.type, "tags": list(node.tags),
                   "work_commit": added.staged.work_commit.hex()})
    else:
        click.echo(node.id)
