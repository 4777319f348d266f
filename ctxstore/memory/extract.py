"""Ideas, entities and relations from transcript text, by rules (spec 004 §3.2–3.4).

No model and no I/O: everything here is a pure function of its arguments, accepts any
string and never raises, so the Stop hook can call it on every turn. The text is split into
sentences (code fences are skipped); a sentence becomes an idea when it carries an intent
cue ("we decided", "the fix is", a question mark, "TODO", ...), with a confidence taken
from the cue's strength and lowered by hedges ("maybe", "I think"). Entities come from
``memory.entities`` (re-exported here), the word scanning both share from ``memory.scan``.
Relations between a new idea and earlier ones follow shared
entities and topic terms plus cue words ("instead", "also", ...).

Every ``start``/``end`` indexes into the text given: ``text[start:end]`` is the idea or the
entity as found.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from functools import lru_cache
from typing import NamedTuple

from ctxstore.memory.entities import ENTITY_KINDS, Entity, extract_entities
from ctxstore.memory.scan import Grouped, lowered, split_phrase

# The tokens of ``search.task``, from their home: the Stop hook then skips the query cleaner.
from ctxstore.search.tokenize import STOP_WORDS, tokenize

__all__ = ["Idea", "Entity", "INTENTS", "ENTITY_KINDS", "RELATIONS", "extract_ideas",
           "extract_entities", "relate", "is_low_value"]

INTENTS = ("decision", "conclusion", "question", "problem", "solution", "todo", "context")
RELATIONS = ("supersedes", "builds_on", "contradicts", "answers", "relates_to")

MAX_IDEA_CHARS = 600
"""An idea longer than this is cut (its ``end`` moves back with it)."""


class Idea(NamedTuple):
    """One sentence that carries an intent.

    Attributes:
        intent: One of ``INTENTS``.
        text: The sentence, ``source[start:end]``.
        confidence: 0..1, from the cue's strength (firm vs tentative wording).
        start: Offset of the sentence in the source text.
        end: Offset just past it.
    """

    intent: str
    text: str
    confidence: float
    start: int
    end: int


# --- sentences ---------------------------------------------------------------------------

# Pattern texts (flags inline) that most turns never need are compiled on first use, through
# ``re``'s cache, instead of at import: ``_FENCE`` here, ``_QUESTION_START``, ``_NAME_RUN``,
# ``_BACKTICK``, ``_COLONS``, ``_CALL``, ``_HANDLE`` and ``_PROJECT_CUE`` below, ``_ACK``, ``_NOISE``
# and ``_FILLER`` at the end (together ~1.5 ms of every Stop hook).
_FENCE = r"(?s)```.*?(?:```|\Z)"
_LEAD = re.compile(r"[\s\-*+>#]*")
_HAS_LETTER = re.compile(r"[A-Za-z]")
_WINDOW = 1000


def _fences(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in re.finditer(_FENCE, text)] if "```" in text else []


def _sentence_at(text: str, pos: int, fences: list[tuple[int, int]]) -> tuple[int, int] | None:
    """The span of the sentence around ``pos`` (stripped), or None inside a code fence.

    A sentence ends at a line break or at ``.``/``!``/``?`` followed by whitespace; a
    sentence longer than the window is cut at the window.
    """
    lo, hi = 0, len(text)
    i = bisect.bisect_right(fences, (pos, len(text) + 1)) - 1
    if i >= 0:
        if pos < fences[i][1]:
            return None
        lo = fences[i][1]
    if i + 1 < len(fences):
        hi = fences[i + 1][0]
    lo = max(lo, pos - _WINDOW)
    hi = min(hi, pos + _WINDOW)
    start = max(text.rfind("\n", lo, pos) + 1, lo,
                *(text.rfind(p, lo, pos) + 1 for p in (". ", "! ", "? ", ".\t")))
    end = min([hi, *(i for i in (text.find("\n", pos, hi),) if i >= 0),
               *(i + 1 for i in (text.find(p, pos, hi) for p in (". ", "! ", "? ", ".\t")) if i >= 0)])
    start = _LEAD.match(text, start, end).end()  # type: ignore[union-attr]
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end) if end - start >= 3 else None


# --- intent cues ---------------------------------------------------------------------------

# (intent, strength, phrases). Strength is the confidence of a firm, unhedged use of the cue.
# Phrases are regexes over lowercased text that start with a literal word.
_CUES: list[tuple[str, float, tuple[str, ...]]] = [
    ("decision", 0.9, ("we decided", "we've decided", "we have decided", "decision:", "decided to",
                       "we're going (?:with|to use)", "we are going (?:with|to use)", "let's go with",
                       "lets go with", "we'll (?:go with|use|stick with|switch to|keep)",
                       "we will (?:go with|use|stick with|switch to|keep)", "agreed (?:to|on)",
                       "switch(?:ed|ing)? to", "we're switching", "settled on",
                       # "we switched the session cache from SQLite to Redis"
                       r"switched (?:[\w.-]+ ){1,5}?from [\w.-]+ to ",
                       r"migrated (?:[\w.-]+ ){1,5}?from [\w.-]+ to ",
                       r"moved (?:[\w.-]+ ){1,5}?from [\w.-]+ to ",
                       "final (?:choice|answer) is")),
    ("decision", 0.7, ("let's (?:use|keep|switch|stick|drop|move|make|do|not)",
                       "lets (?:use|keep|switch|stick|drop|move|make)",
                       "i'll (?:use|go with|switch to|keep)", "i will (?:use|go with|switch to|keep)",
                       "we should (?:use|go with|keep|switch)", "going forward", "from now on",
                       "instead of", "no longer", "chose", "choose", "opt(?:ed)? for", "picked",
                       "prefer")),
    ("conclusion", 0.85, ("turns out", "turned out", "so the answer is",
                          "the (?:key |main )?(?:insight|takeaway|lesson|conclusion) is",
                          "in conclusion", "confirmed", "the root cause (?:is|was)", "that's why",
                          "that is why", "this means", "which means", "it appears that",
                          "we learned")),
    ("conclusion", 0.6, ("so (?:the|it|we|this)", "therefore", "thus", "clearly", "in short",
                         "bottom line", "works now", "measured")),
    ("problem", 0.85, ("the (?:problem|issue|bug) (?:is|was)", "traceback", "exception",
                       "fail(?:s|ed|ing|ure)?", "broken", "crash(?:es|ed)?", "error(?:s)?",
                       "doesn't work", "isn't working", "regression", "flaky", "hangs?", "hung",
                       "times? out", "timed out", "leak(?:s|ing)?", "wrong", "slow", "deadlock",
                       "corrupt(?:ed|s)?")),
    ("solution", 0.85, ("the fix (?:is|was)", "fixed (?:by|it|this|the)", "fix by", "solved (?:by|it)",
                        "resolved (?:by|it)", "the solution (?:is|was)", "workaround",
                        "to fix (?:this|it)", "patched", "the trick is")),
    ("solution", 0.65, ("fixed", "fixes", "resolved", "added a", "now (?:passes|works)",
                        "by (?:adding|removing|setting|using|changing|switching)")),
    ("todo", 0.9, ("todo", "fixme", "to-do:", "need to", "needs to", "we should later", "remember to",
                   "don't forget", "follow[- ]up", "next step", "later we",
                   "we'll (?:need|have) to", "we will (?:need|have) to", "still (?:need|have) to")),
    ("todo", 0.6, ("should (?:add|write|fix|update|remove|check|look)", "eventually",
                   "at some point")),
    ("context", 0.55, ("for context", "background:", "note that", "fyi", "currently", "we use",
                       "we're using", "we are using", "the project uses", "runs on", "is owned by",
                       "owns", "is responsible for", "by design", "deadline", "constraint",
                       "requirement", "must", "always", "never")),
]
_CUE_OF: list[tuple[str, float]] = []
for _intent, _strength, _phrases in _CUES:
    _CUE_OF.extend((_intent, _strength) for _ in _phrases)
_CUE_SCAN = Grouped([split_phrase(p) for _, _, phrases in _CUES for p in phrases])
_QUESTION_START = (r"(?i)(?:how|why|what|which|where|when|who|should|can|could|would|is|are|do|"
                   r"does|did|will)\b")
_HEDGE = re.compile(r"\b(?:maybe|perhaps|might|probably|possibly|not sure|i think|i guess|could|"
                    r"seems?|likely|unclear)\b", re.IGNORECASE)
# On a tie of strength, the more specific intent wins.
_PRIORITY = {"decision": 6, "solution": 5, "todo": 4, "conclusion": 3, "problem": 2, "question": 1,
             "context": 0}


def extract_ideas(text: str, role: str) -> list[Idea]:
    """The sentences of ``text`` that carry an intent, in order.

    Args:
        text: One turn's text (a prompt or an assistant text block).
        role: ``"user"`` or ``"assistant"``; an assistant's question is often rhetorical
            and an assistant's problem report is often a tool echo, so both weigh less.

    Returns:
        The ideas, at most one per sentence; empty for text without cues. Never raises.
    """
    if not isinstance(text, str) or not text:
        return []
    low = lowered(text)
    fences = _fences(text)
    best: dict[tuple[int, int], tuple[float, int, str]] = {}
    for index, start, _ in _CUE_SCAN.scan(low):
        span = _sentence_at(text, start, fences)
        if span is not None:
            intent, strength = _CUE_OF[index]
            _keep_best(best, span, intent, strength)
    pos = text.find("?")
    while pos >= 0:
        if pos + 1 == len(text) or text[pos + 1].isspace():
            span = _sentence_at(text, pos, fences)
            if span is not None and span[1] == pos + 1:
                strength = 0.9 if re.compile(_QUESTION_START).match(text, span[0]) else 0.7
                _keep_best(best, span, "question", strength if role == "user" else strength - 0.25)
        pos = text.find("?", pos + 1)
    ideas: list[Idea] = []
    for (start, end), (strength, _, intent) in sorted(best.items()):
        if not _HAS_LETTER.search(text, start, end):
            continue
        end = min(end, start + MAX_IDEA_CHARS)
        sentence = text[start:end]
        if role != "user" and intent == "problem":
            strength -= 0.1
        if intent != "question" and _HEDGE.search(sentence):
            strength -= 0.25
        ideas.append(Idea(intent, sentence, round(min(1.0, max(0.05, strength)), 2), start, end))
    return ideas


def _keep_best(best: dict[tuple[int, int], tuple[float, int, str]], span: tuple[int, int],
               intent: str, strength: float) -> None:
    key = (strength, _PRIORITY[intent], intent)
    if span not in best or key > best[span]:
        best[span] = key


# --- relations -----------------------------------------------------------------------------

_CHANGE = re.compile(r"\binstead\b|\bswitch(?:ed|ing)? (?:to|from|over|back)\b|\bno longer\b|"
                     r"\b(?:switch|migrat|mov|chang)(?:e|ed|ing)? (?:[\w.-]+ ){1,5}?from \S+ to\b|"
                     r"\breplac(?:e|ed|ing)\b|\brather than\b|\bchanged? (?:our|my) mind\b|"
                     r"\bgo(?:ing)? back to\b|\bmov(?:e|ed|ing) (?:away from|off|to)\b|\bdrop(?:ped)?\b|"
                     r"\bscratch that\b|\brevert(?:ed)?\b|\bnot .{1,30} anymore\b|\bactually\b",
                     re.IGNORECASE)
_CONTRA = re.compile(r"\bthat'?s (?:not|wrong|incorrect)\b|\bnot true\b|\bincorrect\b|\bisn'?t\b|"
                     r"\bwasn'?t\b|\bdoesn'?t\b|\bdidn'?t\b|\bnot the\b|\bon the contrary\b|"
                     r"\bbut actually\b|\bin fact\b|\bdisagree\b|\bnope\b|\bnot\b", re.IGNORECASE)
_BUILD = re.compile(r"\balso\b|\badditionally\b|\bin addition\b|\bon top of\b|\bbuilding on\b|"
                    r"\bfurthermore\b|\bmoreover\b|\bextend(?:s|ed|ing)?\b|\bas well\b|\bnext\b|"
                    r"\bthen\b|\bplus\b|\bfollow(?:ing)? up\b", re.IGNORECASE)
_MAX_RELATES = 3


@lru_cache(maxsize=4096)
def _features(text: str) -> tuple[frozenset[tuple[str, str]], frozenset[str]]:
    """An idea's entity keys (kind, lowered name) and its topic terms."""
    entities = frozenset((e.kind, e.name.lower()) for e in extract_entities(text))
    terms = frozenset(t for t in tokenize(text) if len(t) > 2 and t not in STOP_WORDS)
    return entities, terms


def relate(new: Idea, earlier: Sequence[Idea]) -> list[tuple[str, int, float]]:
    """Relations from ``new`` to the ideas said before it.

    Rules, the first that applies wins for each earlier idea: **supersedes** (both
    decisions on the same entities or topic terms, and the new one changes the choice: a
    cue like "instead" or "switch to", or a different technology for the same topic);
    **answers** (a solution, conclusion or decision after a question or problem sharing
    terms); **contradicts** (a negation of an earlier non-decision sharing most terms);
    **builds_on** (an additive cue, or the same intent, on shared terms); **relates_to**
    (a shared entity; only the closest few).

    Args:
        new: The new idea.
        earlier: Earlier ideas, oldest first.

    Returns:
        ``(label, index into earlier, confidence)``, strongest first. Never raises.
    """
    try:
        return _relate(new, earlier)
    except Exception:  # noqa: BLE001 - extraction must never break indexing
        return []


def _relate(new: Idea, earlier: Sequence[Idea]) -> list[tuple[str, int, float]]:
    ents, terms = _features(new.text)
    change = bool(_CHANGE.search(new.text))
    contra = bool(_CONTRA.search(new.text))
    build = bool(_BUILD.search(new.text))
    out: list[tuple[str, int, float]] = []
    relates: list[tuple[str, int, float]] = []
    for i, old in enumerate(earlier):
        o_ents, o_terms = _features(old.text)
        shared_ents = ents & o_ents
        shared_terms = terms & o_terms
        union = len(terms | o_terms) or 1
        overlap = len(shared_terms) / union
        topical = bool(shared_ents) or len(shared_terms) >= 2
        if not topical:
            continue
        label = _label(new, old, shared_ents, overlap, ents, o_ents, change, contra, build)
        if label is None:
            if shared_ents:
                relates.append(("relates_to", i, round(min(0.6, 0.3 + 0.1 * len(shared_ents)), 2)))
            continue
        out.append((label[0], i, round(label[1], 2)))
    relates.sort(key=lambda r: (-r[2], -r[1]))
    out.extend(relates[:_MAX_RELATES])
    out.sort(key=lambda r: -r[2])
    return out


def _label(new: Idea, old: Idea, shared_ents: frozenset[tuple[str, str]], overlap: float,
           ents: frozenset[tuple[str, str]], o_ents: frozenset[tuple[str, str]], change: bool,
           contra: bool, build: bool) -> tuple[str, float] | None:
    if new.intent == "decision" and old.intent == "decision":
        new_tech = {n for k, n in ents if k == "technology"}
        old_tech = {n for k, n in o_ents if k == "technology"}
        if change:
            return "supersedes", 0.6 + min(0.3, overlap)
        if new_tech and old_tech and new_tech != old_tech:
            return "supersedes", 0.5 + min(0.2, overlap)
    if new.intent in ("solution", "conclusion", "decision") and old.intent in ("question", "problem"):
        return "answers", 0.5 + min(0.4, overlap + 0.1 * len(shared_ents))
    if contra and old.intent not in ("question", "decision") and overlap >= 0.3:
        return "contradicts", 0.4 + min(0.3, overlap)
    if build or new.intent == old.intent:
        return "builds_on", 0.35 + min(0.35, overlap)
    return None


# --- low value -----------------------------------------------------------------------------
#
# Compiled on first use (see ``_FENCE``): most turns are too long for ``_ACK`` and ``_FILLER``,
# and start with no ``_NOISE`` prefix.

_ACK = (
    r"(?i)(?:ok(?:ay)?|k|kk|thanks?(?: you)?(?: so much)?|thx|ty|cool|nice|great|perfect|awesome|good|"
    r"sounds good|looks good(?: to me)?|lgtm|yes|yep|yeah|yup|no|nope|sure|go ahead|go on|continue|"
    r"proceed|do it|done|got it|makes sense|right|correct|exactly|agreed|fine|alright|all right|"
    r"great thanks|ok thanks|okay thanks|thanks a lot|nice work|good job|well done|hi|hello|hey|"
    r"y|n|\+1|👍|ship it|carry on|keep going|next)"
    r"(?:[\s,]+(?:thanks|thank you|please|then|!))*[\s.!?…:)]*")
_NOISE = (r"(?is)\s*(?:\[Request interrupted by user[^\]]*\]|<system-reminder>.*</system-reminder>|"
          r"<local-command-std(?:out|err)>.*|<command-(?:name|message|args)>.*|"
          r"Caveat: The messages below were generated by the user.*|No response requested\.?|"
          r"\(no content\)|Tool ran without output)\s*")
_NOISE_STARTS = frozenset({"[r", "<s", "<l", "<c", "ca", "no", "(n", "to"})
"""The casefolded first two characters of any text ``_NOISE`` matches (``ſ`` folds to ``s``)."""
_FILLER = (r"(?i)\s*(?:now )?(?:let me|i'll|i will|let's|checking|looking at|running|reading)\b"
           r"[^.!?\n]{0,70}[.:!…]?\s*")


def is_low_value(text: str, role: str) -> bool:
    """Whether a turn is noise not worth indexing.

    Acknowledgements ("ok", "thanks", "sounds good"), harness noise (interruptions,
    system reminders, local-command echoes), text without any letter, and an assistant's
    short narration of its next step ("Let me check the tests.").

    Args:
        text: The turn's text.
        role: ``"user"`` or ``"assistant"``.

    Returns:
        True when the turn should be skipped. Never raises.
    """
    if not isinstance(text, str):
        return True
    stripped = text.strip()
    if len(stripped) < 2 or not _HAS_LETTER.search(stripped):
        return True
    if len(stripped) <= 60 and re.fullmatch(_ACK, stripped):
        return True
    if stripped[:2].casefold() in _NOISE_STARTS and re.fullmatch(_NOISE, stripped):
        return True
    return role == "assistant" and len(stripped) <= 90 and bool(re.fullmatch(_FILLER, stripped))
