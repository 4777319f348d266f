"""The SessionEnd hook: deferred commands, the end-of-session upkeep, the view composed ahead.

Composing the default view into the cache when the session changed the store takes tens of
milliseconds; SessionEnd has a 1.5 s budget, and a hook killed mid-way leaves SQLite as it was,
so the next session start reads the view ready.
"""

from __future__ import annotations

from pathlib import Path

from ctxstore.claude.hooks._common import MEMORY_END_SECONDS, Payload, _drain, _repairing, _with_memory
from ctxstore.claude.hooks._view import (
    CONSOLIDATION_CHECKED_KEY,
    CONSOLIDATION_KEY,
    _cached_view,
    _note_consolidation,
)
from ctxstore.claude.state import open_state

__all__ = ["session_end"]

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
