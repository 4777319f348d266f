"""Status transitions of memories (spec 003): archive after decay, restore on recall, prune.

Owns the lifecycle pass::

    active   -> (confidence < threshold for the grace period)  -> archived
    archived -> (recalled since it was archived)                -> active (restored)
    archived -> (untouched for the prune period)                -> pruned (tombstone)

Only nodes this pass archived (``metadata.lifecycle_archived``) are restored or pruned: a
node a person or agent archived or forgot (``ctx forget``, consolidation) stays as it is,
and supersession stays human. Every transition is an ordinary change record (a new node
version or a tombstone) staged in one change batch, so it merges through Git like any
edit and replays to the same state on every clone. Confidence is a pure function of
time (``scoring``), so "below the threshold for 14 days" needs no stored state.

The pass reads the index and writes through ``knowledge.nodes``; it must not run SQL,
print, or run on the prompt path (it runs at session end and on ``ctx lifecycle``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import field, replace
from typing import TYPE_CHECKING, Literal

from ctxstore.errors import LockConflict
from ctxstore.index.read import NodeRow, list_nodes, node_degrees, nodes_by_ids
from ctxstore.knowledge.nodes import (
    NodeChanges,
    WriteResult,
    next_version,
    stage_write,
    tombstones,
    with_tier,
)
from ctxstore.knowledge.scopes import ScopedNode, Stores
from ctxstore.model import scoring
from ctxstore.model.knowledge import KnowledgeRecord
from ctxstore.model.vocab import TIER_TAG_PREFIX
from ctxstore.records import dataclass

if TYPE_CHECKING:
    from ctxstore.search.search import RunHit
    from ctxstore.session import Session

__all__ = ["ARCHIVE_THRESHOLD", "GRACE_DAYS", "PRUNE_DAYS", "ARCHIVED_KEY", "Transition",
           "LifecycleReport", "plan_transitions", "run_lifecycle",
           "run_configured_lifecycle", "Recalled", "recall_restoring", "restore_recalled",
           "restore_recalled_scoped"]

ARCHIVE_THRESHOLD = 0.3
GRACE_DAYS = 14.0
PRUNE_DAYS = 30.0
# Metadata a lifecycle archive writes: when (ms), the tier the node had, its access count then.
ARCHIVED_KEY = "lifecycle_archived"
_TIER_KEY = "lifecycle_tier"
_ACCESS_KEY = "lifecycle_access"

Kind = Literal["archive", "restore", "prune"]


@dataclass(frozen=True, slots=True)
class Transition:
    """One planned status change.

    Attributes:
        node_id: The node.
        kind: ``archive``, ``restore`` or ``prune``.
        confidence: Its decayed confidence at planning time.
        reason: Why, in words.
    """

    node_id: str
    kind: Kind
    confidence: float
    reason: str


@dataclass(frozen=True, slots=True)
class LifecycleReport:
    """What a lifecycle pass found and (unless a dry run) wrote.

    Attributes:
        transitions: The transitions, archive first, then restore, then prune.
        scanned: How many nodes were scored.
        written: The records staged (empty on a dry run or when nothing changed).
    """

    transitions: tuple[Transition, ...]
    scanned: int
    written: WriteResult = field(default_factory=lambda: WriteResult((), None))

    def count(self, kind: Kind) -> int:
        """How many transitions of one kind.

        Args:
            kind: The kind.

        Returns:
            The number.
        """
        return sum(1 for t in self.transitions if t.kind == kind)


def _tier(node: NodeRow) -> str | None:
    return next((t[len(TIER_TAG_PREFIX):] for t in node.tags if t.startswith(TIER_TAG_PREFIX)), None)


def _plan_one(node: NodeRow, *, now_ms: int, access: int, centrality: float, threshold: float,
              grace_days: float, prune_days: float) -> Transition | None:
    if node.superseded_by is not None or node.status not in ("active", "archived"):
        return None
    conf = scoring.node_confidence(node, now_ms=now_ms, access_count=access, centrality=centrality)
    if node.status == "active":
        below = scoring.days_until_below(node, threshold, access_count=access,
                                         centrality=centrality)
        if below is None:
            return None
        if (now_ms - node.updated_at) / scoring.DAY_MS >= below + grace_days:
            return Transition(node.id, "archive", conf,
                              f"confidence {conf:.2f} below {threshold} for {grace_days:g} days")
        return None
    if ARCHIVED_KEY not in node.metadata:
        return None  # archived by a person, an agent's forget or consolidation: left alone
    seen = int(scoring.number(node.metadata.get(_ACCESS_KEY), 0, 1 << 62, 0))
    if access > seen:
        return Transition(node.id, "restore", conf, "recalled since it was archived")
    # Untouched since it was archived: the pass's own time, or a later edit's stamp.
    since = max(node.updated_at, int(scoring.number(node.metadata.get(ARCHIVED_KEY), 0, 1 << 62, 0)))
    idle = (now_ms - since) / scoring.DAY_MS
    if idle >= prune_days:
        return Transition(node.id, "prune", conf, f"archived and untouched for {idle:.0f} days")
    return None


def plan_transitions(nodes: list[NodeRow], degrees: Mapping[str, int], *, now_ms: int,
                     access: Mapping[str, int] | None = None,
                     threshold: float = ARCHIVE_THRESHOLD, grace_days: float = GRACE_DAYS,
                     prune_days: float = PRUNE_DAYS) -> list[Transition]:
    """Decide the transitions of ``nodes`` at ``now_ms`` (pure: reads nothing, writes nothing).

    Args:
        nodes: The live nodes.
        degrees: Edge degree by node id (centrality is relative to the best-connected node).
        now_ms: The time of the pass (ms since the epoch).
        access: Retrievals per node id in this clone (none when None).
        threshold: Archive below this confidence.
        grace_days: ... once it has been below for this many days.
        prune_days: Prune a lifecycle-archived node untouched for this many days.

    Returns:
        The transitions, archive first, then restore, then prune (each by node id).
    """
    access = access or {}
    central = scoring.centralities(degrees, [n.id for n in nodes])
    out = [t for n in nodes if (t := _plan_one(
        n, now_ms=now_ms, access=access.get(n.id, 0), centrality=central.get(n.id, 0.0),
        threshold=threshold, grace_days=grace_days, prune_days=prune_days)) is not None]
    order = {"archive": 0, "restore": 1, "prune": 2}
    out.sort(key=lambda t: (order[t.kind], t.node_id))
    return out


def _restored(node: NodeRow) -> KnowledgeRecord:
    """The next version of a lifecycle-archived node: active again, with its old tier."""
    meta = {k: v for k, v in node.metadata.items() if k not in (ARCHIVED_KEY, _TIER_KEY, _ACCESS_KEY)}
    old = node.metadata.get(_TIER_KEY)
    tags = [x for x in node.tags if not x.startswith(TIER_TAG_PREFIX)]
    if isinstance(old, str) and old:
        tags.append(TIER_TAG_PREFIX + old)
    changes: NodeChanges = {"status": "active", "metadata": meta, "tags": tuple(sorted(tags))}
    return next_version(node, **changes)


def _records(conn: sqlite3.Connection, nodes: dict[str, NodeRow], plan: list[Transition],
             now_ms: int, access: Mapping[str, int]) -> list[KnowledgeRecord]:
    records: list[KnowledgeRecord] = []
    seen_edges: set[tuple[str, ...]] = set()
    for t in plan:
        node = nodes[t.node_id]
        if t.kind == "archive":
            meta = {**node.metadata, ARCHIVED_KEY: now_ms, _TIER_KEY: _tier(node) or "",
                    _ACCESS_KEY: access.get(node.id, 0)}
            records.append(next_version(node, status="archived", metadata=meta,
                                        tags=with_tier(node.tags, "off-context")))
        elif t.kind == "restore":
            records.append(_restored(node))
        else:
            records.extend(tombstones(conn, node, seen_edges))
    return records


def run_lifecycle(db: Session, *, now_ms: int, access: Mapping[str, int] | None = None,
                  dry_run: bool = False, threshold: float = ARCHIVE_THRESHOLD,
                  grace_days: float = GRACE_DAYS, prune_days: float = PRUNE_DAYS
                  ) -> LifecycleReport:
    """Run one lifecycle pass: plan the transitions and stage them as one change batch.

    The plan is made again under the store lock from the index as it is then, so two
    passes at once cannot both archive one version.

    Args:
        db: The open session.
        now_ms: The time of the pass (ms since the epoch).
        access: Retrievals per node id in this clone (``local/state.sqlite``), or None.
        dry_run: Plan only; write nothing and take no lock.
        threshold: Archive below this confidence.
        grace_days: ... once below it for this many days.
        prune_days: Prune lifecycle-archived nodes untouched this long.

    Returns:
        The transitions and what was staged.

    Raises:
        LockConflict, StagingConflict, StorageIOError: if the batch cannot be written
            (the store is unchanged).
        IndexCorrupt: if the index cannot be read.
    """
    store = db.store
    access = dict(access or {})

    def plan(conn: sqlite3.Connection) -> tuple[list[NodeRow], list[Transition]]:
        nodes = list_nodes(conn)
        return nodes, plan_transitions(nodes, node_degrees(conn), now_ms=now_ms, access=access,
                                       threshold=threshold, grace_days=grace_days,
                                       prune_days=prune_days)

    if dry_run:
        conn = db.index()
        nodes, transitions = plan(conn)
        return LifecycleReport(tuple(transitions), len(nodes))
    with store.lock():
        conn = db.index()
        nodes, transitions = plan(conn)
        records = _records(conn, {n.id: n for n in nodes}, transitions, now_ms, access)
        summary = ", ".join(f"{n} {k}d" for k in ("archive", "restore", "prune")
                            if (n := sum(1 for t in transitions if t.kind == k)))
        written = stage_write(store, records, f"lifecycle: {summary}")
    return LifecycleReport(tuple(transitions), len(nodes), written)


def run_configured_lifecycle(db: Session, *, now_ms: int, access: Mapping[str, int] | None = None,
                             dry_run: bool = False) -> LifecycleReport:
    """``run_lifecycle`` with the store's ``[lifecycle]`` settings (``ctx lifecycle``, session end).

    Args:
        db: The open session.
        now_ms: The time of the pass (ms since the epoch).
        access: Retrievals per node id in this clone (``local/state.sqlite``), or None.
        dry_run: Plan only; write nothing and take no lock.

    Returns:
        The transitions and what was staged.

    Raises:
        As ``run_lifecycle``.
    """
    store = db.store
    cfg = store.config
    return run_lifecycle(db, now_ms=now_ms, access=access, dry_run=dry_run,
                         threshold=float(cfg.get("lifecycle", "archive_confidence_threshold")),
                         grace_days=float(cfg.get("lifecycle", "archive_grace_days")),
                         prune_days=float(cfg.get("lifecycle", "prune_after_days")))


@dataclass(frozen=True, slots=True)
class Recalled:
    """What a recall returned, as it is after the restore the recall caused.

    Attributes:
        hits: The recalled nodes in recall order; a restored node is its new, active version.
        restored: How many nodes were restored.
        runs: The project's stored command runs the query asks about
            (``knowledge.recall.recall_runs``), best first.
    """

    hits: list[ScopedNode]
    restored: int
    runs: list[RunHit] = field(default_factory=list)


def restore_recalled(db: Session, node_ids: Sequence[str]) -> WriteResult:
    """Restore the lifecycle-archived nodes among ``node_ids`` now, as one change batch.

    Spec 003: archived -> active when recalled. The nodes are read again under the store
    lock, so a node restored, edited or pruned meanwhile is left as it is. Nodes archived
    by a person, ``ctx forget`` or consolidation are never restored. Writes nothing (and
    takes no lock) when no id is given.

    Args:
        db: The open session.
        node_ids: The ids a recall returned.

    Returns:
        The records staged (none when no recalled node was lifecycle-archived).

    Raises:
        LockConflict, StagingConflict, StorageIOError: if the batch cannot be written (the
            store is unchanged; the next lifecycle pass restores a node whose recall was
            counted).
        IndexCorrupt: if the index cannot be read.
    """
    store = db.store
    if not node_ids:
        return WriteResult((), None)
    with store.lock():
        conn = db.index()
        nodes = nodes_by_ids(conn, list(dict.fromkeys(node_ids)))
        records = [_restored(n) for n in nodes if _restorable(n) and n.superseded_by is None]
        return stage_write(store, records, f"lifecycle: {len(records)} restored on recall")


def recall_restoring(stores: Stores, query: str, *, limit: int, now: float) -> Recalled:
    """Recall over ``stores`` (``knowledge.scopes.recall_scoped``) and restore what it archived.

    The one recall of every front end (CLI, ``<ctx:recall>``, MCP): spec 003's "archived ->
    active when recalled" happens here, and the hits come back as they are after it, with the
    project's command runs the query asks about (``knowledge.recall.recall_runs``).

    Raises:
        InvalidInput: (E011) for a blank query.
        StagingConflict, StorageIOError, IndexCorrupt: as ``restore_recalled_scoped``.
    """
    from ctxstore.knowledge.recall import recall_runs
    from ctxstore.knowledge.scopes import recall_scoped

    recalled = restore_recalled_scoped(recall_scoped(stores, query, limit=limit, now=now), stores)
    return replace(recalled, runs=recall_runs(stores.project.index(), query, now=now))


def restore_recalled_scoped(hits: Sequence[ScopedNode], stores: Stores) -> Recalled:
    """``restore_recalled`` in each store a scoped recall read (project and user store).

    Only hits that are lifecycle-archived cause a write; a store whose lock is held is
    skipped (its recall was counted where the caller counts recalls, and the next lifecycle
    pass restores the node). The hits come back as they are after the restore, so a front
    end shows a restored node as active.

    Args:
        hits: What ``knowledge.scopes.recall_scoped`` returned.
        stores: The stores it read.

    Returns:
        The hits, in order, restored nodes as their new version; and how many were restored.

    Raises:
        StagingConflict, StorageIOError: if a batch cannot be written.
        IndexCorrupt: if an index cannot be read.
    """
    out = list(hits)
    restored = 0
    for scope, db in stores.each():
        ids = [h.node.id for h in hits if h.scope == scope and _restorable(h.node)]
        if not ids:
            continue
        try:
            written = len(restore_recalled(db, ids).records)
        except LockConflict:
            continue
        if written:
            restored += written
            fresh = {n.id: n for n in nodes_by_ids(db.index(), ids)}
            out = [replace(h, node=fresh[h.node.id]) if h.scope == scope and h.node.id in fresh
                   else h for h in out]
    return Recalled(out, restored)


def _restorable(node: NodeRow) -> bool:
    return node.status == "archived" and ARCHIVED_KEY in node.metadata
