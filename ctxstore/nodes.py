"""Moved to ``ctxstore.knowledge.nodes`` (issue 12); this module re-exports it.

It keeps the callers not yet rewired working unchanged, old names included (``bump``,
``new_ulid``, the vocabulary, and the index readers ``open_index``, ``read_node``,
``find_node`` and ``edges_of``, looked up lazily so that importing it never loads the
index). New code imports ``ctxstore.knowledge.nodes``. The lead deletes this shim once
every caller is rewired.
"""

from __future__ import annotations

from ctxstore.clock import next_stamp as bump
from ctxstore.ids import new_ulid
from ctxstore.knowledge.nodes import (
    INLINE_CONTENT_BYTES,
    AddedNode,
    NodeChanges,
    WriteResult,
    add_node,
    archive_node,
    check_content_limit,
    delete_node,
    edge_record,
    forget_node,
    next_version,
    record_of,
    retag_nodes,
    split_content,
    stage_write,
    summarize_nodes,
    supersede_node,
    tag_node,
    tombstones,
    untag_node,
    update_node,
    validate_tag,
    validate_type,
    with_tier,
)
from ctxstore.model.vocab import EDGE_TYPES, NODE_TYPES, TIERS

__all__ = ["NODE_TYPES", "EDGE_TYPES", "INLINE_CONTENT_BYTES", "TIERS", "new_ulid", "validate_tag",
           "validate_type", "AddedNode", "WriteResult", "add_node", "update_node", "delete_node",
           "tag_node", "untag_node", "supersede_node", "summarize_nodes", "record_of",
           "next_version", "tombstones", "edge_record", "bump", "stage_write", "split_content",
           "archive_node", "forget_node", "check_content_limit", "retag_nodes", "with_tier",
           "NodeChanges"]

_LAZY = {"open_index": "ctxstore.index", "read_node": "ctxstore.index.read",
         "find_node": "ctxstore.index.read", "edges_of": "ctxstore.index.read"}


def __getattr__(name: str) -> object:
    """The index readers this module used to wrap, imported on first use (PEP 562).

    Args:
        name: The attribute asked for.

    Returns:
        The function of that name from ``ctxstore.index`` or ``ctxstore.index.read``.

    Raises:
        AttributeError: for any other name.
    """
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_LAZY[name]), name)
