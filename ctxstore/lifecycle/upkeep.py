"""End-of-session upkeep: compaction triggers, the lifecycle pass, consolidation triggers.

One call (``session_end_upkeep``) that the hook makes after it has run deferred
commands. It checks the compaction triggers (``triggers.maybe_compact``) and, when
``[lifecycle] on_session_end`` is set, runs one lifecycle pass
(``policy.run_configured_lifecycle``) with the access counts the hooks recorded in this clone.
Then it checks spec 003's consolidation triggers (``consolidate.consolidation_due``: every
``consolidation_trigger_count`` new memories, or over ``consolidation_trigger_active`` active
ones) and, when one holds, computes the proposals; it applies none (the hook leaves them for
``/consolidate``).
It waits only briefly for the store lock and never raises a ``CtxError``, an SQLite or an
OS error: a hook must never fail because of upkeep, which simply runs again at the next
session end. It never runs on the prompt path.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from dataclasses import field
from pathlib import Path

from ctxstore.errors import CtxError
from ctxstore.history.triggers import Triggered, maybe_compact
from ctxstore.lifecycle.consolidate import Due, consolidation_due
from ctxstore.lifecycle.policy import LifecycleReport, run_configured_lifecycle
from ctxstore.records import dataclass
from ctxstore.repo import now_ms
from ctxstore.session import Session

__all__ = ["UPKEEP_LOCK_WAIT", "Upkeep", "session_end_upkeep"]

UPKEEP_LOCK_WAIT = 0.25


@dataclass
class Upkeep:
    """What the end-of-session upkeep did.

    Attributes:
        compaction: The automatic compaction, if a trigger held.
        lifecycle: The lifecycle pass, if it ran.
        consolidation: The consolidation check, if a trigger held.
        problems: One line per step that could not run (the hook shows or drops them).
    """

    compaction: Triggered | None = None
    lifecycle: LifecycleReport | None = None
    consolidation: Due | None = None
    problems: list[str] = field(default_factory=list)


def session_end_upkeep(ctx_dir: Path, access: Mapping[str, int] | None = None, *,
                       now: int | None = None, task_ended: str | None = None,
                       consolidation_checked: int | None = None,
                       consolidation_pending: bool = False) -> Upkeep:
    """Run the compaction triggers, then the lifecycle pass, on the store at ``ctx_dir``.

    Args:
        ctx_dir: The store's ``.ctx`` directory.
        access: Retrievals per node id in this clone (``HookState.access_counts``).
        now: The time (ms since the epoch); the wall clock when None.
        task_ended: A task that ended with the session, if any.
        consolidation_checked: When the consolidation triggers last held (ms; None: never).
        consolidation_pending: Proposals found earlier wait: check them again (they may have
            been applied since), trigger or not.

    Returns:
        What ran and what could not (never raises for a store, lock or index problem).
    """
    out = Upkeep()
    at = now_ms() if now is None else now
    try:
        db = Session.open(ctx_dir, lock_timeout=UPKEEP_LOCK_WAIT)
    except (CtxError, sqlite3.Error, OSError) as exc:
        out.problems.append(f"upkeep skipped: {exc}")
        return out
    with db:
        try:
            out.compaction = maybe_compact(db, now_ms=at, task_ended=task_ended)
        except (CtxError, sqlite3.Error, OSError) as exc:
            out.problems.append(f"automatic compaction skipped: {exc}")
        if db.config.get("lifecycle", "on_session_end"):
            try:
                out.lifecycle = run_configured_lifecycle(db, now_ms=at, access=access)
            except (CtxError, sqlite3.Error, OSError) as exc:
                out.problems.append(f"lifecycle pass skipped: {exc}")
        try:
            out.consolidation = consolidation_due(
                db.index(), since_ms=consolidation_checked,
                every=int(db.config.get("lifecycle", "consolidation_trigger_count")),
                over=int(db.config.get("lifecycle", "consolidation_trigger_active")),
                recheck=consolidation_pending)
        except (CtxError, sqlite3.Error, OSError) as exc:
            out.problems.append(f"consolidation check skipped: {exc}")
    return out
