"""Claude Code hook handlers: a payload dict in, one output dict out (docs/hooks.md).

One module per hook event, each its handler and the phases only it runs:

- ``on_session_start``: ``session_start``, the default view (capped for injection) plus
  results pending for the session; runs for every ``source`` (startup, resume, clear,
  compact, fork), so memory is re-injected after a compaction. ``preview_session_start``.
- ``on_prompt_submit``: ``prompt_submit`` delivers pending recall / status / expand results
  exactly once, and counts the prompt (a turn's identity when nothing else names it).
- ``on_stop``: ``stop`` runs the ``<ctx:*>`` commands of the whole last assistant turn, each
  once: each is claimed in the state before it runs, so identical Stop hooks running at
  once (ctx installed at user and project level) run it once; one failing command is
  reported and the next runs.
- ``on_pre_compact`` / ``on_session_end``: retry commands deferred under a held lock.
  ``session_end`` also composes the default view into the cache when the session changed
  the store (tens of milliseconds; SessionEnd has a 1.5 s budget, and a hook killed mid-way
  leaves SQLite as it was), so the next session start reads it ready.

What they share: ``_common`` (payload, store discovery, output, running and deferring
commands, the state's repair, transcript memory), ``_context`` (pending results, relevant
memory, what a session was shown) and ``_view`` (the cached default view).

Every handler is cheap when it has nothing to do: prompt-submit opens only
``local/state.sqlite`` (and not even that when it does not exist), stop opens the store
only when the turn holds commands. Commands never wait for the writer lock: under a
held lock they are queued in the state and run by the next hook (RELIABILITY.md CC-06).
A damaged ``local/state.sqlite``, found when it is opened or part-way through a hook, is
moved aside and replaced, the hook runs again, and a notice is said once (state.py).
The CLI (``ctxstore/cli/hook_run.py``) reads stdin, finds the store and prints the result.

A hook runs before every prompt, so this package loads an event's module when its handler is
first asked for (``HANDLERS[event]`` or the name): a hook imports its own module and what it
shares, not the other four events' (STYLE §2.2, the hook start-up budget).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, cast

from ctxstore.claude.hooks._common import LOCK_WAIT_SECONDS, Payload, find_store_root

if TYPE_CHECKING:
    from ctxstore.claude.hooks.on_pre_compact import pre_compact
    from ctxstore.claude.hooks.on_prompt_submit import prompt_submit
    from ctxstore.claude.hooks.on_session_end import session_end
    from ctxstore.claude.hooks.on_session_start import preview_session_start, session_start
    from ctxstore.claude.hooks.on_stop import MAX_COMMANDS_PER_TURN, stop, turn_commands

__all__ = ["MAX_COMMANDS_PER_TURN", "LOCK_WAIT_SECONDS", "HANDLERS",
           "find_store_root", "session_start", "preview_session_start", "prompt_submit", "stop",
           "pre_compact",
           "session_end", "turn_commands"]

Handler = Callable[[Path | None, Payload], Payload]
# Where each name of ``__all__`` not imported above lives.
_HOMES = {
    "session_start": "on_session_start", "preview_session_start": "on_session_start",
    "prompt_submit": "on_prompt_submit", "stop": "on_stop", "turn_commands": "on_stop",
    "MAX_COMMANDS_PER_TURN": "on_stop", "pre_compact": "on_pre_compact",
    "session_end": "on_session_end",
}
_EVENTS = {"session-start": "session_start", "prompt-submit": "prompt_submit", "stop": "stop",
           "pre-compact": "pre_compact", "session-end": "session_end"}


def __getattr__(name: str) -> object:
    """A handler (or its module's public name), its module imported on first use."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # __import__, not importlib.import_module: the import is then timed in -X importtime's log,
    # which the hook start-up checks read (tests/test_layering.py).
    value = getattr(__import__(f"{__name__}.{home}", fromlist=[name]), name)
    globals()[name] = value  # asked once
    return value


class _Handlers(Mapping[str, Handler]):
    """The handler of each hook event, by the event's name (``session-start``, ...)."""

    def __getitem__(self, event: str) -> Handler:
        return cast(Handler, __getattr__(_EVENTS[event]))  # KeyError: not an event

    def __iter__(self) -> Iterator[str]:
        return iter(_EVENTS)

    def __len__(self) -> int:
        return len(_EVENTS)


HANDLERS: Mapping[str, Handler] = _Handlers()
