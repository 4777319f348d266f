"""The index lookups of the import planner.

Which ids are live, whether an edge exists, the newest version of a record key.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from ctxstore.index.read import _CHUNK, _rows

__all__ = ["live_node_ids", "edge_exists", "latest_version"]


def live_node_ids(conn: sqlite3.Connection, ids: Iterable[str]) -> set[str]:
    """Which of ``ids`` name live nodes.

    Args:
        conn: A synced index connection.
        ids: Exact node ids (not prefixes).

    Returns:
        The subset of ``ids`` that the index holds as live nodes.
    """
    wanted = list(ids)
    found: set[str] = set()
    for start in range(0, len(wanted), _CHUNK):
        chunk = wanted[start:start + _CHUNK]
        marks = ",".join("?" * len(chunk))
        found.update(str(r["id"]) for r in _rows(
            conn, f"SELECT id FROM nodes WHERE id IN ({marks})", chunk))
    return found


def edge_exists(conn: sqlite3.Connection, from_ref: tuple[str, str], to_ref: tuple[str, str],
                label: str) -> bool:
    """Whether a live edge ``from_ref -label-> to_ref`` exists.

    Args:
        conn: A synced index connection.
        from_ref: The source endpoint ``(kind, key)``.
        to_ref: The target endpoint ``(kind, key)``.
        label: The edge label.

    Returns:
        True when the index holds that edge.
    """
    return _rows(
        conn, "SELECT 1 AS found FROM edges WHERE from_kind = ? AND from_key = ? AND to_kind = ?"
        " AND to_key = ? AND label = ?", (*from_ref, *to_ref, label)).fetchone() is not None


def latest_version(conn: sqlite3.Connection, key: tuple[str, ...]) -> tuple[bytes, int] | None:
    """The newest version the index has seen for a record key, tombstones included.

    Args:
        conn: A synced index connection.
        key: A record key (``("node", id)``, ``("edge", ...)``, ``("view", name)``).

    Returns:
        ``(version id, stamp)`` of the version with the greatest ``(stamp, version)``, or
        None when the key has no history.
    """
    from ctxstore.model.knowledge import key_text

    row = _rows(conn, "SELECT version, stamp FROM versions WHERE key = ? "
                      "ORDER BY stamp DESC, version DESC LIMIT 1", (key_text(key),)).fetchone()
    return None if row is None else (bytes(row["version"]), int(row["stamp"]))
