"""``ctx stage start|flush|compact|abort|status|recover``."""

from __future__ import annotations

import click

from ctxstore.cli._common import Env, emit_json, fmt_time, format_option, pass_env
from ctxstore.errors import InvalidInput


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
    from ctxstore.staging import start_session

    if not task.strip():
        raise InvalidInput("the task is empty")
    res = start_session(env.store(), task)
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
    from ctxstore.staging import flush

    head = flush(env.store())
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
    from ctxstore.cli.commit import echo_edits, edits_json
    from ctxstore.narrative.summary import compact_session

    res, edits = compact_session(env.store(), message)
    if env.fmt == "json":
        emit_json({"commit": res.commit.hex() if res.commit else None, "records": res.records,
                   "work_commits": res.work_commits, "session_id": res.session_id,
                   "narrative_edits": edits_json(edits)})
        return
    if res.commit is None:
        click.echo("nothing to compact")
    else:
        click.echo(f"compacted {res.work_commits} work commits ({res.records} records) into "
                   f"{res.commit.hex()}")
    echo_edits(edits)


@stage_group.command("abort")
@click.option("--reason", default=None, help="Why the session is abandoned.")
@format_option
@pass_env
def abort_command(env: Env, reason: str | None) -> None:
    """Abort the session: its changes leave the state; an abort commit records them.

    \b
    Example:
        ctx stage abort --reason "Changed approach"
    """
    from ctxstore.staging import abort_session

    res = abort_session(env.store(), reason)
    assert res.commit is not None
    if env.fmt == "json":
        emit_json({"commit": res.commit.hex(), "work_commits": res.work_commits,
                   "session_id": res.session_id})
    else:
        click.echo(f"aborted session {res.session_id} ({res.work_commits} work commits); "
                   f"abort commit {res.commit.hex()}")


@stage_group.command("status")
@format_option
@pass_env
def status_command(env: Env) -> None:
    """Show the staging session: task, base, work commits, staged records.

    \b
    Example:
        ctx stage status --format json
    """
    from ctxstore.staging import session_status

    st = session_status(env.store())
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
    from ctxstore.staging import recover

    rep = recover(env.store(), adopt=adopt)
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
