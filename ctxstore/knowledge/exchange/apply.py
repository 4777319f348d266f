"""An import plan against the store: overlaps refused, one change batch staged.

Under the lock, what the store already has is read, a collision refused and the rest staged in
one change batch (one work commit, one durability barrier), so an import is all-or-nothing
(RELIABILITY IM-01..03). ``import_document`` runs parse, plan and stage.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ctxstore.clock import now_ms
from ctxstore.errors import InvalidInput
from ctxstore.ids import ObjectId
from ctxstore.index.lookups import edge_exists, latest_version, live_node_ids
from ctxstore.index.read import find_view
from ctxstore.knowledge.exchange.document import _SHOWN_IDS, parse_document
from ctxstore.knowledge.exchange.plan import ImportPlan, ImportReport, build_import_plan
from ctxstore.knowledge.nodes.provenance import META_PROVENANCE, Origin, provenance_metadata
from ctxstore.model.codec import JsonValue
from ctxstore.model.knowledge import EdgeRecord, KnowledgeRecord, NodeRecord, ViewRecord
from ctxstore.narrative.markdown import ENTRY_ROLES, parse_entries, role_of
from ctxstore.narrative.snapshot import read_narrative_bytes
from ctxstore.records import dataclass
from ctxstore.repo import Store
from ctxstore.security.guard import guard, policy
from ctxstore.staging import stage_records

if TYPE_CHECKING:
    import sqlite3

    from ctxstore.session import Session

__all__ = ["stage_import_plan", "import_document"]

# -- import: against the store --------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class _Overlap:
    """What of a plan the store already has (live)."""

    nodes: frozenset[str]
    edges: tuple[EdgeRecord, ...]
    views: tuple[ViewRecord, ...]


def _find_overlap(conn: sqlite3.Connection, plan: ImportPlan) -> _Overlap:
    """What the store already has of ``plan``; refuses edges to nodes found nowhere."""
    existing = live_node_ids(conn, (n.id for n in plan.nodes))
    known = {n.id for n in plan.nodes} | existing
    outside = {e.from_ref[1] for e in plan.edges} | {e.to_ref[1] for e in plan.edges}
    known |= live_node_ids(conn, outside - known)
    for i, edge in enumerate(plan.edges):
        for end in (edge.from_ref[1], edge.to_ref[1]):
            if end not in known:
                raise InvalidInput(f"edges[{i}]: node {end} is neither in the document "
                                   "nor in the store")
    return _Overlap(
        nodes=frozenset(existing),
        edges=tuple(e for e in plan.edges if edge_exists(conn, e.from_ref, e.to_ref, e.label)),
        views=tuple(v for v in plan.views if find_view(conn, v.name) is not None))


def _collision(what: str, names: list[str]) -> InvalidInput:
    shown = ", ".join(names[:_SHOWN_IDS]) + (" ..." if len(names) > _SHOWN_IDS else "")
    return InvalidInput(f"{len(names)} {what} already in the store: {shown}",
                        hint="use --merge to skip them")


def _refuse_collisions(plan: ImportPlan, overlap: _Overlap) -> None:
    """Without ``merge``, anything the store already has fails the import."""
    if overlap.nodes:
        raise _collision("nodes are", [n.id for n in plan.nodes if n.id in overlap.nodes])
    if overlap.edges:
        raise _collision("edges are", [f"{e.from_ref[1]} -{e.label}-> {e.to_ref[1]}"
                                       for e in overlap.edges])
    if overlap.views:
        raise _collision("views are", [v.name for v in overlap.views])


def _after_history(conn: sqlite3.Connection, key: tuple[str, ...], stamp: int
                   ) -> tuple[int, ObjectId | None]:
    """Stamp and ``prev`` for a record whose key may have history.

    A deleted node, edge or view: the imported version must win replay over the
    tombstone, so it is stamped after it (hybrid clock), and names it as its predecessor.
    """
    latest = latest_version(conn, key)
    if latest is None:
        return stamp, None
    version, seen = latest
    return max(stamp, seen + 1), ObjectId(version)


def _new_records(conn: sqlite3.Connection, plan: ImportPlan, overlap: _Overlap,
                 report: ImportReport) -> tuple[list[KnowledgeRecord], list[bytes]]:
    """The records to stage and the blobs they need; counts them in ``report``.

    Only what the store lacks, each stamped after any history of its key.
    """
    skip_edges = {(e.from_ref, e.to_ref, e.label) for e in overlap.edges}
    skip_views = {v.name for v in overlap.views}
    records: list[KnowledgeRecord] = []
    blobs: list[bytes] = []
    for node in plan.nodes:
        if node.id in overlap.nodes:
            continue
        stamp, prev = _after_history(conn, ("node", node.id), node.updated_at)
        records.append(replace(node, updated_at=stamp, prev=prev))
        if node.id in plan.blobs:
            blobs.append(plan.blobs[node.id])
    report.nodes = len(records)
    for edge in plan.edges:
        if (edge.from_ref, edge.to_ref, edge.label) in skip_edges:
            continue
        stamp, prev = _after_history(
            conn, ("edge", *edge.from_ref, *edge.to_ref, edge.label), edge.updated_at)
        records.append(replace(edge, updated_at=stamp, prev=prev))
        report.edges += 1
    for view in plan.views:
        if view.name in skip_views:
            continue
        stamp, prev = _after_history(conn, ("view", view.name), view.updated_at)
        records.append(replace(view, updated_at=stamp, prev=prev))
        report.views += 1
    return records, blobs


# What ties a node to its narrative entry (narrative.entries META_PATH, META_HASH, META_KEY).
_NARRATIVE_TIES = ("narrative_path", "narrative_hash", "narrative_key")


def _untied_from_missing_entries(store: Store, records: list[KnowledgeRecord]
                                 ) -> list[KnowledgeRecord]:
    """Imported nodes, without ties to narrative entries this store does not have.

    A node exported from another project names an entry of that project's Markdown; here
    the next ``ctx commit`` would read the missing entry as one a person deleted and
    tombstone the node. It stays tied only where its entry is (by marker, or by file and
    heading for an entry a person wrote), or where the file cannot be read (then ingestion
    leaves its nodes alone as well).
    """
    texts: dict[str, str | None] = {}

    def entry_here(node: NodeRecord, rel: str) -> bool:
        parts = rel.split("/")
        if role_of(rel) not in ENTRY_ROLES or rel.startswith("/") or ".." in parts:
            return False
        if rel not in texts:
            path = store.root / "narrative" / rel
            if not path.exists() and not path.is_symlink():
                texts[rel] = ""
            else:
                data = read_narrative_bytes(path)
                texts[rel] = data.decode("utf-8", "replace") if data is not None else None
        text = texts[rel]
        if text is None:
            return True  # unreadable: nothing is ingested from it, nothing removed
        key = node.metadata.get("narrative_key")
        return any(e.marker == node.id or (e.marker is None and key is not None and e.key == key)
                   for e in parse_entries(rel, text))

    out: list[KnowledgeRecord] = []
    for rec in records:
        rel = rec.metadata.get("narrative_path") if isinstance(rec, NodeRecord) else None
        if isinstance(rec, NodeRecord) and isinstance(rel, str) and not entry_here(rec, rel):
            rec = replace(rec, metadata={k: v for k, v in rec.metadata.items()
                                         if k not in _NARRATIVE_TIES})
        out.append(rec)
    return out


def stage_import_plan(db: Session, plan: ImportPlan, *, merge: bool) -> ImportReport:
    """Stage what ``plan`` holds that the store lacks, as one change batch.

    Under the store lock: find what the store already has, refuse it (or, with
    ``merge``, skip it), stamp each record after any history of its key (a deleted node
    comes back after its tombstone), then stage everything in one call.

    Args:
        db: The open session.
        plan: The checked records (``build_import_plan``).
        merge: Skip nodes, edges and views the store already has instead of failing.

    Returns:
        The counts of what was imported and skipped; ``staged`` is None when there was
        nothing new to write (an idempotent re-import writes nothing).

    Raises:
        InvalidInput: for an edge to a node neither in the plan nor in the store, or
            (without ``merge``) items the store already has. The store is unchanged.
        LockConflict, StorageIOError: if the write cannot happen (the store is unchanged).
    """
    store = db.store
    report = ImportReport()
    with store.lock():
        conn = db.index()
        overlap = _find_overlap(conn, plan)
        if not merge:
            _refuse_collisions(plan, overlap)
        report.skipped = [n.id for n in plan.nodes if n.id in overlap.nodes]
        report.skipped_edges, report.skipped_views = len(overlap.edges), len(overlap.views)
        records, blobs = _new_records(conn, plan, overlap, report)
        records = _untied_from_missing_entries(store, records)
        records = _with_provenance(store, records)
        if records:
            # One call: one change batch, one work commit, one durability barrier.
            report.staged = stage_records(
                store, records, blobs=blobs,
                message=f"import {report.nodes} nodes, {report.edges} edges, "
                        f"{report.views} views")
    return report


def _with_provenance(store: Store, records: list[KnowledgeRecord]) -> list[KnowledgeRecord]:
    """Imported nodes that record no provenance get ``import`` (the exporter's is kept).

    Git is asked once for the whole document.
    """
    value: JsonValue | None = None
    out: list[KnowledgeRecord] = []
    for rec in records:
        if isinstance(rec, NodeRecord) and META_PROVENANCE not in rec.metadata:
            if value is None:
                value = provenance_metadata(store, Origin("import"))
            rec = replace(rec, metadata={**rec.metadata, META_PROVENANCE: value})
        out.append(rec)
    return out


def _guard_document(store: Store, doc: Mapping[str, Any], allow_secret: bool) -> None:
    """Refuse a document any string of which holds a secret, naming where (``nodes[3].content``).

    Raises:
        SecretRefused: (E025) for the first such string (unless ``allow_secret``).
    """
    pol = policy(store)

    def walk(value: Any, where: str) -> None:
        if isinstance(value, str):
            guard(store, "explicit", value, what=where, allow_secret=allow_secret, policy_=pol)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                walk(item, f"{where}[{i}]")
        elif isinstance(value, Mapping):
            for key, item in value.items():
                walk(item, f"{where}.{key}" if where else str(key))

    walk(doc, "")


def import_document(db: Session, doc: Mapping[str, JsonValue] | bytes | str, *, merge: bool,
                    allow_secret: bool = False) -> ImportReport:
    """Validate an export document completely, then stage it as one change batch.

    Nothing is written unless the whole document is valid. Timestamps from the future
    are clamped to now. Items the store already has are never overwritten: without
    ``merge`` they make the import fail; with ``merge`` they are skipped and reported.
    The phases are ``parse_document``, ``build_import_plan`` and ``stage_import_plan``.

    Args:
        db: The open session.
        doc: A parsed document, or its raw text/bytes (parsed with ``parse_document``).
        merge: Skip nodes, edges and views the store already has instead of failing.
        allow_secret: The user's ``--allow-secret``: import text that holds a secret.

    Returns:
        The counts of what was imported and skipped; ``staged`` is None when there was
        nothing new to write (an idempotent re-import writes nothing).

    Raises:
        SecretRefused: (E025) naming the first string that holds a secret
            (``nodes[3].content``, its rule and line). The store is unchanged.
        InvalidInput: naming the first invalid item (e.g. ``nodes[3].type: unknown node
            type 'x'``), an edge to a node neither in the document nor in the store, or
            (without ``merge``) items the store already has. The store is unchanged.
        LockConflict, StorageIOError: if the write cannot happen (the store is unchanged).
    """
    if isinstance(doc, (bytes, str)):
        doc = parse_document(doc)
    plan = build_import_plan(doc, now=now_ms())
    _guard_document(db.store, doc, allow_secret)  # an explicit write: nothing is staged before
    return stage_import_plan(db, plan, merge=merge)
