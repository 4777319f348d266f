"""``ctx rebuild``."""

from __future__ import annotations

import time

import click

from ctxstore.cli._common import Env, emit_json, format_option, pass_env, progress_printer


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
    from ctxstore.index import rebuild_store

    start = time.perf_counter()
    report = rebuild_store(env.store(), full=full, progress=progress_printer("rebuild records"))
    took = time.perf_counter() - start
    if env.fmt == "json":
        emit_json({"nodes": report.nodes, "edges": report.edges, "commits": report.commits,
                   "merged_heads": report.merged_heads, "seconds": round(took, 3)})
    else:
        click.echo(f"rebuilt index: {report.nodes} nodes, {report.edges} edges from "
                   f"{report.commits} commits in {took:.2f}s"
                   + (" (merged Git heads)" if report.merged_heads else ""))
