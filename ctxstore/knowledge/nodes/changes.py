"""New versions that change a node's standing: tags, supersession, summary, archive, forget."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ctxstore.clock import next_stamp
from ctxstore.errors import InvalidInput
from ctxstore.ids import new_ulid
from ctxstore.knowledge.nodes.checks import check_content_limit, split_content, with_tier
from ctxstore.knowledge.nodes.provenance import META_PROVENANCE, Origin, provenance_metadata
from ctxstore.knowledge.nodes.read import _edges_of, _hook_write, _read_node
from ctxstore.knowledge.nodes.records import WriteResult, edge_record, next_version, record_of
from ctxstore.knowledge.nodes.write import _guarded, stage_write
from ctxstore.model.codec import JsonValue
from ctxstore.model.knowledge import KnowledgeRecord, NodeRecord
from ctxstore.tagnames import validate_tag

if TYPE_CHECKING:
    from ctxstore.index.read import NodeRow
    from ctxstore.session import Session

__all__ = ["tag_node", "untag_node", "supersede_node", "summarize_nodes", "archive_node",
           "forget_node"]

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
                    allow_secret: bool = False, origin: Origin | None = None
                    ) -> tuple[NodeRecord, WriteResult]:
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
        origin: Where the write comes from (``knowledge.nodes.provenance``); explicit when None.

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
        metadata[META_PROVENANCE] = provenance_metadata(store, origin or Origin("explicit"), content)
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
