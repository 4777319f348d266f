"""Knowledge node writes: new nodes, staged as change batches (DESIGN §4).

Node ids are ULIDs. Content above ``INLINE_CONTENT_BYTES`` is stored as a blob and
referenced from the node version. Tags are ``namespace:value`` (or a bare word).
"""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import dataclass
from typing import Any

from ctxstore.errors import InvalidInput
from ctxstore.model.knowledge import NodeRecord
from ctxstore.objects import KIND_BLOB, object_id_of
from ctxstore.repo import Store, now_ms
from ctxstore.staging import StageResult, stage_records

__all__ = ["NODE_TYPES", "INLINE_CONTENT_BYTES", "new_ulid", "validate_tag", "AddedNode",
           "add_node"]

NODE_TYPES = ("fact", "decision", "pattern", "observation", "hypothesis", "task", "summary",
              "source", "open-question")
INLINE_CONTENT_BYTES = 4096
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_TAG = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*(:[A-Za-z0-9_.\-/]+)?")
_ulid_lock = threading.Lock()
_ulid_last = (0, 0)


def new_ulid() -> str:
    """Return a new ULID, monotonic within this process."""
    global _ulid_last
    with _ulid_lock:
        ms = time.time_ns() // 1_000_000
        last_ms, last_rand = _ulid_last
        if ms <= last_ms:
            ms, rand = last_ms, last_rand + 1
        else:
            rand = int.from_bytes(os.urandom(10), "big")
        _ulid_last = (ms, rand)
    value = (ms << 80) | (rand & ((1 << 80) - 1))
    return "".join(_CROCKFORD[(value >> shift) & 31] for shift in range(125, -1, -5))


def validate_tag(tag: str) -> str:
    """Check a tag (``namespace:value`` or a bare word).

    Raises:
        InvalidInput: for an empty or malformed tag.
    """
    tag = tag.strip()
    if not _TAG.fullmatch(tag):
        raise InvalidInput(f"invalid tag {tag!r} (want namespace:value, e.g. project:ctx)")
    return tag


@dataclass(frozen=True)
class AddedNode:
    """A node written by ``add_node``."""

    node: NodeRecord
    staged: StageResult


def add_node(store: Store, node_type: str, content: str, *, tags: list[str] | tuple[str, ...] = (),
             metadata: dict[str, Any] | None = None, summary: str | None = None,
             author: str | None = None) -> AddedNode:
    """Create a knowledge node and stage it.

    Raises:
        InvalidInput: for an unknown type, empty content or a bad tag.
        LockConflict, StorageIOError: if it cannot be written (nothing changes).
    """
    if node_type not in NODE_TYPES:
        raise InvalidInput(f"unknown node type {node_type!r}",
                           hint="one of " + ", ".join(NODE_TYPES))
    if not content.strip():
        raise InvalidInput("node content is empty")
    clean_tags = tuple(sorted({validate_tag(t) for t in tags}))
    data = content.encode("utf-8", "surrogatepass")
    try:
        content.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput("node content is not valid Unicode text") from None
    blobs: list[bytes] = []
    inline: str | None = content
    blob_id = None
    if len(data) > INLINE_CONTENT_BYTES:
        blobs.append(data)
        inline, blob_id = None, object_id_of(KIND_BLOB, data)
    stamp = now_ms()
    node = NodeRecord(id=new_ulid(), type=node_type, content=inline, content_blob=blob_id,
                      summary=summary, tags=clean_tags, metadata=dict(metadata or {}),
                      status="active", superseded_by=None, created_at=stamp, updated_at=stamp,
                      author=author, prev=None)
    staged = stage_records(store, [node], message=f"add {node_type} {node.id}", blobs=blobs,
                           author=author)
    return AddedNode(node, staged)
