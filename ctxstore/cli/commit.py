"""``ctx commit``, and the listing of ingested narrative edits it shares with ``ctx stage compact``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ctxstore.cli._common import Env, emit_json, format_option, pass_env, progress_printer

if TYPE_CHECKING:
    from ctxstore.narrative.ingest import NarrativeChange


def edits_json(edits: Sequence[NarrativeChange]) -> list[dict[str, Any]]:
    """The ``narrative_edits`` list of a ``--format json`` result."""
    return [{"action": e.action, "id": None if e.action in ("skipped", "redacted") else e.node_id,
             "path": e.path} for e in edits]


def echo_edits(edits: Sequence[NarrativeChange]) -> None:
    """One line per ingested narrative edit, below the commit line.

    A file not read as knowledge is a note on stderr, not an edit.
    """
    from ctxstore.narrative.snapshot import MAX_NARRATIVE_BYTES

    for e in edits:
        if e.action == "skipped":
            click.echo(f"ctx: note: narrative/{e.path} was not read as knowledge (larger than "
                       f"{MAX_NARRATIVE_BYTES >> 20} MiB or not UTF-8): edits in it are not "
                       "recorded and its nodes are left as they are", err=True)
            continue
        if e.action == "redacted":  # node_id holds what was found (rules and lines)
            click.echo(f"ctx: note: narrative/{e.path} held secrets ({e.node_id}): redacted in "
                       "place before it was committed", err=True)
            continue
        click.echo(f"  {e.action} {e.node_id or '(unmarked)'} from narrative/{e.path}")


@click.command("commit")
@click.option("-m", "--message", default=None, help="Commit message (required unless --amend).")
@click.option("--amend", is_flag=True, help="Replace the last commit, adding staged work to it.")
@click.option("--no-narrative", is_flag=True, help="Do not snapshot changed narrative files.")
@click.option("--allow-empty", is_flag=True, help="Commit even when nothing changed.")
@format_option
@pass_env
def commit_command(env: Env, message: str | None, amend: bool, no_narrative: bool,
                   allow_empty: bool) -> None:
    """Fold everything staged into one canonical commit and advance refs/main.

    Only the newest version of each node, edge and view of the session is kept.
    Changed narrative Markdown files are snapshotted, and edits of the log, task and
    decision entries become node versions first (a new entry a new node, a removed one
    a tombstone). With nothing staged and no narrative change, nothing is committed
    (exit 0). When Git tracks .ctx/ (as `ctx init` sets it up), the store is staged
    in Git afterwards (`git add .ctx`), ready for your next `git commit`.

    \b
    Examples:
        ctx commit -m "Record the retry decision"
        ctx commit --amend -m "Better message"
    """
    from ctxstore.narrative.ingest import commit_with_edits

    store = env.store()
    res, edits = commit_with_edits(store, message, amend=amend, narrative=not no_narrative,
                                   allow_empty=allow_empty,
                                   progress=progress_printer("folding work commits", min_total=500))
    if res.commit is not None:  # the SCC view is derived: a failure is a notice, never an error
        from ctxstore.graph.scc import refresh_after_commit
        from ctxstore.search.tantivy_index import refresh_tantivy

        # the full-text index is derived too: a notice at most
        for notice in (refresh_after_commit(store), refresh_tantivy(env.session())):
            if notice:
                click.echo(f"ctx: {notice}", err=True)
    # A merge of several heads of refs/main (after a Git merge) is a canonical commit too,
    # even with nothing to fold: Git must carry it with the pointer that names it.
    staged = git_stage_after(store.root, res.commit is not None or res.merge_commit is not None)
    if env.fmt == "json":
        emit_json({"commit": res.commit.hex() if res.commit else None, "records": res.records,
                   "work_commits": res.work_commits, "narrative_refs": res.narrative_refs,
                   "amended": res.amended,
                   "merge_commit": res.merge_commit.hex() if res.merge_commit else None,
                   "narrative_edits": edits_json(edits), "git_staged": staged})
        return
    if res.commit is None and res.merge_commit is not None:
        click.echo(f"merged {res.merged_heads} heads of {store.head_ref()} into "
                   f"{res.merge_commit.hex()}")
    elif res.commit is None:
        click.echo("nothing to commit")
    else:
        click.echo(f"{'amended' if amend else 'committed'} {res.commit.hex()}: {res.records} "
                   f"records from {res.work_commits} work commits, {res.narrative_refs} "
                   "narrative files")
    echo_edits(edits)  # with nothing committed, only entries left alone (tangled) are listed
    if staged:
        click.echo("  git add .ctx")


def git_stage_after(ctx_dir: Path, committed: bool) -> bool:
    """``git add .ctx`` after a canonical commit, as ``ctx init`` did, when Git tracks the store.

    Shared by ``ctx commit``, ``ctx stage compact`` and ``ctx stage abort`` (docs/git.md).

    Args:
        ctx_dir: The store.
        committed: Whether the command made a canonical commit (nothing to stage otherwise).

    Returns:
        True if the store was staged in Git.
    """
    if not committed:
        return False
    from ctxstore.git import stage_in_git

    return stage_in_git(ctx_dir)
