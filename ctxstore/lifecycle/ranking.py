"""Ranking memories for what an agent reads first (spec 003's formula), over the index.

``rank_memories`` scores every live, non-superseded node of the given types that is not
off-context::

    rank = confidence * 0.5 + priority/10 * 0.2 + centrality * 0.15
           + log(access_count + 1) / max_log * 0.15

with confidence decayed by each type's half-life (``model.scoring``), priority from the
node's metadata, centrality its edge degree relative to the best-connected candidate, and
the access counts the hooks record in this clone. The CLAUDE.md section
(``claude.claudemd``) renders what this ranks; nothing here renders, writes or prints.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ctxstore.index.read import NodeRow, active_nodes_of_types, node_degrees
from ctxstore.model import scoring
from ctxstore.packs.compose import tier_of
from ctxstore.records import dataclass

if TYPE_CHECKING:
    from ctxstore.session import Session

__all__ = ["Ranked", "rank_memories"]


@dataclass
class Ranked:
    """A candidate node with its score and the parts of it."""

    node: NodeRow
    rank: float
    confidence: float
    priority: int
    centrality: float
    access: int


def rank_memories(db: Session, types: Sequence[str], *, now: int,
                  access: Mapping[str, int] | None = None) -> list[Ranked]:
    """Every live, non-superseded, non-off-context node of ``types``, best first.

    Args:
        db: The open session.
        types: The node types ranked.
        now: Milliseconds since the epoch (the decay's clock).
        access: Retrievals per node id in this clone (``HookState.access_counts``).

    Returns:
        The candidates, best first (ties: newest, then by id).
    """
    access = access or {}
    conn = db.index()
    nodes = [n for n in active_nodes_of_types(conn, list(types)) if tier_of(n) != "off-context"]
    central = scoring.centralities(node_degrees(conn), [n.id for n in nodes])
    max_log = max((math.log(access.get(n.id, 0) + 1) for n in nodes), default=0.0)
    out = []
    for node in nodes:  # decay and rank come from the one scoring module (model.scoring)
        centrality = central[node.id]
        count = access.get(node.id, 0)
        confidence = scoring.node_confidence(node, now_ms=now, access_count=count,
                                             centrality=centrality)
        priority = scoring.priority_of(node)
        rank = scoring.rank_score(confidence, priority, centrality, count, max_log)
        out.append(Ranked(node, rank, confidence, priority, centrality, count))
    out.sort(key=lambda r: (-r.rank, -r.node.updated_at, r.node.id))
    return out
