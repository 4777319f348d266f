"""``ctx rebuild``."""

from __future__ import annotations

import time
from typing import Any

import click

from ctxstore.cli._common import Env, emit_json, format_option, pass_env, progress_printer
from ctxstore.errors import InvalidInput


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
    from ctxstore.graph import scc
    from ctxstore.index import index_dir
    from ctxstore.search import tantivy_index

    store = env.store()
    start = time.perf_counter()
    doc: dict[str, Any] = {}
    lines: list[str] = []
    if not (scc_only or tantivy_only):
        if not incremental:  # rows come back with new rowids: Tantivy's are no longer theirs
            tantivy_index.forget_tantivy(store.root)
        doc, line = _rebuild_index(env, full=full, incremental=incremental)
        lines.append(line)
    if not tantivy_only:
        for notice in scc.load_scc(store.root).notices:
            click.echo(f"ctx: {notice}; rebuilding it", err=True)
        built = scc.build_scc(store)
        found = scc.cycles(built.view)
        doc["scc"] = {"id": built.oid.hex(), "nodes": len(built.view.nodes),
                      "sccs": built.view.scc_count, "cycles": len(found)}
        lines.append(f"SCC view {built.oid.hex()[:16]}: {len(built.view.nodes)} nodes, "
                     f"{built.view.scc_count} SCCs, {len(found)} cycles")
    conn = env.index()
    if tantivy_only or (not scc_only and (tantivy_index.wanted(conn, env.session().config)
                                          or (index_dir(store) / tantivy_index.TANTIVY_DIR).is_dir())):
        rep = (tantivy_index.sync_tantivy(store.root, conn, lock_timeout=store.lock_timeout)
               if incremental else None) \
            or tantivy_index.rebuild_tantivy(store.root, conn, lock_timeout=store.lock_timeout)
        doc["tantivy"] = {"chunks": rep.chunks, "nodes": rep.nodes, "files": rep.files,
                          "seconds": round(rep.seconds, 3)}
        lines.append(f"Tantivy: {rep.chunks} chunks, {rep.nodes} nodes, {rep.files} files")
    took = time.perf_counter() - start
    if env.fmt == "json":
        emit_json({**doc, "seconds": round(took, 3)})
    else:
        click.echo("; ".join(lines) + f" in {took:.2f}s")


def _rebuild_index(env: Env, *, full: bool, incremental: bool) -> tuple[dict[str, Any], str]:
    """Rebuild (or, ``incremental``, catch up) the SQLite index; its JSON fields and text line."""
    from ctxstore.index import rebuild_store

    store = env.store()
    records: dict[str, int] | None = None  # a build's records: applied now, and resumed
    if incremental:
        from ctxstore.index.read import table_counts
        from ctxstore.staging import flush

        before = store.read_head().heads
        flush(store)
        merged = store.read_head().heads != before
        nodes, edges, commits = table_counts(env.index())
        verb = "caught up index"
    else:
        report = rebuild_store(store, full=full, progress=progress_printer("rebuild records"))
        nodes, edges, commits, merged = report.nodes, report.edges, report.commits, report.merged_heads
        records = {"applied": report.records_applied, "resumed": report.records_resumed}
        verb = "rebuilt index"
        if report.records_resumed:
            verb = (f"finished an interrupted rebuild ({report.records_resumed} records were "
                    f"already in, {report.records_applied} applied now); index")
    doc: dict[str, Any] = {"nodes": nodes, "edges": edges, "commits": commits, "merged_heads": merged}
    if records is not None:
        doc["records"] = records
    return (doc, f"{verb}: {nodes} nodes, {edges} edges from {commits} commits"
            + (" (merged Git heads)" if merged else ""))
