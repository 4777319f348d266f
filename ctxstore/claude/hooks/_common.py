"""What every hook handler shares (docs/hooks.md).

Reading the payload, finding the store, opening a session that never waits on the writer
lock, shaping the output (``additionalContext``, ``systemMessage``), running ``<ctx:*>``
commands (each claimed before it runs; the rest queued under a held lock, and drained by the
next hook), running a handler again on a replaced ``local/state.sqlite``, and indexing the new
transcript bytes into transcript memory. It holds no handler of its own.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxstore.claude.inject import escape_tags, sanitize_text
from ctxstore.claude.state import NOTICE_KEY, HookState, StateDamaged, repair_state
from ctxstore.errors import CtxError, LockConflict, StoreCorrupt, UnsafePath, UpgradeRequired

if TYPE_CHECKING:
    from ctxstore.config import Config
    from ctxstore.session import Session

__all__ = ["LOCK_WAIT_SECONDS", "MEMORY_END_SECONDS", "MEMORY_STOP_BACKLOG_SECONDS",
           "MEMORY_STOP_SECONDS", "Payload", "find_store_root"]

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

    began = time.monotonic()
    try:
        report = index_transcript(root, path, seconds=seconds, backlog_seconds=backlog_seconds)
        _with_vectors(root, payload, seconds - (time.monotonic() - began))
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


def _with_vectors(root: Path, payload: Payload, seconds: float) -> None:
    """Embed the turns just indexed in what is left of the budget (``[memory] vectors``).

    A missing extra is a line in the hook log, never a failed hook: the turns stay searchable
    by their words, and ``ctx memory vectors`` embeds them once it is installed.
    """
    if seconds <= 0:
        return
    from ctxstore.errors import EmbedUnavailable
    from ctxstore.memory.vectors import fill_store_vectors

    try:
        fill_store_vectors(root, seconds)
    except EmbedUnavailable as exc:
        from ctxstore.claude.hooklog import log_problem

        log_problem(root, _text(payload, "hook_event_name") or "hook",
                    f"transcript memory: {exc.message}" + (f"; {exc.hint}" if exc.hint else ""))


def _notice(state: HookState, *, take: bool = True) -> list[str]:
    """The one-time notice that a damaged state was replaced, if not reported yet.

    ``take=False`` (a preview) leaves it for the next hook.
    """
    text = state.take(NOTICE_KEY) if take else state.get(NOTICE_KEY)
    return [text] if text else []
