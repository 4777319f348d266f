"""The Stop hook: run the ``<ctx:*>`` commands of the last assistant turn, each once.

Each command is claimed in the state before it runs, so identical Stop hooks running at once
(ctx installed at user and project level) run it once; one failing command is reported and
the next runs. A command's keys (its turn, its transcript line, its reply) make a turn read
again run nothing twice (docs/hooks.md "Turn identity").
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxstore.claude.hooks._common import (
    MEMORY_STOP_BACKLOG_SECONDS,
    MEMORY_STOP_SECONDS,
    Payload,
    _drain,
    _message,
    _notice,
    _open_session,
    _read_reply,
    _repair_notes,
    _repairing,
    _run,
    _session,
    _text,
    _usable_path,
    _with_memory,
)
from ctxstore.claude.inject import sanitize_text
from ctxstore.claude.state import HookState, key_of, open_state
from ctxstore.errors import CtxError, StoreCorrupt

if TYPE_CHECKING:
    from ctxstore.claude.tags import TagProblem
    from ctxstore.claude.transcript import TextBlock
    from ctxstore.session import Session

__all__ = ["MAX_COMMANDS_PER_TURN", "stop", "turn_commands"]

MAX_COMMANDS_PER_TURN = 50
# Blocks that come from no transcript line (``--response``, ``last_assistant_message``).
_UNKEYED_BLOCKS = frozenset({"response", "last_assistant_message"})


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
               ) -> tuple[list[TextBlock], str | None, str | None, list[str], tuple[str, ...]]:
    """The turn's text blocks, its identity, the line that opened it, problems, files touched.

    The opening line is ``Turn.prompt_uuid`` (None without a transcript).

    Turn identity (docs/hooks.md "Turn identity"): the payload's ``prompt_id``; else the
    ``uuid`` of the transcript line that opened the turn (the prompt, or the end of the
    previous turn); else that of the turn's first assistant line read. None when there is
    none of these (``--response``, no transcript): the caller counts prompts instead.
    """
    from ctxstore.claude.transcript import TextBlock, Turn, merge_final_message, read_last_turn

    prompt_id = _text(payload, "prompt_id") or None
    if response is not None:
        return [TextBlock("response", sanitize_text(response))], prompt_id, None, [], ()
    path = _usable_path(_text(payload, "transcript_path"))
    turn = read_last_turn(path, timeout=timeout) if path is not None else Turn([], None)
    problems = []
    if turn.timed_out:
        problems.append(f"the transcript was not read whole within {timeout:g} s "
                        "(CTX_TRANSCRIPT_TIMEOUT); commands earlier in the turn were not run")
    blocks = merge_final_message(turn, _text(payload, "last_assistant_message"))
    first_line = next((b.key.rsplit(":", 1)[0] for b in turn.blocks
                       if b.key not in _UNKEYED_BLOCKS), None)
    return (blocks, prompt_id or turn.prompt_uuid or first_line, turn.prompt_uuid, problems,
            turn.files)


def _stop(root: Path | None, payload: Payload, response: str | None,
          timeout: float | None) -> Payload:
    """The Stop hook's phases: read the turn, parse it, pick what to run, run it, follow up."""
    session = _session(payload)
    read_ms = int(time.time() * 1000)  # before the reading: the reply was written before it
    blocks, turn_id, opened_by, read_problems, files = _read_turn(payload, response, timeout)
    has_tags = any("<ctx:" in block.text for block in blocks)
    state = open_state(root, create=has_tags) if root is not None else None
    if turn_id is None:
        turn_id = _counted_turn(state, session)
    done = _turn_done_key(session, turn_id, blocks) if has_tags and not read_problems else None
    if state is not None and done is not None and _already_done(state, done):
        state.close()  # a repeated Stop of a turn fully run: no parser to import
        return {}
    commands, bad = turn_commands(blocks, session, turn_id, opened_by, read_ms)
    for cmd in commands:  # the files the turn touched: the provenance of what it writes
        if files and cmd["name"] in ("remember", "summarize"):
            cmd["files"] = list(files)
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
