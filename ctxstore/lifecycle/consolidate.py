"""Consolidation (spec 003): group similar memories into merge proposals, apply and undo them.

Owns the proposals (memories of one type whose word overlap is at least
``MERGE_THRESHOLD``, grouped transitively), applying one (a ``summary`` node
DERIVED_FROM every source, the sources archived and moved off-context — never
superseded: supersession stays human) and undoing the last one. A proposal's id is a
hash of its members, so the same store gives the same ids on every clone and
``--apply ID`` names exactly what ``--dry-run`` showed.

Similarity is ``knowledge.autolink.similarity`` (Jaccard of significant words); the
pairs scored are found by prefix filtering over the words ordered by rarity (exact, and
far fewer pairs than an inverted index of every word). Without an LLM
the merged text is drafted mechanically (each distinct line of the sources, in order);
the agent or user may pass their own text (the ``/consolidate`` skill); with one
configured, ``lifecycle.drafting`` asks it for the text before anything is written.

Every write is an ordinary change batch; the sources keep their history, so undo is a
new batch that deletes the summary and restores the sources. No SQL, no printing.
"""

from __future__ import annotations

import hashlib
import math
import sqlite3
from collections import defaultdict
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ctxstore.clock import next_stamp
from ctxstore.errors import InvalidInput, NothingToDo
from ctxstore.ids import new_ulid
from ctxstore.index.read import NodeRow, find_node, list_nodes, nodes_with_metadata
from ctxstore.knowledge.autolink import MERGE_THRESHOLD, similarity, word_set
from ctxstore.knowledge.nodes import (
    NodeChanges,
    WriteResult,
    next_version,
    split_content,
    stage_write,
    tombstones,
    with_tier,
)
from ctxstore.knowledge.nodes.provenance import META_PROVENANCE, Origin, provenance_metadata
from ctxstore.model.codec import JsonValue
from ctxstore.model.knowledge import EdgeRecord, KnowledgeRecord, NodeRecord
from ctxstore.model.scoring import is_pinned
from ctxstore.model.vocab import TIER_TAG_PREFIX
from ctxstore.records import dataclass
from ctxstore.security.guard import guard

if TYPE_CHECKING:
    from ctxstore.session import Session

__all__ = ["Proposal", "Applied", "Due", "CONSOLIDATED_TYPES", "propose", "plan_proposals",
           "choose_proposals", "apply_proposals", "undo_last", "consolidation_due"]

# Memory types that are merged; summaries, sources and tasks are not.
CONSOLIDATED_TYPES = frozenset({"fact", "decision", "pattern", "observation", "hypothesis",
                                "open-question"})
CONSOLIDATION_KEY = "consolidation"
_INTO_KEY = "consolidated_into"
_ID_HEX = 12


@dataclass(frozen=True, slots=True)
class Proposal:
    """A group of similar memories that could become one.

    Attributes:
        id: Stable id (hash of the member ids).
        type: The members' node type.
        members: The member node ids, sorted.
        similarity: The weakest similarity that joined the group.
        draft: A mechanical merge of the members' text.
    """

    id: str
    type: str
    members: tuple[str, ...]
    similarity: float
    draft: str


@dataclass(frozen=True, slots=True)
class Applied:
    """A proposal applied.

    Attributes:
        proposal: The proposal.
        summary_id: The summary node written.
        written: What was staged.
    """

    proposal: Proposal
    summary_id: str
    written: WriteResult


def _eligible(node: NodeRow) -> bool:
    return (node.type in CONSOLIDATED_TYPES and node.status == "active"
            and node.superseded_by is None and not is_pinned(node)
            and TIER_TAG_PREFIX + "off-context" not in node.tags)


def _draft(nodes: list[NodeRow]) -> str:
    seen: set[str] = set()
    lines: list[str] = []
    for node in nodes:
        for line in node.content.splitlines():
            key = " ".join(line.split()).lower()
            if key and key not in seen:
                seen.add(key)
                lines.append(line.rstrip())
    return "\n".join(lines)


def plan_proposals(nodes: list[NodeRow], *, threshold: float = MERGE_THRESHOLD) -> list[Proposal]:
    """Group eligible memories of one type with similarity at or above ``threshold`` (pure).

    Args:
        nodes: Live nodes (ineligible ones are skipped: pinned, off-context, archived,
            superseded, and types outside ``CONSOLIDATED_TYPES``).
        threshold: The least similarity that joins two memories.

    Returns:
        The proposals, largest first, then by id.
    """
    eligible = sorted((n for n in nodes if _eligible(n)), key=lambda n: n.id)
    words = {n.id: word_set(f"{n.summary or ''} {n.content}") for n in eligible}
    by_id = {n.id: n for n in eligible}
    # Prefix filtering (the AllPairs set-similarity join): with every word set ordered by
    # rarity, two sets of Jaccard >= t share a word within the first len - ceil(t*len) + 1
    # words of each, so only those prefixes are indexed and probed. Exact, and it skips
    # the pairs that share only common words, which a plain inverted index would score.
    freq: dict[str, int] = defaultdict(int)
    for ws in words.values():
        for w in ws:
            freq[w] += 1
    ordered = {nid: sorted(ws, key=lambda w: (freq[w], w)) for nid, ws in words.items()}
    prefix_index: dict[tuple[str, str], list[tuple[str, int]]] = defaultdict(list)
    parent = {n.id: n.id for n in eligible}
    weakest: dict[str, float] = {}

    def root(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for n in sorted(eligible, key=lambda n: (len(ordered[n.id]), n.id)):
        mine = ordered[n.id]
        if not mine:
            continue
        size = len(mine)
        prefix = mine[:size - math.ceil(threshold * size - 1e-9) + 1]
        # Overlap seen so far per candidate; -1 once the positional bound rules it out.
        overlap: dict[str, int] = {}
        for i, w in enumerate(prefix):
            for other, j in prefix_index[(n.type, w)]:
                if overlap.get(other) == -1:
                    continue
                # Processed by size, so |other| <= |mine|: Jaccard >= t needs |other| >= t|mine|.
                other_size = len(ordered[other])
                if other_size < threshold * size:
                    overlap[other] = -1
                    continue
                need = math.ceil(threshold / (1 + threshold) * (size + other_size) - 1e-9)
                have = overlap.get(other, 0)
                if have + 1 + min(size - i - 1, other_size - j - 1) >= need:
                    overlap[other] = have + 1
                else:
                    overlap[other] = -1
            prefix_index[(n.type, w)].append((n.id, i))
        for other, have in overlap.items():
            if have <= 0:
                continue
            sim = similarity(words[n.id], words[other])
            if sim >= threshold:
                a, b = root(n.id), root(other)
                low = min(sim, weakest.get(a, 1.0), weakest.get(b, 1.0))
                if a != b:
                    parent[b] = a
                weakest[a] = low
    groups: dict[str, list[str]] = defaultdict(list)
    for nid in parent:
        groups[root(nid)].append(nid)
    out = []
    for rid, members in groups.items():
        if len(members) < 2:
            continue
        members.sort()
        pid = hashlib.sha256("\n".join(members).encode()).hexdigest()[:_ID_HEX]
        member_nodes = sorted((by_id[m] for m in members), key=lambda n: (n.created_at, n.id))
        out.append(Proposal(pid, by_id[members[0]].type, tuple(members),
                            round(weakest.get(rid, 1.0), 4), _draft(member_nodes)))
    out.sort(key=lambda p: (-len(p.members), p.id))
    return out


def propose(conn: sqlite3.Connection, *, threshold: float = MERGE_THRESHOLD) -> list[Proposal]:
    """The merge proposals of the store as the index holds it.

    Args:
        conn: A synced index connection.
        threshold: The least similarity that joins two memories.

    Returns:
        The proposals, largest first.
    """
    return plan_proposals(list_nodes(conn), threshold=threshold)


@dataclass(frozen=True, slots=True)
class Due:
    """A consolidation check (spec 003's triggers) and what it found.

    Attributes:
        why: Which trigger held: ``"10 new memories"``, ``"85 active memories"``.
        proposals: The proposals now (none: nothing similar enough to merge).
        active: Memories that could be merged (eligible), in all.
        new: Of those, created after the previous check.
    """

    why: str
    proposals: list[Proposal]
    active: int
    new: int


def consolidation_due(conn: sqlite3.Connection, *, since_ms: int | None, every: int,
                      over: int, recheck: bool = False) -> Due | None:
    """Whether consolidation is due, and its proposals if it is.

    Spec 003's triggers: every 10 extractions (memories written), or over 80 active memories.

    Args:
        conn: A synced index connection.
        since_ms: When the previous check ran (ms since the epoch); None: never (every memory
            counts as new).
        every: Due once this many memories were created since that check (0: never).
        over: Due while more than this many memories are active (0: never).
        recheck: Check whether proposals found earlier still stand, trigger or not (``why``
            is then ``"pending"``).

    Returns:
        The check when a trigger holds (or ``recheck``), else None.
    """
    nodes = [n for n in list_nodes(conn) if _eligible(n)]
    new = sum(1 for n in nodes if since_ms is None or n.created_at > since_ms)
    if every and new >= every:
        why = f"{new} new memories"
    elif over and len(nodes) > over:
        why = f"{len(nodes)} active memories"
    elif recheck:
        why = "pending"
    else:
        return None
    return Due(why, plan_proposals(nodes), len(nodes), new)


def _tier(node: NodeRow) -> str:
    return next((t[len(TIER_TAG_PREFIX):] for t in node.tags if t.startswith(TIER_TAG_PREFIX)), "")


def _apply_records(proposal: Proposal, nodes: list[NodeRow], content: str | None,
                   drafted_by: str | None = None, provenance: JsonValue = None
                   ) -> tuple[str, list[KnowledgeRecord], list[bytes]]:
    inline, blob, blobs = split_content(content if content is not None else proposal.draft)
    stamp = next_stamp(max(n.updated_at for n in nodes))
    info: dict[str, JsonValue] = {"proposal": proposal.id, "merged_type": proposal.type,
                                  "sources": list(proposal.members),
                                  "tiers": {n.id: _tier(n) for n in nodes}}
    if drafted_by:
        info["drafted_by"] = drafted_by
    summary = NodeRecord(
        id=new_ulid(), type="summary", content=inline, content_blob=blob, summary=None,
        tags=(), status="active", superseded_by=None, created_at=stamp, updated_at=stamp,
        author=None, prev=None, metadata={CONSOLIDATION_KEY: info, META_PROVENANCE: provenance})
    records: list[KnowledgeRecord] = [summary]
    for n in nodes:
        edge_stamp = next_stamp()
        records.append(EdgeRecord(from_ref=("node", summary.id), to_ref=("node", n.id),
                                  label="DERIVED_FROM", weight=None, metadata={},
                                  evidence={"tool": "Parser", "confidence": proposal.similarity},
                                  created_at=edge_stamp, updated_at=edge_stamp, prev=None))
        records.append(next_version(n, status="archived", tags=with_tier(n.tags, "off-context"),
                                    metadata={**n.metadata, _INTO_KEY: summary.id}))
    return summary.id, records, blobs


def choose_proposals(proposals: list[Proposal], ids: list[str]) -> list[Proposal]:
    """The proposals named by ids or unique id prefixes, in the order of ``ids``.

    Args:
        proposals: The current proposals (``propose``).
        ids: Ids or prefixes (at least one).

    Returns:
        One proposal per id.

    Raises:
        InvalidInput: (E011) for no id, or an unknown or ambiguous one.
    """
    if not ids:
        raise InvalidInput("no proposal id given", hint="run `ctx consolidate --dry-run`")
    chosen: list[Proposal] = []
    for pid in ids:
        hits = [p for p in proposals if p.id.startswith(pid.strip().lower())]
        if len(hits) != 1 or not pid.strip():
            what = "ambiguous" if hits else "unknown"
            raise InvalidInput(f"{what} consolidation proposal {pid!r}",
                               hint="run `ctx consolidate --dry-run` for current ids")
        chosen.append(hits[0])
    return chosen


def apply_proposals(db: Session, ids: list[str], *, content: str | None = None,
                    drafts: Mapping[str, str] | None = None, drafted_by: str | None = None,
                    threshold: float = MERGE_THRESHOLD) -> list[Applied]:
    """Apply proposals by id (or unique id prefix), each as one change batch.

    The proposals are computed again under the store lock, so an id applies only while its
    members are still what ``--dry-run`` showed (a draft keyed by a proposal id fits only
    that same group: the id is a hash of the members).

    Args:
        db: The open session.
        ids: Proposal ids or unique prefixes (at least one).
        content: The merged text (one proposal only); else ``drafts``, else the mechanical
            draft.
        drafts: Merged texts by full proposal id (``lifecycle.drafting.llm_drafts``).
        drafted_by: Who wrote ``content`` or a draft (an LLM's model name), kept in the
            summary's ``consolidation`` metadata as ``drafted_by``.
        threshold: As ``propose``.

    Returns:
        One ``Applied`` per id, in order.

    Raises:
        InvalidInput: (E011) for no id, an unknown or ambiguous id, or ``content`` with
            several ids.
        SecretRefused: (E025) if ``content`` holds a secret.
        LockConflict, StorageIOError: if a batch cannot be written.
    """
    store = db.store
    if content is not None and len(ids) > 1:
        raise InvalidInput("--content applies to one proposal at a time")
    if content is not None:  # typed by the user: an explicit write (docs/security.md)
        guard(store, "explicit", content, what="--content")
    out: list[Applied] = []
    with store.lock():
        conn = db.index()
        chosen = choose_proposals(propose(conn, threshold=threshold), ids)
        plans = []
        for p in chosen:
            nodes = [n for m in p.members if (n := find_node(conn, m)) is not None]
            plans.append((p, nodes))
        for p, nodes in plans:
            text = content if content is not None else (drafts or {}).get(p.id)
            if text is not None and content is None:  # an LLM's draft: captured, redacted
                text = guard(store, "llm", text, what="the draft")
            merged = text if text is not None else p.draft
            sid, records, blobs = _apply_records(
                p, nodes, text, drafted_by if text is not None else None,
                provenance_metadata(store, Origin("consolidation"), merged))
            out.append(Applied(p, sid, stage_write(store, records, f"consolidate {p.id} into {sid}",
                                                   blobs)))
    return out


def undo_last(db: Session) -> tuple[str, WriteResult]:
    """Undo the newest consolidation: delete its summary, restore its sources as they were.

    Args:
        db: The open session.

    Returns:
        The summary id removed and what was staged.

    Raises:
        NothingToDo: if no consolidation is live.
        LockConflict, StorageIOError: if it cannot be written.
    """
    store = db.store
    with store.lock():
        conn = db.index()
        found = [n for n in nodes_with_metadata(conn, CONSOLIDATION_KEY) if n.type == "summary"]
        if not found:
            raise NothingToDo("no consolidation to undo")
        summary = max(found, key=lambda n: (n.created_at, n.id))
        info = summary.metadata.get(CONSOLIDATION_KEY)
        info = info if isinstance(info, dict) else {}
        tiers = info.get("tiers") if isinstance(info.get("tiers"), dict) else {}
        records: list[KnowledgeRecord] = tombstones(conn, summary, set())
        for sid in info.get("sources") or []:
            node = find_node(conn, str(sid))
            if node is None or node.metadata.get(_INTO_KEY) != summary.id:
                continue  # edited or deleted since: left as it is now
            tags = [t for t in node.tags if not t.startswith(TIER_TAG_PREFIX)]
            old = tiers.get(node.id) if isinstance(tiers, dict) else None
            if isinstance(old, str) and old:
                tags.append(TIER_TAG_PREFIX + old)
            changes: NodeChanges = {
                "status": "active", "tags": tuple(sorted(tags)),
                "metadata": {k: v for k, v in node.metadata.items() if k != _INTO_KEY}}
            records.append(next_version(node, **changes))
        return summary.id, stage_write(store, records, f"undo consolidation {summary.id}")
