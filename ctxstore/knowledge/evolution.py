"""Decisions that evolve: a newer memory on the same subject refines or contradicts an older one.

When a memory is written, the older memories of the same type (a decision, a fact, a pattern
...) on the same subject are found among its auto-link candidates (``knowledge.autolink``), and
a rule classifies each pair without a model (spec 003's edge types):

- ``CONTRADICTS``: the newer text says a change ("switched", "instead", "no longer",
  "replaced", "moved from", "rather than", "reverted" ...), or one of the two says "not" where
  the other does not: they are in tension.
- ``REFINES``: the newer text holds most of the older one's words and says more (two words or
  more of its own): a more precise version. A near-duplicate (auto-link similarity over
  ``MERGE_THRESHOLD``) stays a merge candidate instead (``ctx consolidate``).

The edge goes from the newer node to the older one, with ``metadata.evolves = true``. It is a
proposal: superseding is a person's decision (spec 003), so the older node stays active until
someone runs ``ctx supersede OLD NEW``. Until then every context that injects the older node
marks it as history and names the newer one (``knowledge.recall.newer_versions`` and
``history_note``, on the hooks' read path), so the model never reads both without knowing
which one stands.

Words are compared by their Snowball stems (``search.tokenize.PROSE``): "sessions" and
"session" are one subject.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Literal

from ctxstore.records import dataclass

if TYPE_CHECKING:
    from ctxstore.index.read import NodeRow

__all__ = ["EVOLVING_TYPES", "SUBJECT_THRESHOLD", "COVER_THRESHOLD", "Evolution", "classify",
           "evolutions"]

EVOLVING_TYPES = frozenset({"decision", "fact", "pattern"})
"""Types whose later node on the same subject replaces what the earlier one said."""
SUBJECT_THRESHOLD = 0.25
"""The least Jaccard overlap of two texts' stemmed significant words to be one subject."""
COVER_THRESHOLD = 0.6
"""A newer text holding this share of the older one's words (and more) refines it."""

Label = Literal["REFINES", "CONTRADICTS"]

_CHANGE = re.compile(
    r"\b(?:instead|no longer|not anymore|any more|switch(?:ed|es|ing)?|replac(?:e|ed|es|ing)"
    r"|migrat(?:e|ed|es|ing)|mov(?:e|ed|es|ing) (?:from|away|off)|drop(?:ped|s|ping)?"
    r"|stop(?:ped|s)? using|abandon(?:ed|s)?|revert(?:ed|s)?|rather than|deprecat(?:e|ed|es)"
    r"|changed? (?:from|to)|went back|turns? out|actually)\b", re.IGNORECASE)
_NEGATION = re.compile(
    r"\b(?:not|never|no|don't|doesn't|didn't|won't|shouldn't|mustn't|can't|cannot|avoid|"
    r"without)\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Evolution:
    """A newer node's relation to an older one on the same subject.

    Attributes:
        old_id: The older node.
        label: ``REFINES`` or ``CONTRADICTS``.
        overlap: The Jaccard overlap of their stemmed words.
    """

    old_id: str
    label: Label
    overlap: float


def _stems(text: str) -> frozenset[str]:
    from ctxstore.search.tokenize import PROSE

    return frozenset(PROSE.tokenize(text))


def classify(new_text: str, old_text: str) -> tuple[Label, float] | None:
    """How a newer text on the same subject relates to an older one, by rule.

    Args:
        new_text: The newer memory's text.
        old_text: The older one's.

    Returns:
        The label and the overlap, or None when they are not on one subject or the newer
        neither changes nor refines the older.
    """
    new, old = _stems(new_text), _stems(old_text)
    if not new or not old:
        return None
    overlap = len(new & old) / len(new | old)
    if overlap < SUBJECT_THRESHOLD:
        return None
    if _CHANGE.search(new_text) or bool(_NEGATION.search(new_text)) != bool(
            _NEGATION.search(old_text)):
        return "CONTRADICTS", overlap
    if len(new & old) >= COVER_THRESHOLD * len(old) and len(new - old) >= 2:
        return "REFINES", overlap
    return None


def evolutions(node_type: str, text: str, candidates: Iterable[NodeRow]) -> list[Evolution]:
    """The older nodes of the same type that a new node's text refines or contradicts.

    Args:
        node_type: The new node's type (others than ``EVOLVING_TYPES`` never evolve).
        text: Its summary and content.
        candidates: Live nodes on a similar subject (the auto-link candidates), any order.

    Returns:
        One ``Evolution`` per older node of the same type, best overlap first.
    """
    if node_type not in EVOLVING_TYPES:
        return []
    out: list[Evolution] = []
    for node in candidates:
        if node.type != node_type or node.status != "active" or node.superseded_by:
            continue
        found = classify(text, f"{node.summary or ''} {node.content}")
        if found is not None:
            out.append(Evolution(node.id, found[0], round(found[1], 4)))
    out.sort(key=lambda e: (-e.overlap, e.old_id))
    return out
