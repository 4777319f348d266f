"""Promoting an idea of transcript memory into a shared knowledge node (issue 15 §4).

Transcript memory is private; a knowledge node is shared with the project through Git. Promotion
is explicit (``ctx memory promote IDEA_ID``, or a ``<ctx:remember>`` tag, which writes a node
directly). The node is DERIVED_FROM its span: a span is not a node, so the link is kept in the
node's metadata under ``derived_from`` (``{"kind": "transcript-span", "span", "idea", "session",
"uuids", "timestamp"}``) rather than as an edge. The transcript text itself never leaves memory:
only the idea's sentence becomes the node's content. Its provenance names the branch and commit
the idea was said on (recorded at extraction) when memory knows them, not the work tree's now.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ctxstore.errors import InvalidInput, NothingToDo
from ctxstore.memory.db import open_memory
from ctxstore.memory.search import iso

if TYPE_CHECKING:
    from ctxstore.knowledge.nodes import AddedNode
    from ctxstore.session import Session

__all__ = ["INTENT_TYPES", "promote_idea"]

INTENT_TYPES = {"decision": "decision", "conclusion": "fact", "question": "open-question",
                "problem": "observation", "solution": "pattern", "todo": "task",
                "context": "observation"}
"""The node type an idea of each intent becomes unless one is given."""


def promote_idea(db: Session, ctx_dir: Path, idea_id: int, node_type: str | None = None,
                 *, allow_secret: bool = False) -> AddedNode:
    """Write the idea ``idea_id`` as a knowledge node DERIVED_FROM its span.

    Args:
        db: The open session.
        ctx_dir: The ``.ctx`` directory whose ``local/memory.sqlite`` holds the idea.
        idea_id: The idea (as ``ctx memory search --format json`` shows it).
        node_type: The node type; from the idea's intent when None (``INTENT_TYPES``).
        allow_secret: The user's ``--allow-secret``: promote an idea that holds a secret.

    Returns:
        The node written.

    Raises:
        NothingToDo: (E018) there is no transcript memory.
        InvalidInput: (E011) no idea has this id, or the type is unknown.
        MemoryDamaged: (E023) the memory file is damaged.
        SecretRefused: (E025) the idea holds a secret (memory indexed before it was redacted).
    """
    from ctxstore.knowledge.nodes import add_node
    from ctxstore.knowledge.nodes.provenance import META_PROVENANCE, Origin, provenance_metadata

    mem = open_memory(ctx_dir, create=False)
    if mem is None:
        raise NothingToDo("there is no transcript memory yet", hint="run `ctx memory backfill`")
    with mem:
        row = mem.idea(idea_id)
        if row is None:
            raise InvalidInput(f"no idea has id {idea_id}",
                               hint="`ctx memory search TEXT --format json` lists idea ids")
        _, turn_id, span_id, session, intent, content, confidence, ts, branch, commit = row
        turn = mem.turn(turn_id)
    metadata = {"source": "transcript-memory", "confidence": round(float(confidence), 3),
                "derived_from": {"kind": "transcript-span", "span": span_id, "idea": idea_id,
                                 "session": session, "uuids": list(turn.uuids) if turn else [],
                                 "timestamp": iso(ts)}}
    if commit is not None or branch is not None:  # where the idea was said, not where HEAD is now
        metadata[META_PROVENANCE] = provenance_metadata(db.store, Origin("promotion", session),
                                                        content, position=(branch, commit))
    return add_node(db, node_type or INTENT_TYPES.get(intent, "observation"), content,
                    metadata=metadata, channel="remember", allow_secret=allow_secret,
                    origin=Origin("promotion", session))
