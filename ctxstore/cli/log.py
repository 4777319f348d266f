"""``ctx log``."""

from __future__ import annotations

import itertools

import click

from ctxstore.cli._common import Env, emit_json, fmt_time, format_option, pass_env


@click.command("log")
@click.option("-n", "--limit", type=click.IntRange(min=1), default=None,
              help="Show at most N commits.")
@format_option
@pass_env
def log_command(env: Env, limit: int | None) -> None:
    """Show canonical commits reachable from HEAD, newest first, and what is staged.

    \b
    Examples:
        ctx log -n 5
        ctx log --format json
    """
    from ctxstore.cli._render import commit_summary
    from ctxstore.model import Commit
    from ctxstore.staging import session_status

    store = env.store()
    status = session_status(store)
    head = store.read_head()
    entries = (commit_summary(oid, obj) for oid, obj in store.iter_history(head.heads)
               if isinstance(obj, Commit))
    commits = list(itertools.islice(entries, limit))
    staged = None
    if status.stage:
        staged = {"session_id": status.session_id, "task": status.task,
                  "work_commits": status.work_commits, "records": status.records,
                  "heads": [h.hex() for h in status.stage]}
    if env.fmt == "json":
        emit_json({"ref": store.head_ref(), "heads": [h.hex() for h in head.heads],
                   "staged": staged, "commits": commits})
        return
    if staged:
        click.echo(f"staged: {staged['work_commits']} work commits, {staged['records']} records "
                   f"(session {staged['session_id']}) — `ctx commit -m MSG` to commit")
        click.echo("")
    for entry in commits:
        click.echo(f"commit {entry['id']}")
        if len(entry["parents"]) > 1:
            click.echo("Merge:  " + " ".join(p[:12] for p in entry["parents"]))
        click.echo(f"Date:   {fmt_time(entry['time'])}")
        extra = f"{entry['change_batches']} change batches, {entry['narrative_refs']} narrative files"
        if entry["aborted"]:
            extra += ", aborted session"
        click.echo(f"Info:   {extra}")
        click.echo("")
        for line in entry["message"].splitlines() or [""]:
            click.echo(f"    {line}")
        click.echo("")
