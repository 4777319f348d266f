"""``ctx status``."""

from __future__ import annotations

import click

from ctxstore.cli._common import Env, emit_json, format_option, pass_env


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


@click.command("status")
@format_option
@pass_env
def status_command(env: Env) -> None:
    """Show which store is used and what it holds: nodes by type, edges, tags, tiers.

    \b
    Example:
        ctx status
    """
    from ctxstore.stats import store_status

    st = store_status(env.store(), env.index(), kind=env.kind)
    if env.fmt == "json":
        emit_json({"store": st.path, "kind": st.kind, "index_bytes": st.size_bytes,
                   "nodes": st.nodes, "tokens": st.tokens, "by_type": st.by_type,
                   "edges": st.edges, "tags": st.tags, "superseded": st.superseded,
                   "tiers": {k: {"nodes": v[0], "tokens": v[1]} for k, v in st.tiers.items()},
                   "staged": {"records": st.staged_records, "work_commits": st.staged_work_commits},
                   "head": st.head})
        return
    label = {"project": "project store", "user": "user store", "explicit": "store"}[st.kind]
    click.echo(f"Store: {st.path} ({label}, index {_size(st.size_bytes)})")
    click.echo(f"Nodes: {st.nodes} (estimated {st.tokens:,} tokens)")
    for node_type, count in st.by_type.items():
        click.echo(f"  {node_type}: {count}")
    click.echo(f"Edges: {st.edges}")
    click.echo(f"Tags: {st.tags} unique")
    click.echo("")
    click.echo("Tier breakdown:")
    for tier, (count, tokens) in st.tiers.items():
        click.echo(f"  {tier}: {count} nodes ({tokens:,} tokens)")
    if st.staged_work_commits:
        click.echo("")
        click.echo(f"Staged: {st.staged_records} records in {st.staged_work_commits} work commits "
                   "(`ctx commit -m MSG` to commit)")
