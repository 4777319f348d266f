"""Stale memory: knowledge that mentions code which changed after the mention.

A ``Mentions`` edge from a knowledge node to a file, module or item records in its
evidence the blob of the file when the mention was made (``code.relate``). When the
file's current blob (the index's ``files`` row) differs, the mention is stale, since
the file's newest version was recorded; when the file is no longer indexed, since it
was removed. An item or module mention is judged by the file that defines it now.
``ctx status``, ``ctx show`` and the packs say so.

It must not run SQL (``index.retrieval.mention_rows``) or print.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ctxstore.records import dataclass

if TYPE_CHECKING:
    from ctxstore.session import Session

__all__ = ["StaleMention", "stale_mentions"]


@dataclass(frozen=True, slots=True)
class StaleMention:
    """One stale mention.

    Attributes:
        node_id: The knowledge node that mentions.
        kind: The mentioned endpoint's kind (``file``, ``module``, ``item``).
        key: Its key (a path or a qualified name).
        path: The file it lies in (None when no longer indexed).
        since_ms: When the file's newer version was recorded (None: removed, time unknown).
        reason: ``changed`` or ``removed``.
    """

    node_id: str
    kind: str
    key: str
    path: str | None
    since_ms: int | None
    reason: str

    def to_json(self) -> dict[str, object]:
        """The mention as a JSON-ready map."""
        return {"node": self.node_id, "kind": self.kind, "key": self.key, "path": self.path,
                "since_ms": self.since_ms, "reason": self.reason}


def stale_mentions(source: Session | sqlite3.Connection, node_ids: Sequence[str] | None = None
                   ) -> dict[str, list[StaleMention]]:
    """The stale mentions of these nodes (every node when None), by node id.

    Args:
        source: A session (its index is used) or a current index connection.
        node_ids: The nodes to check.

    Returns:
        Node id -> its stale mentions; nodes without any are left out.
    """
    from ctxstore.index.retrieval import mention_rows

    conn = source if isinstance(source, sqlite3.Connection) else source.index()
    out: dict[str, list[StaleMention]] = {}
    for node_id, kind, key, evidence, path, blob, stamp in mention_rows(conn, node_ids):
        try:
            ev = json.loads(evidence) if evidence else {}
        except (ValueError, RecursionError):
            ev = {}
        seen = ev.get("blob") if isinstance(ev, dict) else None
        if not isinstance(seen, str):
            continue  # made without a blob (the file was not indexed then): nothing to compare
        if path is None:
            out.setdefault(node_id, []).append(StaleMention(node_id, kind, key, None, None,
                                                            "removed"))
        elif blob is not None and bytes(blob).hex() != seen:
            out.setdefault(node_id, []).append(StaleMention(node_id, kind, key, path, stamp,
                                                            "changed"))
    return out
