"""What a store holds, as ``ctx status`` and ``<ctx:status>`` show it (spec 000 "Context Status").

Owns ``store_status``: node, token, type, edge and tag counts, tiers with their tokens,
superseded nodes, what is staged and not committed, and concurrent edits (nodes both
sides of a Git merge changed). It must not run SQL (the counts are
``index.counts.store_counts``), render text or print.
"""

from __future__ import annotations

from dataclasses import field
from typing import TYPE_CHECKING

from ctxstore.index import INDEX_FILE, index_dir
from ctxstore.index.counts import store_counts
from ctxstore.index.heads import ConcurrentEdit, concurrent_edits
from ctxstore.model.vocab import TIER_ORDER, TIER_TAG_PREFIX
from ctxstore.records import dataclass
from ctxstore.repo import Store
from ctxstore.staging import session_status

if TYPE_CHECKING:
    import sqlite3

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
    """Counts of one store.

    Attributes:
        path: The store's folder.
        kind: ``project`` or ``user``.
        size_bytes: The index file's size, standing for the store's.
        nodes: Live nodes.
        tokens: Their estimated tokens.
        by_type: Live nodes per type.
        edges: Live edges.
        tags: Distinct tags.
        tiers: For each tier, (nodes, tokens), in composition order.
        superseded: Superseded nodes.
        staged_records: Records staged and not committed.
        staged_work_commits: Work commits staged and not committed.
        head: HEAD's commit id (hex).
        concurrent: Nodes both sides of a merge changed.
    """

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
    """Gather the status of ``store`` from its index.

    Args:
        store: The store.
        conn: Its synced index connection.
        kind: ``project`` or ``user``, as the front end found it.

    Returns:
        The counts, concurrent edits included (read from the index's node heads).

    Raises:
        StoreCorrupt: if STAGE or HEAD cannot be read.
    """
    names = [tier for tier in TIER_ORDER if tier is not None]
    counts = store_counts(conn, [TIER_TAG_PREFIX + tier for tier in names])
    tiers = {tier: counts.tag_totals.get(TIER_TAG_PREFIX + tier, (0, 0)) for tier in names}
    staged = session_status(store)
    # The index file's size stands for the store's (walking every object costs tens of
    # milliseconds on a large store, on a command meant to be instant).
    return StoreStatus(path=str(store.root), kind=kind, size_bytes=_index_size(store),
                       nodes=counts.nodes, tokens=counts.tokens, by_type=counts.by_type,
                       edges=counts.edges, tags=counts.tags, tiers=tiers,
                       superseded=counts.superseded, staged_records=staged.records,
                       staged_work_commits=staged.work_commits, head=staged.head.hex(),
                       concurrent=concurrent_edits(conn))
