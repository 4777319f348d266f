"""The PreCompact hook: run the commands a held lock deferred, index the transcript.

The SessionStart with ``source: compact`` that follows injects memory again.
"""

from __future__ import annotations

from pathlib import Path

from ctxstore.claude.hooks._common import MEMORY_END_SECONDS, Payload, _drain, _repairing, _with_memory
from ctxstore.claude.state import open_state

__all__ = ["pre_compact"]

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
