"""Claude Code hook handlers: a payload dict in, one output dict out (docs/hooks.md).

- ``session_start``: the default view (capped for injection) plus results pending for
  the session; runs for every ``source`` (startup, resume, clear, compact, fork), so
  memory is re-injected after a compaction.
- ``prompt_submit``: delivers pending recall / status / expand results exactly once, and
  counts the prompt (a turn's identity when nothing else names it, see ``_read_turn``).
- ``stop``: runs the ``<ctx:*>`` commands of the whole last assistant turn, each once:
  each is claimed in the state before it runs, so identical Stop hooks running at once
  (ctx installed at user and project level) run it once; one failing command is
  reported and the next runs.
- ``pre_compact`` / ``session_end``: retry commands deferred under a held lock; record
  the compaction. ``session_end`` also composes the default view into the cache when the
  session changed the store (tens of milliseconds; SessionEnd has a 1.5 s budget, and a
  hook killed mid-way leaves SQLite as it was), so the next session start reads it ready.

Every handler is cheap when it has nothing to do: prompt-submit opens only
``local/state.sqlite`` (and not even that when it does not exist), stop opens the store
only when the turn holds commands. Commands never wait for the writer lock: under a
held lock they are queued in the state and run by the next hook (RELIABILITY.md CC-06).
A damaged ``local/state.sqlite``, found when it is opened or part-way through a hook, is
moved aside and replaced, the hook runs again, and a notice is said once (state.py).
The CLI (``ctxstore/cli/hook_run.py``) reads stdin, finds the store and prints the result.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxstore.claude.inject import MAX_INJECT_CHARS, escape_tags, frame, frame_items, sanitize_text
from ctxstore.claude.state import (
    NOTICE_KEY,
    HookState,
    StateDamaged,
    key_of,
    open_state,
    peek_state,
    repair_state,
)
from ctxstore.errors import (
    CtxError,
    IndexNotReady,
    LockConflict,
    StoreCorrupt,
    UnsafePath,
    UpgradeRequired,
)

if TYPE_CHECKING:
    from ctxstore.claude.tags import TagProblem
    from ctxstore.claude.transcript import TextBlock
    from ctxstore.config import Config
    from ctxstore.lifecycle.consolidate import Due
    from ctxstore.session import Session

__all__ = ["MAX_COMMANDS_PER_TURN", "LOCK_WAIT_SECONDS", "HANDLERS",
           "find_store_root", "session_start", "preview_session_start", "prompt_submit", "stop",
           "pre_compact",
           "session_end", "turn_commands"]

MAX_COMMANDS_PER_TURN = 50
LOCK_WAIT_SECONDS = 0.25
# Seconds the Stop hook (and PreCompact / SessionEnd) may spend indexing the transcript into
# transcript memory: past them the rest waits for the next hook (docs/memory.md).
MEMORY_STOP_SECONDS = 0.3
# A Stop that finds a large backlog (memory.index.BACKLOG_BYTES unread, e.g. a long session from
# before memory was on) takes only this (one or two batches of memory.index.BUDGET_BATCH_BYTES),
# so the reply is not held up; the next hooks, PreCompact / SessionEnd and backfill continue it.
MEMORY_STOP_BACKLOG_SECONDS = 0.05
MEMORY_END_SECONDS = 1.0
_MAX_MESSAGE = 1_000
# Blocks that come from no transcript line (``--response``, ``last_assistant_message``).
_UNKEYED_BLOCKS = frozenset({"response", "last_assistant_message"})
Payload = dict[str, Any]


# -- payload and store discovery ---------------------------------------------------------
def _text(payload: Payload, key: str) -> str | None:
    """A string field, or None when absent or of another type (parse tolerantly)."""
    value = payload.get(key)
    return value if isinstance(value, str) else None


def _session(payload: Payload) -> str:
    return sanitize_text(_text(payload, "session_id") or "")[:200]


def _usable_path(text: str | None) -> Path | None:
    if not text or "\0" in text or not text.startswith("/"):
        return None
    return Path(text)


def find_store_root(cwd: str | None, explicit: str | None, home: Path | None) -> Path | None:
    """The ``.ctx`` directory a hook works on, or None (hooks never create a store).

    ``explicit`` (``--ctx-dir`` / ``CTX_DIR``) wins; else the nearest ``.ctx/`` from ``cwd``
    upwards, stopping at the Git top level (HK-04; ``repo.discover_store``); else the user
    store ``~/.ctx`` if it exists.

    Raises:
        RefNotFound: (E005) the project's ``.ctx/`` directory has no HEAD: a damaged
            project store is reported, never replaced by the user store (whose data a
            Stop hook would otherwise write to).
    """
    from ctxstore.discovery import discover_store
    from ctxstore.errors import StoreNotFound

    if explicit:
        path = Path(explicit)
        for candidate in (path, path / ".ctx"):
            if (candidate / "HEAD").is_file():
                return candidate
        if (path / ".ctx").is_dir():
            discover_store(path)  # raises RefNotFound naming it
        return None
    user = home / ".ctx" if home is not None else None
    start = _usable_path(cwd)
    if start is not None and start.is_dir():
        try:
            return discover_store(start, user_store=user, stop_at_git=True)
        except StoreNotFound:
            pass
    if user is not None and (user / "HEAD").is_file():
        return user
    return None


def _open_session(root: Path, config: Config | None = None, *, build: bool = True) -> Session:
    # Imported here: a hook with nothing to do never loads the store layer.
    from ctxstore.session import Session

    # Never block the agent on another writer. ``build=False``: the index is read only if it
    # needs no full build (an older ctx's, a partial one, one another process builds); else
    # IndexNotReady, and the hook answers without it (a build can outlast the hook's timeout).
    return Session.open(root, lock_timeout=LOCK_WAIT_SECONDS, config=config, build=build)


def _repair_notes(db: Session) -> list[str]:
    """The notices of a damaged index ``db`` rebuilt on the way (said in ``systemMessage``)."""
    return [repair.message() for repair in db.take_repairs()]


def _context(event: str, text: str) -> Payload:
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


def _message(lines: list[str]) -> Payload:
    if not lines:
        return {}
    text = "ctx: " + "; ".join(dict.fromkeys(lines))  # one note said once
    if len(text) > _MAX_MESSAGE:
        text = text[:_MAX_MESSAGE - 20] + " [... more omitted]"
    return {"systemMessage": escape_tags(text)}


# -- running commands ----------------------------------------------------------------------
def _keys(session: str, turn_id: str, items: list[str]) -> list[str]:
    """A key per item of a turn that is the same however often the turn is read.

    Session, turn, the item's text, and which identical item it is (the n-th one).
    """
    from collections import Counter

    seen: Counter[str] = Counter()
    out = []
    for item in items:
        seen[item] += 1
        out.append(key_of(session, turn_id, item, str(seen[item])))
    return out


def turn_commands(blocks: list[TextBlock], session: str, turn_id: str,
                  opened_by: str | None = None, read_ms: int | None = None
                  ) -> tuple[list[dict[str, Any]], list[TagProblem]]:
    """Parse every block of a turn.

    Give each command a key that is the same however often the turn is read (session, turn, tag
    text, n-th identical tag).

    A command read from a transcript line also gets an alias keyed by that line (its
    ``uuid`` and block index, the tag text, the n-th identical tag in the block): a
    command already run under either key never runs again, so a previous turn read
    again (a new prompt the transcript does not show as one, a lagging ``prompt_id``)
    re-runs nothing (TR-02, TR-12). When the transcript names the line that opened the
    turn (``opened_by``: its prompt), every command also gets an alias keyed by it: a tag
    run from ``last_assistant_message`` while its line was not written yet has no line key,
    and the later Stop that reads that line (the next turn's, whose own lines lag) must
    know it ran.

    When the transcript lags by a whole turn, its prompt line missing too, neither names the
    reply. So every command also carries its *reply key* (session, the text of its block, the
    tag text, the n-th identical tag in the block): one from ``last_assistant_message`` with
    ``read_ms``, when this Stop read it; one from a transcript line with ``written_ms``, the
    line's ``timestamp``. A line whose reply key ran from ``last_assistant_message`` read after
    the line was created is that reply (``_to_run``); the same reply written again in a later
    turn is created after that read, and runs.
    """
    if not any("<ctx:" in block.text for block in blocks):
        return [], []  # the common reply: no tags, so no parser to import
    from ctxstore.claude.tags import parse_commands

    found: list[Any] = []
    aliases: list[list[str]] = []
    replies: list[dict[str, Any]] = []
    problems: list[TagProblem] = []
    for block in blocks:
        cmds, bad = parse_commands(block.text)
        found += cmds
        problems += bad
        raws = [c.raw for c in cmds]
        if block.key in _UNKEYED_BLOCKS:
            aliases += [[] for _ in cmds]
        else:
            aliases += [[k] for k in _keys(session, "line\0" + block.key, raws)]
        when = ({"read_ms": read_ms} if block.key == "last_assistant_message"
                else {"written_ms": block.at_ms} if block.key not in _UNKEYED_BLOCKS else None)
        replies += [{"reply": k, **when} if when is not None and read_ms is not None else {}
                    for k in _keys(session, "reply\0" + _reply_text(block.text), raws)]
    keys = _keys(session, turn_id, [cmd.raw for cmd in found])
    if opened_by is not None:
        opened = _keys(session, "opened\0" + opened_by, [cmd.raw for cmd in found])
        aliases = [[*alias, key] for alias, key in zip(aliases, opened, strict=True)]
    commands = [{"name": cmd.name, "attrs": dict(cmd.attrs), "content": cmd.content,
                 "raw": cmd.raw, "key": key, "aliases": alias, **reply}
                for cmd, key, alias, reply in zip(found, keys, aliases, replies, strict=True)]
    return commands, problems


def _reply_text(text: str) -> str:
    """A block's text as ``merge_final_message`` compares it with ``last_assistant_message``.

    Without ``<system-reminder>`` sections, trimmed; a digest, so keys stay short.
    """
    from ctxstore.memory.transcript import strip_reminders

    return key_of(strip_reminders(text).strip())


def _refresh_claude_md(db: Session) -> str | None:
    """The optional CLAUDE.md refresh after a Stop that changed memory (config ``claude.claude_md_on_stop``).

    A problem to report, or None.
    """
    from ctxstore.claude.claudemd import refresh

    try:
        refresh(db)
    except StoreCorrupt:
        raise
    except CtxError as exc:
        return f"CLAUDE.md not refreshed: {exc.message}"
    return None


def _run(db: Session, state: HookState, batch: list[tuple[str, dict[str, Any]]], *,
         queued: bool = False) -> tuple[bool, list[str], bool]:
    """Run ``(session, command)`` pairs in order; on a held lock queue the rest.

    Each command is claimed in the state before it runs (``HookState.claim``), so of
    identical hooks running at once exactly one runs it; its result and the record that
    it ran are written in one transaction. A library error, a query SQLite cannot run
    (mapped to a typed error by ``execute``) included, is reported and the next command
    runs: one bad tag never costs the rest of the turn.

    Returns:
        Whether the store changed, the problems to report, and whether commands were
        deferred because of the lock.
    """
    from ctxstore.claude.commands import CommandContext, execute

    changed = False
    problems: list[str] = []
    for i, (session, cmd) in enumerate(batch):
        key, aliases = cmd["key"], list(cmd.get("aliases") or ())
        if not state.claim(key, session, aliases=aliases, queued=queued):
            continue  # run (or being run) by another hook
        pending = None
        try:
            outcome = execute(CommandContext(db, state, session), cmd)
        except (LockConflict, UpgradeRequired) as exc:
            for later_session, later in batch[i:]:  # releases this command's claim
                state.enqueue(later["key"], later_session, later)
            if isinstance(exc, UpgradeRequired):  # nothing written; kept until `ctx upgrade`
                problems.append(f"{exc.message} ({exc.hint}); {len(batch) - i} command(s) "
                                "deferred to the next hook after it")
            else:
                who = f" (pid {exc.pid})" if exc.pid else ""
                problems.append(f"store locked by another process{who}; {len(batch) - i} "
                                "command(s) deferred to the next hook")
            return changed, problems, True
        except StateDamaged:
            raise  # the state is replaced and the hook runs again (_repairing)
        except StoreCorrupt:
            _release(state, key)
            raise
        except CtxError as exc:
            problems.append(f"<ctx:{cmd['name']}> failed: {exc.message}")
        except BaseException:
            _release(state, key)  # a hook run again later may retry it
            raise
        else:
            changed = changed or outcome.changed
            if outcome.problem:
                problems.append(outcome.problem)
            if outcome.pending:
                pending = (session, *outcome.pending)
        state.mark_executed(key, session, aliases, pending=pending, reply=_read_reply(cmd))
    return changed, problems, False


def _read_reply(cmd: dict[str, Any]) -> tuple[str, int] | None:
    """The reply key of a command run from ``last_assistant_message`` and when it was read."""
    read_ms = cmd.get("read_ms")
    if isinstance(read_ms, int) and isinstance(cmd.get("reply"), str):
        return cmd["reply"], read_ms
    return None


def _release(state: HookState, key: str) -> None:
    """Drop this process's claim on ``key`` while another error propagates.

    Which wins: a claim left behind is taken over once this process is gone.
    """
    try:
        state.release(key)
    except (StateDamaged, sqlite3.Error):
        pass


def _drain(root: Path, state: HookState, db: Session | None = None
           ) -> tuple[bool, list[str], bool]:
    """Run the commands a held lock deferred earlier (cheap when there are none).

    In ``db``, or in a session of its own, closed before it returns.
    """
    if not state.has_queued():
        return False, [], False
    if db is not None:
        return _run(db, state, state.queued(), queued=True)
    with _open_session(root) as own:
        ran, problems, deferred = _run(own, state, state.queued(), queued=True)
        return ran, problems + _repair_notes(own), deferred


def _repairing(root: Path | None, handler: Callable[[], Payload]) -> Payload:
    """Run ``handler``.

    If it finds ``local/state.sqlite`` damaged part-way, move the state aside (a one-time notice
    goes into the fresh one) and run it once more.
    """
    try:
        return handler()
    except StateDamaged as damage:
        if root is None:
            raise
        repair_state(root, damage)
    try:
        return handler()
    except StateDamaged as damage:
        why = (f"the hook state .ctx/local/state.sqlite is damaged and could not be replaced "
               f"({damage.reason}); nothing was run")
        return _message([why])


def _with_memory(root: Path | None, payload: Payload, result: Payload, seconds: float,
                 backlog_seconds: float | None = None) -> Payload:
    """``result`` after indexing the new transcript bytes into transcript memory (docs/memory.md).

    Within ``seconds``, or ``backlog_seconds`` over a large backlog (the next hook continues).
    A damaged memory is named in the message, never wiped; a memory busy with another writer is
    left for the next hook.
    """
    path = _usable_path(_text(payload, "transcript_path"))
    if root is None or path is None:
        return result
    from ctxstore.memory.index import index_transcript

    try:
        report = index_transcript(root, path, seconds=seconds, backlog_seconds=backlog_seconds)
    except sqlite3.OperationalError:
        return result  # locked or busy: the cursor did not move, the next hook continues
    except sqlite3.DatabaseError as exc:  # damaged while being read: named, never wiped
        why = f".ctx/local/memory.sqlite is damaged ({exc}); move it aside and run ctx memory backfill"
        problem = _message([f"transcript memory: {why}"])["systemMessage"]
        earlier = result.get("systemMessage")
        return {**result, "systemMessage": f"{earlier}\n{problem}" if earlier else problem}
    except (StoreCorrupt, UnsafePath) as exc:
        problem = _message([f"transcript memory: {exc.message}"])["systemMessage"]
        earlier = result.get("systemMessage")
        return {**result, "systemMessage": f"{earlier}\n{problem}" if earlier else problem}
    if report.skipped:  # passed over for good (the cursor is past them): said in the hook log
        from ctxstore.claude.hooklog import log_problem

        log_problem(root, _text(payload, "hook_event_name") or "hook",
                    f"transcript memory: {report.skipped} line(s) of {report.path} skipped "
                    "(malformed, or over 8 MB), never read again")
    return result


def _notice(state: HookState, *, take: bool = True) -> list[str]:
    """The one-time notice that a damaged state was replaced, if not reported yet.

    ``take=False`` (a preview) leaves it for the next hook.
    """
    text = state.take(NOTICE_KEY) if take else state.get(NOTICE_KEY)
    return [text] if text else []


# -- handlers ------------------------------------------------------------------------------
def stop(root: Path | None, payload: Payload, *, response: str | None = None,
         transcript_timeout: float | None = None) -> Payload:
    """Run the ``<ctx:*>`` commands of the last assistant turn.

    Each exactly once, also when identical Stop hooks run at once.

    ``response`` (``ctx hook stop --response``) replaces the transcript, for tests and
    simple integrations (spec 001 §3). ``transcript_timeout`` (``CTX_TRANSCRIPT_TIMEOUT``,
    read by the CLI) bounds the seconds spent reading the transcript; None: no bound.

    Raises:
        StoreCorrupt: if the store is damaged.
        UnsafePath: if ``.ctx/local`` is a symbolic link.
    """
    result = _repairing(root, lambda: _stop(root, payload, response, transcript_timeout))
    return _with_memory(root, payload, result, MEMORY_STOP_SECONDS, MEMORY_STOP_BACKLOG_SECONDS)


def _read_turn(payload: Payload, response: str | None, timeout: float | None
               ) -> tuple[list[TextBlock], str | None, str | None, list[str]]:
    """The turn's text blocks, its identity, the transcript line that opened it, problems.

    The opening line is ``Turn.prompt_uuid`` (None without a transcript).

    Turn identity (docs/hooks.md "Turn identity"): the payload's ``prompt_id``; else the
    ``uuid`` of the transcript line that opened the turn (the prompt, or the end of the
    previous turn); else that of the turn's first assistant line read. None when there is
    none of these (``--response``, no transcript): the caller counts prompts instead.
    """
    from ctxstore.claude.transcript import TextBlock, Turn, merge_final_message, read_last_turn

    prompt_id = _text(payload, "prompt_id") or None
    if response is not None:
        return [TextBlock("response", sanitize_text(response))], prompt_id, None, []
    path = _usable_path(_text(payload, "transcript_path"))
    turn = read_last_turn(path, timeout=timeout) if path is not None else Turn([], None)
    problems = []
    if turn.timed_out:
        problems.append(f"the transcript was not read whole within {timeout:g} s "
                        "(CTX_TRANSCRIPT_TIMEOUT); commands earlier in the turn were not run")
    blocks = merge_final_message(turn, _text(payload, "last_assistant_message"))
    first_line = next((b.key.rsplit(":", 1)[0] for b in turn.blocks
                       if b.key not in _UNKEYED_BLOCKS), None)
    return blocks, prompt_id or turn.prompt_uuid or first_line, turn.prompt_uuid, problems


def _stop(root: Path | None, payload: Payload, response: str | None,
          timeout: float | None) -> Payload:
    """The Stop hook's phases: read the turn, parse it, pick what to run, run it, follow up."""
    session = _session(payload)
    read_ms = int(time.time() * 1000)  # before the reading: the reply was written before it
    blocks, turn_id, opened_by, read_problems = _read_turn(payload, response, timeout)
    has_tags = any("<ctx:" in block.text for block in blocks)
    state = open_state(root, create=has_tags) if root is not None else None
    if turn_id is None:
        turn_id = _counted_turn(state, session)
    done = _turn_done_key(session, turn_id, blocks) if has_tags and not read_problems else None
    if state is not None and done is not None and _already_done(state, done):
        state.close()  # a repeated Stop of a turn fully run: no parser to import
        return {}
    commands, bad = turn_commands(blocks, session, turn_id, opened_by, read_ms)
    problems = read_problems + [f"{p.reason}: {p.snippet}" for p in bad]
    if root is None:
        return _message(_no_store(session, commands, problems))
    if state is None:
        return _message(problems)
    with state:
        notice = _notice(state)
        todo, over = _to_run(root, state, session, commands)
        problems = notice + _once(state, session, turn_id, problems + over)
        if not todo and not state.has_queued():
            _mark_done(state, session, done, commands)
            return _message(problems)
        db, changed, ran = _run_turn(root, state, session, todo)
        problems += ran
        if not state.has_queued():
            _mark_done(state, session, done, commands)
    with db:
        problems += _after_turn(db, changed)
        problems += _repair_notes(db)
    return _message(problems)


def _turn_done_key(session: str, turn_id: str, blocks: list[TextBlock]) -> str:
    """The key recorded once every command of this exact turn text has run or been dropped.

    A repeated Stop of the same turn (the common case after a reply with tags) then
    returns before parsing, which spares it the CommonMark parser's import (~20 ms). Any
    change to the turn's text (the turn went on) gives another key and the full path.
    """
    return key_of(session, turn_id, "turn-done", *(block.text for block in blocks))


def _already_done(state: HookState, key: str) -> bool:
    """True when ``key`` was recorded and nothing waits in the queue (else: the full path).

    ``state`` is closed when reading it fails.
    """
    try:
        return not state.unexecuted([key]) and not state.has_queued()
    except BaseException:
        state.close()
        raise


def _mark_done(state: HookState, session: str, key: str | None,
               commands: list[dict[str, Any]]) -> None:
    """Record that this turn's text has been fully processed (see ``_turn_done_key``).

    Only when every one of its commands has run, not while another hook holds a claim.
    """
    if key is not None and not state.unexecuted([c["key"] for c in commands]):
        state.mark_executed(key, session)


def _counted_turn(state: HookState | None, session: str) -> str:
    """The turn's identity when nothing names it: the prompts prompt-submit counted.

    So a Stop of one turn run twice runs nothing twice, and the same reply in a later turn
    runs. ``state`` is closed when reading it fails.
    """
    try:
        count = state.prompt_count(session) if state is not None else 0
    except BaseException:
        if state is not None:
            state.close()
        raise
    return f"prompt-count:{count}"


def _no_store(session: str, commands: list[dict[str, Any]], problems: list[str]) -> list[str]:
    """The problems to report when no store was found: a notice first, once per session."""
    if not commands:  # the common reply: nothing more to import
        return problems
    from ctxstore.claude.notice import first_notice

    if first_notice("no-store\0" + session):  # once per session, visibly
        problems.insert(0, f"no ctx store found; {len(commands)} command(s) not run "
                           "(run `ctx init` at the repository root, or `ctx install --user` "
                           "for a user store); said once per session")
    return problems


def _to_run(root: Path, state: HookState, session: str, commands: list[dict[str, Any]]
            ) -> tuple[list[dict[str, Any]], list[str]]:
    """The turn's commands no hook has run or claimed, at most the per-turn limit; problems.

    A command runs only when neither its key nor any alias was run before, and it is not the
    reply a Stop ran from ``last_assistant_message`` before the transcript held it (``_ran_as_reply``;
    it is recorded as run under its keys then). Those over ``max_commands_per_turn`` are
    recorded as run (dropped for good, not left for a rerun) and reported.
    """
    names = [c["key"] for c in commands] + [a for c in commands for a in c["aliases"]]
    fresh = state.unexecuted(names)
    todo = [c for c in commands if c["key"] in fresh and all(a in fresh for a in c["aliases"])]
    ran = _ran_as_reply(state, todo)
    for cmd in ran:  # known by its line keys from now on
        state.mark_executed(cmd["key"], session, cmd["aliases"])
    todo = [c for c in todo if all(c is not r for r in ran)]
    cap = _limit(root, "max_commands_per_turn", MAX_COMMANDS_PER_TURN) if todo else 0
    if len(todo) <= cap:
        return todo, []
    for cmd in todo[cap:]:  # dropped for good, not left for a rerun
        state.mark_executed(cmd["key"], session, cmd["aliases"], reply=_read_reply(cmd))
    return todo[:cap], [f"{len(todo) - cap} command(s) over the limit of {cap} per turn "
                        "were not run (config [claude] max_commands_per_turn)"]


def _ran_as_reply(state: HookState, commands: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The commands read from transcript lines that already ran from ``last_assistant_message``.

    The same reply key, run from a reply read at or after the line's ``timestamp`` (a line with
    no time counts as written before: a command never runs twice).
    """
    lines = [c for c in commands if "written_ms" in c]
    read = state.replies_read([c["reply"] for c in lines]) if lines else {}
    return [c for c in lines if c["reply"] in read
            and (c["written_ms"] is None or c["written_ms"] <= read[c["reply"]])]


def _run_turn(root: Path, state: HookState, session: str, todo: list[dict[str, Any]]
              ) -> tuple[Session, bool, list[str]]:
    """Run the deferred commands, then this turn's, in a session opened here.

    Under a held lock this turn's commands are queued behind the older ones, keeping the
    order. Returns the open session (closed here only when this raises), whether the store
    changed, and the problems to report.
    """
    db = _open_session(root)
    try:
        changed, problems, deferred = _drain(root, state, db)
        if deferred:  # keep the order: this turn's commands wait behind the older ones
            for cmd in todo:
                state.enqueue(cmd["key"], session, cmd)
        else:
            ran, more, _ = _run(db, state, [(session, c) for c in todo])
            changed, problems = changed or ran, problems + more
        state.prune()
    except BaseException:
        db.close()
        raise
    return db, changed, problems


def _after_turn(db: Session, changed: bool) -> list[str]:
    """What follows a turn that ran commands: the optional CLAUDE.md refresh; its problems."""
    if changed and (db.config.get("claude", "claude_md_on_stop")
                    or db.config.get("claude", "agents_md_on_stop")):
        if (why := _refresh_claude_md(db)) is not None:
            return [why]
    return []


def _limit(root: Path, key: str, default: int) -> int:
    """A ``[claude]`` limit of the store's config.toml (the default if it cannot be read).

    A config.toml that cannot be read is reported by the store's session, opened next.
    """
    from ctxstore.limits import load_store_config

    try:
        value = load_store_config(root).get("claude", key)
    except (CtxError, KeyError):
        return default
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _once(state: HookState, session: str, turn_id: str, problems: list[str]) -> list[str]:
    """The tag problems of this turn not reported yet.

    They are recorded as reported, so a repeated Stop of the same turn (or an identical hook running
    at once) does not warn twice (keyed as commands are, and claimed in one transaction).
    """
    if not problems:
        return []
    keys = _keys(session, turn_id, ["problem\0" + text for text in problems])
    fresh = state.mark_new(keys, session)
    return [text for key, text in zip(keys, problems, strict=True) if key in fresh]


def _take_fitting(state: HookState, session: str, room: int, *, take: bool = True) -> list[str]:
    """Pending texts that fit in ``room`` characters, with a note of how many were held.

    The rest go back for the next prompt. ``take=False`` (a preview) leaves them all waiting.
    """
    taken = state.take_pending(session) if take else state.peek_pending(session)
    out: list[str] = []
    used = 0
    for i, (_kind, value) in enumerate(taken):
        if used + len(value) > room and out:
            for later_kind, later_value in taken[i:] if take else ():
                state.add_pending(session, later_kind, later_value)
            return out + [f"[{len(taken) - i} more ctx result(s) held for the next prompt]\n"]
        out.append(value)
        used += len(value)
    return out


def prompt_submit(root: Path | None, payload: Payload) -> Payload:
    """Deliver the results waiting for this session (recall, status, expand), once.

    Raises:
        StoreCorrupt: if the store is damaged (only when deferred commands run).
        UnsafePath: if ``.ctx/local`` is a symbolic link.
    """
    return _repairing(root, lambda: _prompt_submit(root, payload))


def _prompt_submit(root: Path | None, payload: Payload) -> Payload:
    if root is None:
        return {}
    prompt = sanitize_text(_text(payload, "prompt") or "")
    topical = len(prompt.split()) >= _MIN_PROMPT_WORDS  # "yes", "go on": no topic
    state = open_state(root, create=False)
    if state is None:
        # No state yet (no session start ran here, or it failed): a prompt with a topic
        # creates it, so relevant memory is injected and what was shown is remembered.
        if not topical:
            return {}
        try:
            state = open_state(root, create=True)
        except (OSError, sqlite3.Error):  # a read-only checkout: nothing to remember with
            return {}
        if state is None:
            return {}
    session = _session(payload)
    with state:
        state.count_prompt(session)  # a new turn begins (see _counted_turn)
        notice = _notice(state)
        _, problems, _ = _drain(root, state)
        problems = notice + problems
        texts = _take_fitting(state, session, MAX_INJECT_CHARS - 200)
        if prompt.strip():
            _note_prompt(state, session, prompt)
        if topical:  # else no store opened
            room = MAX_INJECT_CHARS - 200 - sum(len(t) for t in texts)
            found, trouble = _relevant(root, state, session, prompt, room)
            texts, problems = texts + found, problems + trouble
    out: Payload = _context("UserPromptSubmit", "\n".join(texts)) if texts else {}
    return {**out, **_message(problems)}


# -- relevant context (packs.session): what this session was shown, the recent prompts ------
_SEEN_CAP = 2_000
_MIN_PROMPT_WORDS = 3
_PROMPTS_KEPT, _PROMPT_CHARS = 3, 2_000


def _json_list(state: HookState, key: str) -> list[str]:
    import json

    try:
        value = json.loads(state.get(key) or "[]")
    except (ValueError, RecursionError):
        return []
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _seen(state: HookState, session: str) -> list[str]:
    """The node ids (and source keys) injected into this session's context so far."""
    return _json_list(state, f"injected:{session}")


def _mark_seen(state: HookState, session: str, keys: list[str], *, reset: bool = False) -> None:
    """Record ``keys`` as shown to the session (``reset``: its context was lost or is new)."""
    import json

    keys = list(dict.fromkeys(keys if reset else _seen(state, session) + keys))
    state.put_session("injected:", session, json.dumps(keys[-_SEEN_CAP:]))


def _note_prompt(state: HookState, session: str, prompt: str) -> None:
    """Keep the session's last few prompts: what a compaction's re-injection is relevant to."""
    import json

    recent = _json_list(state, f"recent_prompts:{session}")[-(_PROMPTS_KEPT - 1):]
    state.put_session("recent_prompts:", session, json.dumps(recent + [prompt[:_PROMPT_CHARS]]))


def _relevant(root: Path, state: HookState, session: str, text: str, room: int, *,
              title: str = "relevant memory", scale: int = 1,
              mark: bool = True) -> tuple[list[str], list[str]]:
    """Memory relevant to ``text`` not yet shown in this session, framed; problems to report.

    ``[retrieval] prompt_context`` off, a budget of 0, or nothing above the threshold inject
    nothing. ``scale`` multiplies the budget (a compaction re-injects more). A store that
    cannot be searched is reported and the prompt goes on. ``mark=False`` (a preview) records
    nothing as seen.
    """
    if room < 500:
        return [], []
    from ctxstore.limits import load_store_config
    from ctxstore.packs.session import prompt_settings, relevant_context

    problems: list[str] = []
    try:  # the settings first: switched off, the store is never opened
        config = load_store_config(root)
        on, threshold, budget = prompt_settings(config)
        if not on or not budget:
            return [], []
        with _open_session(root, config, build=False) as db:  # the config read once
            items = relevant_context(db, text, budget * scale, _seen(state, session),
                                     threshold=threshold, problems=problems)
            problems += _repair_notes(db)
    except StateDamaged:
        raise
    except CtxError as exc:
        return [], [f"relevant memory not searched: {exc.message}"]
    text, shown = frame_items(title, [item.text for item in items], limit=room)
    if not shown:
        return [], problems
    # only what the frame holds counts as seen: an item left out may come with a later prompt
    if mark:
        _mark_seen(state, session, [items[k].key for k in shown])
    return [text], problems


def _view_cache_key(root: Path, task: str | None) -> str | None:
    """What the composed default view depends on.

    The pointer files (every node, edge and view change moves them), config.toml (``[retrieval]
    narrative_days``), the active task and the budget; the clock only for a view whose query uses
    relative times (the cache entry says so, see ``_cached_view``). None when a pointer cannot be
    read plainly (then compose, which resolves it).
    """
    from ctxstore.fsio import read_regular  # bounded, no FIFO, no link: a clone is untrusted

    parts = []
    try:
        head = read_regular(root / "HEAD", 1024)
        parts.append(head)
        target = head.decode("ascii", "replace").strip()
        if target.startswith("ref: "):
            ref = target[5:].strip()
            if not ref.startswith("refs/") or ".." in ref:
                return None
            parts.append(read_regular(root / ref, 65536))
        for name in ("local/STAGE", "STAGE", "config.toml"):
            try:
                parts.append(read_regular(root / name, 1 << 20))
            except FileNotFoundError:
                parts.append(b"-")
    except (OSError, CtxError):
        return None
    from ctxstore.packs.session import SESSION_START_TOKENS

    parts.append(str(SESSION_START_TOKENS).encode())
    parts.append((task or "-").encode("utf-8", "replace"))
    return b"|".join(parts).decode("ascii", "replace")


def _hour() -> str:
    return time.strftime("%Y-%m-%dT%H", time.gmtime())


def _default_view(root: Path, task: str | None = None
                  ) -> tuple[str, bool, str | None, list[str], list[str]]:
    """The default view composed for injection (``packs.compose.compose_session_start``).

    Returns the view, whether it depends on the clock, a problem to report (kept with the
    view), the ids shown, and the notices of this composing only (a damaged index rebuilt).
    """
    from ctxstore.packs.compose import compose_session_start

    with _open_session(root, build=False) as db:
        view = compose_session_start(db, task=task, now=time.time())
        notes = _repair_notes(db)
    return view.text, view.timed, view.problem, list(view.ids), notes


def _cached_view(root: Path, state: HookState, *, store: bool = True
                 ) -> tuple[str, str | None, list[str]]:
    """The composed default view from the state's cache, or composed and cached anew.

    Also the problem composing it met (cached with it, so it is said at every start), and
    the ids of the nodes it shows.

    An entry is valid while the pointers, the config, the active task and the budget are
    unchanged, and, for a view with relative times, within the UTC hour it was composed in.
    ``store=False`` (a preview) composes without caching.
    """
    import json

    from ctxstore.knowledge.tasks import read_current_task

    task = read_current_task(root)
    key = _view_cache_key(root, task)
    cached = state.get("view_cache")
    if key is not None and cached is not None:
        try:
            entry = json.loads(cached)
        except (ValueError, RecursionError):
            entry = {}
        if isinstance(entry, dict) and entry.get("key") == key \
                and entry.get("hour") in (None, _hour()) and isinstance(entry.get("text"), str):
            problem, ids = entry.get("problem"), entry.get("ids")
            return (str(entry["text"]), problem if isinstance(problem, str) else None,
                    [i for i in ids if isinstance(i, str)] if isinstance(ids, list) else [])
    try:
        body, timed, problem, ids, notes = _default_view(root, task)
    except IndexNotReady as exc:
        return "", exc.note(), []  # not cached: the start after `ctx rebuild` composes it
    if key is not None and store:
        state.put("view_cache", json.dumps({"key": key, "hour": _hour() if timed else None,
                                            "text": body, "problem": problem, "ids": ids}))
    said = [p for p in (problem, *notes) if p]  # a repair is said now, not with every start
    return body, "; ".join(said) or None, ids


def session_start(root: Path | None, payload: Payload) -> Payload:
    """The default view of memory plus pending results, at every session (re)start.

    The composed view is cached in the state, keyed by the store's pointers: a session
    start on an unchanged store opens neither the store nor the index.

    Raises:
        StoreCorrupt: if the store is damaged.
    """
    return _repairing(root, lambda: _session_start(root, payload))


def preview_session_start(root: Path, *, source: str = "startup",
                          session: str | None = None) -> Payload:
    """What ``session_start`` would answer now, changing nothing (``ctx compose --session-start``).

    The same composition, run read-only: the state is opened read-only (``peek_state``), pending
    results stay waiting, nothing is marked as seen, the composed view is not cached, and
    commands deferred under a held lock are not run (a note says how many wait).

    Args:
        root: The ``.ctx`` directory.
        source: The SessionStart ``source`` (``startup``, ``resume``, ``clear``, ``compact``,
            ``fork``).
        session: The session id (its pending results and recent prompts count); None: a new
            session, which has none.

    Returns:
        The hook's output: ``hookSpecificOutput.additionalContext`` unless there is nothing to
        inject, and ``systemMessage`` with the problems it would report.

    Raises:
        StoreCorrupt: if the store is damaged.
    """
    from ctxstore.ids import new_ulid

    payload = {"hook_event_name": "SessionStart", "source": source,
               "session_id": session if session is not None else f"preview-{new_ulid()}"}
    return _session_start(root, payload, write=False)


def _session_start(root: Path | None, payload: Payload, *, write: bool = True) -> Payload:
    """The SessionStart answer; ``write=False``: as a preview, with nothing written."""
    if root is None:
        return {}
    from ctxstore.knowledge.tasks import read_current_task

    session = _session(payload)
    problems: list[str] = []
    pending: list[str] = []
    task = None
    try:
        state = open_state(root, create=True) if write else peek_state(root)
    except (OSError, sqlite3.Error):  # e.g. a read-only checkout: memory is still shown
        state = None
    except UnsafePath as exc:  # a linked local/: refused, and memory is still shown
        state, problems = None, [exc.message]
    compacted = _text(payload, "source") == "compact"
    lost: list[str] = []  # after a compaction: memory relevant to the recent prompts
    consolidation = None
    if state is None:
        try:
            body, _, problem, shown, notes = _default_view(root)
            problem = "; ".join(p for p in (problem, *notes) if p) or None
        except IndexNotReady as exc:
            body, problem, shown = "", exc.note(), []
    else:
        with state:
            notice = _notice(state, take=write)
            _, drained, _ = _drain(root, state) if write else (False, _waiting(state), False)
            problems = notice + drained
            pending = _take_fitting(state, session, MAX_INJECT_CHARS // 2, take=write)
            task = read_current_task(root)
            consolidation = _consolidation_line(state)
            body, problem, shown = _cached_view(root, state, store=write)
            # A new, cleared or compacted conversation holds only what is injected now.
            if write:
                _mark_seen(state, session, shown, reset=_text(payload, "source") != "resume")
            if compacted and (recent := _json_list(state, f"recent_prompts:{session}")):
                lost, trouble = _relevant(root, state, session, "\n".join(recent),
                                          MAX_INJECT_CHARS // 3, scale=2, mark=write,
                                          title="memory relevant to the recent prompts")
                problems += trouble
    if problem:
        problems.append(problem)
    lead = []
    if compacted:
        lead.append("ctx memory, injected again after the conversation was compacted.")
    if task:
        lead.append(f"Current ctx task: {sanitize_text(task)}")
    if consolidation:
        lead.append(consolidation)
    prefix = "".join(line + "\n" for line in lead) + "".join(pending)
    tail = "".join(lost)
    if not shown and not prefix and not tail:  # nothing stored to show: no empty frame
        return _message(problems)
    # No view (an index not ready, an empty store): the task line and pending results alone.
    view = frame("default view", body, limit=MAX_INJECT_CHARS - len(prefix) - len(tail)) \
        if body else ""
    text = prefix + view
    return {**_context("SessionStart", text + tail), **_message(problems)}


def _waiting(state: HookState) -> list[str]:
    """A preview's note of the commands a held lock deferred (the next hook runs them first)."""
    count = len(state.queued()) if state.has_queued() else 0
    return [f"{count} deferred command(s) wait; the next hook runs them first, which may change "
            "what it injects"] if count else []


def pre_compact(root: Path | None, payload: Payload) -> Payload:
    """Before a compaction: run deferred commands.

    The SessionStart with ``source: compact`` that follows re-injects memory (its payload says
    it follows a compaction, so nothing is recorded here). Claude Code discards
    its messages: a notice of a replaced state waits for the next prompt.
    """
    result = _repairing(root, lambda: _pre_compact(root, payload))
    return _with_memory(root, payload, result, MEMORY_END_SECONDS)


def _pre_compact(root: Path | None, payload: Payload) -> Payload:
    if root is None:
        return {}
    state = open_state(root, create=True)
    assert state is not None
    with state:
        _drain(root, state)
    return {}


def session_end(root: Path | None, payload: Payload) -> Payload:
    """At the end of a session.

    Run deferred commands if the lock is free, then compose the default view into the cache if the
    session changed the store, so the next session start finds it ready (the composing moves from
    the next start to this end). Claude Code discards its messages: a notice of a replaced state
    waits for the next prompt.
    """
    result = _repairing(root, lambda: _session_end(root, payload))
    return _with_memory(root, payload, result, MEMORY_END_SECONDS)


def _session_end(root: Path | None, payload: Payload) -> Payload:
    if root is None:
        return {}
    state = open_state(root, create=False)
    if state is None:
        return {}
    with state:
        _drain(root, state)
        from ctxstore.lifecycle.upkeep import session_end_upkeep  # never raises; not on the prompt path

        checked = state.get(CONSOLIDATION_CHECKED_KEY)
        # compaction triggers, the lifecycle pass, the consolidation triggers
        upkeep = session_end_upkeep(
            root, state.access_counts(),
            consolidation_checked=int(checked) if checked and checked.isdigit() else None,
            consolidation_pending=state.get(CONSOLIDATION_KEY) is not None)
        _note_consolidation(state, upkeep.consolidation, upkeep.problems)
        _cached_view(root, state)
        state.prune()  # idle sessions' values: the file must not grow with every session
    return {}


# Spec 003's consolidation triggers: when they last held, and the proposals left for /consolidate.
CONSOLIDATION_CHECKED_KEY = "consolidation_checked"
CONSOLIDATION_KEY = "consolidation_due"


def _note_consolidation(state: HookState, due: Due | None, problems: list[str]) -> None:
    """Keep what the session end's consolidation check found for the next session start.

    A trigger that held restarts the count of new memories; proposals are kept (their count and
    why) until a later check finds none. A check that could not run changes nothing.
    """
    import json

    if due is None or any(p.startswith("consolidation check") for p in problems):
        return
    if due.why != "pending":
        state.put(CONSOLIDATION_CHECKED_KEY, str(int(time.time() * 1000)))
    state.put(CONSOLIDATION_KEY, json.dumps({"why": due.why, "proposals": len(due.proposals)})
              if due.proposals else None)


def _consolidation_line(state: HookState) -> str | None:
    """The session start's line about consolidation proposals waiting, if any."""
    import json

    raw = state.get(CONSOLIDATION_KEY)
    try:
        due = json.loads(raw) if raw else None
    except (ValueError, RecursionError):
        return None
    if not isinstance(due, dict) or not isinstance(due.get("proposals"), int):
        return None
    why = due["why"] if isinstance(due.get("why"), str) else "pending"
    count = due["proposals"]
    return (f"ctx: consolidation is due ({sanitize_text(why)[:40]}): {count} merge "
            f"proposal{'s' if count != 1 else ''} of similar memories wait; review them with "
            "/consolidate (`ctx consolidate --dry-run`).")


HANDLERS: dict[str, Callable[[Path | None, Payload], Payload]] = {
    "session-start": session_start, "prompt-submit": prompt_submit, "stop": stop,
    "pre-compact": pre_compact, "session-end": session_end,
}
