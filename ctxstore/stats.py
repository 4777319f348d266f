"""What a store holds, as ``ctx status`` shows it (spec 000 "Context Status")."""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

from ctxstore.pack import TIER_ORDER
from ctxstore.repo import Store
from ctxstore.staging import session_status

__all__ = ["StoreStatus", "store_status", "dir_size"]


def dir_size(path: Path) -> int:
    """Total bytes of the regular files under ``path``."""
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                continue
    return total


@dataclass
class StoreStatus:
    """Counts of one store."""

    path: str
    kind: str  # "project" or "user"
    size_bytes: int
    nodes: int
    tokens: int
    by_type: dict[str, int]
    edges: int
    tags: int
    tiers: dict[str, tuple[int, int]] = field(default_factory=dict)
    superseded: int = 0
    staged_records: int = 0
    staged_work_commits: int = 0
    head: str = ""


def store_status(store: Store, conn: sqlite3.Connection, *, kind: str) -> StoreStatus:
    """Gather the status of ``store`` from its index."""
    nodes, tokens = conn.execute("SELECT count(*), coalesce(sum(tokens), 0) FROM nodes").fetchone()
    by_type = dict(conn.execute("SELECT type, count(*) FROM nodes GROUP BY type ORDER BY type"))
    edges = conn.execute("SELECT count(*) FROM edges").fetchone()[0]
    tags = conn.execute("SELECT count(DISTINCT tag) FROM tags").fetchone()[0]
    tiers: dict[str, tuple[int, int]] = {}
    for tier in (t for t in TIER_ORDER if t is not None):
        count, tier_tokens = conn.execute(
            "SELECT count(*), coalesce(sum(n.tokens), 0) FROM nodes n JOIN tags t "
            "ON t.node_id = n.id WHERE t.tag = ?", (f"tier:{tier}",)).fetchone()
        tiers[tier] = (count, tier_tokens)
    superseded = conn.execute("SELECT count(*) FROM nodes WHERE superseded_by IS NOT NULL").fetchone()[0]
    staged = session_status(store)
    return StoreStatus(path=str(store.root), kind=kind, size_bytes=dir_size(store.root),
                       nodes=nodes, tokens=tokens, by_type=by_type, edges=edges, tags=tags,
                       tiers=tiers, superseded=superseded, staged_records=staged.records,
                       staged_work_commits=staged.work_commits, head=staged.head.hex())
