"""``ctx commit``, and the listing of ingested narrative edits it shares with ``ctx stage compact``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from ctxstore.cli._common import Env, emit_json, format_option, pass_env, progress_printer

if TYPE_CHECKING:
    from ctxstore.history.commit import PostCommit
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
    from ctxstore.history.commit import commit

    res = commit(env.session(), message, amend=amend, narrative=not no_narrative,
                 allow_empty=allow_empty,
                 progress=progress_printer("folding work commits", min_total=500))
    fold = res.fold
    if env.fmt == "json":
        emit_json({"commit": fold.commit.hex() if fold.commit else None, "records": fold.records,
                   "work_commits": fold.work_commits, "narrative_refs": fold.narrative_refs,
                   "amended": fold.amended,
                   "merge_commit": fold.merge_commit.hex() if fold.merge_commit else None,
                   "narrative_edits": edits_json(res.edits), "git_staged": res.git_staged})
        echo_notices(res.notices)
        return
    if fold.commit is None and fold.merge_commit is not None:
        click.echo(f"merged {fold.merged_heads} heads of {env.store().head_ref()} into "
                   f"{fold.merge_commit.hex()}")
    elif fold.commit is None:
        click.echo("nothing to commit")
    else:
        click.echo(f"{'amended' if amend else 'committed'} {fold.commit.hex()}: {fold.records} "
                   f"records from {fold.work_commits} work commits, {fold.narrative_refs} "
                   "narrative files")
    echo_edits(res.edits)  # with nothing committed, only entries left alone (tangled) are listed
    echo_after(res.after)


def echo_after(after: PostCommit) -> None:
    """What followed a canonical commit: ``  git add .ctx``, and notices on stderr."""
    if after.git_staged:
        click.echo("  git add .ctx")
    echo_notices(after.notices)


def echo_notices(notices: Sequence[str]) -> None:
    """Notices of the steps after a commit (the graph view), one ``ctx: `` line each on stderr."""
    for notice in notices:
        click.echo(f"ctx: {notice}", err=True)
