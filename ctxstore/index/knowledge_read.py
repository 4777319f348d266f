"""The index reads of the operations layer that ``index/read.py`` does not have yet.

Owns the SELECTs moved out of ``ctxstore/stats.py`` and ``ctxstore/exchange.py`` when they
became ``knowledge/status.py`` and ``knowledge/exchange.py`` (issue 12: no SQL outside
``index/``, ``query/`` and ``claude/state.py``). It lives beside ``read.py`` only because
that file was being edited by other work at the same time; the functions belong in
``read.py`` and move there unchanged. Like ``read.py`` it only reads: it must not write,
sync or open the index (every function takes a connection from ``open_index``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ctxstore.model.knowledge import key_text

if TYPE_CHECKING:
    import sqlite3

__all__ = ["StoreCounts", "store_counts", "all_node_ids", "live_node_ids", "edge_exists",
           "latest_version"]

# SQLite's default limit on host parameters is far above this; 500 keeps statements short.
_CHUNK = 500


@dataclass(frozen=True, slots=True)
class StoreCounts:
    """What the index holds, counted (``ctx status``).

    Attributes:
        nodes: Live nodes.
        tokens: Their estimated tokens, summed.
        by_type: Live nodes per node type, by type name.
        edges: Live edges of every kind.
        tags: Distinct tags on live nodes.
        tag_totals: For each tag asked for, (nodes carrying it, their tokens).
        superseded: Live nodes that are superseded.
    """

    nodes: int
    tokens: int
    by_type: dict[str, int]
    edges: int
    tags: int
    tag_totals: dict[str, tuple[int, int]]
    superseded: int


def store_counts(conn: sqlite3.Connection, tags: Sequence[str]) -> StoreCounts:
    """Count nodes, tokens, types, edges and tags, and total the nodes of some tags.

    Args:
        conn: A synced index connection.
        tags: The tags to total (``tier:pinned``, ...); absent ones are left out.

    Returns:
        The counts.
    """
    nodes, tokens = conn.execute("SELECT count(*), coalesce(sum(tokens), 0) FROM nodes").fetchone()
    by_type = {str(t): int(c) for t, c in conn.execute(
        "SELECT type, count(*) FROM nodes GROUP BY type ORDER BY type")}
    edges = conn.execute("SELECT count(*) FROM edges").fetchone()[0]
    distinct = conn.execute("SELECT count(DISTINCT tag) FROM tags").fetchone()[0]
    totals: dict[str, tuple[int, int]] = {}
    if tags:
        totals = {str(tag): (int(count), int(total)) for tag, count, total in conn.execute(
            "SELECT t.tag, count(*), coalesce(sum(n.tokens), 0) FROM tags t JOIN nodes n "
            f"ON n.id = t.node_id WHERE t.tag IN ({','.join('?' * len(tags))}) GROUP BY t.tag",
            list(tags))}
    superseded = conn.execute(
        "SELECT count(*) FROM nodes WHERE superseded_by IS NOT NULL").fetchone()[0]
    return StoreCounts(nodes=int(nodes), tokens=int(tokens), by_type=by_type, edges=int(edges),
                       tags=int(distinct), tag_totals=totals, superseded=int(superseded))


def all_node_ids(conn: sqlite3.Connection) -> list[str]:
    """Every live node id, sorted.

    Args:
        conn: A synced index connection.

    Returns:
        The ids in ascending order.
    """
    return [str(row[0]) for row in conn.execute("SELECT id FROM nodes ORDER BY id")]


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
        found.update(str(r[0]) for r in conn.execute(
            f"SELECT id FROM nodes WHERE id IN ({marks})", chunk))
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
    return conn.execute(
        "SELECT 1 FROM edges WHERE from_kind = ? AND from_key = ? AND to_kind = ? AND to_key = ?"
        " AND label = ?", (*from_ref, *to_ref, label)).fetchone() is not None


def latest_version(conn: sqlite3.Connection, key: tuple[str, ...]) -> tuple[bytes, int] | None:
    """The newest version the index has seen for a record key, tombstones included.

    Args:
        conn: A synced index connection.
        key: A record key (``("node", id)``, ``("edge", ...)``, ``("view", name)``).

    Returns:
        ``(version id, stamp)`` of the version with the greatest ``(stamp, version)``, or
        None when the key has no history.
    """
    row = conn.execute("SELECT version, stamp FROM versions WHERE key = ? "
                       "ORDER BY stamp DESC, version DESC LIMIT 1", (key_text(key),)).fetchone()
    return None if row is None else (bytes(row[0]), int(row[1]))
