"""``ctx gc``."""

from __future__ import annotations

import click

from ctxstore.cli._common import Env, emit_json, format_option, pass_env, progress_printer
from ctxstore.gc import collect_garbage


@click.command("gc")
@click.option("--dry-run", is_flag=True, help="Show what would be deleted; delete nothing.")
@click.option("--aggressive", is_flag=True, help="No grace period for unreachable objects "
              "(staging leftovers of compacted sessions go at once).")
@click.option("--keep-days", type=click.FloatRange(min=0), default=None,
              help="Keep unreachable objects younger than this (default: config, 7).")
@format_option
@pass_env
def gc_command(env: Env, dry_run: bool, aggressive: bool, keep_days: float | None) -> None:
    """Delete objects no ref, HEAD or STAGE reaches, once older than the grace period.

    Also prunes the code index an older ctx committed (file versions, their blobs, the
    trees of old commits): no knowledge needs them and `ctx index` rebuilds the code index
    from the work tree. Their ids are first listed in a new file under .ctx/pruned/
    (commit it with the deletions), so verify and replay know them as pruned.

    \b
    Examples:
        ctx gc --dry-run
        ctx gc --keep-days 0
        ctx gc --dry-run --format json
    """
    rep = collect_garbage(env.store(), keep_days=keep_days, aggressive=aggressive,
                          dry_run=dry_run, progress=progress_printer("gc"))
    if env.fmt == "json":
        emit_json({"dry_run": rep.dry_run, "scanned": rep.scanned, "reachable": rep.reachable,
                   "deleted": rep.deleted, "bytes_reclaimed": rep.bytes_reclaimed,
                   "kept_recent": rep.kept_recent, "kept_narrative": rep.kept_narrative,
                   "tmp_removed": rep.tmp_removed, "deleted_ids": rep.deleted_ids,
                   "pruned": rep.pruned, "pruned_bytes": rep.pruned_bytes,
                   "pruned_list": rep.pruned_list})
        return
    verb = "would delete" if dry_run else "deleted"
    if dry_run:
        for oid in rep.deleted_ids:
            click.echo(oid)
    click.echo(f"scanned {rep.scanned} objects, {rep.reachable} reachable; {verb} {rep.deleted} "
               f"({rep.bytes_reclaimed} bytes); kept {rep.kept_recent} recent, "
               f"{rep.kept_narrative} narrative; {rep.tmp_removed} temp files")
    if rep.pruned:
        click.echo(f"{'would prune' if dry_run else 'pruned'} {rep.pruned} objects of the code "
                   f"index an older ctx committed ({rep.pruned_bytes} bytes; `ctx index` "
                   "rebuilds the code index)"
                   + (f"; listed in .ctx/{rep.pruned_list}" if rep.pruned_list else ""))
