"""Knowledge node writes: add, update, delete, tag, untag, supersede, summarize.

Every change is a new record staged as a change batch (DESIGN §4); nothing is
updated in place. Operations that read the current version take the store lock
first, so two writers cannot both build on the same version. A new version is
stamped at least one millisecond after the version it replaces (``ctxstore.clock``).
Node ids are ULIDs (``ctxstore.ids``); content above ``INLINE_CONTENT_BYTES`` is stored
as a blob. The vocabulary (node types, edge labels, tiers) is ``ctxstore.model.vocab``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ctxstore.clock import next_stamp
from ctxstore.clock import next_stamp as bump  # the old name, still imported by claude/
from ctxstore.errors import InvalidInput
from ctxstore.ids import new_ulid
from ctxstore.model.knowledge import (
    EdgeRecord,
    EdgeRemoved,
    KnowledgeRecord,
    NodeRecord,
    NodeRemoved,
)
from ctxstore.model.vocab import EDGE_TYPES, NODE_TYPES, TIERS
from ctxstore.objects import KIND_BLOB, object_id_of
from ctxstore.repo import Store
from ctxstore.staging import StageResult, stage_records

if TYPE_CHECKING:
    from ctxstore.index.read import NodeRow

__all__ = ["NODE_TYPES", "EDGE_TYPES", "INLINE_CONTENT_BYTES", "TIERS", "new_ulid", "validate_tag",
           "validate_type", "AddedNode", "WriteResult", "add_node", "update_node", "delete_node",
           "tag_node", "untag_node", "supersede_node", "summarize_nodes", "record_of",
           "next_version", "tombstones", "edge_record", "bump", "stage_write", "split_content"]

INLINE_CONTENT_BYTES = 4096
_TAG = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*(:[A-Za-z0-9_.\-/:]+)?")


def validate_tag(tag: str) -> str:
    """Check a tag (``namespace:value`` or a bare word).

    Raises:
        InvalidInput: for an empty or malformed tag.
    """
    tag = tag.strip()
    if not _TAG.fullmatch(tag):
        raise InvalidInput(f"invalid tag {tag!r} (want namespace:value, e.g. project:ctx)")
    return tag


def validate_type(node_type: str) -> str:
    """Check a node type.

    Raises:
        InvalidInput: if it is not one of ``NODE_TYPES``.
    """
    if node_type not in NODE_TYPES:
        raise InvalidInput(f"unknown node type {node_type!r}", hint="one of " + ", ".join(NODE_TYPES))
    return node_type


def split_content(content: str) -> tuple[str | None, bytes | None, list[bytes]]:
    """(inline text, blob id, blobs to store): content above INLINE_CONTENT_BYTES goes to a blob.

    Raises:
        InvalidInput: for empty content or text that is not valid Unicode.
    """
    if not content.strip():
        raise InvalidInput("node content is empty")
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput("node content is not valid Unicode text") from None
    if len(data) > INLINE_CONTENT_BYTES:
        return None, object_id_of(KIND_BLOB, data), [data]
    return content, None, []


def record_of(node: NodeRow) -> NodeRecord:
    """The record of a node's current version (its ``version`` becomes ``prev`` of the next)."""
    return NodeRecord(id=node.id, type=node.type,
                      content=None if node.content_blob else node.content,
                      content_blob=node.content_blob, summary=node.summary,
                      tags=tuple(node.tags), metadata=dict(node.metadata), status=node.status,
                      superseded_by=node.superseded_by, created_at=node.created_at,
                      updated_at=node.updated_at, author=node.author, prev=None)


def next_version(node: NodeRow, **changes: Any) -> NodeRecord:
    """The record of ``node``'s next version with ``changes`` applied (stamped after it)."""
    from dataclasses import replace

    return replace(record_of(node), updated_at=next_stamp(node.updated_at), prev=node.version,
                   **changes)


def tombstones(conn, node: NodeRow, seen_edges: set[tuple[str, ...]]  # type: ignore[no-untyped-def]
               ) -> list[KnowledgeRecord]:
    """The records that delete ``node`` and its edges.

    ``seen_edges`` is shared by the nodes deleted in one batch, so an edge between two of
    them is removed once.
    """
    out: list[KnowledgeRecord] = [NodeRemoved(id=node.id, at=next_stamp(node.updated_at),
                                              prev=node.version)]
    for e in edges_of(conn, node.id):
        key = (e.from_kind, e.from_key, e.to_kind, e.to_key, e.label)
        if key not in seen_edges:
            seen_edges.add(key)
            out.append(EdgeRemoved(from_ref=(e.from_kind, e.from_key), to_ref=(e.to_kind, e.to_key),
                                   label=e.label, at=next_stamp(e.updated_at), prev=None))
    return out


def edge_record(src: str, dst: str, label: str, *, weight: float | None = None,
                metadata: dict[str, Any] | None = None, prev_stamp: int = 0) -> EdgeRecord:
    """A new node-to-node edge record."""
    stamp = next_stamp(prev_stamp)
    return EdgeRecord(from_ref=("node", src), to_ref=("node", dst), label=label, weight=weight,
                      metadata=dict(metadata or {}), evidence={"tool": "human"}, created_at=stamp,
                      updated_at=stamp, prev=None)


@dataclass(frozen=True)
class AddedNode:
    """A node written by ``add_node``."""

    node: NodeRecord
    staged: StageResult


@dataclass(frozen=True)
class WriteResult:
    """What a write changed: the records staged (empty when it was a no-op)."""

    records: tuple[KnowledgeRecord, ...]
    staged: StageResult | None

    @property
    def changed(self) -> bool:
        """False when the operation found nothing to change (idempotent no-op)."""
        return bool(self.records)


def open_index(store: Store):  # type: ignore[no-untyped-def]
    """The synced index (imported lazily: ``ctx add`` never needs it)."""
    from ctxstore.index import open_index as _open

    return _open(store)


def read_node(conn, ref: str) -> NodeRow:  # type: ignore[no-untyped-def]
    """See ``ctxstore.index.read.read_node`` (imported lazily)."""
    from ctxstore.index.read import read_node as _read

    return _read(conn, ref)


def find_node(conn, node_id: str) -> NodeRow | None:  # type: ignore[no-untyped-def]
    """See ``ctxstore.index.read.find_node`` (imported lazily)."""
    from ctxstore.index.read import find_node as _find

    return _find(conn, node_id)


def edges_of(conn, node_id: str, direction: str = "both", label: str | None = None):  # type: ignore[no-untyped-def]
    """See ``ctxstore.index.read.edges_of`` (imported lazily)."""
    from ctxstore.index.read import edges_of as _edges

    return _edges(conn, node_id, direction, label)


def stage_write(store: Store, records: list[KnowledgeRecord], message: str, blobs: list[bytes] = ()
           ) -> WriteResult:
    """Stage ``records`` as one change batch; no records is a no-op (nothing written)."""
    if not records:
        return WriteResult((), None)
    return WriteResult(tuple(records), stage_records(store, records, message=message, blobs=blobs))


def add_node(store: Store, node_type: str, content: str, *, tags: list[str] | tuple[str, ...] = (),
             metadata: dict[str, Any] | None = None, summary: str | None = None,
             author: str | None = None, node_id: str | None = None) -> AddedNode:
    """Create a knowledge node and stage it.

    Raises:
        InvalidInput: for an unknown type, empty content or a bad tag.
        LockConflict, StorageIOError: if it cannot be written (nothing changes).
    """
    validate_type(node_type)
    clean_tags = tuple(sorted({validate_tag(t) for t in tags}))
    inline, blob_id, blobs = split_content(content)
    stamp = next_stamp()
    node = NodeRecord(id=node_id or new_ulid(), type=node_type, content=inline,
                      content_blob=blob_id, summary=summary, tags=clean_tags,
                      metadata=dict(metadata or {}), status="active", superseded_by=None,
                      created_at=stamp, updated_at=stamp, author=author, prev=None)
    staged = stage_records(store, [node], message=f"add {node_type} {node.id}", blobs=blobs,
                           author=author)
    return AddedNode(node, staged)


def update_node(store: Store, node_ref: str, *, content: str | None = None,
                node_type: str | None = None, metadata: dict[str, Any] | None = None,
                summary: str | None = None) -> WriteResult:
    """Write a new version of a node with the given fields changed.

    ``metadata`` entries are merged into the node's metadata (an empty value removes the key).

    Raises:
        InvalidInput: if nothing to change is given, or a value is invalid.
        NodeNotFound, AmbiguousPrefix: if the node cannot be identified.
    """
    if content is None and node_type is None and metadata is None and summary is None:
        raise InvalidInput("nothing to update", hint="give --content, --type, --meta or --summary")
    with store.lock():
        node = read_node(open_index(store), node_ref)
        changes: dict[str, Any] = {}
        blobs: list[bytes] = []
        if content is not None:
            inline, blob_id, blobs = split_content(content)
            changes.update(content=inline, content_blob=blob_id)
        if node_type is not None:
            changes["type"] = validate_type(node_type)
        if metadata is not None:
            merged = dict(node.metadata)
            for key, value in metadata.items():
                if value == "":
                    merged.pop(key, None)
                else:
                    merged[key] = value
            changes["metadata"] = merged
        if summary is not None:
            changes["summary"] = summary or None
        rec = next_version(node, **changes)
        return stage_write(store, [rec], f"update {node.id}", blobs)


def delete_node(store: Store, node_ref: str, *, cascade: bool = False) -> WriteResult:
    """Delete a node and its edges; with ``cascade`` also every node derived from it
    (transitively through DERIVED_FROM).

    Raises:
        NodeNotFound, AmbiguousPrefix, InvalidInput: if the node cannot be identified.
    """
    with store.lock():
        conn = open_index(store)
        root = read_node(conn, node_ref)
        doomed = [root.id]
        if cascade:
            todo = [root.id]
            while todo:
                for edge in edges_of(conn, todo.pop(), "in", "DERIVED_FROM"):
                    if edge.from_kind == "node" and edge.from_key not in doomed:
                        doomed.append(edge.from_key)
                        todo.append(edge.from_key)
        records: list[KnowledgeRecord] = []
        seen_edges: set[tuple[str, ...]] = set()
        for nid in doomed:
            node = find_node(conn, nid)
            if node is not None:
                records.extend(tombstones(conn, node, seen_edges))
        return stage_write(store, records, f"delete {root.id}")


def tag_node(store: Store, node_ref: str, tags: list[str]) -> WriteResult:
    """Add tags to a node; already present tags are a silent no-op.

    Raises:
        InvalidInput, NodeNotFound, AmbiguousPrefix: bad tag or unknown node.
    """
    wanted = {validate_tag(t) for t in tags}
    if not wanted:
        raise InvalidInput("no tag given")
    with store.lock():
        node = read_node(open_index(store), node_ref)
        if wanted <= set(node.tags):
            return WriteResult((), None)
        rec = next_version(node, tags=tuple(sorted(set(node.tags) | wanted)))
        return stage_write(store, [rec], f"tag {node.id}")


def untag_node(store: Store, node_ref: str, tags: list[str]) -> WriteResult:
    """Remove tags from a node; absent tags are a silent no-op.

    Raises:
        InvalidInput, NodeNotFound, AmbiguousPrefix: bad tag or unknown node.
    """
    unwanted = {validate_tag(t) for t in tags}
    with store.lock():
        node = read_node(open_index(store), node_ref)
        if not unwanted & set(node.tags):
            return WriteResult((), None)
        rec = next_version(node, tags=tuple(sorted(set(node.tags) - unwanted)))
        return stage_write(store, [rec], f"untag {node.id}")


def supersede_node(store: Store, old_ref: str, new_ref: str) -> WriteResult:
    """Mark ``old`` as superseded by ``new`` and link new -SUPERSEDES-> old (spec 001 §7).

    Raises:
        InvalidInput: if both name the same node.
        NodeNotFound, AmbiguousPrefix: if a node cannot be identified.
    """
    with store.lock():
        conn = open_index(store)
        old, new = read_node(conn, old_ref), read_node(conn, new_ref)
        if old.id == new.id:
            raise InvalidInput("a node cannot supersede itself")
        records: list[KnowledgeRecord] = []
        if old.superseded_by != new.id:
            records.append(next_version(old, superseded_by=new.id))
        if not any(e.to_key == old.id for e in edges_of(conn, new.id, "out", "SUPERSEDES")):
            records.append(edge_record(new.id, old.id, "SUPERSEDES"))
        return stage_write(store, records, f"supersede {old.id} by {new.id}")


def summarize_nodes(store: Store, refs_: list[str], content: str, *, archive_sources: bool = False,
                    tags: list[str] | tuple[str, ...] = ()) -> tuple[NodeRecord, WriteResult]:
    """Create a summary node DERIVED_FROM each source, in one change batch; with
    ``archive_sources`` the sources move to ``tier:off-context``.

    Raises:
        InvalidInput: for no sources or empty content.
        NodeNotFound, AmbiguousPrefix: if a source cannot be identified.
    """
    if not refs_:
        raise InvalidInput("summarize needs at least one source node")
    inline, blob_id, blobs = split_content(content)
    clean_tags = tuple(sorted({validate_tag(t) for t in tags}))
    with store.lock():
        conn = open_index(store)
        sources = []
        for ref in refs_:
            node = read_node(conn, ref)
            if node.id not in {s.id for s in sources}:
                sources.append(node)
        stamp = next_stamp()
        summary = NodeRecord(id=new_ulid(), type="summary", content=inline, content_blob=blob_id,
                             summary=None, tags=clean_tags, metadata={}, status="active",
                             superseded_by=None, created_at=stamp, updated_at=stamp, author=None,
                             prev=None)
        records: list[KnowledgeRecord] = [summary]
        records += [edge_record(summary.id, s.id, "DERIVED_FROM") for s in sources]
        if archive_sources:
            for s in sources:
                kept = {t for t in s.tags if not t.startswith("tier:")}
                records.append(next_version(s, tags=tuple(sorted(kept | {"tier:off-context"}))))
        return summary, stage_write(store, records, f"summarize into {summary.id}", blobs)
