"""Topic spans without a model: where a conversation changes subject (spec 004 §4.3).

Decided when a new prompt arrives, from what came before it (so indexing a transcript in pieces
gives the same spans as indexing it whole). A new *topic* starts at an explicit transition ("now
let's", "moving on", "next,", "back to"), after a pause longer than ``TOPIC_GAP_MS``, or when the
prompt shares almost no terms with the last few turns (cosine over term counts). A new *sub-span*
inside the topic starts on a weaker lexical shift or when the files and symbols talked about
change completely. Pure functions of their arguments.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable

# The tokens of ``search.task``, from their home: the Stop hook then skips the query cleaner.
from ctxstore.search.tokenize import tokenize

__all__ = ["TOPIC_GAP_MS", "TOPIC_COSINE", "SUB_COSINE", "terms", "cosine", "boundary",
           "span_name"]

TOPIC_GAP_MS = 30 * 60 * 1000
"""A pause longer than this (30 min) starts a new topic."""
TOPIC_COSINE = 0.04
"""Below this similarity to the recent window, a prompt starts a new topic."""
SUB_COSINE = 0.12
"""Below this similarity, a prompt starts a new sub-span of the topic."""
_MIN_TERMS = 3  # a prompt this short ("yes", "go on") never shifts the topic by its words
_TRANSITION = re.compile(
    r"^\W*(?:(?:ok(?:ay)?|alright|right|good|great|thanks?(?: you)?|so|and)\W+){0,3}"
    r"(?:now,? let'?s|let'?s (?:now |also )?(?:move on|switch|turn|look at|talk about|discuss)|"
    r"moving on|next,|next up|switching (?:to|gears)|back to|changing (?:the )?subject|"
    r"(?:a |one )?(?:different|new|another|unrelated|separate) (?:topic|question|thing|issue)|"
    r"on another note|different question)", re.IGNORECASE)


def terms(text: str) -> Counter[str]:
    """Term counts of a text (retrieval tokens, stop words dropped)."""
    return Counter(tokenize(text))


def cosine(left: Counter[str], right: Counter[str]) -> float:
    """Cosine similarity of two term-count vectors (0 when either is empty)."""
    if not left or not right:
        return 0.0
    small, large = (left, right) if len(left) < len(right) else (right, left)
    dot = sum(count * large.get(term, 0) for term, count in small.items())
    if not dot:
        return 0.0
    return dot / (math.sqrt(sum(c * c for c in left.values()))
                  * math.sqrt(sum(c * c for c in right.values())))


def boundary(prompt: str, gap_ms: int | None, window: Counter[str],
             entities: Iterable[str], window_entities: Iterable[str]) -> str | None:
    """Whether a prompt opens a new ``"topic"``, a new ``"sub"``-span, or neither (None).

    Args:
        prompt: The prompt's text.
        gap_ms: Milliseconds since the previous turn ended (None: unknown).
        window: Term counts of the last few turns of the session.
        entities: Files and symbols the prompt names.
        window_entities: Files and symbols the last few turns named.

    Returns:
        ``"topic"``, ``"sub"`` or None.
    """
    if _TRANSITION.match(prompt):
        return "topic"
    if gap_ms is not None and gap_ms > TOPIC_GAP_MS:
        return "topic"
    own = terms(prompt)
    if sum(own.values()) >= _MIN_TERMS and window:
        similarity = cosine(own, window)
        if similarity < TOPIC_COSINE:
            return "topic"
        if similarity < SUB_COSINE:
            return "sub"
    mine, theirs = set(entities), set(window_entities)
    if mine and theirs and not mine & theirs:
        return "sub"
    return None


_LEAD = re.compile(r"^\W*(?:(?:ok(?:ay)?|alright|so|now|next|please|hey|hi|and|then|let'?s|"
                   r"can you|could you|I want to|we need to|move on to|moving on to|switch(?:ing)? to|"
                   r"back to|turn to|look at|talk about)\b[\s,:]*)+", re.IGNORECASE)


def span_name(prompt: str, width: int = 60) -> str:
    """A short name for a span opened by ``prompt``: its first line, lead words dropped."""
    line = next((ln.strip() for ln in prompt.splitlines() if ln.strip()), "")
    line = _LEAD.sub("", line).strip() or line
    if len(line) > width:
        line = line[:width].rsplit(" ", 1)[0].rstrip(",;:") + "..."
    return line or "(untitled)"
