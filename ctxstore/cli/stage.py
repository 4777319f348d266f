"""``ctx stage start|flush|compact|abort|status|recover``."""

from __future__ import annotations

import sys
from typing import Any

import click

from ctxstore.cli._common import Env, emit_json, fmt_time, format_option, pass_env, plural
from ctxstore.cli.commit import echo_after, echo_edits, echo_notices, edits_json
from ctxstore.errors import InvalidInput
from ctxstore.history.abort import abort, plan_abort
from ctxstore.history.compact import compact
from ctxstore.history.stage import flush, recover, start, status


@click.group("stage")
def stage_group() -> None:
    """Manage the staging session (work in progress before a commit).

    Every write is staged as a durable work commit at once; `stage compact` (or
    `ctx commit`) folds the session into one canonical commit.

    \b
    Example:
        ctx stage start "Fix timeout handling" && ctx stage status
    """


@stage_group.command("start")
@click.argument("task")
@format_option
@pass_env
def start_command(env: Env, task: str) -> None:
    """Start a staging session for TASK (prints the session id).

    \b
    Example:
        ctx stage start "Fix timeout handling"
    """
    res = start(env.session(), task)
    if env.fmt == "json":
        emit_json({"session_id": res.session_id, "work_commit": res.work_commit.hex()})
    else:
        click.echo(f"Session ID: {res.session_id}")


@stage_group.command("flush")
@format_option
@pass_env
def flush_command(env: Env) -> None:
    """Make the staging state durable (writes already are) and merge split STAGE heads.

    \b
    Example:
        ctx stage flush
    """
    head = flush(env.session())
    if env.fmt == "json":
        emit_json({"stage": head.hex() if head else None})
    else:
        click.echo(f"STAGE {head.hex()} is durable" if head else "nothing staged")


@stage_group.command("compact")
@click.option("-m", "--message", required=True, help="Message of the canonical commit.")
@format_option
@pass_env
def compact_command(env: Env, message: str) -> None:
    """Compact the staging session into one canonical commit.

    Narrative edits are ingested first and listed (as `ctx commit` does), and a
    session summary (message, task, counts, node ids) is appended to today's log,
    whose snapshot is part of the commit.

    \b
    Example:
        ctx stage compact --message "Completed timeout fix"
    """
    res = compact(env.session(), message)
    fold = res.fold
    if env.fmt == "json":
        emit_json({"commit": fold.commit.hex() if fold.commit else None, "records": fold.records,
                   "work_commits": fold.work_commits, "session_id": fold.session_id,
                   "merge_commit": fold.merge_commit.hex() if fold.merge_commit else None,
                   "narrative_edits": edits_json(res.edits), "git_staged": res.git_staged})
        echo_notices(res.notices)
        return
    if fold.commit is None and fold.merge_commit is not None:
        click.echo(f"nothing to compact; merged {fold.merged_heads} heads of "
                   f"{env.store().head_ref()} into {fold.merge_commit.hex()}")
    elif fold.commit is None:
        click.echo("nothing to compact")
    else:
        click.echo(f"compacted {fold.work_commits} work commits ({fold.records} records) into "
                   f"{fold.commit.hex()}")
    echo_edits(res.edits)
    echo_after(res.after)


@stage_group.command("abort")
@click.option("--reason", default=None, help="Why the session is abandoned.")
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation (required when "
              "standard input is not a terminal).")
@format_option
@pass_env
def abort_command(env: Env, reason: str | None, yes: bool) -> None:
    """Abort the session: drop its staged work and the narrative entries it wrote.

    Lists what is dropped (work commits, records, the nodes the session created and
    their log, decision and task entries, and the "file read" and "command run" log
    entries of its steps) and asks for confirmation on a terminal.
    Without a terminal it refuses unless --yes is given (as `git clean` without -f).
    An abort commit records the session, so `ctx log` still shows it; its nodes leave
    the state and its entries leave narrative/, so the next commit does not bring
    them back.

    \b
    Examples:
        ctx stage abort --reason "Changed approach"
        ctx stage abort --yes
    """
    db = env.session()
    plan = plan_abort(db.store)  # E018 with nothing staged, before any question
    if not yes:
        if not sys.stdin.isatty():
            raise InvalidInput(
                f"refusing to abort session {plan.session_id} ({_dropped(plan)}) without "
                "confirmation: standard input is not a terminal",
                hint="pass --yes to abort without asking")
        click.echo(f"This drops session {plan.session_id}"
                   + (f" ({plan.task})" if plan.task else "") + f": {_dropped(plan)}.", err=True)
        for entry in plan.entries:
            what = "file" if entry.kind == "file" else "entry"
            click.echo(f"  narrative/{entry.path}: {what} {entry.key}", err=True)
        if not click.confirm("Abort it?", default=False, err=True):
            raise click.Abort()
    res = abort(db, reason)
    fold, done = res.fold, res.dropped
    assert fold.commit is not None
    if env.fmt == "json":
        emit_json({"commit": fold.commit.hex(), "work_commits": fold.work_commits,
                   "session_id": fold.session_id, "records": done.records, "nodes": done.nodes,
                   "narrative_removed": [{"path": e.path, "key": e.key, "kind": e.kind}
                                         for e in done.entries],
                   "git_staged": res.after.git_staged})
        echo_notices(res.after.notices)
        return
    click.echo(f"aborted session {fold.session_id}: dropped {_dropped(done)}; "
               f"abort commit {fold.commit.hex()}")
    for entry in done.entries:
        what = "removed file" if entry.kind == "file" else "removed entry"
        click.echo(f"  {what} {entry.key} from narrative/{entry.path}")
    echo_after(res.after)


def _dropped(plan: Any) -> str:
    """``3 work commits, 5 records, 2 new nodes, 2 narrative entries``."""
    return ", ".join([plural(plan.work_commits, "work commit"), plural(plan.records, "record"),
                      plural(len(plan.nodes), "new node"),
                      plural(len(plan.entries), "narrative entry", "narrative entries")])


@stage_group.command("status")
@format_option
@pass_env
def status_command(env: Env) -> None:
    """Show the staging session: task, base, work commits, staged records.

    \b
    Example:
        ctx stage status --format json
    """
    st = status(env.session())
    data = {"head": st.head.hex(), "head_conflicted": st.head_conflicted,
            "stage": [h.hex() for h in st.stage], "session_id": st.session_id, "task": st.task,
            "base": st.base.hex() if st.base else None, "work_commits": st.work_commits,
            "records": st.records, "steps": st.steps,
            "started_at": st.started_at, "updated_at": st.updated_at}
    if env.fmt == "json":
        emit_json(data)
        return
    click.echo(f"HEAD:    {st.head.hex()}" + ("  (several heads: next write merges them)"
                                               if st.head_conflicted else ""))
    if not st.stage:
        click.echo("STAGE:   nothing staged")
        return
    click.echo(f"STAGE:   {' '.join(h.hex() for h in st.stage)}")
    click.echo(f"session: {st.session_id}" + (f"  task: {st.task}" if st.task else ""))
    click.echo(f"base:    {data['base']}" + ("" if st.base == st.head else "  (HEAD has moved since)"))
    click.echo(f"staged:  {st.work_commits} work commits, {st.records} records")
    if st.started_at and st.updated_at:
        click.echo(f"started: {fmt_time(st.started_at / 1000)}  last: {fmt_time(st.updated_at / 1000)}")


@stage_group.command("recover")
@click.option("--adopt", is_flag=True,
              help="Also re-attach staged work that no pointer names while STAGE exists "
                   "(`ctx debug verify` reports it as W003).")
@format_option
@pass_env
def recover_command(env: Env, adopt: bool) -> None:
    """Check STAGE after a crash and repair it (re-link readable work commits).

    A missing STAGE is re-pointed at the staged work no pointer names (its nodes were
    hidden). With STAGE intact, such work is only listed, since it may be what a killed
    command wrote before it could move STAGE; --adopt merges it into the staging session.

    \b
    Example:
        ctx stage recover
    """
    rep = recover(env.session(), adopt=adopt)
    if env.fmt == "json":
        emit_json({"state": rep.state, "stage": rep.stage.hex() if rep.stage else None,
                   "kept": rep.kept, "lost": rep.lost, "notes": rep.notes,
                   "unnamed": [{"tip": w.tip.hex(), "session_id": w.session_id,
                                "work_commits": w.work_commits} for w in rep.unnamed]})
        return
    messages = {"no-session": "no staging session: nothing to recover",
                "clean": f"STAGE is intact ({rep.kept} work commits): resume or compact it",
                "repaired": f"STAGE repaired: {rep.kept} work commits kept",
                "reset": "STAGE named nothing recoverable: reset to HEAD (nothing staged)"}
    click.echo(messages[rep.state])
    for oid in rep.lost:
        click.echo(f"  unrecoverable work commit {oid}")
    for note in rep.notes:
        click.echo(f"  {note}")
    for w in rep.unnamed:
        click.echo(f"  {w.work_commits} work commits of session {w.session_id} (tip {w.tip.hex()}) "
                   "are named by no pointer: `ctx stage recover --adopt` re-attaches them")
