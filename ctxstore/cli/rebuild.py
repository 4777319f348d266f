"""``ctx rebuild``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from ctxstore.cli._common import Env, emit_json, format_option, pass_env, progress_printer
from ctxstore.errors import InvalidInput

if TYPE_CHECKING:
    from ctxstore.history.rebuild import Mode, RebuildResult


@click.command("rebuild")
@click.option("--full", is_flag=True, help="Delete the index files and recreate them.")
@click.option("--incremental", is_flag=True,
              help="Only apply the commits the index lacks, then recompute the SCC view.")
@click.option("--scc", "scc_only", is_flag=True, help="Only recompute the SCC view (DERIVED/scc_latest).")
@click.option("--tantivy", "tantivy_only", is_flag=True,
              help="Only recreate the Tantivy full-text index (index/tantivy/).")
@format_option
@pass_env
def rebuild_command(env: Env, full: bool, incremental: bool, scc_only: bool,
                    tantivy_only: bool) -> None:
    """Resolve pointers a Git merge left with several heads, then rebuild the derived state.

    The index is recreated from the objects (deleting .ctx/index/ or .ctx/DERIVED/ loses
    nothing), then the SCC view is recomputed; the Tantivy index is recreated when it
    serves this index ([index] fulltext, docs/index.md) or exists (or with --tantivy). A
    stale DERIVED/scc_latest is named and replaced. A rebuild that was interrupted
    (Ctrl-C, a kill) goes on from where it stopped; --full starts over.

    \b
    Examples:
        ctx rebuild
        ctx rebuild --full
        ctx rebuild --scc
    """
    if sum((full, incremental, scc_only, tantivy_only)) > 1:
        raise InvalidInput("choose one of --full, --incremental, --scc, --tantivy")
    from ctxstore.cli.commit import echo_notices
    from ctxstore.history.rebuild import rebuild

    mode: Mode = ("full" if full else "incremental" if incremental else "scc" if scc_only
            else "tantivy" if tantivy_only else "all")
    res = rebuild(env.session(), mode, progress=progress_printer("rebuild records"))
    if res.scc is not None:
        for notice in res.scc.stale:
            click.echo(f"ctx: {notice}; rebuilding it", err=True)
    if res.upgrade is not None and res.upgrade.upgraded:
        from ctxstore.cli.upgrade import upgrade_line

        click.echo(f"ctx: {upgrade_line(res.upgrade)}", err=True)
    doc: dict[str, Any] = {}
    lines: list[str] = []
    if res.index is not None:
        doc, line = _index_report(res)
        lines.append(line)
    if res.scc is not None:
        doc["scc"] = {"id": res.scc.oid.hex(), "nodes": res.scc.nodes, "sccs": res.scc.sccs,
                      "cycles": res.scc.cycles}
        lines.append(f"SCC view {res.scc.oid.hex()[:16]}: {res.scc.nodes} nodes, "
                     f"{res.scc.sccs} SCCs, {res.scc.cycles} cycles")
    if res.scc_deferred is not None:
        doc["scc"] = {"deferred": True, "edges": res.scc_deferred.edges}
        lines.append(f"SCC view left to `ctx rebuild --scc` ({res.scc_deferred.edges:,} edges)")
    if res.node_vectors is not None:
        doc["node_vectors"] = res.node_vectors
        lines.append(f"node vectors: {res.node_vectors} nodes embedded")
    if res.tantivy is not None:
        doc["tantivy"] = {"chunks": res.tantivy.chunks, "nodes": res.tantivy.nodes,
                          "files": res.tantivy.files, "seconds": round(res.tantivy.seconds, 3)}
        lines.append(f"Tantivy: {res.tantivy.chunks} chunks, {res.tantivy.nodes} nodes, "
                     f"{res.tantivy.files} files")
    if res.upgrade is not None:
        doc["upgraded"] = res.upgrade.upgraded
    if res.after.git_staged:
        doc["git_staged"] = True
    if env.fmt == "json":
        emit_json({**doc, "seconds": round(res.seconds, 3)})
    else:
        click.echo("; ".join(lines) + f" in {res.seconds:.2f}s")
        if res.after.git_staged:
            click.echo("  git add .ctx")
    echo_notices(res.after.notices)


def _index_report(res: RebuildResult) -> tuple[dict[str, Any], str]:
    """The SQLite index's JSON fields and text line."""
    index = res.index
    assert index is not None
    merged = res.merged_heads
    doc: dict[str, Any] = {"nodes": index.nodes, "edges": index.edges, "commits": index.commits,
                           "merged_heads": merged}
    if index.incremental:
        verb = "caught up index"
    else:
        doc["records"] = {"applied": index.records_applied, "resumed": index.records_resumed}
        verb = "rebuilt index"
        if index.records_resumed:
            verb = (f"finished an interrupted rebuild ({index.records_resumed} records were "
                    f"already in, {index.records_applied} applied now); index")
    return (doc, f"{verb}: {index.nodes} nodes, {index.edges} edges from {index.commits} commits"
            + (" (merged Git heads)" if merged else ""))
