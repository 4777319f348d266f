"""The one scoring module: confidence decay and rank of a memory (spec 003, "Memory Lifecycle").

Owns the numbers every ranking of memories uses, so compose, recall, CLAUDE.md and the
lifecycle pass agree (compose orders within a tier, and recall orders a query without
text terms, by ``order_score``): each node type's half-life, the decay modifiers
(pinned, access count, centrality), the decay formula and spec 003's rank formula::

    confidence = initial_confidence * 0.5 ** (days_since_update / half_life)
    rank = confidence * 0.5 + priority/10 * 0.2 + centrality * 0.15
           + log(access_count + 1) / max_log * 0.15

Spec 003's categories map onto ctx's node types: architecture -> fact, gotcha ->
open-question and hypothesis, progress -> task, context -> observation,
code_description -> summary and source. A node may name a spec 003 category in its
``memory_type`` metadata, which then decides its half-life.

Pure functions over numbers and node rows (anything shaped as ``Scorable``, such as
``index.read.NodeRow``): no I/O, no SQL, and no import but the vocabulary, so that every
layer that ranks memories (``knowledge.recall``, ``packs``, ``lifecycle``, ``claude.claudemd``
on the hook path) imports this one module.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ctxstore.model.vocab import TIER_TAG_PREFIX

__all__ = ["Scorable", "DAY_MS", "HALF_LIVES", "SPEC_HALF_LIVES", "ACCESS_BOOST_COUNT",
           "CENTRALITY_BOOST", "base_half_life", "effective_half_life", "decay", "is_pinned",
           "initial_confidence", "node_confidence", "days_until_below", "rank_score", "priority_of", "number",
           "centralities", "ORDER_STEP", "order_score"]

DAY_MS = 86_400_000
# Half-life in days by ctx node type; None = stable (never decays).
HALF_LIVES: dict[str, float | None] = {
    "fact": None, "decision": None, "pattern": 60.0, "open-question": 45.0,
    "hypothesis": 45.0, "task": 7.0, "observation": 30.0, "summary": None, "source": None,
}
# Spec 003's own categories, for nodes that name one in ``metadata.memory_type``.
SPEC_HALF_LIVES: dict[str, float | None] = {
    "architecture": None, "decision": None, "pattern": 60.0, "gotcha": 45.0, "progress": 7.0,
    "context": 30.0, "code_description": None, "code": None,
}
ACCESS_BOOST_COUNT = 10  # access_count > 10 doubles the half-life
CENTRALITY_BOOST = 0.5  # centrality > 0.5 doubles the half-life
ORDER_STEP = 0.01  # order_score's resolution: closer scores tie (then newest first)


class Scorable(Protocol):
    """What scoring reads of a node (``index.read.NodeRow`` has it)."""

    @property
    def type(self) -> str:
        """The node type."""

    @property
    def tags(self) -> Sequence[str]:
        """The node's tags (``tier:pinned`` pins it)."""

    @property
    def metadata(self) -> Mapping[str, Any]:
        """The node's metadata (``confidence``, ``priority``, ``pinned``, ``memory_type``)."""

    @property
    def updated_at(self) -> int:
        """When the node was last written (ms since the epoch)."""


def number(value: object, low: float, high: float, default: float) -> float:
    """A metadata value as a number clamped to ``low..high`` (``default`` when unusable).

    Args:
        value: The value as stored (metadata is untrusted input).
        low: The smallest value allowed.
        high: The largest value allowed.
        default: What a missing, non-numeric or non-finite value counts as.

    Returns:
        The number.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return default
    try:
        num = float(value)
    except ValueError:
        return default
    return min(max(num, low), high) if math.isfinite(num) else default


def base_half_life(node_type: str, memory_type: object = None) -> float | None:
    """The half-life of a type before modifiers.

    Args:
        node_type: The ctx node type.
        memory_type: The node's ``metadata.memory_type`` (a spec 003 category), if any.

    Returns:
        Days, or None for a stable type (and for an unknown one).
    """
    if isinstance(memory_type, str) and memory_type in SPEC_HALF_LIVES:
        return SPEC_HALF_LIVES[memory_type]
    return HALF_LIVES.get(node_type)


def effective_half_life(base: float | None, *, pinned: bool = False, access_count: int = 0,
                        centrality: float = 0.0) -> float | None:
    """Apply spec 003's decay modifiers to a half-life.

    Args:
        base: The type's half-life in days (None: stable).
        pinned: A pinned memory never decays.
        access_count: Retrievals of the memory; above ``ACCESS_BOOST_COUNT`` doubles it.
        centrality: Degree relative to the best-connected memory (0..1); above
            ``CENTRALITY_BOOST`` doubles it.

    Returns:
        The half-life in days, or None when the memory does not decay.
    """
    if base is None or pinned:
        return None
    half = base
    if access_count > ACCESS_BOOST_COUNT:
        half *= 2
    if centrality > CENTRALITY_BOOST:
        half *= 2
    return half


def decay(initial: float, days: float, half_life: float | None) -> float:
    """Spec 003's formula: ``initial * 0.5 ** (days / half_life)``.

    Args:
        initial: The confidence at the last update (0..1).
        days: Days since the last update (negative counts as 0: a clock behind).
        half_life: Days, or None for no decay.

    Returns:
        The decayed confidence.
    """
    if half_life is None:
        return initial
    factor: float = 0.5 ** (max(days, 0.0) / half_life)  # typeshed: float ** float may be complex
    return initial * factor


def is_pinned(node: Scorable) -> bool:
    """True for a pinned memory (``tier:pinned`` or ``metadata.pinned = true``).

    Args:
        node: The node.

    Returns:
        Whether it is pinned.
    """
    return TIER_TAG_PREFIX + "pinned" in node.tags or node.metadata.get("pinned") is True


def initial_confidence(node: Scorable) -> float:
    """The confidence a node was written with (``metadata.confidence``, default 1.0).

    Args:
        node: The node.

    Returns:
        A number in 0..1.
    """
    return number(node.metadata.get("confidence"), 0.0, 1.0, 1.0)


def _half_life_of(node: Scorable, access_count: int, centrality: float) -> float | None:
    return effective_half_life(base_half_life(node.type, node.metadata.get("memory_type")),
                               pinned=is_pinned(node), access_count=access_count,
                               centrality=centrality)


def node_confidence(node: Scorable, *, now_ms: int, access_count: int = 0,
                    centrality: float = 0.0) -> float:
    """A node's confidence now: its initial confidence decayed since its last update.

    Args:
        node: The node.
        now_ms: The time to score at (ms since the epoch).
        access_count: Its retrievals in this clone.
        centrality: Its degree relative to the best-connected candidate (0..1).

    Returns:
        The confidence (0..1).
    """
    days = (now_ms - node.updated_at) / DAY_MS
    return decay(initial_confidence(node), days, _half_life_of(node, access_count, centrality))


def days_until_below(node: Scorable, threshold: float, *, access_count: int = 0,
                     centrality: float = 0.0) -> float | None:
    """Days after its last update at which a node's confidence falls below ``threshold``.

    Confidence is a pure function of time, so "below 0.3 for 14 days" needs no stored state:
    it holds once ``now >= updated_at + days_until_below + 14``.

    Args:
        node: The node.
        threshold: The confidence (0..1, exclusive of 0).
        access_count: Its retrievals in this clone.
        centrality: Its relative degree (0..1).

    Returns:
        Days (0 when it starts below), or None when it never falls below.
    """
    initial = initial_confidence(node)
    if initial < threshold:
        return 0.0
    half = _half_life_of(node, access_count, centrality)
    if half is None or threshold <= 0:
        return None
    return half * math.log2(initial / threshold)


def priority_of(node: Scorable) -> int:
    """A node's priority 1..10 (``metadata.priority``; 10 when pinned, else 5 by default).

    Args:
        node: The node.

    Returns:
        The priority.
    """
    return int(number(node.metadata.get("priority"), 1, 10, 10 if is_pinned(node) else 5))


def rank_score(confidence: float, priority: int, centrality: float, access_count: int,
               max_log: float) -> float:
    """Spec 003's rank of a memory.

    Args:
        confidence: Its decayed confidence (0..1).
        priority: Its priority (1..10).
        centrality: Its relative degree (0..1).
        access_count: Its retrievals.
        max_log: ``log(count + 1)`` of the most retrieved candidate (0: none retrieved).

    Returns:
        The rank; higher first.
    """
    usage = math.log(access_count + 1) / max_log if max_log else 0.0
    return confidence * 0.5 + priority / 10 * 0.2 + centrality * 0.15 + usage * 0.15


def order_score(node: Scorable, *, now_ms: int) -> float:
    """The rank of a node from its own row, for ordering candidates within a tier.

    Spec 003's rank with what a node row holds (decayed confidence and priority; no
    centrality or access counts, which need the graph and the clone's state), rounded to
    ``ORDER_STEP`` so that memories written moments apart tie and keep newest-first
    order, while a task from last week ranks below a fact from last week.

    Args:
        node: The node.
        now_ms: The time to score at (ms since the epoch).

    Returns:
        The score; higher first.
    """
    score = rank_score(node_confidence(node, now_ms=now_ms), priority_of(node), 0.0, 0, 0.0)
    return round(score / ORDER_STEP) * ORDER_STEP


def centralities(degrees: Mapping[str, int], ids: list[str]) -> dict[str, float]:
    """Each node's degree relative to the best-connected of ``ids`` (0..1).

    Args:
        degrees: Edge degree by node id (``index.read.node_degrees``).
        ids: The candidate nodes.

    Returns:
        Node id to centrality.
    """
    top = max((degrees.get(i, 0) for i in ids), default=0)
    return {i: degrees.get(i, 0) / top if top else 0.0 for i in ids}

