"""The SessionStart hook: the default view of memory plus the results pending.

It runs for every ``source`` (startup, resume, clear, compact, fork), so memory is injected
again after a compaction, with memory relevant to the recent prompts. ``preview_session_start``
answers the same, read-only (``ctx compose --session-start``).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ctxstore.claude.hooks._common import (
    Payload,
    _context,
    _drain,
    _message,
    _notice,
    _repairing,
    _session,
    _text,
)
from ctxstore.claude.hooks._context import _json_list, _mark_seen, _relevant, _take_fitting
from ctxstore.claude.hooks._view import _cached_view, _consolidation_line, _default_view
from ctxstore.claude.inject import MAX_INJECT_CHARS, frame, sanitize_text
from ctxstore.claude.state import HookState, open_state, peek_state
from ctxstore.errors import IndexNotReady, UnsafePath

__all__ = ["preview_session_start", "session_start"]

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
