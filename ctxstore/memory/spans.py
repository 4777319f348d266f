"""Span summaries (spec 004 §4.4), extractive: focus, decisions, conclusions, open questions.

No model is called. A topic span's *focus* is the terms its prompts use most (Snowball-stemmed
significant words, shown in the form first met), so a topic is named by what it is about, not
by the first line of its first prompt; its *decisions* and *conclusions* are the ideas transcript
memory extracted with those intents (``memory.extract``), its *open questions* the question ideas
nothing answered. ``ctx memory topics`` shows them.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from ctxstore.records import dataclass

if TYPE_CHECKING:
    from ctxstore.memory.db import MemoryDB

__all__ = ["SpanSummary", "summarize", "FOCUS_TERMS", "LISTED"]

FOCUS_TERMS = 5
"""Terms in a span's focus."""
LISTED = 3
"""Decisions, conclusions and open questions listed per span (the newest)."""
_CHARS = 160


@dataclass(frozen=True, slots=True)
class SpanSummary:
    """What a span was about and what came of it.

    Attributes:
        focus: Its most used terms, most used first.
        decisions: Its last decisions.
        conclusions: Its last conclusions.
        open_questions: Its questions nothing answered (the last ones).
    """

    focus: tuple[str, ...]
    decisions: tuple[str, ...]
    conclusions: tuple[str, ...]
    open_questions: tuple[str, ...]

    def to_json(self) -> dict[str, list[str]]:
        """The JSON form (``ctx memory topics --format json``)."""
        return {"focus": list(self.focus), "decisions": list(self.decisions),
                "conclusions": list(self.conclusions), "open_questions": list(self.open_questions)}


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _CHARS else text[:_CHARS - 3].rstrip() + "..."


def _focus(prompts: list[str]) -> tuple[str, ...]:
    from ctxstore.search.tokenize import PROSE_QUERY, english_stem, words

    counts: Counter[str] = Counter()
    shown: dict[str, str] = {}
    for prompt in prompts:
        for term in set(PROSE_QUERY.tokenize(prompt)):  # one vote per prompt
            counts[term] += 1
        for word in words(prompt):
            shown.setdefault(english_stem(word.lower()), word.lower())
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return tuple(shown.get(term, term) for term, _ in ranked[:FOCUS_TERMS])


def summarize(db: MemoryDB, span_id: int) -> SpanSummary:
    """The extractive summary of a span, its sub-spans included.

    Args:
        db: The open transcript memory.
        span_id: The span.

    Returns:
        Its focus and its ideas by intent.
    """
    prompts, ideas = db.span_content(span_id)

    def last(intent: str, *, open_only: bool = False) -> tuple[str, ...]:
        found = [_cut(content) for kind, content, answered in ideas
                 if kind == intent and not (open_only and answered)]
        return tuple(dict.fromkeys(found[-LISTED:]))

    return SpanSummary(_focus(prompts), last("decision"), last("conclusion"),
                       last("question", open_only=True))
