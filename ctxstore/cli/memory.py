"""``ctx memory``: transcript memory (backfill, search, stats, topics, promote). See docs/memory.md."""

from __future__ import annotations

import os
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ctxstore.cli._common import Env, emit_json, format_option, pass_env, plural
from ctxstore.cli._hyde import drafter_for, echo_notes, hyde_json
from ctxstore.errors import InvalidInput, NothingToDo

if TYPE_CHECKING:
    from ctxstore.llm.hyde import Drafter
    from ctxstore.memory.search import Hit

# The intents of ``--intent`` (``memory.search.INTENTS``, not imported at CLI start-up).
_INTENTS = ("decision", "conclusion", "question", "problem", "solution", "todo", "context")


@click.group("memory")
def memory_group() -> None:
    """Transcript memory: every Claude Code session indexed, searchable by meaning and time.

    Kept private in .ctx/local/memory.sqlite (never committed). See docs/memory.md.

    \b
    Examples:
        ctx memory backfill --all
        ctx memory search "why sqlite for the cache" --since "last week"
    """


def _memory_dir(env: Env) -> Path:
    return env.store_path()


@memory_group.command("backfill")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--all", "everything", is_flag=True,
              help="This project's transcripts under ~/.claude/projects (or "
                   "$CLAUDE_CONFIG_DIR/projects): those whose working directory is the project's "
                   "work tree or below it.")
@click.option("--project", "projects", multiple=True, metavar="DIR",
              type=click.Path(path_type=Path),
              help="Also the transcripts of the project whose work tree is DIR (repeatable).")
@click.option("--all-projects", is_flag=True,
              help="Every transcript under ~/.claude/projects, whatever its project.")
@format_option
@pass_env
def backfill_command(env: Env, paths: tuple[Path, ...], everything: bool,
                     projects: tuple[Path, ...], all_projects: bool) -> None:
    """Index existing transcripts (files, or directories of *.jsonl).

    Idempotent and resumable: a second run reads only what is new. Then links the files and
    symbols talked about to the project's code index. Refused when config.toml has
    [memory] enabled = false.

    --all keeps to this project: ~/.claude/projects holds every project's sessions, and
    those of other projects are skipped with a note saying how many (--project DIR adds one
    by its work tree, --all-projects takes them all). Paths named are indexed as given.

    \b
    Examples:
        ctx memory backfill --all
        ctx memory backfill --all --project ~/work/other-repo
        ctx memory backfill ~/.claude/projects/-home-me-work-repo
    """
    from ctxstore.cli._common import progress_printer
    from ctxstore.memory.backfill import project_transcripts
    from ctxstore.memory.manage import backfill_memory
    from ctxstore.memory.settings import OFF_NOTE, settings_of

    settings = settings_of(env.session().config)  # a bad config.toml is named (E015)
    if not settings.enabled:
        raise NothingToDo(f"{OFF_NOTE}: nothing was indexed",
                          hint="set [memory] enabled = true to index sessions (docs/memory.md)")
    targets = list(paths)
    skipped: tuple[int, list[str]] = (0, [])
    notes: list[str] = []
    if everything or projects or all_projects:
        config = os.environ.get("CLAUDE_CONFIG_DIR") or os.path.join(os.path.expanduser("~"),
                                                                      ".claude")
        folder = Path(config) / "projects"
        if all_projects:
            targets.append(folder)
        else:
            trees = ([env.session().store.worktree] if everything else []) + \
                [Path(os.path.abspath(p)) for p in projects]
            chosen = project_transcripts(folder, trees)
            targets += chosen.paths
            skipped, notes = (chosen.skipped_files, chosen.skipped_projects), chosen.notes
    elif not targets:
        raise InvalidInput("name transcript files or directories, or give --all",
                           hint="ctx memory backfill --all")
    started = time.monotonic()
    report, linked, embedded = backfill_memory(env.session(), targets,
                                               tool_budget=settings.tool_budget,
                                               progress=progress_printer("indexing transcripts"))
    seconds = time.monotonic() - started
    notes += report.notes
    if skipped[0]:
        shown = ", ".join(skipped[1][:5]) + (f" and {len(skipped[1]) - 5} more"
                                              if len(skipped[1]) > 5 else "")
        notes.append(f"skipped {plural(skipped[0], 'transcript')} of "
                     f"{plural(len(skipped[1]), 'other project')} ({shown}); "
                     "--project DIR or --all-projects indexes them")
    if env.fmt == "json":
        emit_json({"files": len(report.files), "bytes": report.bytes, "turns": report.turns,
                   "ideas": report.ideas, "seconds": round(seconds, 3),
                   "skipped_lines": sum(f.skipped for f in report.files),
                   "skipped_other_projects": {"transcripts": skipped[0], "projects": skipped[1]},
                   "linked": linked, "embedded": embedded, "notes": notes})
        return
    for note in notes:
        click.echo(f"ctx: note: {note}", err=True)
    click.echo(f"indexed {plural(len(report.files), 'file')}, {report.bytes} new bytes: "
               f"{plural(report.turns, 'turn')}, {plural(report.ideas, 'idea')} "
               f"in {seconds:.1f} s" + (f"; linked {plural(linked, 'name')} to the code index"
                                        if linked else "")
               + (f"; embedded {plural(embedded, 'turn')}" if embedded else ""))


def _now_ms(now: str | None) -> int:
    if now is None:
        return int(time.time() * 1000)
    try:
        moment = datetime.fromisoformat(now.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInput(f"--now: {now!r} is not an ISO-8601 time",
                           hint="e.g. 2026-03-01T12:00:00Z") from None
    if moment.tzinfo is None:
        raise InvalidInput(f"--now: {now!r} has no time zone", hint="add Z for UTC")
    return int(moment.timestamp() * 1000)


@memory_group.command("search")
@click.argument("text")
@click.option("--since", default=None, help='Only turns from this time on ("last week", 7d, a date).')
@click.option("--until", default=None, help="Only turns before this time.")
@click.option("--session", default=None, help="Only this session (an id or a unique prefix).")
@click.option("--intent", type=click.Choice(_INTENTS), default=None,
              help="Only turns holding an idea of this intent.")
@click.option("--limit", type=click.IntRange(min=1, max=1000), default=10, show_default=True)
@click.option("--now", default=None, help="Pin 'now' (ISO-8601) for the time words.")
@click.option("--no-hyde", is_flag=True,
              help="With vectors on and [llm] configured: search with the question's vector "
                   "alone, no drafted answer.")
@format_option
@pass_env
def search_command(env: Env, text: str, since: str | None, until: str | None,
                   session: str | None, intent: str | None, limit: int, now: str | None,
                   no_hyde: bool) -> None:
    """Search past sessions; time words in TEXT rank that time first (--since/--until filter).

    \b
    Examples:
        ctx memory search "session cache redis"
        ctx memory search "decisions about the login page last week"
        ctx memory search "flaky test" --since 2026-03-01 --format json
    """
    from ctxstore.memory.search import MemoryQuery, result_json, search_transcripts

    drafter = None if no_hyde else _drafter(env)
    answer = search_transcripts(_memory_dir(env), MemoryQuery(text, since, until, session, intent,
                                                              limit),
                                now_ms=_now_ms(now), agent=False, hyde=drafter)
    echo_notes(drafter)
    if answer.note:  # vectors on but unavailable: searched by words
        click.echo(f"ctx: note: {answer.note}", err=True)
    if answer.missing:
        raise NothingToDo("there is no transcript memory yet",
                          hint="`ctx memory backfill --all` indexes past sessions; the Stop hook "
                               "indexes new ones")
    result = answer.result
    if env.fmt == "json":
        emit_json(hyde_json(result_json(result, answer.note), drafter))
        return
    if not result.hits:
        click.echo("no matching turns")
        return
    _print_grouped(result.hits)


def _drafter(env: Env) -> Drafter | None:
    """HyDE's drafter for this store, when ``[memory] vectors`` is on (``cli._hyde``)."""
    from ctxstore.memory.settings import memory_settings

    if not memory_settings(_memory_dir(env)).vectors:  # no session opened for a plain search
        return None
    return drafter_for(env, "memory")


def _print_grouped(hits: list[Hit]) -> None:
    """Hits grouped by topic, groups in the order of their best hit."""
    from ctxstore.claude.inject import escape_tags
    from ctxstore.memory.search import hit_provenance, hit_text, iso

    groups: dict[tuple[str, str | None], list[Hit]] = {}
    for hit in hits:
        groups.setdefault((hit.turn.session, hit.topic), []).append(hit)
    for (session, topic), members in groups.items():
        click.echo(f"## {escape_tags(topic or '(no topic)')}  [session {session[:8]}]")
        for hit in members:
            intent = f" {hit.intent}" if hit.intent else ""
            click.echo(f"- {iso(hit.turn.ts_start)}{intent} ({hit.score:.2f})")
            for line in escape_tags(hit_text(hit.turn, 300)).splitlines():
                click.echo(f"    {line}")
            prov = hit_provenance(hit)
            if prov["branch"] or prov["commit"]:
                where = (f"branch {prov['branch']}" if prov["branch"] else "detached HEAD") + (
                    f" at {prov['commit'][:8]}" if prov["commit"] else "")
                click.echo(f"    from: {escape_tags(where)}")
            for old in hit.history:
                click.echo(f"    earlier ({old['timestamp']}, {old['intent']}): "
                           f"{escape_tags(old['text'])}")
        click.echo("")


@memory_group.command("vectors")
@click.option("--rebuild", is_flag=True,
              help="Delete every stored vector and embed every turn and idea again.")
@format_option
@pass_env
def vectors_command(env: Env, rebuild: bool) -> None:
    """Embed the turns and ideas that have no vector yet (with [memory] vectors = "on").

    Vectors are derived from the turns and ideas and kept in .ctx/local/memory.sqlite; backfill and
    the Stop hook fill them as sessions are indexed. Needs pip install 'ctxstore[embed]'.

    \b
    Examples:
        ctx memory vectors
        ctx memory vectors --rebuild --format json
    """
    from ctxstore.cli._common import progress_printer
    from ctxstore.memory.manage import memory_vectors

    done = memory_vectors(env.session(), rebuild=rebuild,
                          progress=progress_printer("embedding turns and ideas"))
    if env.fmt == "json":
        emit_json({"model": done.model, "embedded": done.embedded, "turns_with_vectors": done.turns,
                   "ideas_embedded": done.ideas_embedded, "ideas_with_vectors": done.ideas})
        return
    click.echo(f"embedded {plural(done.embedded, 'turn')} and {plural(done.ideas_embedded, 'idea')} "
               f"with {done.model}; {plural(done.turns, 'turn')} and {plural(done.ideas, 'idea')} "
               "have vectors")


@memory_group.command("stats")
@format_option
@pass_env
def stats_command(env: Env) -> None:
    """Show what transcript memory holds: sessions, turns, spans, ideas, entities.

    \b
    Example:
        ctx memory stats --format json
    """
    from ctxstore.memory.manage import memory_stats
    from ctxstore.memory.search import iso

    counts, intents, first, last, path, size = memory_stats(_memory_dir(env))
    if env.fmt == "json":
        emit_json({**counts, "intents": intents, "first": iso(first), "last": iso(last),
                   "bytes": size, "path": str(path)})
        return
    click.echo(f"transcript memory {path} ({size} bytes)")
    for name, count in counts.items():
        click.echo(f"  {name:<10} {count}")
    if intents:
        click.echo("  ideas by intent: " + ", ".join(f"{k} {v}" for k, v in sorted(intents.items())))
    if first is not None:
        click.echo(f"  from {iso(first) or '-'} to {iso(last) or '-'}")


@memory_group.command("topics")
@click.argument("session", required=False)
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True)
@format_option
@pass_env
def topics_command(env: Env, session: str | None, limit: int) -> None:
    """List topic spans (topic, then its sub-spans) of a session, or of all sessions.

    Each span comes with its summary (spec 004): its focus (the terms its prompts use most),
    its last decisions and conclusions, and the questions nothing answered.

    \b
    Examples:
        ctx memory topics
        ctx memory topics 4d5611e5
    """
    from ctxstore.claude.inject import escape_tags
    from ctxstore.memory.manage import memory_topics
    from ctxstore.memory.search import iso

    session, rows = memory_topics(_memory_dir(env), session, limit)
    spans = [{"id": r[0], "session": r[1], "parent": r[2], "name": r[3], "depth": r[4],
              "turns": [r[5], r[6]], "start": iso(r[7]), "end": iso(r[8]), "ideas": r[9],
              "summary": summary.to_json()} for r, summary in rows]
    if env.fmt == "json":
        emit_json({"spans": spans})
        return
    if not spans:
        click.echo("no topics")
        return
    for span in spans:
        indent = "  " * int(span["depth"])
        click.echo(f"{indent}{span['id']:>5} {span['start'] or '-'} [{str(span['session'])[:8]}] "
                   f"{escape_tags(str(span['name']))} (turns {span['turns'][0]}-{span['turns'][1]}"
                   f", {plural(int(span['ideas']), 'idea')})")
        summary = span["summary"]
        assert isinstance(summary, dict)
        for label, key in (("focus", "focus"), ("decided", "decisions"),
                           ("concluded", "conclusions"), ("open", "open_questions")):
            if summary[key]:
                sep = ", " if key == "focus" else " | "
                click.echo(f"{indent}      {label}: {escape_tags(sep.join(summary[key]))}")


@memory_group.command("promote")
@click.argument("idea_id", type=click.IntRange(min=1))
@click.option("--type", "node_type", default=None,
              help="The node type (default: from the idea's intent: decision -> decision, "
                   "conclusion -> fact, ...).")
@click.option("--allow-secret", is_flag=True,
              help="Promote the idea even if it holds a secret (it reaches Git with .ctx/).")
@format_option
@pass_env
def promote_command(env: Env, idea_id: int, node_type: str | None, allow_secret: bool) -> None:
    """Make an idea a shared knowledge node, DERIVED_FROM its transcript span.

    \b
    Example:
        ctx memory promote 42 --type decision
    """
    from ctxstore.memory.promote import promote_idea

    added = promote_idea(env.session(), _memory_dir(env), idea_id, node_type,
                         allow_secret=allow_secret)
    node = added.node
    if env.fmt == "json":
        emit_json({"id": node.id, "type": node.type, "idea": idea_id,
                   "derived_from": node.metadata.get("derived_from")})
        return
    click.echo(f"promoted idea {idea_id} to {node.type} {node.id}")


@memory_group.command("forget")
@click.option("--session", default=None, help="The session to forget (an id or a unique prefix).")
@click.option("--all", "everything", is_flag=True, help="Forget every session.")
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation (required when "
              "standard input is not a terminal).")
@format_option
@pass_env
def forget_command(env: Env, session: str | None, everything: bool, yes: bool) -> None:
    """Delete what transcript memory holds of one session (and its subagents), or of all.

    Its turns, topics, ideas and their links go, overwritten on disk. The transcript lines
    already read are not indexed again; new lines of the session are. Asks on a terminal.

    \b
    Examples:
        ctx memory forget --session 4d5611e5
        ctx memory forget --all --yes
    """
    import sys

    if (session is None) == (not everything):
        raise InvalidInput("give --session ID or --all (one of them)",
                           hint="ctx memory forget --session 4d5611e5")
    from ctxstore.memory.manage import forget_memory, memory_session, open_existing

    if session is not None:
        session = memory_session(_memory_dir(env), session, option="--session")
    else:
        open_existing(_memory_dir(env)).close()  # no memory: said before asking
    what = f"session {session}" if session else "every session"
    if not yes:
        if not sys.stdin.isatty():
            raise InvalidInput(f"refusing to forget {what} without confirmation: standard "
                               "input is not a terminal", hint="pass --yes to forget it")
        if not click.confirm(f"Forget {what} from transcript memory?", default=False,
                             err=True):
            raise click.Abort()
    turns = forget_memory(_memory_dir(env), session)
    if env.fmt == "json":
        emit_json({"session": session, "all": everything, "turns": turns})
        return
    click.echo(f"forgot {what}: {plural(turns, 'turn')}")
