"""The session-start view kept in the hook state between sessions.

The composed default view, cached in ``local/state.sqlite`` and keyed by the store's pointers,
its config and the active task (so a session start on an unchanged store opens neither the
store nor the index; session end composes it ahead), and the consolidation notice session end
leaves for the next session start (spec 003's consolidation triggers).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from ctxstore.claude.hooks._common import _open_session, _repair_notes
from ctxstore.claude.inject import sanitize_text
from ctxstore.claude.state import HookState
from ctxstore.errors import CtxError, IndexNotReady

if TYPE_CHECKING:
    from ctxstore.lifecycle.consolidate import Due

__all__ = ["CONSOLIDATION_CHECKED_KEY", "CONSOLIDATION_KEY"]

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
