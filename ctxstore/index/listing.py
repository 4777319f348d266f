"""What Git said when ``ctx index`` last listed the whole work tree (``code_meta`` ``git``).

The next run asks Git what changed since (``code.ingest.run``); this module keeps the state
it compares with. Re-exported by ``index.code``. SQL lives here and in the other modules of
``index/``.
"""

from __future__ import annotations

import sqlite3

from ctxstore.records import dataclass

__all__ = ["ListingState", "listing_state", "set_listing_state"]


@dataclass(frozen=True, slots=True)
class ListingState:
    """What Git said when a run last listed the whole work tree (``code_meta`` ``git``).

    Attributes:
        head: The commit HEAD named then ("" before the first commit).
        dirty: The paths that may differ from that commit's files as indexed: those
            ``git status`` named then and those the runs since read.
        config: What the listing depended on besides Git (``ctx index``'s settings).
    """

    head: str
    dirty: tuple[str, ...]
    config: str


def listing_state(conn: sqlite3.Connection) -> ListingState | None:
    """The recorded ``ListingState``, or None (none recorded, or not one this ctx wrote)."""
    import json

    from ctxstore.index.codedb import meta_value

    raw = meta_value(conn, "git")
    try:
        data = json.loads(raw) if raw is not None else None
    except (ValueError, RecursionError):  # a nested value past the parser's depth too
        return None
    if not isinstance(data, dict):
        return None
    head, dirty, config = data.get("head"), data.get("dirty"), data.get("config")
    if not (isinstance(head, str) and isinstance(config, str) and isinstance(dirty, list)
            and all(isinstance(p, str) for p in dirty)):
        return None
    return ListingState(head, tuple(dirty), config)


def set_listing_state(conn: sqlite3.Connection, state: ListingState | None) -> None:
    """Record ``state`` (None forgets it), inside the caller's write of the code tables."""
    import json

    from ctxstore.index.codedb import set_meta

    if state is None:
        conn.execute("DELETE FROM code_meta WHERE key = 'git'")
        return
    set_meta(conn, "git", json.dumps({"head": state.head, "dirty": sorted(set(state.dirty)),
                                      "config": state.config}))
