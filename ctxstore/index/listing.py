"""What Git said when ``ctx index`` last listed the whole work tree (``code_meta`` ``git``).

The next run asks Git what changed since (``code.ingest.run``); this module keeps the state
it compares with, and answers what such a run asks of the files table without a row per
file in Python (``look_paths``, ``count_indexed``, ``module_paths``). ``ListingState`` and
its two functions are re-exported by ``index.code``. SQL lives here and in the other
modules of ``index/``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from ctxstore.records import dataclass

__all__ = ["ListingState", "listing_state", "set_listing_state", "look_paths", "count_indexed",
           "module_paths"]


@dataclass(frozen=True, slots=True)
class ListingState:
    """What Git said when a run last listed the whole work tree (``code_meta`` ``git``).

    Attributes:
        head: The commit HEAD named then ("" before the first commit).
        dirty: The paths that may differ from that commit's files as indexed: those
            ``git status`` named then and those the runs since read.
        config: What the listing depended on besides Git (``ctx index``'s settings).
        quiet: Those of ``dirty`` that were in Git's index then and that ``git status`` did
            not name (as in HEAD): while Git names neither them nor a change of them between
            two HEADs, they are still in its index, and no ``git ls-files`` need say so.
    """

    head: str
    dirty: tuple[str, ...]
    config: str
    quiet: tuple[str, ...] = ()


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
    quiet = data.get("quiet", [])  # absent: written by a ctx that did not record it
    if not (isinstance(head, str) and isinstance(config, str) and isinstance(dirty, list)
            and isinstance(quiet, list) and all(isinstance(p, str) for p in dirty)
            and all(isinstance(p, str) for p in quiet)):
        return None
    return ListingState(head, tuple(dirty), config, tuple(quiet))


def set_listing_state(conn: sqlite3.Connection, state: ListingState | None) -> None:
    """Record ``state`` (None forgets it), inside the caller's write of the code tables."""
    import json

    from ctxstore.index.codedb import set_meta

    if state is None:
        conn.execute("DELETE FROM code_meta WHERE key = 'git'")
        return
    set_meta(conn, "git", json.dumps({"head": state.head, "dirty": sorted(set(state.dirty)),
                                      "config": state.config,
                                      "quiet": sorted(set(state.quiet) & set(state.dirty))}))


def look_paths(conn: sqlite3.Connection, no_semantics: str) -> frozenset[str]:
    """``indexed_paths(...).look`` alone: a scan in SQLite, no row per file in Python."""
    return frozenset(str(p) for (p,) in conn.execute(
        "SELECT path FROM files WHERE size IS NULL OR named OR note IS ?", (no_semantics,)))


def count_indexed(conn: sqlite3.Connection, others: Iterable[str] = ()) -> int:
    """How many files the code index holds, plus those of ``others`` it does not hold."""
    total = int(conn.execute("SELECT count(*) FROM files").fetchone()[0])
    wanted = list(dict.fromkeys(others))
    for start in range(0, len(wanted), 500):
        part = wanted[start:start + 500]
        held = conn.execute(f"SELECT count(*) FROM files WHERE path IN "  # noqa: S608
                            f"({','.join('?' * len(part))})", part).fetchone()[0]
        total += len(part) - int(held)
    return total


def module_paths(conn: sqlite3.Connection, names: Iterable[str]
                 ) -> tuple[dict[str, list[str]], list[str]]:
    """The indexed files of each module of ``names``, by one scan (no index on ``module``).

    Returns:
        (module name -> paths, for the names some file has; the paths of files whose module
        name was not recorded, for the caller to name).
    """
    found: dict[str, list[str]] = {}
    unnamed: list[str] = []
    wanted = sorted(set(names))
    for start in range(0, max(len(wanted), 1), 500):
        part = wanted[start:start + 500]
        for module, path in conn.execute(
                f"SELECT module, path FROM files WHERE module IN ({','.join('?' * len(part))})"  # noqa: S608
                + (" OR module IS NULL" if start == 0 else ""), part):
            if module is None:
                unnamed.append(str(path))
            else:
                found.setdefault(str(module), []).append(str(path))
    return found, unnamed
