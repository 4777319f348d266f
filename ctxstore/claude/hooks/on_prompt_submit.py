"""The UserPromptSubmit hook: pending results once, memory relevant to the prompt.

It counts the prompt (a turn's identity when nothing else names it, see ``on_stop._read_turn``)
and opens only ``local/state.sqlite`` (not even that when it does not exist and the prompt
has no topic); the store only to search relevant memory.
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
from ctxstore.claude.hooks._context import _MIN_PROMPT_WORDS, _note_prompt, _relevant, _take_fitting
from ctxstore.claude.inject import MAX_INJECT_CHARS, sanitize_text
from ctxstore.claude.state import open_state

__all__ = ["prompt_submit"]

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
        state.count_prompt(session)  # a new turn begins (see on_stop._counted_turn)
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
