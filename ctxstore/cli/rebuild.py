"""``ctx rebuild``."""

from __future__ import annotations

import time

import click

from ctxstore.cli._common import Env, emit_json, format_option, pass_env


@click.command("rebuild")
@click.option("--full", is_flag=True, help="Delete the index files and recreate them.")
@format_option
@pass_env
def rebuild_command(env: Env, full: bool) -> None:
    """Resolve pointers a Git merge left with several heads, then rebuild the index.

    The derived index is recreated from the objects (deleting .ctx/index/ loses nothing).

    \b
    Examples:
        ctx rebuild
        ctx rebuild --full
    """
    from ctxstore.index import rebuild_index
    from ctxstore.index.read import table_counts
    from ctxstore.staging import flush

    store = env.store()
    start = time.perf_counter()
    head_before = store.read_head()
    flush(store)  # writes a merge commit if HEAD or STAGE hold several heads
    merged = store.read_head().heads != head_before.heads
    conn = rebuild_index(store, full=full)
    try:
        nodes, edges, commits = table_counts(conn)
    finally:
        conn.close()
    took = time.perf_counter() - start
    if env.fmt == "json":
        emit_json({"nodes": nodes, "edges": edges, "commits": commits, "merged_heads": merged,
                   "seconds": round(took, 3)})
    else:
        click.echo(f"rebuilt index: {nodes} nodes, {edges} edges from {commits} commits "
                   f"in {took:.2f}s" + (" (merged Git heads)" if merged else ""))
