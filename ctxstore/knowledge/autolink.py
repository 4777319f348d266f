"""Auto-linking (spec 003): a new memory gets RELATES_TO edges to its most similar memories.

An older memory of the same type on the same subject that the new one refines or contradicts
gets a ``REFINES`` / ``CONTRADICTS`` edge instead, marked ``evolves`` (``knowledge.evolution``).

Owns the similarity of two memories (Jaccard overlap of their significant words) and the
edges written with a new node: candidates come from the full-text index (BM25 over at
most ``CANDIDATES`` nodes that share one of the new text's words, never a scan), and
each candidate at or above ``RELATE_THRESHOLD`` similarity gets an edge, at most
``MAX_LINKS``. Spec 003's table::

    similarity < 0.1        no relation
    0.1 .. 0.5              RELATES_TO
    > 0.5                   RELATES_TO, flagged as a merge candidate (``ctx consolidate``)

It is on when ``[lifecycle] autolink = true`` in config.toml (the default; a store whose
config says ``false`` keeps it off). It runs on write, never in the prompt hook. Edges carry evidence
``{"tool": "Parser", "confidence": similarity}`` (an LLM classifier
would write ``tool: Llm``). Linking never makes a write fail: an index that cannot
answer gives no links. It must not print, run SQL itself, or stage anything (the caller
stages the edges in the same change batch as the node).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ctxstore.clock import next_stamp
from ctxstore.errors import CtxError
from ctxstore.model.knowledge import EdgeRecord, NodeRecord

if TYPE_CHECKING:
    import sqlite3

    from ctxstore.index.read import NodeRow
    from ctxstore.knowledge.evolution import Evolution
    from ctxstore.session import Session

__all__ = ["RELATE_THRESHOLD", "MERGE_THRESHOLD", "MAX_LINKS", "CANDIDATES", "QUERY_WORDS",
           "UNLINKED_TYPES", "word_set", "similarity", "similar_rows", "link_records",
           "autolink_records"]

RELATE_THRESHOLD = 0.1
MERGE_THRESHOLD = 0.5
MAX_LINKS = 5
CANDIDATES = 20
QUERY_WORDS = 12
# Types that are not memories of their own (ingested files) are never auto-linked.
UNLINKED_TYPES = frozenset({"source"})
_WORD = re.compile(r"[^\W_]{3,}", re.UNICODE)
_STOP = frozenset(
    "the and for with that this from are was were not but you your have has had its can will "
    "into than then them they their there when what which who how all any use used using our "
    "out off also one two some such only over more most other should would could may must "
    "about after before because been being does did done each here just like make made very".split())


def word_set(text: str) -> frozenset[str]:
    """The significant words of a text (lower case, three letters or more, no stop words).

    Args:
        text: Any text.

    Returns:
        The words.
    """
    return frozenset(w for w in (m.lower() for m in _WORD.findall(text)) if w not in _STOP)


def similarity(a: frozenset[str], b: frozenset[str]) -> float:
    """Jaccard similarity of two word sets (0 when either is empty).

    Args:
        a: One text's words.
        b: The other's.

    Returns:
        ``|a & b| / |a | b|``, in 0..1.
    """
    if not a or not b:
        return 0.0
    return len(a & b) / len(a | b)


def _query_words(words: Iterable[str]) -> list[str]:
    # Longer words are rarer on average: a cheap stand-in for IDF that needs no extra query.
    return sorted(words, key=lambda w: (-len(w), w))[:QUERY_WORDS]


def similar_rows(conn: sqlite3.Connection, text: str, *, exclude: str | None = None,
                 limit: int = CANDIDATES) -> list[tuple[NodeRow, float]]:
    """Live, active memories most similar to ``text``, most similar first, with their rows.

    The rows give ``knowledge.evolution`` each candidate's type and text.

    Args:
        conn: A synced index connection.
        text: The new memory's text.
        exclude: A node id to leave out (the memory itself).
        limit: At most this many full-text candidates are scored.

    Returns:
        ``(node row, similarity)`` pairs above 0, best first (ties by id).

    Raises:
        IndexCorrupt, QueryTooComplex: if the index cannot answer.
    """
    from ctxstore.query.executor import run_query

    words = word_set(text)
    if not words:
        return []
    query = " OR ".join(f'"{w}"' for w in _query_words(words))
    out: list[tuple[NodeRow, float]] = []
    for node in run_query(conn, query, now=time.time(), limit=limit):
        if node.id == exclude or node.status != "active" or node.type in UNLINKED_TYPES:
            continue
        sim = similarity(words, word_set(f"{node.summary or ''} {node.content}"))
        if sim > 0:
            out.append((node, sim))
    out.sort(key=lambda p: (-p[1], p[0].id))
    return out


def link_records(node_id: str, similar: Iterable[tuple[str, float]], *,
                 threshold: float = RELATE_THRESHOLD, max_links: int = MAX_LINKS,
                 evolves: Iterable[Evolution] = ()) -> list[EdgeRecord]:
    """RELATES_TO edges from ``node_id`` to the similar nodes at or above ``threshold``.

    A similar node that the new one refines or contradicts (``evolves``, from
    ``knowledge.evolution``) gets that edge instead, marked ``evolves`` (a proposal to
    supersede it, which a person confirms with ``ctx supersede``).

    Args:
        node_id: The new node.
        similar: ``(node id, similarity)`` pairs, best first.
        threshold: The least similarity that links.
        max_links: At most this many edges.
        evolves: The older nodes the new one refines or contradicts.

    Returns:
        The edge records (evidence ``tool: Parser`` with the similarity as confidence).
    """
    evolving = {e.old_id: e for e in evolves}
    out: list[EdgeRecord] = []
    for other, sim in similar:
        if len(out) >= max_links:
            break
        change = evolving.get(other)
        if change is not None and change.label == "REFINES" and sim > MERGE_THRESHOLD:
            change = None  # a near-duplicate: a merge candidate, not a new version
        if change is None and sim < threshold:
            continue  # best first: only an evolving node can still follow
        stamp = next_stamp()
        meta: dict[str, object] = {"auto": True}
        label = "RELATES_TO"
        if change is not None:
            label = change.label
            meta["evolves"] = True
        elif sim > MERGE_THRESHOLD:
            meta["merge_candidate"] = True
        out.append(EdgeRecord(from_ref=("node", node_id), to_ref=("node", other),
                              label=label, weight=round(sim, 4), metadata=meta,
                              evidence={"tool": "Parser", "confidence": round(sim, 4)},
                              created_at=stamp, updated_at=stamp, prev=None))
    return out


def autolink_records(db: Session, node: NodeRecord, content: str) -> list[EdgeRecord]:
    """The auto-link edges of a node about to be written (none when the index cannot answer).

    Args:
        db: The open session.
        node: The new node's record.
        content: Its full text.

    Returns:
        The edge records to stage with the node.
    """
    store = db.store

    if node.type in UNLINKED_TYPES or not store.config.get("lifecycle", "autolink"):
        return []
    text = f"{node.summary or ''} {content}"
    try:
        conn = db.index()
        rows = similar_rows(conn, text, exclude=node.id)
    except CtxError:  # the index and the executor raise typed errors (IndexCorrupt, ...)
        # A link is a convenience: a damaged or busy index must not lose the memory itself.
        return []
    changes: list[Evolution] = []
    if rows:  # the rule loads only when there is an older memory to compare with
        from ctxstore.knowledge.evolution import evolutions

        changes = evolutions(node.type, text, (row for row, _ in rows))
    return link_records(node.id, [(row.id, sim) for row, sim in rows], evolves=changes)
