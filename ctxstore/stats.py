"""What a store holds, as ``ctx status`` shows it (spec 000 "Context Status")."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field

from ctxstore.index import INDEX_FILE, index_dir
from ctxstore.index.heads import ConcurrentEdit, concurrent_edits
from ctxstore.model.vocab import TIER_ORDER
from ctxstore.repo import Store
from ctxstore.staging import session_status

__all__ = ["StoreStatus", "store_status"]


def _index_size(store: Store) -> int:
    total = 0
    for name in (INDEX_FILE, INDEX_FILE + "-wal"):
        try:
            total += (index_dir(store) / name).stat().st_size
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
    concurrent: list[ConcurrentEdit] = field(default_factory=list)


def store_status(store: Store, conn: sqlite3.Connection, *, kind: str) -> StoreStatus:
    """Gather the status of ``store`` from its index (concurrent edits included: nodes
    both sides of a Git merge changed, read from the index's node heads)."""
    nodes, tokens = conn.execute("SELECT count(*), coalesce(sum(tokens), 0) FROM nodes").fetchone()
    by_type = dict(conn.execute("SELECT type, count(*) FROM nodes GROUP BY type ORDER BY type"))
    edges = conn.execute("SELECT count(*) FROM edges").fetchone()[0]
    tags = conn.execute("SELECT count(DISTINCT tag) FROM tags").fetchone()[0]
    names = [tier for tier in TIER_ORDER if tier is not None]
    found = {tag[5:]: (count, total) for tag, count, total in conn.execute(
        "SELECT t.tag, count(*), coalesce(sum(n.tokens), 0) FROM tags t JOIN nodes n "
        f"ON n.id = t.node_id WHERE t.tag IN ({','.join('?' * len(names))}) GROUP BY t.tag",
        [f"tier:{tier}" for tier in names])}
    tiers = {tier: found.get(tier, (0, 0)) for tier in names}
    superseded = conn.execute("SELECT count(*) FROM nodes WHERE superseded_by IS NOT NULL").fetchone()[0]
    staged = session_status(store)
    # The index file's size stands for the store's (walking every object costs tens of
    # milliseconds on a large store, on a command meant to be instant).
    return StoreStatus(path=str(store.root), kind=kind, size_bytes=_index_size(store),
                       nodes=nodes, tokens=tokens, by_type=by_type, edges=edges, tags=tags,
                       tiers=tiers, superseded=superseded, staged_records=staged.records,
                       staged_work_commits=staged.work_commits, head=staged.head.hex(),
                       concurrent=concurrent_edits(conn))
