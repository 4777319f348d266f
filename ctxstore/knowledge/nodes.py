"""Knowledge node operations: add, update, delete, tag, untag, supersede, summarize, archive.

Owns every write of a knowledge node version and the helpers other operations build on
(``next_version``, ``tombstones``, ``edge_record``, ``stage_write``, ``retag_nodes``,
``with_tier``). Every change is a new record staged as a change batch (DESIGN §4); nothing
is updated in place. Operations that read the current version take the store lock first,
so two writers cannot both build on the same version. A new version is stamped after the
version it replaces (``ctxstore.clock``). Node ids are ULIDs (``ctxstore.ids``); content
above ``INLINE_CONTENT_BYTES`` is stored as a blob. The vocabulary (node types, edge labels,
tiers) is ``ctxstore.model.vocab``.

Every text a write stores (content, summary, tags, metadata values) passes the secret
policy first (``ctxstore.security.guard``): an explicit write that holds a secret is
refused before anything is written; a channel of automatic capture redacts it.

It must not run SQL (reads go through ``ctxstore.index.read``), parse front-end syntax
(comma-separated tags, ``<ctx:*>`` attributes), print, or import ``claude``/``cli``. The
index is imported inside the functions that read it, so ``ctx add`` never loads it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, TypedDict, Unpack

from ctxstore.clock import next_stamp
from ctxstore.errors import InvalidInput
from ctxstore.ids import ObjectId, new_ulid
from ctxstore.model.codec import JsonValue
from ctxstore.model.knowledge import (
    EdgeRecord,
    EdgeRemoved,
    KnowledgeRecord,
    NodeRecord,
    NodeRemoved,
)
from ctxstore.model.vocab import NODE_TYPES, TIER_TAG_PREFIX
from ctxstore.objects import KIND_BLOB, object_id_of
from ctxstore.records import dataclass
from ctxstore.repo import Store
from ctxstore.security.guard import guard_fields, guard_metadata
from ctxstore.staging import StageResult, stage_records
from ctxstore.tagnames import MAX_TAG_CHARS, validate_tag

if TYPE_CHECKING:
    import sqlite3

    from ctxstore.index.read import EdgeRow, NodeRow
    from ctxstore.session import Session

__all__ = ["INLINE_CONTENT_BYTES", "MAX_TAG_CHARS", "validate_tag", "validate_type", "split_content",
           "check_content_limit", "with_tier", "AddedNode", "WriteResult", "NodeChanges",
           "record_of", "next_version", "tombstones", "edge_record", "stage_write", "retag_nodes",
           "add_node", "update_node", "delete_node", "tag_node", "untag_node", "supersede_node",
           "summarize_nodes", "archive_node", "forget_node", "list_nodes"]

INLINE_CONTENT_BYTES = 4096


# -- checks ---------------------------------------------------------------------------------------

def validate_type(node_type: str) -> str:
    """Check a node type.

    Args:
        node_type: The type name.

    Returns:
        ``node_type`` unchanged.

    Raises:
        InvalidInput: if it is not one of ``NODE_TYPES``.
    """
    if node_type not in NODE_TYPES:
        raise InvalidInput(f"unknown node type {node_type!r}",
                           hint="one of " + ", ".join(NODE_TYPES))
    return node_type


def split_content(content: str) -> tuple[str | None, ObjectId | None, list[bytes]]:
    """Decide where content is kept: inline, or in a blob above ``INLINE_CONTENT_BYTES``.

    Args:
        content: The node's text.

    Returns:
        ``(inline text, blob id, blobs to store)``: the text and no blob, or no text,
        the blob's id and its bytes.

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


def check_content_limit(content: str, limit: int) -> None:
    """Refuse content longer than ``limit`` characters (agent writes, RELIABILITY PI-12).

    Args:
        content: The text to be written.
        limit: The largest number of characters allowed.

    Raises:
        InvalidInput: if ``content`` is longer than ``limit``.
    """
    if len(content) > limit:
        raise InvalidInput(f"content of {len(content)} characters is over the limit of {limit}")


def with_tier(tags: Iterable[str], tier: str) -> tuple[str, ...]:
    """A node's tags with every ``tier:`` tag replaced by ``tier:<tier>``.

    Args:
        tags: The node's current tags.
        tier: The tier to move it to (``off-context``, ``reference``, ...).

    Returns:
        The new tags, sorted.
    """
    kept = {t for t in tags if not t.startswith(TIER_TAG_PREFIX)}
    return tuple(sorted(kept | {TIER_TAG_PREFIX + tier}))


# -- records --------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class AddedNode:
    """A node written by ``add_node``.

    Attributes:
        node: The record written.
        staged: Where it was staged.
        evolves: ``(label, older node id)`` for each older node of the same type on the same
            subject that it refines or contradicts (``knowledge.evolution``): a proposal to
            supersede it, which a person confirms (``ctx supersede``).
    """

    node: NodeRecord
    staged: StageResult
    evolves: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class WriteResult:
    """What a write changed: the records staged (empty when it was a no-op).

    Attributes:
        records: The records staged, in order.
        staged: Where they were staged, or None when nothing was written.
    """

    records: tuple[KnowledgeRecord, ...]
    staged: StageResult | None

    @property
    def changed(self) -> bool:
        """False when the operation found nothing to change (idempotent no-op)."""
        return bool(self.records)


class NodeChanges(TypedDict, total=False):
    """The fields of a node that a new version may change (``next_version``)."""

    type: str
    content: str | None
    content_blob: ObjectId | None
    summary: str | None
    tags: tuple[str, ...]
    metadata: dict[str, JsonValue]
    status: str
    superseded_by: str | None
    author: str | None


def record_of(node: NodeRow) -> NodeRecord:
    """The record of a node's current version (its ``version`` becomes ``prev`` of the next).

    Args:
        node: A live node as the index holds it.

    Returns:
        The record, with ``prev`` None.
    """
    blob = ObjectId(node.content_blob) if node.content_blob else None
    return NodeRecord(id=node.id, type=node.type,
                      content=None if blob else node.content,
                      content_blob=blob, summary=node.summary,
                      tags=tuple(node.tags), metadata=dict(node.metadata), status=node.status,
                      superseded_by=node.superseded_by, created_at=node.created_at,
                      updated_at=node.updated_at, author=node.author, prev=None)


def next_version(node: NodeRow, **changes: Unpack[NodeChanges]) -> NodeRecord:
    """The record of ``node``'s next version with ``changes`` applied (stamped after it).

    Args:
        node: The current version.
        **changes: ``NodeRecord`` fields to change (``tags=``, ``status=``, ...).

    Returns:
        The new version's record, whose ``prev`` is ``node.version``.
    """
    return replace(record_of(node), updated_at=next_stamp(node.updated_at),
                   prev=ObjectId(node.version), **changes)


def tombstones(conn: sqlite3.Connection, node: NodeRow, seen_edges: set[tuple[str, ...]]
               ) -> list[KnowledgeRecord]:
    """The records that delete ``node`` and its edges.

    Args:
        conn: A synced index connection.
        node: The node to delete.
        seen_edges: Edges already removed by this batch, shared by the nodes deleted in
            one batch so an edge between two of them is removed once (updated in place).

    Returns:
        The node's tombstone followed by one per edge not seen yet.
    """
    out: list[KnowledgeRecord] = [NodeRemoved(id=node.id, at=next_stamp(node.updated_at),
                                              prev=ObjectId(node.version))]
    for e in _edges_of(conn, node.id):
        key = (e.from_kind, e.from_key, e.to_kind, e.to_key, e.label)
        if key not in seen_edges:
            seen_edges.add(key)
            out.append(EdgeRemoved(from_ref=(e.from_kind, e.from_key), to_ref=(e.to_kind, e.to_key),
                                   label=e.label, at=next_stamp(e.updated_at), prev=None))
    return out


def edge_record(src: str, dst: str, label: str, *, weight: float | None = None,
                metadata: dict[str, JsonValue] | None = None, prev_stamp: int = 0) -> EdgeRecord:
    """A new node-to-node edge record, made by a person (``evidence.tool = human``).

    Args:
        src: The source node id.
        dst: The target node id.
        label: The edge label (already normalised).
        weight: An optional weight.
        metadata: Optional metadata.
        prev_stamp: The stamp of the version it replaces, if any.

    Returns:
        The record, stamped after ``prev_stamp``.
    """
    stamp = next_stamp(prev_stamp)
    return EdgeRecord(from_ref=("node", src), to_ref=("node", dst), label=label, weight=weight,
                      metadata=dict(metadata or {}), evidence={"tool": "human"}, created_at=stamp,
                      updated_at=stamp, prev=None)


# -- index reads (imported lazily: ``ctx add`` never needs the index) ----------------------------

def _read_node(conn: sqlite3.Connection, ref: str) -> NodeRow:
    from ctxstore.index.read import read_node

    return read_node(conn, ref)


def _find_node(conn: sqlite3.Connection, node_id: str) -> NodeRow | None:
    from ctxstore.index.read import find_node

    return find_node(conn, node_id)


def _hook_write(conn: sqlite3.Connection, hook_key: str) -> NodeRow | None:
    """The live node whose metadata records ``hook_key`` (an agent write already done), or None."""
    from ctxstore.index.read import find_node_by_hook_key

    found = find_node_by_hook_key(conn, hook_key)
    return _find_node(conn, found) if found is not None else None


def _edges_of(conn: sqlite3.Connection, node_id: str, direction: str = "both",
              label: str | None = None) -> list[EdgeRow]:
    from ctxstore.index.read import edges_of

    return edges_of(conn, node_id, direction, label)


# -- reads ----------------------------------------------------------------------------------------

def list_nodes(conn: sqlite3.Connection, *, node_type: str | None = None,
               tags: Sequence[str] = (), created_since_ms: int | None = None,
               limit: int | None = None) -> list[NodeRow]:
    """Live nodes, newest first, filtered by type, tags (all of them) and creation time.

    Args:
        conn: A synced index connection.
        node_type: Only nodes of this type (checked).
        tags: Only nodes carrying every one of these tags (each checked).
        created_since_ms: Only nodes created at or after this time (ms since the epoch).
        limit: At most this many nodes; None for all.

    Returns:
        The nodes with their tags.

    Raises:
        InvalidInput: for a bad type or tag.
    """
    from ctxstore.index.read import list_nodes as select

    return select(conn, node_type=validate_type(node_type) if node_type else None,
                  tags=[validate_tag(t) for t in tags], created_since_ms=created_since_ms,
                  limit=limit)


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
             channel: str | None = "explicit", allow_secret: bool = False) -> AddedNode:
    """Create a knowledge node and stage it.

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
    stamp = next_stamp()
    node = NodeRecord(id=node_id or new_ulid(), type=node_type, content=inline,
                      content_blob=blob_id, summary=summary, tags=clean_tags,
                      metadata=dict(metadata or {}), status="active", superseded_by=None,
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


def tag_node(db: Session, node_ref: str, tags: Sequence[str]) -> WriteResult:
    """Add tags to a node; already present tags are a silent no-op.

    Args:
        db: The open session.
        node_ref: A node id or unique prefix.
        tags: The tags to add.

    Returns:
        The new version staged, or nothing when every tag was there.

    Raises:
        InvalidInput, NodeNotFound, AmbiguousPrefix: no tag, a bad tag or an unknown node.
        SecretRefused: (E025) if a tag holds a secret.
        LockConflict, StorageIOError: if it cannot be written (nothing changes).
    """
    wanted = {validate_tag(t) for t in tags}
    if not wanted:
        raise InvalidInput("no tag given")
    _guarded(db.store, "explicit", False, None, None, sorted(wanted))
    return _retag_one(db, node_ref, lambda have: have | wanted, "tag")


def untag_node(db: Session, node_ref: str, tags: Sequence[str]) -> WriteResult:
    """Remove tags from a node; absent tags are a silent no-op.

    Args:
        db: The open session.
        node_ref: A node id or unique prefix.
        tags: The tags to remove.

    Returns:
        The new version staged, or nothing when no tag was there.

    Raises:
        InvalidInput, NodeNotFound, AmbiguousPrefix: a bad tag or an unknown node.
        LockConflict, StorageIOError: if it cannot be written (nothing changes).
    """
    unwanted = {validate_tag(t) for t in tags}
    return _retag_one(db, node_ref, lambda have: have - unwanted, "untag")


def _retag_one(db: Session, node_ref: str, change: Callable[[set[str]], set[str]],
               verb: str) -> WriteResult:
    """Stage a new version of one node with ``change(tags)``; nothing when the set is equal."""
    store = db.store
    with store.lock():
        conn = db.index()
        node = _read_node(conn, node_ref)
        have = set(node.tags)
        tags = change(have)
        if tags == have:
            return WriteResult((), None)
        return stage_write(store, [next_version(node, tags=tuple(sorted(tags)))],
                           f"{verb} {node.id}")


def supersede_node(db: Session, old_ref: str, new_ref: str) -> WriteResult:
    """Mark ``old`` as superseded by ``new`` and link new -SUPERSEDES-> old (spec 001 §7).

    Args:
        db: The open session.
        old_ref: The node superseded (id or unique prefix).
        new_ref: The node that replaces it.

    Returns:
        What was staged; nothing when both were already recorded.

    Raises:
        InvalidInput: if both name the same node.
        NodeNotFound, AmbiguousPrefix: if a node cannot be identified.
        LockConflict, StorageIOError: if it cannot be written (nothing changes).
    """
    store = db.store
    with store.lock():
        conn = db.index()
        old, new = _read_node(conn, old_ref), _read_node(conn, new_ref)
        if old.id == new.id:
            raise InvalidInput("a node cannot supersede itself")
        linked = any(e.to_key == old.id for e in _edges_of(conn, new.id, "out", "SUPERSEDES"))
        records: list[KnowledgeRecord] = []
        if old.superseded_by != new.id:
            records.append(next_version(old, superseded_by=new.id))
        if not linked:
            records.append(edge_record(new.id, old.id, "SUPERSEDES"))
        return stage_write(store, records, f"supersede {old.id} by {new.id}")


def summarize_nodes(db: Session, refs_: Sequence[str], content: str, *,
                    archive_sources: bool = False, tags: Sequence[str] = (),
                    max_content: int | None = None,
                    hook_key: str | None = None, channel: str | None = "explicit",
                    allow_secret: bool = False) -> tuple[NodeRecord, WriteResult]:
    """Create a summary node DERIVED_FROM each source, in one change batch.

    With ``hook_key`` (an agent's tag, as ``knowledge.remember`` takes it) the write happens
    once: the key is kept in the summary's metadata, and when a live node already records it
    nothing is written and that node is returned. The lookup and the write are under one hold
    of the store lock, so a hook killed after the write and run again writes no second summary.

    Args:
        db: The open session.
        refs_: The source nodes (ids or unique prefixes; repeats are ignored).
        content: The summary's text.
        archive_sources: Also move the sources to ``tier:off-context``.
        tags: Tags of the summary node.
        max_content: Refuse content longer than this many characters (agent writes pass
            ``knowledge.remember.MAX_CONTENT``); None for no limit.
        hook_key: The identity of this write (an opaque string), or None.
        channel: The secret policy's channel (``summaries`` for an agent's tag).
        allow_secret: The user's ``--allow-secret``.

    Returns:
        The summary node's record and everything staged (nothing when a node already
        records ``hook_key``: then that node's record).

    Raises:
        InvalidInput: for no sources, empty or oversized content, or a bad tag.
        SecretRefused: (E025) if the channel refuses and the content holds a secret.
        NodeNotFound, AmbiguousPrefix: if a source cannot be identified.
        LockConflict, StorageIOError: if it cannot be written (nothing changes).
    """
    store = db.store
    if max_content is not None:
        check_content_limit(content, max_content)
    if not refs_:
        raise InvalidInput("summarize needs at least one source node")
    clean_tags = tuple(sorted({validate_tag(t) for t in tags}))
    content = _guarded(store, channel, allow_secret, content, None, clean_tags)[0] or ""
    inline, blob_id, blobs = split_content(content)
    with store.lock():
        conn = db.index()
        if hook_key is not None and (done := _hook_write(conn, hook_key)) is not None:
            return record_of(done), WriteResult((), None)
        sources: list[NodeRow] = []
        for ref in refs_:
            node = _read_node(conn, ref)
            if node.id not in {s.id for s in sources}:
                sources.append(node)
        stamp = next_stamp()
        metadata: dict[str, JsonValue] = {"hook_key": hook_key} if hook_key is not None else {}
        summary = NodeRecord(id=new_ulid(), type="summary", content=inline, content_blob=blob_id,
                             summary=None, tags=clean_tags, metadata=metadata, status="active",
                             superseded_by=None, created_at=stamp, updated_at=stamp, author=None,
                             prev=None)
        records: list[KnowledgeRecord] = [summary]
        records += [edge_record(summary.id, s.id, "DERIVED_FROM") for s in sources]
        if archive_sources:
            records += [next_version(s, tags=with_tier(s.tags, "off-context")) for s in sources]
        return summary, stage_write(store, records, f"summarize into {summary.id}", blobs)


def _archive(db: Session, node_ref: str, verb: str) -> WriteResult:
    store = db.store
    # Archive, never delete: the node keeps its history (`ctx show --history`) and leaves
    # the default view by moving off-context. An archived node is left as it is.
    with store.lock():
        conn = db.index()
        node = _read_node(conn, node_ref)
        if node.status == "archived":
            return WriteResult((), None)
        rec = next_version(node, status="archived", tags=with_tier(node.tags, "off-context"))
        return stage_write(store, [rec], f"{verb} {node.id}")


def archive_node(db: Session, node_ref: str) -> WriteResult:
    """Archive a node: status ``archived`` and ``tier:off-context``, history kept.

    Args:
        db: The open session.
        node_ref: A node id or unique prefix.

    Returns:
        The new version staged, or nothing when the node was already archived.

    Raises:
        InvalidInput, NodeNotFound, AmbiguousPrefix: if the node cannot be identified.
        LockConflict, StorageIOError: if it cannot be written (nothing changes).
    """
    return _archive(db, node_ref, "archive")


def forget_node(db: Session, node_ref: str) -> WriteResult:
    """What ``<ctx:forget>`` does: ``archive_node``, recorded as a forget.

    The agent's "forget" never deletes: the node is archived and moved
    off-context, and its versions stay readable. Only the work commit message differs
    from ``archive_node`` (``forget <id>``).

    Args:
        db: The open session.
        node_ref: A node id or unique prefix.

    Returns:
        The new version staged, or nothing when the node was already archived.

    Raises:
        InvalidInput, NodeNotFound, AmbiguousPrefix: if the node cannot be identified.
        LockConflict, StorageIOError: if it cannot be written (nothing changes).
    """
    return _archive(db, node_ref, "forget")
