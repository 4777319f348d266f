"""What the Claude Code hooks inject: session-start memory and context relevant to a prompt.

- ``session_start_query`` widens the default view (pinned, reference and working nodes) with
  recent memory no one tiered: decisions and log entries of the last ``[retrieval]
  narrative_days`` days, recent tasks and the active task's nodes. ``compose_query`` fills the
  budget tiered nodes first, then the recent ones newest first, so a ``ctx add decision``
  reaches the next session without a tier tag.
- ``relevant_context(session, prompt, budget, seen)`` ranks candidates from every source in
  ``SOURCES`` (ranked free-text search over nodes and narrative to begin with), keeps those
  above the threshold that this session has not been shown yet, and fills a token budget.
  A source is any callable ``(session, prompt, limit) -> list[Item]``: the transcript memory
  adds its own with ``register_source``.
- Each item's ``text`` is the Markdown line a hook frames and injects
  (``claude.inject.frame_items``).

The hook path imports this module: nothing heavy here (no click, networkx, embeddings).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from ctxstore.records import dataclass
from ctxstore.tokens import estimate_tokens

if TYPE_CHECKING:
    from ctxstore.config import Config
    from ctxstore.session import Session

__all__ = ["Item", "Source", "SOURCES", "PROMPT_THRESHOLD", "PROMPT_BUDGET", "NARRATIVE_DAYS",
           "SESSION_START_TOKENS",
           "ITEM_CHARS", "register_source", "node_source", "relevant_context",
           "session_start_query", "prompt_settings"]

PROMPT_THRESHOLD = 0.5
# What session start injects from the store (``packs.compose.compose_session_start``), in
# tokens: within Claude Code's 10,000-character cap on injected text.
SESSION_START_TOKENS = 2_000
PROMPT_BUDGET = 500
NARRATIVE_DAYS = 7
# At most this many characters of one item's text are injected (the rest: `ctx show ID`).
ITEM_CHARS = 600
# Each source proposes at most this many candidates per prompt.
_CANDIDATES = 12
# Compiled on first use (``re`` keeps it): only session start reads a task name.
_TASK_NAME = r"[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}"


@dataclass(frozen=True, slots=True)
class Item:
    """One piece of context a hook may inject.

    Attributes:
        key: What identifies it across prompts (a node id; a source's own key otherwise).
        kind: ``node``, ``narrative`` or a source's kind (``transcript``).
        text: The rendered Markdown item (``- [type:id] ...``), ready to frame.
        score: Relevance, 0..1 (the hook's threshold applies to it); items of equal
            relevance keep their source's order.
        tokens: The tokens ``text`` costs.
        why: Why it was chosen (the matched terms).
    """

    key: str
    kind: str
    text: str
    score: float
    tokens: int
    why: str


Source = Callable[["Session", str, int], list[Item]]


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _cut(text: str, limit: int = ITEM_CHARS) -> str:
    text = _one_line(text)
    return text if len(text) <= limit else text[:limit - 3].rstrip() + "..."


def node_source(session: Session, prompt: str, limit: int) -> list[Item]:
    """Nodes and narrative entries ranked by free-text search against the prompt.

    An item's relevance is the share of the prompt's terms it holds, out of at most
    ``search.search.FULL_MATCH`` (BM25 scales with the size of the store; this does not, so one threshold
    fits a new store and a large one). A node counts only when it holds at least two terms
    (the one term of a one-word prompt): one shared word is no reason to inject a memory.
    Candidates come in search order (BM25 with coverage, ``search.search``).

    Args:
        session: An open session (its index is read).
        prompt: The user's prompt, or the recent prompts after a compaction.
        limit: At most this many candidates.

    Returns:
        The candidates, best first.
    """
    from ctxstore.index.read import short_id_lookup
    from ctxstore.knowledge.recall import history_note, injectable, newer_versions
    from ctxstore.search.search import FULL_MATCH, search, search_terms

    conn = session.index()
    total = len(search_terms(prompt).terms)
    wanted, full = min(2, total), min(total, FULL_MATCH)
    hits = search(conn, prompt, kinds=("node", "narrative"), limit=limit)
    short = short_id_lookup(conn)
    newer = newer_versions(conn, [h.node.id for h in hits if h.node is not None])
    items = []
    for hit in hits:
        node = hit.node
        if node is None or len(hit.matched) < wanted or not injectable(node):
            continue
        text = f"- [{node.type}:{short(node.id)}] {_cut(node.content)}\n"
        if node.id in newer:  # a newer node refines or contradicts it: shown as history
            text += f"  - {history_note(newer[node.id], short(newer[node.id].id))}\n"
        items.append(Item(node.id, hit.kind, text, min(1.0, len(hit.matched) / full),
                          estimate_tokens(text), "matched: " + ", ".join(hit.matched)))
    return items


def _transcript_source(session: Session, prompt: str, limit: int) -> list[Item]:
    """Past turns from transcript memory (``memory.context``; imported only when asked)."""
    from ctxstore.memory.context import memory_context

    return [Item(m.key, "transcript", m.text, m.score, estimate_tokens(m.text), m.why)
            for m in memory_context(session.root, prompt, limit, config=session.config)]


SOURCES: list[Source] = [node_source, _transcript_source]


def register_source(source: Source) -> None:
    """Add a source of candidates to ``relevant_context`` (once; adding it again does nothing).

    Args:
        source: ``(session, prompt, limit) -> list[Item]``, best first.
    """
    if source not in SOURCES:
        SOURCES.append(source)


def relevant_context(session: Session, prompt: str, budget: int, seen: Iterable[str], *,
                     threshold: float = PROMPT_THRESHOLD,
                     sources: Sequence[Source] | None = None,
                     problems: list[str] | None = None) -> list[Item]:
    """The items most relevant to ``prompt`` that fit ``budget`` tokens, best first.

    A source that fails costs only its own items: the failure is added to ``problems`` (when
    given) and the other sources are still asked. The store's own errors (``StoreCorrupt``)
    and those of ``node_source`` propagate.

    Args:
        session: An open session.
        prompt: Any text (the user's prompt; the recent prompts after a compaction).
        budget: Tokens the items may take in all.
        seen: Keys already shown in this session (left out).
        threshold: The lowest score kept.
        sources: The sources to ask; ``SOURCES`` when None.
        problems: Where a failing source's one-line problem is added.

    Returns:
        The chosen items, best first; none when nothing scores above the threshold.
    """
    shown = set(seen)
    pool: dict[str, Item] = {}
    for source in SOURCES if sources is None else sources:
        for item in _ask(source, session, prompt, problems):
            if item.key in shown or item.score < threshold:
                continue
            if item.key not in pool or pool[item.key].score < item.score:
                pool[item.key] = item
    chosen, used = [], 0
    for item in sorted(pool.values(), key=lambda i: -i.score):  # stable: source order
        if used + item.tokens <= budget:
            chosen.append(item)
            used += item.tokens
    return chosen


def _ask(source: Source, session: Session, prompt: str, problems: list[str] | None) -> list[Item]:
    """A source's candidates; for a failing added source, none and a problem noted.

    ``node_source`` on an index that needs a full build (``IndexNotReady``: a hook's session
    never builds) offers nothing and notes why; the other sources still answer.
    """
    from ctxstore.errors import IndexNotReady, StoreCorrupt

    if source is node_source:
        try:
            return source(session, prompt, _CANDIDATES)
        except IndexNotReady as exc:
            if problems is not None:
                problems.append(exc.note())
            return []
    try:
        return source(session, prompt, _CANDIDATES)
    except StoreCorrupt:
        raise
    except Exception as exc:  # a source's bug must not cost the prompt its other context
        if problems is not None:
            name = getattr(source, "__name__", "a source")
            problems.append(f"context source {name} failed: {type(exc).__name__}: {exc}")
        return []


def session_start_query(view_query: str, *, days: int = NARRATIVE_DAYS,
                        task: str | None = None) -> str:
    """The default view's query widened with recent untiered memory, off-context nodes left out.

    Args:
        view_query: The default view's query (``tag:tier:pinned OR ...``).
        days: How far back decisions, log entries and tasks count as recent; 0 adds none.
        task: The active task's name (its ``task:NAME`` nodes are added), if any.

    Returns:
        A query-language expression.
    """
    parts = [f"({view_query})"]
    if days > 0:
        parts += [f"(type:decision AND created:>{days}d)", f"(type:observation AND created:>{days}d)",
                  f"(type:task AND updated:>{days}d)"]
    if task and re.fullmatch(_TASK_NAME, task):
        parts.append(f'tag:"task:{task}"')
    # Nothing forgotten or moved off-context comes back at a session start, whatever matched.
    return f"({' OR '.join(parts)}) AND NOT tag:tier:off-context"


def prompt_settings(config: Config) -> tuple[bool, float, int]:
    """``[retrieval]`` settings of prompt-submit context: on, threshold, budget (tokens)."""
    return (bool(config.get("retrieval", "prompt_context")),
            float(config.get("retrieval", "prompt_threshold")),
            int(config.get("retrieval", "prompt_budget")))
