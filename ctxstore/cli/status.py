"""``ctx status``."""

from __future__ import annotations

import click

from ctxstore.cli._common import Env, emit_json, format_option, pass_env, plural


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


@click.command("status")
@format_option
@pass_env
def status_command(env: Env) -> None:
    """Show which store is used and what it holds.

    Nodes by type, edges, tags, tiers, and nodes edited on both sides of a Git merge (concurrent
    edits: the newer version is kept, the other stays in `ctx show ID --history`).

    \b
    Examples:
        ctx status
        ctx status --format json
    """
    from ctxstore.code.stale import stale_mentions
    from ctxstore.knowledge.status import store_status

    st = store_status(env.store(), env.index(), kind=env.kind)
    stale = [m for ms in stale_mentions(env.index()).values() for m in ms]
    if env.fmt == "json":
        emit_json({"store": st.path, "kind": st.kind, "index_bytes": st.size_bytes,
                   "nodes": st.nodes, "tokens": st.tokens, "by_type": st.by_type,
                   "edges": st.edges, "tags": st.tags, "superseded": st.superseded,
                   "tiers": {k: {"nodes": v[0], "tokens": v[1]} for k, v in st.tiers.items()},
                   "staged": {"records": st.staged_records, "work_commits": st.staged_work_commits},
                   "head": st.head,
                   "concurrent_edits": [{"id": c.node_id, "kept": c.kept.hex(),
                                         "other": c.other.hex(), "deleted": c.kept_removed}
                                        for c in st.concurrent],
                   "stale_memory": [m.to_json() for m in stale]})
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
        click.echo(f"  {tier}: {plural(count, 'node')} ({tokens:,} tokens)")
    if st.concurrent:
        click.echo("")
        click.echo(f"Concurrent edits: {len(st.concurrent)} (changed on both sides of a merge; "
                   "the newer version is kept, see `ctx show ID --history`)")
        for c in st.concurrent:
            kept = "deleted" if c.kept_removed else f"kept {c.kept.hex()[:12]}"
            click.echo(f"  {c.node_id}: {kept}, other {c.other.hex()[:12]}")
    if stale:
        from ctxstore.packs.compose import iso_ms

        click.echo("")
        click.echo(f"Stale memory: {plural(len(stale), 'mention')} of code that changed since "
                   "(`ctx show ID`)")
        for m in stale:
            when = f"since {iso_ms(m.since_ms)}" if m.since_ms is not None else "file removed"
            click.echo(f"  {m.node_id}: {m.kind} {m.key} {m.reason} ({when})")
    if st.staged_work_commits:
        click.echo("")
        click.echo(f"Staged: {plural(st.staged_records, 'record')} in "
                   f"{plural(st.staged_work_commits, 'work commit')} "
                   "in this clone only: not in Git until `ctx commit -m MSG`")
