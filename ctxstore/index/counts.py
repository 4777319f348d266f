"""What the index holds, counted: ``ctx status`` (``store_counts``) and ``ctx rebuild`` (``table_counts``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from ctxstore.index.read import _rows
from ctxstore.records import dataclass

__all__ = ["StoreCounts", "store_counts", "table_counts"]


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


def _count(conn: sqlite3.Connection, sql: str) -> int:
    return int(_rows(conn, sql).fetchone()["n"])


def store_counts(conn: sqlite3.Connection, tags: Sequence[str]) -> StoreCounts:
    """Count nodes, tokens, types, edges and tags, and total the nodes of some tags.

    Args:
        conn: A synced index connection.
        tags: The tags to total (``tier:pinned``, ...); absent ones are left out.

    Returns:
        The counts.
    """
    head = _rows(conn, "SELECT count(*) AS n, coalesce(sum(tokens), 0) AS tokens"
                       " FROM nodes").fetchone()
    by_type = {str(r["type"]): int(r["n"]) for r in _rows(
        conn, "SELECT type, count(*) AS n FROM nodes GROUP BY type ORDER BY type")}
    totals: dict[str, tuple[int, int]] = {}
    if tags:
        totals = {str(r["tag"]): (int(r["n"]), int(r["tokens"])) for r in _rows(
            conn, "SELECT t.tag AS tag, count(*) AS n, coalesce(sum(n.tokens), 0) AS tokens"
            f" FROM tags t JOIN nodes n ON n.id = t.node_id WHERE t.tag IN"
            f" ({','.join('?' * len(tags))}) GROUP BY t.tag", list(tags))}
    return StoreCounts(
        nodes=int(head["n"]), tokens=int(head["tokens"]), by_type=by_type,
        edges=_count(conn, "SELECT count(*) AS n FROM edges"),
        tags=_count(conn, "SELECT count(DISTINCT tag) AS n FROM tags"), tag_totals=totals,
        superseded=_count(conn, "SELECT count(*) AS n FROM nodes WHERE superseded_by IS NOT NULL"))


def table_counts(conn: sqlite3.Connection) -> tuple[int, int, int]:
    """Live nodes, live edges and applied commits (what ``ctx rebuild`` reports).

    Args:
        conn: A synced index connection.

    Returns:
        ``(nodes, edges, commits)``.
    """
    return (_count(conn, "SELECT count(*) AS n FROM nodes"),
            _count(conn, "SELECT count(*) AS n FROM edges"),
            _count(conn, "SELECT count(*) AS n FROM applied"))
