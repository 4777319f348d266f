"""What a hook injects besides the default view, and what it remembers of it.

Pending results (recall, status, expand) that fit the room left; memory relevant to a prompt
(``packs.session``) not shown to this session yet; the ids a session was shown and its last
few prompts, kept in the hook state. Used by the prompt-submit and session-start hooks.
"""

from __future__ import annotations

from pathlib import Path

from ctxstore.claude.hooks._common import _open_session, _repair_notes
from ctxstore.claude.inject import frame_items
from ctxstore.claude.state import HookState, StateDamaged
from ctxstore.errors import CtxError

__all__: list[str] = []

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
