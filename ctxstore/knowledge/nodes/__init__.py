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

Its modules: ``checks`` (type, content size, tier), ``records`` (the records a write makes
and its results), ``read`` (the index reads, lazily), ``provenance`` (where a node came
from: source, session, Git branch and commit, files; kept in its metadata), ``write`` (add,
update, delete and the staging they share) and ``changes`` (tag, untag, supersede,
summarize, archive, forget). The names below are re-exported for the operations and front ends.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ctxstore.tagnames import MAX_TAG_CHARS, validate_tag

if TYPE_CHECKING:
    from ctxstore.knowledge.nodes.changes import (
        archive_node,
        forget_node,
        summarize_nodes,
        supersede_node,
        tag_node,
        untag_node,
    )
    from ctxstore.knowledge.nodes.checks import (
        INLINE_CONTENT_BYTES,
        check_content_limit,
        split_content,
        validate_type,
        with_tier,
    )
    from ctxstore.knowledge.nodes.read import list_nodes
    from ctxstore.knowledge.nodes.records import (
        AddedNode,
        NodeChanges,
        WriteResult,
        edge_record,
        next_version,
        record_of,
        tombstones,
    )
    from ctxstore.knowledge.nodes.write import add_node, delete_node, retag_nodes, stage_write, update_node

__all__ = ["INLINE_CONTENT_BYTES", "MAX_TAG_CHARS", "validate_tag", "validate_type", "split_content",
           "check_content_limit", "with_tier", "AddedNode", "WriteResult", "NodeChanges",
           "record_of", "next_version", "tombstones", "edge_record", "stage_write", "retag_nodes",
           "add_node", "update_node", "delete_node", "tag_node", "untag_node", "supersede_node",
           "summarize_nodes", "archive_node", "forget_node", "list_nodes"]


# Each name and the submodule that defines it: the package imports a submodule when one of
# its names is first used, so importing ``provenance`` or ``read`` (a prompt pack's memory
# items, ``ctx show``) does not load the write side (staging, the object model, ~20 ms).
_LAZY: dict[str, str] = {name: module for module, names in (
    ("changes", ("archive_node", "forget_node", "summarize_nodes", "supersede_node", "tag_node",
                 "untag_node")),
    ("checks", ("INLINE_CONTENT_BYTES", "check_content_limit", "split_content", "validate_type",
                "with_tier")),
    ("read", ("list_nodes",)),
    ("records", ("AddedNode", "NodeChanges", "WriteResult", "edge_record", "next_version",
                 "record_of", "tombstones")),
    ("write", ("add_node", "delete_node", "retag_nodes", "stage_write", "update_node")),
) for name in names}


def __getattr__(name: str) -> Any:
    """A re-exported name, its submodule imported on first use."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
