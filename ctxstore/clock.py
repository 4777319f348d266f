"""The hybrid logical clock that stamps knowledge records (DESIGN §4).

Owns the wall clock in milliseconds, the stamp of a new version given its
predecessor's (``next_stamp``), and the clamp of stamps from the future on import
(``clamp_future``). Replay lets the greatest ``(stamp, version id)`` win, so these two
rules are what keep an edit from losing to its own predecessor on a machine whose
clock runs behind, and a stamp from the future from winning every merge forever.
It must not touch the store or import anything of ctxstore (STYLE §2.2).
"""

from __future__ import annotations

import time

__all__ = ["now_ms", "next_stamp", "clamp_future"]


def now_ms() -> int:
    """Wall-clock milliseconds since the epoch.

    Returns:
        The current time in integer milliseconds.
    """
    return time.time_ns() // 1_000_000


def next_stamp(prev: int | None = None, *, now: int | None = None) -> int:
    """The stamp of a new version: the wall clock, but never at or before ``prev``.

    A version replacing one stamped ``prev`` gets at least ``prev + 1``, whatever the
    wall clock says, so it wins replay against the version it was built from even when
    that version came from a clone whose clock runs ahead.

    Args:
        prev: The stamp of the version being replaced; None for a first version.
        now: The wall clock in milliseconds; read when None (tests pass it).

    Returns:
        ``max(now, prev + 1)``, or ``now`` without a predecessor.
    """
    wall = now_ms() if now is None else now
    return wall if prev is None else max(wall, prev + 1)


def clamp_future(stamp: int, *, now: int) -> int:
    """A stamp read from outside (an import document) with the future cut to ``now``.

    A stamp from the future would win every last-writer-wins merge until the real
    clock caught up (RELIABILITY IM-02), so it is brought back to the present.

    Args:
        stamp: The stamp as given, in milliseconds.
        now: The wall clock in milliseconds at the start of the import.

    Returns:
        ``min(stamp, now)``.
    """
    return min(stamp, now)
