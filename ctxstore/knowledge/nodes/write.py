"""Writing nodes: ``add_node``, ``update_node``, ``delete_node``, and the staging they share.

Every text a write stores passes the secret policy first (``ctxstore.security.guard``);
operations that read the current version take the store lock first, so two writers cannot
both build on the same version.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from ctxstore.clock import next_stamp
from ctxstore.errors import InvalidInput
from ctxstore.ids import new_ulid
from ctxstore.knowledge.nodes.checks import split_content, validate_type
from ctxstore.knowledge.nodes.provenance import META_PROVENANCE, Origin, provenance_metadata
from ctxstore.knowledge.nodes.read import _edges_of, _find_node, _read_node
from ctxstore.knowledge.nodes.records import AddedNode, NodeChanges, WriteResult, next_version, tombstones
from ctxstore.model.codec import JsonValue
from ctxstore.model.knowledge import KnowledgeRecord, NodeRecord
from ctxstore.repo import Store
from ctxstore.security.guard import guard_fields, guard_metadata
from ctxstore.staging import stage_records
from ctxstore.tagnames import validate_tag

if TYPE_CHECKING:
    from ctxstore.index.read import NodeRow
    from ctxstore.session import Session

__all__ = ["stage_write", "retag_nodes", "add_node", "update_node", "delete_node"]

# -- writes ---------------------------------------------------------------------------------------

def stage_write(store: Store, records: Sequence[KnowledgeRecord], message: str,
                blobs: Iterable[bytes] = ()) -> WriteResult:
    """Stage ``records`` as one change batch; no records is a no-op (nothing written).

    Args:
        store: The store to write to.
        records: The records, in order.
        message: The work commit message.
        blobs: Blobs the records reference (large content), stored first.

    Returns:
        The records and where they were staged.

    Raises:
        LockConflict, StagingConflict, StorageIOError: if the write cannot happen (the
            store is unchanged).
    """
    if not records:
        return WriteResult((), None)
    return WriteResult(tuple(records), stage_records(store, records, message=message, blobs=blobs))


def retag_nodes(store: Store, nodes: Iterable[NodeRow], change: Callable[[NodeRow], set[str]],
                message: str) -> WriteResult:
    """Give each node the tags ``change`` computes, in one change batch.

    Nodes whose tags come out the same are left alone; none changed writes nothing.
    The caller holds the store lock when ``nodes`` were read under it.

    Args:
        store: The store to write to.
        nodes: The nodes to retag (current versions).
        change: The new tag set of a node.
        message: The work commit message.

    Returns:
        The new versions staged.

    Raises:
        LockConflict, StagingConflict, StorageIOError: if the write cannot happen.
    """
    records: list[KnowledgeRecord] = []
    for node in nodes:
        tags = change(node)
        if tags != set(node.tags):
            records.append(next_version(node, tags=tuple(sorted(tags))))
    return stage_write(store, records, message)


def _guarded(store: Store, channel: str | None, allow_secret: bool, content: str | None,
             summary: str | None, tags: Sequence[str] = (),
             metadata: dict[str, JsonValue] | None = None
             ) -> tuple[str | None, str | None, dict[str, JsonValue] | None]:
    """Content, summary and metadata as the secret policy lets them be written.

    ``channel`` None: the caller applied the policy already. Tags are checked, never
    redacted (a redacted tag would be another tag).

    Raises:
        SecretRefused: (E025) when the channel refuses and a field holds a secret.
    """
    if channel is None:
        return content, summary, metadata
    content, summary, *_ = guard_fields(
        store, channel, [("content", content), ("summary", summary),
                         *[("tag", t) for t in tags]], allow_secret=allow_secret)
    if metadata:
        metadata = guard_metadata(store, channel, metadata, allow_secret=allow_secret)
    return content, summary, metadata


def add_node(db: Session, node_type: str, content: str, *, tags: Sequence[str] = (),
             metadata: dict[str, JsonValue] | None = None, summary: str | None = None,
             author: str | None = None, node_id: str | None = None,
             channel: str | None = "explicit", allow_secret: bool = False,
             origin: Origin | None = None) -> AddedNode:
    """Create a knowledge node and stage it, with its provenance.

    Args:
        db: The open session.
        node_type: One of ``NODE_TYPES``.
        content: The node's text (a blob above ``INLINE_CONTENT_BYTES``).
        tags: Its tags (checked, deduplicated, sorted).
        metadata: Its metadata.
        summary: An optional one-line summary.
        author: Who wrote it (``agent`` for hook writes), or None.
        node_id: Its id; a new ULID when None.
        channel: The secret policy's channel of this write (``explicit``: refused when it
            holds a secret; ``remember``, ``llm`` ...), or None when the caller applied it.
        allow_secret: The user's ``--allow-secret``: write a secret all the same.
        origin: Where the write comes from (``knowledge.nodes.provenance``); an explicit write
            of no session when None. Kept in metadata as ``provenance`` with the work
            tree's Git branch and commit and the files the content names.

    Returns:
        The node written and where it was staged.

    Raises:
        InvalidInput: for an unknown type, empty content or a bad tag.
        SecretRefused: (E025) if the channel refuses and a field holds a secret.
        LockConflict, StorageIOError: if it cannot be written (nothing changes).
    """
    store = db.store
    validate_type(node_type)
    clean_tags = tuple(sorted({validate_tag(t) for t in tags}))
    content_, summary, metadata = _guarded(store, channel, allow_secret, content, summary,
                                           clean_tags, metadata)
    content = content_ or ""
    inline, blob_id, blobs = split_content(content)
    meta = dict(metadata or {})
    if META_PROVENANCE not in meta:  # an import keeps the provenance it carries
        meta[META_PROVENANCE] = provenance_metadata(store, origin or Origin("explicit"), content)
    stamp = next_stamp()
    node = NodeRecord(id=node_id or new_ulid(), type=node_type, content=inline,
                      content_blob=blob_id, summary=summary, tags=clean_tags,
                      metadata=meta, status="active", superseded_by=None,
                      created_at=stamp, updated_at=stamp, author=author, prev=None)
    from ctxstore.knowledge.autolink import autolink_records  # spec 003 auto-linking

    links = autolink_records(db, node, content)
    staged = stage_records(store, [node, *links],
                           message=f"add {node_type} {node.id}", blobs=blobs, author=author)
    return AddedNode(node, staged, tuple((e.label, e.to_ref[1]) for e in links
                                         if e.metadata.get("evolves")))


def update_node(db: Session, node_ref: str, *, content: str | None = None,
                node_type: str | None = None, metadata: dict[str, JsonValue] | None = None,
                summary: str | None = None, channel: str | None = "explicit",
                allow_secret: bool = False) -> WriteResult:
    """Write a new version of a node with the given fields changed.

    Args:
        db: The open session.
        node_ref: A node id or unique prefix.
        content: New content, or None to keep it.
        node_type: New type, or None to keep it.
        metadata: Entries merged into the node's metadata (an empty string removes the key).
        summary: New summary (empty removes it), or None to keep it.
        channel: The secret policy's channel (see ``add_node``).
        allow_secret: The user's ``--allow-secret``.

    Returns:
        The new version staged.

    Raises:
        InvalidInput: if nothing to change is given, or a value is invalid.
        SecretRefused: (E025) if the channel refuses and a new value holds a secret.
        NodeNotFound, AmbiguousPrefix: if the node cannot be identified.
        LockConflict, StorageIOError: if it cannot be written (nothing changes).
    """
    store = db.store
    if content is None and node_type is None and metadata is None and summary is None:
        raise InvalidInput("nothing to update", hint="give --content, --type, --meta or --summary")
    content, summary, metadata = _guarded(store, channel, allow_secret, content, summary,
                                          (), metadata)
    with store.lock():
        conn = db.index()
        node = _read_node(conn, node_ref)
        changes: NodeChanges = {}
        blobs: list[bytes] = []
        if content is not None:
            inline, blob_id, blobs = split_content(content)
            changes["content"], changes["content_blob"] = inline, blob_id
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


def delete_node(db: Session, node_ref: str, *, cascade: bool = False) -> WriteResult:
    """Delete a node and its edges; with ``cascade`` also every node derived from it.

    Args:
        db: The open session.
        node_ref: A node id or unique prefix.
        cascade: Also delete the nodes derived from it, transitively through DERIVED_FROM.

    Returns:
        The tombstones staged.

    Raises:
        NodeNotFound, AmbiguousPrefix, InvalidInput: if the node cannot be identified.
        LockConflict, StorageIOError: if it cannot be written (nothing changes).
    """
    store = db.store
    with store.lock():
        conn = db.index()
        root = _read_node(conn, node_ref)
        doomed = [root.id]
        if cascade:
            todo = [root.id]
            while todo:
                for edge in _edges_of(conn, todo.pop(), "in", "DERIVED_FROM"):
                    if edge.from_kind == "node" and edge.from_key not in doomed:
                        doomed.append(edge.from_key)
                        todo.append(edge.from_key)
        records: list[KnowledgeRecord] = []
        seen_edges: set[tuple[str, ...]] = set()
        for nid in doomed:
            node = _find_node(conn, nid)
            if node is not None:
                records.extend(tombstones(conn, node, seen_edges))
        return stage_write(store, records, f"delete {root.id}")
