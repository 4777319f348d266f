"""``ctx log``."""

from __future__ import annotations

import itertools

import click

from ctxstore.cli._common import Env, emit_json, fmt_time, format_option, pass_env, plural
from ctxstore.cli._render import commit_summary, echo_stored
from ctxstore.history.stage import status as stage_status
from ctxstore.model import Commit

SHORT_ID = 12  # hex characters of an id in --oneline and Merge: lines (as `ctx status` shows them)


@click.command("log")
@click.option("-n", "--limit", type=click.IntRange(min=1), default=None,
              help="Show at most N commits.")
@click.option("--oneline", is_flag=True,
              help="One line per commit: its short id and the first line of its message.")
@format_option
@pass_env
def log_command(env: Env, limit: int | None, oneline: bool) -> None:
    """Show canonical commits reachable from HEAD, newest first, and what is staged.

    \b
    Examples:
        ctx log -n 5
        ctx log --oneline
        ctx log --format json
    """
    store = env.store()
    status = stage_status(env.session())
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
        click.echo(f"staged: {plural(status.work_commits, 'work commit')}, "
                   f"{plural(status.records, 'record')} (session {status.session_id}) — "
                   "`ctx commit -m MSG` to commit")
        if not oneline:
            click.echo("")
    for entry in commits:
        if oneline:
            first = entry["message"].splitlines()[0] if entry["message"] else ""
            echo_stored(f"{entry['id'][:SHORT_ID]} {first}")  # a message is stored text
            continue
        click.echo(f"commit {entry['id']}")
        if len(entry["parents"]) > 1:
            click.echo("Merge:  " + " ".join(p[:SHORT_ID] for p in entry["parents"]))
        click.echo(f"Date:   {fmt_time(entry['time'])}")
        extra = (f"{plural(entry['change_batches'], 'change batch', 'change batches')}, "
                 f"{plural(entry['narrative_refs'], 'narrative file')}")
        if entry["aborted"]:
            extra += ", aborted session"
        click.echo(f"Info:   {extra}")
        click.echo("")
        for line in entry["message"].splitlines() or [""]:
            echo_stored(f"    {line}")
        click.echo("")
